#!/usr/bin/env bash
# Benchmark of `heartbeat-agent run` against curl (targets in BENCHMARKS.md), over http and https.
#
#   http:  A: heartbeat-agent run --ping-url http://127.0.0.1:PORT/TOKEN -- true
#          B: curl -fsS -o /dev/null http://127.0.0.1:PORT/TOKEN
#          (python3 -m http.server serving a file named TOKEN, so GET /TOKEN answers 200)
#          targets: median A <= 0.6 x B, peak RSS of A (median of 11) <= 5.5 MiB (1.1x runitor's
#          5.0 MiB; scripts/bench-builds.sh measures both side by side)
#   https: A: SSL_CERT_FILE=BUNDLE heartbeat-agent run --ping-url https://127.0.0.1:PORT/TOKEN -- true
#          B: curl -fsS -o /dev/null --cacert BUNDLE https://127.0.0.1:PORT/TOKEN
#          (openssl s_server -www with the test certificate of tests/data/tls: a fast TLS server,
#          whose own handshake does not hide the client's cost; BUNDLE is the system's whole CA
#          bundle plus the test CA, one file given to both)
#          targets: median A <= 0.6 x B, peak RSS of A (median of 11) <= 6 MiB
#   https-ca (a private CA):  A: heartbeat-agent run --ca-file CA --ping-url https://... -- true
#          with the system store (SSL_CERT_FILE and SSL_CERT_DIR unset: the system bundle)
#          B: curl -fsS -o /dev/null --cacert CA https://...   (CA: tests/data/tls/ca.pem alone)
#          targets: median A <= 0.8 x B, peak RSS of A (median of 11) <= 7 MiB
#   A never inherits SSL_CERT_DIR from the caller's shell (some set it to /etc/ssl/certs), so
#   each case measures the store it names.
#
# Builds the release binary and runs A and B alternately N times each per protocol; prints both
# medians, the ratio A/B and the peak RSS of A, and a `ROW` line per figure (scripts/lib/benchrow.py,
# collected by scripts/bench.sh). Every run of A must have delivered its ping: the
# outbox (every ping is written there before its first attempt, and an undelivered one stays)
# must be empty at the end, with nothing queued, or the benchmark fails.
# Timing comes from a small python driver (posix_spawn + wait4 per run). Peak RSS comes from GNU
# time (`/usr/bin/time -f %M`) over separate runs of A: the driver's own wait4 numbers are not
# usable for RSS, because a child spawned by python shares python's memory until exec and Linux
# carries that high-water mark (~14 MiB) into the child's ru_maxrss. Without GNU time the script
# prints that upper bound, labelled as such, and installs nothing.
#
# Usage: scripts/bench-run.sh [N]     (default N=200; BENCH_HTTPS=0 skips https)
set -euo pipefail
cd "$(dirname "$0")/.."

N="${1:-200}"
for tool in python3 curl openssl; do
  command -v "$tool" >/dev/null || { echo "bench-run: $tool is required" >&2; exit 1; }
done

# BENCH_NO_BUILD=1 measures the binary already built (e.g. while other builds hold the CPU).
[ -n "${BENCH_NO_BUILD:-}" ] || cargo build --release --quiet
BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/heartbeat-agent"
HTTPS="${BENCH_HTTPS:-1}"

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

HTTPS_URL=""
BUNDLE="$work/bundle.pem"
if [ "$HTTPS" = 1 ]; then
  system_bundle=""
  for f in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/cert.pem; do
    [ -f "$f" ] && { system_bundle="$f"; break; }
  done
  [ -n "$system_bundle" ] || { echo "bench-run: no system CA bundle found" >&2; exit 1; }
  cat "$system_bundle" tests/data/tls/ca.pem >"$BUNDLE"
  tls_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  openssl s_server -quiet -www -accept "127.0.0.1:$tls_port" -cert tests/data/tls/server.pem \
    -key tests/data/tls/server.key >/dev/null 2>&1 &
  tls_pid=$!
  trap 'kill $tls_pid 2>/dev/null || true; stop_workdir' EXIT
  HTTPS_URL="https://127.0.0.1:$tls_port/$TOKEN"
  for _ in $(seq 1 100); do
    curl -fsS -o /dev/null --cacert "$BUNDLE" "$HTTPS_URL" 2>/dev/null && break
    sleep 0.05
  done
  curl -fsS -o /dev/null --cacert "$BUNDLE" "$HTTPS_URL" ||
    { echo "bench-run: the TLS server does not answer" >&2; exit 1; }
  echo "https: bundle of $(grep -c 'BEGIN CERTIFICATE' "$BUNDLE") certificates ($(wc -c <"$BUNDLE") bytes) from $system_bundle + the test CA"
fi

GNU_TIME=""
if [ -x /usr/bin/time ] && /usr/bin/time -f %M true >/dev/null 2>&1; then GNU_TIME=/usr/bin/time; fi

