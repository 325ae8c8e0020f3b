#!/usr/bin/env bash
# Benchmark of `heartbeat-agent run` against curl (targets in BENCHMARKS.md).
#
#   A: heartbeat-agent run --ping-url http://127.0.0.1:PORT/TOKEN -- true
#   B: curl -fsS -o /dev/null http://127.0.0.1:PORT/TOKEN
#
# Builds the release binary, starts a loopback HTTP server (python3 -m http.server serving a
# file named TOKEN, so GET /TOKEN answers 200), runs A and B alternately N times each, and
# prints both medians, the ratio A/B (target <= 0.5) and the peak RSS of A (target <= 5 MiB).
# Timing comes from a small python driver (posix_spawn + wait4 per run). Peak RSS comes from GNU
# time (`/usr/bin/time -f %M`) over separate runs of A: the driver's own wait4 numbers are not
# usable for RSS, because a child spawned by python shares python's memory until exec and Linux
# carries that high-water mark (~14 MiB) into the child's ru_maxrss. Without GNU time the script
# prints that upper bound, labelled as such, and installs nothing.
#
# Usage: scripts/bench-run.sh [N]     (default N=200)
set -euo pipefail
cd "$(dirname "$0")/.."

N="${1:-200}"
for tool in python3 curl; do
  command -v "$tool" >/dev/null || { echo "bench-run: $tool is required" >&2; exit 1; }
done

# BENCH_NO_BUILD=1 measures the binary already built (e.g. while other builds hold the CPU).
[ -n "${BENCH_NO_BUILD:-}" ] || cargo build --release --quiet
BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/heartbeat-agent"

. scripts/lib/static-server.sh
make_workdir

TOKEN="bench-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
mkdir -p "$work/www" "$work/home"
printf 'OK' >"$work/www/$TOKEN"

start_static_server "$work/www" "$work/server.out"
URL="http://127.0.0.1:$port/$TOKEN"
curl -fsS -o /dev/null "$URL" || { echo "bench-run: GET /TOKEN does not answer 2xx" >&2; exit 1; }

# A clean environment for A: no config, state or ping URL from the caller's shell, and its own
# empty state directory (as root the default is /var/lib/heartbeat-agent, whose outbox may hold
# pings left by other runs; each would get an attempt).
export HOME="$work/home" STATE_DIRECTORY="$work/state"
unset HEARTBEAT_AGENT_CONFIG HEARTBEAT_AGENT_PING_URL HEARTBEAT_AGENT_LOG XDG_CONFIG_HOME XDG_STATE_HOME

GNU_TIME=""
if [ -x /usr/bin/time ] && /usr/bin/time -f %M true >/dev/null 2>&1; then GNU_TIME=/usr/bin/time; fi

python3 - "$N" "$BIN" "$URL" "$GNU_TIME" <<'PY'
import os, statistics, subprocess, sys, time

n, binary, url, gnu_time = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
curl = "/usr/bin/curl" if os.path.exists("/usr/bin/curl") else "curl"
a_argv = [binary, "run", "--ping-url", url, "--", "true"]
b_argv = [curl, "-fsS", "-o", "/dev/null", url]
devnull = os.open(os.devnull, os.O_RDWR)

def once(argv):
    """Wall time (s) and peak RSS (KiB) of one run; fails loudly on a non-zero exit."""
    start = time.perf_counter()
    pid = os.posix_spawnp(argv[0], argv, os.environ,
                          file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0)])
    _, status, usage = os.wait4(pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench-run: {argv[0]} exited with {os.waitstatus_to_exitcode(status)}")
    return elapsed, usage.ru_maxrss

for argv in (a_argv, b_argv):   # warm-up: page cache, server threads
    for _ in range(5):
        once(argv)

a_times, b_times, a_rss = [], [], []
for i in range(n):
    order = (a_argv, b_argv) if i % 2 == 0 else (b_argv, a_argv)
    for argv in order:
        t, rss = once(argv)
        if argv is a_argv:
            a_times.append(t); a_rss.append(rss)
        else:
            b_times.append(t)

ma, mb = statistics.median(a_times), statistics.median(b_times)
ratio = ma / mb
if gnu_time:
    peaks = []
    for _ in range(20):
        res = subprocess.run([gnu_time, "-f", "%M", *a_argv], stdin=devnull,
                             capture_output=True, text=True, check=True)
        peaks.append(int(res.stderr.strip().splitlines()[-1]))
    peak, how = max(peaks), "GNU time, max of 20 runs"
else:
    peak, how = max(a_rss), "UPPER BOUND from wait4, includes the driver's memory; install GNU time for the real figure"
print(f"runs: {n} each, alternating")
print(f"A heartbeat-agent run: median {ma * 1000:.2f} ms")
print(f"B curl:                median {mb * 1000:.2f} ms")
print(f"ratio A/B:             {ratio:.3f}  (target <= 0.5)")
print(f"peak RSS of A:         {peak} KiB = {peak / 1024:.2f} MiB  (target <= 5 MiB; {how})")
print(f"verdict: wall {'OK' if ratio <= 0.5 else 'MISSED'}, rss {'OK' if peak <= 5 * 1024 else 'MISSED'}")
PY

# Whether the link order list still matches this binary (names carry compiler hashes; a low
# count means the list is stale and RSS will show it): reported, not a failure of the benchmark.
bash scripts/check-link-order.sh "$BIN" || true
