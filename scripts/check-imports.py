#!/usr/bin/env python3
"""Checks that imports between the top-level modules of src/ point one way.

Each top-level module (a folder of src/, or a file beside them) is one node; each `crate::X`
path in a module's files (outside its `#[cfg(test)]` test files) is an edge to X. Prints every
cycle found (as `a -> b -> a`, with one file and line per edge) and exits 1; with `--graph`
prints the edges. Also refuses `crate::cli` outside `src/cli/`, `crate::daemon` in
`src/cluster/`, `crate::cluster` in `src/status/` (status reads the cluster through the view it
is given), in `src/status/` any item of `crate::daemon` but its published surface, in
`src/cluster/` any item of `crate::status` but the view it offers (`SURFACES`), and a top-level
module that README.md's Layout table does not list.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
CRATE = re.compile(r"\bcrate::")
NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)")

# What a module may use of another one, where it may not use the rest: the daemon's view of
# itself and what a background task is given; the view of the cluster that status reads (and
# the figures it reads), which the cluster offers.
SURFACES = {
    ("status", "daemon"): {"view", "DaemonView", "JobView", "Context", "Task"},
    ("cluster", "status"): {"cluster"},
}


def group_heads(text, i):
    """The first path segment of each item of the `{...}` group that starts at `text[i]`
    (`crate::{a::{b, c}, d as e, self}` gives `a`, `d`, `self`), and the index after the group.
    Nested groups and groups over several lines are read by counting braces."""
    heads, depth, item_start, j = [], 0, i + 1, i
    while j < len(text):
        c = text[j]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                break
        if depth == 1 and c == ",":
            heads.append(text[item_start:j])
            item_start = j + 1
        j += 1
    heads.append(text[item_start:j])
    names = []
    for item in heads:
        m = NAME.match(item)
        if m:
            names.append(m.group(1))
    return names, j + 1


def crate_names(code):
    """`(offset, top-level module)` for every `crate::` path in `code` (comments removed)."""
    out = []
    for m in CRATE.finditer(code):
        rest = m.end()
        if code.startswith("{", rest):
            names, _ = group_heads(code, rest)
            out += [(m.start(), name) for name in names]
        else:
            name = NAME.match(code, rest)
            if name:
                out.append((m.start(), name.group(1)))
    return out


def without_comments(text):
    """`text` with every `//` comment blanked (line numbers kept); block comments are not used
    in this tree. A `//` inside a string literal ends the line's code too, which at worst
    hides an import written after a URL on the same line."""
    return "\n".join(line.split("//")[0] for line in text.split("\n"))


def module_of(path):
    rel = os.path.relpath(path, ROOT)
    head = rel.split(os.sep)[0]
    return head[:-3] if head.endswith(".rs") else head


def strip_tests(text):
    """Drops `#[cfg(test)] mod tests { ... }` blocks: tests may reach anywhere."""
    out, i = [], 0
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(pub\s+)?mod\s+\w+\s*\{", text[i:])
        if not m:
            out.append(text[i:])
            return "".join(out)
        start = i + m.start()
        out.append(text[i:start])
        depth, j = 0, i + m.end() - 1
        while j < len(text):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        # Keep the block's line breaks, so later lines keep their numbers.
        out.append("\n" * text.count("\n", start, j + 1))
        i = j + 1


def test_files():
    """Files declared as `#[cfg(test)] mod x;` are test code too."""
    skip = set()
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if not f.endswith(".rs"):
                continue
            p = os.path.join(dirpath, f)
            text = open(p, encoding="utf-8").read()
            for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*mod\s+(\w+)\s*;", text):
                name = m.group(1)
                base = dirpath if f in ("mod.rs", "lib.rs", "main.rs") else os.path.join(dirpath, f[:-3])
                skip.add(os.path.normpath(os.path.join(base, name + ".rs")))
                skip.add(os.path.normpath(os.path.join(base, name, "mod.rs")))
    return skip


def is_module(name):
    """Whether `name` is a top-level module of src/ (a folder or a file beside them)."""
    return os.path.isdir(os.path.join(ROOT, name)) or os.path.isfile(os.path.join(ROOT, name + ".rs"))


def edges():
    skip = test_files()
    found = {}
    for dirpath, _, files in os.walk(ROOT):
        for f in sorted(files):
            if not f.endswith(".rs"):
                continue
            p = os.path.normpath(os.path.join(dirpath, f))
            if p in skip or os.path.relpath(p, ROOT) in ("lib.rs", "main.rs"):
                continue
            src = module_of(p)
            code = without_comments(strip_tests(open(p, encoding="utf-8").read()))
            for offset, dst in crate_names(code):
                if dst == src or not is_module(dst):
                    continue
                line = code.count("\n", 0, offset) + 1
                found.setdefault((src, dst), f"{os.path.relpath(p, os.path.dirname(ROOT))}:{line}")
    return found


def beyond_surfaces():
    """`(file:line, dst, path)` for every `crate::dst::item` in a module `src` whose item is not
    in `SURFACES[(src, dst)]`; naming the module itself (`use crate::dst;`) counts, since its
    items could then be reached as `dst::item`. The form `crate::{dst::..}` is not looked at:
    this tree does not use it."""
    skip = test_files()
    out = []
    for (src, dst), allowed in sorted(SURFACES.items()):
        for dirpath, _, files in os.walk(os.path.join(ROOT, src)):
            for f in sorted(files):
                p = os.path.normpath(os.path.join(dirpath, f))
                if not f.endswith(".rs") or p in skip:
                    continue
                code = without_comments(strip_tests(open(p, encoding="utf-8").read()))
                for m in re.finditer(r"\bcrate::" + dst + r"\b(::)?", code):
                    if not m.group(1):
                        items = [""]
                    elif code.startswith("{", m.end()):
                        items, _ = group_heads(code, m.end())
                    else:
                        name = NAME.match(code, m.end())
                        items = [name.group(1)] if name else ["?"]
                    line = code.count("\n", 0, m.start()) + 1
                    where = f"{os.path.relpath(p, os.path.dirname(ROOT))}:{line}"
                    paths = [
                        f"crate::{dst}::{i}" if i else f"crate::{dst}"
                        for i in items
                        if i not in allowed
                    ]
                    out += [(where, dst, path) for path in paths]
    return out


def cycles(found):
    graph = {}
    for a, b in found:
        graph.setdefault(a, set()).add(b)
    # Tarjan's strongly connected components.
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    out = []
    for comp in comps:
        # One shortest cycle through the component's first node, by breadth-first search.
        start, members = comp[0], set(comp)
        prev, queue, seen = {}, [start], {start}
        path = None
        while queue and path is None:
            v = queue.pop(0)
            for w in sorted(graph.get(v, ())):
                if w not in members:
                    continue
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    path.reverse()
                    break
                if w not in seen:
                    seen.add(w)
                    prev[w] = v
                    queue.append(w)
        out.append((comp, path + [start]))
    return out


def main():
    found = edges()
    if "--graph" in sys.argv:
        for (a, b), where in sorted(found.items()):
            print(f"{a} -> {b}  ({where})")
    bad = 0
    for (a, b), where in sorted(found.items()):
        if b == "cli" and a not in ("main",):
            print(f"error: {where}: `crate::cli` used outside src/cli/ (module {a})")
            bad = 1
        if (a, b) == ("cluster", "daemon"):
            print(f"error: {where}: cluster/ plugs into the daemon through run/ and imports nothing of daemon/")
            bad = 1
        if (a, b) == ("status", "cluster"):
            print(f"error: {where}: status/ reads the cluster through the view it is given (status/cluster.rs) and imports nothing of cluster/")
            bad = 1
    for where, dst, path in beyond_surfaces():
        print(f"error: {where}: `{path}` is not part of what src/{dst}/ publishes")
        bad = 1
    for comp, path in cycles(found):
        print(f"error: import cycle between top-level modules {', '.join(comp)}:")
        for a, b in zip(path, path[1:]):
            print(f"  {a} -> {b}  ({found[(a, b)]})")
        bad = 1
    bad |= unlisted_modules()
    if not bad:
        print(f"imports: {len(found)} edges between top-level modules of src/, no cycle")
    return bad


def unlisted_modules():
    """Every top-level module of src/ has its row in README.md's Layout table."""
    readme = open(os.path.join(ROOT, "..", "README.md"), encoding="utf-8").read()
    missing = []
    for entry in sorted(os.listdir(ROOT)):
        name = entry[:-3] if entry.endswith(".rs") else entry
        if name in ("lib", "main"):
            continue
        row = f"| `{name}/` |" if os.path.isdir(os.path.join(ROOT, entry)) else f"| `{entry}` |"
        if row not in readme:
            missing.append(row)
    for row in missing:
        print(f"error: README.md's Layout table has no row starting {row}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
