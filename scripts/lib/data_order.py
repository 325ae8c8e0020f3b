#!/usr/bin/env python3
"""The read-only data a profiled command touches, for packaging/link/data.order.

scripts/link-order.sh orders the code; this orders the data beside it. `.rodata` and
`.data.rel.ro` hold about 2.2 MB of constants, jump tables and vtables, and an http `run`
touches about 20 KB of them spread over 18 windows of 64 KiB (the kernel maps 64 KiB around
every first touch of a file page): 1.1 MiB of resident data for 20 KB read. The touched
input sections (one per constant, `-Z function-sections`' data sections) are listed here
and build.rs writes a linker script that places them first in their output sections.

Addresses come from valgrind's lackey (`--trace-mem=yes`: every load and store), the section
of each address from lld's map of the same link (build.rs writes it for release builds), so
names are input-section names such as `.rodata..Lanon.<hash>.94` that carry no symbol: lld's
`--symbol-ordering-file` cannot reach them, a linker script can.

Subcommands:
  trace BIN OUT [LOG TEXT]  read a lackey trace on stdin; write the data addresses of BIN it
                            touched, in first-touch order. With LOG and TEXT, the addresses
                            touched after TEXT appears in LOG (the daemon's "daemon started")
                            follow a line `# after`: the steady path's data.
  names MAP RUN_TRACE... DAEMON_TRACE
                            print `name size` of the input sections the traces touched,
                            first touch first, in three groups: `# run` (every `run`
                            trace), `# steady` (the daemon's `# after` part, less `run`'s),
                            `# start-up` (the rest of the daemon's).
  map BIN                   print the path of the linker map of BIN's link.
  check LIST BIN            print how many of LIST's sections BIN's link holds with the
                            listed size, and how many LIST names (for check-link-order.sh).
"""
import bisect
import os
import re
import subprocess
import sys

# Merged sections (lld joins every object's constants of one size, or strings, into one
# synthetic section) and the objects' unnamed `.rodata`: a pattern naming them would match
# every object's, so build.rs places the merged ones itself and the rest stays where it was.
GENERIC = re.compile(r"^\.(rodata|data\.rel\.ro)(\.(cst\d+|str\d+\.\d+))?$")
ORDERED = (".rodata", ".data.rel.ro")


def segments(binary):
    """The address ranges of BIN's sections that data.order can order."""
    out = subprocess.run(["readelf", "-SW", binary], capture_output=True, text=True, check=True).stdout
    ranges = []
    for line in out.splitlines():
        m = re.match(r"^\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", line)
        if m and m.group(1) in ORDERED:
            start = int(m.group(2), 16)
            ranges.append((start, start + int(m.group(3), 16)))
    return ranges


def trace(binary, out, log=None, text=None):
    ranges = segments(binary)
    lo = min(r[0] for r in ranges)
    hi = max(r[1] for r in ranges)
    before, after, seen, seen_after = [], [], set(), set()
    marked = log is None
    count = 0
    for line in sys.stdin:
        count += 1
        if not marked and count % 200000 == 0:
            try:
                with open(log, errors="replace") as f:
                    marked = text in f.read()
            except OSError:
                pass
        # Data accesses are " L addr,size", " S ...", " M ..."; instructions "I  addr,size".
        if not line.startswith(" "):
            continue
        comma = line.find(",")
        try:
            first = int(line[3:comma], 16)
            size = int(line[comma + 1:])
        except ValueError:
            continue
        if first + size <= lo or first >= hi:
            continue
        # Every byte: one load of 16 or 32 bytes may read several small constants.
        for addr in range(first, first + size):
            if not any(s <= addr < e for s, e in ranges):
                continue
            if addr not in seen:
                seen.add(addr)
                before.append(addr)
            if marked and log is not None and addr not in seen_after:
                seen_after.add(addr)
                after.append(addr)
    with open(out, "w") as f:
        f.write("".join(f"{a:x}\n" for a in before))
        if log is not None:
            f.write("# after\n" + "".join(f"{a:x}\n" for a in after))