python3 - "$N" "$BIN" "$URL" "$GNU_TIME" "$HTTPS_URL" "$BUNDLE" "$PWD/tests/data/tls/ca.pem" <<'PY'
import os, statistics, subprocess, sys, time

sys.dont_write_bytecode = True  # no __pycache__ in the checkout
sys.path.insert(0, "scripts/lib")
import benchrow

n, binary, url, gnu_time, https_url, bundle, ca = (int(sys.argv[1]), *sys.argv[2:8])
curl = "/usr/bin/curl" if os.path.exists("/usr/bin/curl") else "curl"
devnull = os.open(os.devnull, os.O_RDWR)

def once(argv, env):
    """Wall time (s) and peak RSS (KiB) of one run; fails loudly on a non-zero exit."""
    start = time.perf_counter()
    pid = os.posix_spawnp(argv[0], argv, env,
                          file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0)])
    _, status, usage = os.wait4(pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench-run: {argv[0]} exited with {os.waitstatus_to_exitcode(status)}")
    return elapsed, usage.ru_maxrss

def compare(name, a_argv, b_argv, a_env, wall_target, rss_target_mib, b_what, b_env=None):
    b_env = b_env or os.environ
    for argv, env in ((a_argv, a_env), (b_argv, b_env)):   # warm-up
        for _ in range(5):
            once(argv, env)
    a_times, b_times, a_rss = [], [], []
    for i in range(n):
        pair = ((a_argv, a_env), (b_argv, b_env))
        for argv, env in (pair if i % 2 == 0 else pair[::-1]):
            t, rss = once(argv, env)
            if argv is a_argv:
                a_times.append(t); a_rss.append(rss)
            else:
                b_times.append(t)
    ma, mb = statistics.median(a_times), statistics.median(b_times)
    ratio = ma / mb
    if gnu_time:
        peaks = []
        for _ in range(11):
            res = subprocess.run([gnu_time, "-f", "%M", *a_argv], stdin=devnull, env=a_env,
                                 capture_output=True, text=True, check=True)
            peaks.append(int(res.stderr.strip().splitlines()[-1]))
        peak, how = statistics.median(peaks), f"GNU time, median of 11 runs (max {max(peaks)} KiB)"
    else:
        peak, how = max(a_rss), "UPPER BOUND from wait4, includes the driver's memory; install GNU time for the real figure"
    print(f"== {name}: runs: {n} each, alternating")
    print(f"A heartbeat-agent run: median {ma * 1000:.2f} ms")
    print(f"B {b_what + ':':<20} median {mb * 1000:.2f} ms")
    print(f"ratio A/B:             {ratio:.3f}  (target <= {wall_target})")
    print(f"peak RSS of A:         {peak:.0f} KiB = {peak / 1024:.2f} MiB  (target <= {rss_target_mib} MiB; {how})")
    print(f"verdict {name}: wall {'OK' if ratio <= wall_target else 'MISSED'}, "
          f"rss {'OK' if peak <= rss_target_mib * 1024 else 'MISSED'}")
    benchrow.emit(f"run.{name}.wall", f"`run -- true`, {name} ping, median wall", ma * 1000, "ms",
                  f"ratio<={wall_target}", mb * 1000, b_what)
    if gnu_time:
        benchrow.emit(f"run.{name}.rss", f"`run -- true`, {name} ping, peak RSS (median of 11)",
                      peak / 1024, "MiB", f"<={rss_target_mib}")

compare("http",
        [binary, "run", "--ping-url", url, "--", "true"],
        [curl, "-fsS", "-o", "/dev/null", url],
        dict(os.environ), 0.6, 5.5, "curl")
if https_url:
    system_store = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    env = dict(system_store, SSL_CERT_FILE=bundle)
    compare("https",
            [binary, "run", "--ping-url", https_url, "--", "true"],
            [curl, "-fsS", "-o", "/dev/null", "--cacert", bundle, https_url],
            env, 0.6, 6, "curl --cacert BUNDLE")
    compare("https-ca",
            [binary, "run", "--ca-file", ca, "--ping-url", https_url, "--", "true"],
            [curl, "-fsS", "-o", "/dev/null", "--cacert", ca, https_url],
            system_store, 0.8, 7, "curl --cacert CA")
PY

# Every ping was delivered: nothing pending, nothing ever queued.
"$BIN" outbox list --json | python3 -c '
import json, sys
doc = json.load(sys.stdin)
pending, queued = len(doc["entries"]), doc["stats"]["queued"]
print(f"outbox after the runs: {pending} pending, {queued} queued")
sys.exit(1 if pending or queued else 0)
' || { echo "bench-run: some pings were not delivered" >&2; exit 1; }

# Whether the link order list still matches this binary (names carry compiler hashes; a low
# count means the list is stale and RSS will show it): reported, not a failure of the benchmark.
bash scripts/check-link-order.sh "$BIN" || true
