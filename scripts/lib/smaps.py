"""Where a process's resident memory is: /proc/PID/smaps summed per kind of mapping (the
program's own segments by what they hold, libc, libm, ld.so, heap, stacks, other anonymous
memory), each with its Rss, Private_Dirty and Anonymous KiB. bench-builds.sh prints it for the
daemon (BENCH_SMAPS=1). The program's segments, in the order a PIE built by lld maps them:
read-only (ELF headers, .rodata, .eh_frame), code (.text), RELRO (.data.rel.ro and .got,
written by the loader's relocations, then made read-only), data (.data, .bss).
"""
import os
import re

SEGMENTS = ["binary: .rodata, .eh_frame", "binary: .text", "binary: RELRO (.data.rel.ro)",
            "binary: .data, .bss"]


def breakdown(pid, binary):
    """[(kind, rss, private_dirty, anonymous)] in KiB, largest Rss first."""
    binary = os.path.realpath(binary)
    sums, segment, current = {}, 0, None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = re.match(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \d+\s*(.*)$", line)
            if head:
                start, end, perms, name = int(head[1], 16), int(head[2], 16), head[3], head[4]
                if name == binary:
                    kind = SEGMENTS[min(segment, 3)]
                    segment += 1
                elif name:
                    base = os.path.basename(name)
                    kind = next((k for k in ("libc.so", "libm.so", "libgcc_s", "ld-linux")
                                 if base.startswith(k)), None) or name
                elif perms == "---p":
                    kind = "guard pages"
                else:
                    # glibc's thread stacks are 8 MiB mappings (ulimit -s), tokio's 2 MiB.
                    size = (end - start) // 1024
                    kind = "thread stacks" if size in (2048, 8192) else "anonymous (malloc arenas, mmap)"
                current = sums.setdefault(kind, [0, 0, 0])
                continue
            field = re.match(r"^(Rss|Private_Dirty|Anonymous):\s+(\d+) kB", line)
            if field and current is not None:
                current[("Rss", "Private_Dirty", "Anonymous").index(field[1])] += int(field[2])
    rows = [(k, *v) for k, v in sums.items() if v[0]]
    return sorted(rows, key=lambda r: -r[1])


def table(pid, binary):
    """The breakdown as Markdown rows, with the total."""
    rows = breakdown(pid, binary)
    out = ["| mapping | Rss KiB | Private_Dirty KiB | Anonymous KiB |", "|---|---|---|---|"]
    out += [f"| {k} | {r:,} | {p:,} | {a:,} |" for k, r, p, a in rows]
    total = [sum(r[i] for r in rows) for i in (1, 2, 3)]
    out.append(f"| total | {total[0]:,} | {total[1]:,} | {total[2]:,} |")
    return "\n".join(out)