def input_sections(map_path):
    """lld's map: [(start, size, output section, input section name)] by address."""
    sections, output = [], None
    line_re = re.compile(r"^\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+( +)(\S.*)$")
    for line in open(map_path, errors="replace"):
        m = line_re.match(line)
        if not m:
            continue
        indent = len(m.group(3))
        if indent == 1:
            output = m.group(4)
        elif indent == 9 and output in ORDERED:
            # "path/to/file.o:(.rodata..Lanon.x.94)" or "archive.rlib(member.o):(...)"
            where = m.group(4)
            name = where[where.rfind(":(") + 2:-1] if where.endswith(")") else where
            sections.append((int(m.group(1), 16), int(m.group(2), 16), output, name))
    sections.sort()
    return sections


def touched(sections, starts, path):
    """The names of the input sections a trace touched: (before `# after`, after it)."""
    parts = ([], [])
    seen = (set(), set())
    part = 0
    for line in open(path):
        if line.startswith("# after"):
            part = 1
            continue
        addr = int(line, 16)
        i = bisect.bisect_right(starts, addr) - 1
        if i < 0:
            continue
        start, size, _, name = sections[i]
        if not start <= addr < start + size or GENERIC.match(name) or name in seen[part]:
            continue
        seen[part].add(name)
        parts[part].append(f"{name} {size}")
    return parts


def names(map_path, run_traces, daemon_trace):
    """data.order's three groups: `run`'s sections, the running daemon's, its start-up's."""
    sections = input_sections(map_path)
    starts = [s[0] for s in sections]
    run, placed = [], set()
    for path in run_traces:
        for name in touched(sections, starts, path)[0]:
            if name not in placed:
                placed.add(name)
                run.append(name)
    everything, steady = touched(sections, starts, daemon_trace)
    steady = [n for n in steady if n not in placed]
    placed.update(steady)
    start_up = [n for n in everything if n not in placed]
    for title, group in (("run", run), ("steady", steady), ("start-up", start_up)):
        print(f"# {title}")
        if group:
            print("\n".join(group))


def find_map(binary):
    """The map build.rs wrote for the link that made BIN (its .rodata where BIN's is)."""
    release = os.path.dirname(os.path.abspath(binary))
    maps = sorted(
        (os.path.join(release, "build", d, "out", "heartbeat-agent.map")
         for d in os.listdir(os.path.join(release, "build")) if d.startswith("heartbeat-agent-")),
        key=lambda p: os.path.getmtime(p) if os.path.exists(p) else 0, reverse=True)
    want = sorted(segments(binary))
    for path in maps:
        if not os.path.exists(path):
            continue
        found = sorted({(s, e) for s, e in map_ranges(path)})
        if found == want:
            return path
    sys.exit(f"data-order: no linker map matches {binary}; relink it (cargo build --release "
             "writes target/release/build/heartbeat-agent-*/out/heartbeat-agent.map)")


def map_ranges(path):
    """The output sections' ranges in a map, for the ordered sections."""
    out = []
    line_re = re.compile(r"^\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+ (\S+)$")
    for line in open(path, errors="replace"):
        m = line_re.match(line)
        if m and m.group(3) in ORDERED:
            start = int(m.group(1), 16)
            out.append((start, start + int(m.group(2), 16)))
    return out


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "trace":
        trace(*sys.argv[2:6])
    elif len(sys.argv) >= 5 and sys.argv[1] == "names":
        names(sys.argv[2], sys.argv[3:-1], sys.argv[-1])
    elif len(sys.argv) == 4 and sys.argv[1] == "check":
        have = {(s[3], s[1]) for s in input_sections(find_map(sys.argv[3]))}
        listed = [line.split() for line in open(sys.argv[2]) if not line.startswith("#")]
        listed = [(w[0], int(w[1])) for w in listed if len(w) == 2]
        print(sum(entry in have for entry in listed), len(listed))
    elif len(sys.argv) == 3 and sys.argv[1] == "map":
        print(find_map(sys.argv[2]))
    else:
        sys.exit(__doc__)
