#!/usr/bin/env bash
# Resident memory of two daemon builds side by side: the memory phases of bench-daemon.sh, run
# ROUNDS times per build, the two builds interleaved and their order swapped every round so
# that load drifts hit both alike. The phases:
#   100 and 1,000 jobs `echo ok`, each due once, spread over the seconds after start; VmRSS
#   1.5 s after every job's `job finished` line;
#   10 and 100 jobs `echo ok` every 5 s (`*/5` in the seconds field): VmRSS 1 s after the
#   daemon started, and the largest VmRSS sampled every 0.25 s over the 5 s after the jobs'
#   sixth fire.
# Prints each run ("round R A|B <what>: X MiB") and, per phase, the median of each build and
# their difference and ratio ("<what>: median A X MiB, B Y MiB, B - A ... (R x)"). One run each
# is too few for a difference of a few tenths of a MiB (the run-to-run noise); five interleaved
# rounds tell it.
#
# Usage: scripts/bench-daemon-pair.sh BIN_A BIN_B [ROUNDS]     (default 5)
# For instance BIN_A a copy of an earlier commit's release build, BIN_B the current one.
# BENCH_PHASES chooses phases (default "once-100 once-1000 every5-10 every5-100").
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 BIN_A BIN_B [ROUNDS]" >&2; exit 2; }
A="$1" B="$2" ROUNDS="${3:-5}"
BENCH_BIN="$A" . scripts/lib/bench-env.sh

python3 - "$A" "$B" "$ROUNDS" "$work" <<'PY'
import os, statistics, sys, time

sys.dont_write_bytecode = True
sys.path.insert(0, "scripts/lib")
import agentlog

A, B, ROUNDS, WORK = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

def once(binary, name, n):
    """[(label, KiB)] of `n` jobs each due once: VmRSS 1.5 s after the last finished."""
    daemon = agentlog.EchoJobs(binary, agentlog.echo_jobs_config(os.path.join(WORK, name), n, False))
    ok = daemon.wait(lambda d: d.finished >= n, 70)
    time.sleep(1.5)
    kib = daemon.rss_kib()
    daemon.stop()
    return [(f"{n:>5} jobs", kib, ok)]

def every5(binary, name, n):
    """[(label, KiB)] of `n` jobs every 5 s: at start, and the peak after the sixth fire."""
    daemon = agentlog.EchoJobs(binary, agentlog.echo_jobs_config(os.path.join(WORK, name), n, True))
    start, peak, ok = daemon.running_rss(n)
    daemon.stop()
    return [(f"{n:>3} jobs every 5 s, at start", start, True),
            (f"{n:>3} jobs every 5 s, running", peak, ok)]

PHASES = {"once-100": (once, 100), "once-1000": (once, 1000),
          "every5-10": (every5, 10), "every5-100": (every5, 100)}
phases = os.environ.get("BENCH_PHASES", " ".join(PHASES)).split()
print(f"machine: {os.cpu_count()} cpus; A = {A}; B = {B}; {ROUNDS} rounds")
rss, labels = {}, []
for r in range(ROUNDS):
    for phase in phases:
        measure, n = PHASES[phase]
        for side, binary in ((("A", A), ("B", B)) if r % 2 == 0 else (("B", B), ("A", A))):
            for label, kib, ok in measure(binary, f"{side}-{phase}-{r}", n):
                if label not in labels:
                    labels.append(label)
                rss.setdefault((side, label), []).append(kib / 1024)
                print(f"round {r} {side} {label}: {kib / 1024:.2f} MiB" + ("" if ok else " (not all ran)"), flush=True)
for label in labels:
    a, b = (statistics.median(rss[(s, label)]) for s in "AB")
    print(f"{label}: median A {a:.2f} MiB, B {b:.2f} MiB, B - A {b - a:+.2f} MiB ({b / a:.3f}x)")
PY
