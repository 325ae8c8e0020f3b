#!/usr/bin/env bash
# The daemon's burst against the machine's floor: N jobs (default 1,000) `shell = "date +%s.%N
# >> FILE"` all due at the same wall-clock second, and the floor, `scripts/spawn-floor.c
# --burst`: a C program that sleeps until such a second, then starts the same N `sh -c` commands
# with posix_spawn from one thread without waiting. Each child records its own start time, so
# both sides are measured the same way: the start delay of a child is the time it wrote minus
# the due second. ROUNDS rounds; each round runs every binary given (the order rotated every
# round) with the floor measured before and after each, and a binary's ratio in a round is
# its p99 over the geometric mean of the two floors' p99 beside it (on a loaded machine the
# floor moves by 2x within a minute, so only the floor measured next to a daemon is its
# anchor). The due second is a whole second a few seconds after the daemon started
# (its schedule `S M H * * *`), so a round does not wait for the next minute; every job's
# fire is at that second all the same.
#
# Prints one line per measurement (p50, p99, max in ms; for a daemon also its CPU per run,
# utime + stime over the burst), then, per binary, one summary line:
#   burst: daemon p99 <median> ms, floor p99 <median of all floors> ms, ratio <median of the
#     rounds' ratios> (rounds r1 r2 r3; target <= 1.15) BIN
# and, with one binary, a `ROW` line (scripts/lib/benchrow.py, collected by scripts/bench.sh)
# whose anchor is the daemon's median p99 over the median ratio.
#
# Usage: scripts/bench-burst.sh [ROUNDS] [BIN...]   (default 3 rounds; BIN defaults to the
# release build, or BENCH_BIN). Several binaries (e.g. a saved base build and a new one) are
# measured in the same interleaved rounds. BURST_JOBS=N changes the number of jobs.
# BENCH_NO_BUILD=1 measures the binary already built. Needs python3 and cc.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v python3 >/dev/null || { echo "bench-burst: python3 is required" >&2; exit 1; }
command -v cc >/dev/null || { echo "bench-burst: cc is required (the floor is a C program)" >&2; exit 1; }
ROUNDS="${1:-3}"
shift || true
[ $# -gt 0 ] && export BENCH_NO_BUILD=1
. scripts/lib/bench-env.sh
[ $# -gt 0 ] || set -- "$BIN"
cc -O2 -pthread -o "$work/spawn-floor" scripts/spawn-floor.c

python3 - "$work" "$ROUNDS" "${BURST_JOBS:-1000}" "$@" <<'PY'
import math, os, signal, statistics, subprocess, sys, time

sys.dont_write_bytecode = True
sys.path.insert(0, "scripts/lib")
import benchrow
from agentlog import cpu_seconds as cpu, pct, start_due_jobs

WORK, ROUNDS, N, BINS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
FLOOR = os.path.join(WORK, "spawn-floor")

def script(out):
    return f"date +%s.%N >> {out}"

def delays(out, due):
    """The children's start delays (ms) after `due`, once all N wrote theirs (or 60 s)."""
    end = time.time() + 60
    lines = []
    while time.time() < end:
        with open(out) as f:
            lines = f.read().split()
        if len(lines) >= N:
            break
        time.sleep(0.1)
    if len(lines) < N:
        sys.exit(f"bench-burst: only {len(lines)} of {N} children ran")
    return [(float(t) - due) * 1000 for t in lines]

def floor(tag):
    out = os.path.join(WORK, f"{tag}.times")
    open(out, "w").close()
    due = int(time.time()) + 2
    subprocess.run([FLOOR, "--burst", str(due), str(N), script(out)], check=True)
    return delays(out, due), None

def daemon(binary, tag):
    d = os.path.join(WORK, tag)
    os.makedirs(d)
    out = os.path.join(d, "times")
    open(out, "w").close()
    due = int(time.time()) + 6 + N // 500
    proc = start_due_jobs(binary, d, N, due, lambda i: f'shell = "{script(out)}"\n')
    time.sleep(max(0, due - 1 - time.time()))
    if proc.poll() is not None:
        sys.exit(f"bench-burst: the daemon exited early; see its log")
    cpu0 = cpu(proc.pid)
    d_ms = delays(out, due)
    time.sleep(1)  # the runs' ends (pipes closed, records) are part of the burst's CPU
    used = cpu(proc.pid) - cpu0
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    return d_ms, used * 1000 / N

def show(name, d, per_run):
    extra = f"; daemon CPU per run {per_run:.3f} ms" if per_run is not None else ""
    print(f"  {name}: p50 {pct(d, 50):.1f} ms, p99 {pct(d, 99):.1f} ms, max {max(d):.1f} ms{extra}", flush=True)
    return pct(d, 99)

print(f"machine: {os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}; {N} jobs due together, {ROUNDS} rounds")
floors, p99, ratios = [], {b: [] for b in BINS}, {b: [] for b in BINS}
for r in range(ROUNDS):
    order = BINS[r % len(BINS):] + BINS[: r % len(BINS)]
    print(f"round {r + 1}:")
    before = show("floor (C, posix_spawn, one thread)", *floor(f"floor-{r}-0"))
    floors.append(before)
    for i, binary in enumerate(order):
        value = show(f"daemon {binary}", *daemon(binary, f"daemon-{r}-{i}"))
        after = show("floor (C, posix_spawn, one thread)", *floor(f"floor-{r}-{i + 1}"))
        floors.append(after)
        p99[binary].append(value)
        ratios[binary].append(value / math.sqrt(before * after))
        before = after
for binary in BINS:
    rs = ratios[binary]
    print(f"burst: daemon p99 {statistics.median(p99[binary]):.0f} ms, floor p99 {statistics.median(floors):.0f} ms, "
          f"ratio {statistics.median(rs):.3f} (rounds {' '.join(f'{x:.3f}' for x in rs)}; "
          f"target <= 1.15) {binary}")
if len(BINS) == 1:
    value, ratio = statistics.median(p99[BINS[0]]), statistics.median(ratios[BINS[0]])
    benchrow.emit("daemon.burst.p99", f"daemon, {N:,} jobs `date >> FILE` due at one second, start delay p99",
                  value, "ms", "ratio<=1.15", value / ratio, "C posix_spawn floor beside it")
PY
