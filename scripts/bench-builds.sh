#!/usr/bin/env bash
# What a process of each of several builds costs, side by side in one run: resident memory
# (RSS, which counts the program's code pages that the page cache shares) and private memory
# (RssAnon: heap, stacks and relocated data, which no other process shares), and `run`'s wall
# time against curl. For comparing builds (PIE or not, with or without link-order lists, own
# spawn or std's) and wrappers (runitor): every figure of every build comes from the same
# rounds, interleaved, so load drifts hit all alike.
#
#   run http       BIN run --ping-url http://127.0.0.1:PORT/TOKEN -- true
#                  (a runitor binary: runitor -api-url http://127.0.0.1:PORT -uuid TOKEN
#                  -no-start-ping -- true, the same one ping after the command)
#                  peak RSS (GNU time's %M), RssAnon at exit (gdb stops it at exit_group and
#                  reads /proc/PID/status: the heap is still mapped there, so this is close to its
#                  peak), and the median wall time of N runs against curl's, alternating
#   run https-ca   BIN run --ca-file CA --ping-url https://127.0.0.1:PORT/TOKEN -- true (the
#                  system store as well, as bench-run.sh) against curl --cacert CA: the same
#                  figures (not for runitor)
#   daemon         100 jobs `echo ok` every 5 s: VmRSS and RssAnon at the largest VmRSS sampled
#                  every 0.25 s over 5 s after the sixth fire; 1,000 jobs each due once: VmRSS
#                  and RssAnon 1.5 s after the last finished (not for runitor)
#
# Usage: scripts/bench-builds.sh ROUNDS NAME=BIN [NAME=BIN...]
#   e.g. scripts/bench-builds.sh 5 base=/tmp/base new=target/release/heartbeat-agent
#   runitor=/usr/local/bin/runitor. A NAME starting with `runitor` is measured as runitor.
#   BENCH_GROUPS chooses groups (default "run https-ca daemon"); BENCH_RUN_N the runs per wall
#   median (default 60). Prints every measure and, per figure, each build's median over the
#   rounds (for wall times: the median of the per-round ratios to curl).
#   BENCH_SMAPS=1 also prints, in the last round, where each build's 100-job daemon's memory
#   is: /proc/PID/smaps per kind of mapping (scripts/lib/smaps.py).
# Needs python3, curl, openssl, GNU time (/usr/bin/time) and gdb.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 ROUNDS NAME=BIN [NAME=BIN...]" >&2; exit 2; }
ROUNDS=$1
shift
for tool in python3 curl openssl gdb /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "bench-builds: $tool is required" >&2; exit 1; }
done
BENCH_NO_BUILD=1 . scripts/lib/bench-env.sh
TOKEN="bench-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
# An HTTP server that answers 200 to GET and POST (runitor POSTs the command's output; python's
# http.server answers POST with 501).
python3 -u - "$work/server.out" <<'PY' &
import http.server, sys
class Ok(http.server.BaseHTTPRequestHandler):
    def answer(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"OK")
    do_GET = do_POST = do_HEAD = answer
    def log_message(self, *args):
        pass
class Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, address):
        pass  # a client that closed first
server = Server(("127.0.0.1", 0), Ok)
open(sys.argv[1], "w").write(str(server.server_address[1]))
server.serve_forever()
PY
server_pid=$!
trap 'kill $server_pid 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do [ -s "$work/server.out" ] && break; sleep 0.05; done
port=$(cat "$work/server.out")
tls_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
openssl s_server -quiet -www -accept "127.0.0.1:$tls_port" -cert tests/data/tls/server.pem \
  -key tests/data/tls/server.key >/dev/null 2>&1 &
tls_pid=$!
trap 'kill $tls_pid $server_pid 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 100); do
  curl -fsS -o /dev/null --cacert tests/data/tls/ca.pem "https://127.0.0.1:$tls_port/" 2>/dev/null && break
  sleep 0.05
done
unset SSL_CERT_FILE SSL_CERT_DIR HEARTBEAT_AGENT_PING_URL

python3 - "$ROUNDS" "$port" "$tls_port" "$TOKEN" "$work" "$PWD/tests/data/tls/ca.pem" "$@" <<'PY'
import os, re, statistics, subprocess, sys, time

sys.dont_write_bytecode = True
sys.path.insert(0, "scripts/lib")
import agentlog
import smaps

rounds, port, tls_port, token, work, ca = int(sys.argv[1]), *sys.argv[2:7]
builds = [arg.split("=", 1) for arg in sys.argv[7:]]
groups = os.environ.get("BENCH_GROUPS", "run https-ca daemon").split()
n_wall = int(os.environ.get("BENCH_RUN_N", "60"))
http_url = f"http://127.0.0.1:{port}/{token}"
https_url = f"https://127.0.0.1:{tls_port}/{token}"
devnull = os.open(os.devnull, os.O_RDWR)
curl = "/usr/bin/curl" if os.path.exists("/usr/bin/curl") else "curl"
results = {}  # (figure, build) -> [values]

def record(figure, name, value):
    results.setdefault((figure, name), []).append(value)
    print(f"  {name:<16} {figure}: {value:.3f}", flush=True)

def argv_of(name, binary, group):
    if name.startswith("runitor"):
        return [binary, "-api-url", f"http://127.0.0.1:{port}", "-uuid", token,
                "-no-start-ping", "--", "true"]
    if group == "run":
        return [binary, "run", "--ping-url", http_url, "--", "true"]
    return [binary, "run", "--ca-file", ca, "--ping-url", https_url, "--", "true"]

def env_for(name):
    env = dict(os.environ, HOME=os.path.join(work, "home-" + name),
               STATE_DIRECTORY=os.path.join(work, "state-" + name))
    os.makedirs(env["HOME"], exist_ok=True)
    return env

def wall(argv, env):
    start = time.perf_counter()
    pid = os.posix_spawnp(argv[0], argv, env, file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0)])
    _, status, _ = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench-builds: {argv} exited with {os.waitstatus_to_exitcode(status)}")
    return time.perf_counter() - start

def peak_rss_kib(argv, env):
    res = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], stdin=devnull, env=env,
                         capture_output=True, text=True, check=True)
    return int(res.stderr.strip().splitlines()[-1])

GDB_SCRIPT = """
set pagination off
set confirm off
catch syscall exit_group
run
python import gdb; print("STATUS:" + open("/proc/%d/status" % gdb.selected_inferior().pid).read().replace("\\n", "|"))
kill
quit
"""

def anon_at_exit_kib(argv, env):
    script = os.path.join(work, "gdb.cmds")
    with open(script, "w") as f:
        f.write(GDB_SCRIPT)
    res = subprocess.run(["gdb", "-nx", "-batch", "-x", script, "--args", *argv], stdin=devnull,
                         env=env, capture_output=True, text=True)
    m = re.search(r"RssAnon:\s+(\d+) kB", res.stdout)
    if not m:
        sys.exit(f"bench-builds: gdb did not stop {argv[0]} at exit_group:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    return int(m.group(1))

def measure_run(group, r):
    names = [(n, b) for n, b in builds if group == "run" or not n.startswith("runitor")]
    order = names if r % 2 == 0 else names[::-1]
    curl_argv = [curl, "-fsS", "-o", "/dev/null", http_url] if group == "run" else \
        [curl, "-fsS", "-o", "/dev/null", "--cacert", ca, https_url]
    # Wall: each build alternating with curl, n_wall pairs each.
    for name, binary in order:
        argv, env = argv_of(name, binary, group), env_for(name)
        for _ in range(3):
            wall(argv, env), wall(curl_argv, os.environ)
        mine, theirs = [], []
        for i in range(n_wall):
            pair = ((argv, env, mine), (curl_argv, dict(os.environ), theirs))
            for a, e, into in (pair if i % 2 == 0 else pair[::-1]):
                into.append(wall(a, e))
        ma, mb = statistics.median(mine), statistics.median(theirs)
        record(f"{group} wall ms", name, ma * 1000)
        record(f"{group} wall / curl", name, ma / mb)
    # Memory: 11 runs of each build, interleaved.
    peaks, anons = {}, {}
    for i in range(11):
        for name, binary in (order if i % 2 == 0 else order[::-1]):
            argv, env = argv_of(name, binary, group), env_for(name)
            peaks.setdefault(name, []).append(peak_rss_kib(argv, env))
    for i in range(5):
        for name, binary in (order if i % 2 == 0 else order[::-1]):
            argv, env = argv_of(name, binary, group), env_for(name)
            anons.setdefault(name, []).append(anon_at_exit_kib(argv, env))
    for name, _ in names:
        record(f"{group} peak RSS MiB (median of 11)", name, statistics.median(peaks[name]) / 1024)
        record(f"{group} RssAnon at exit MiB (median of 5)", name, statistics.median(anons[name]) / 1024)

def measure_daemon(r):
    names = [(n, b) for n, b in builds if not n.startswith("runitor")]
    for name, binary in (names if r % 2 == 0 else names[::-1]):
        daemon = agentlog.EchoJobs(binary, agentlog.echo_jobs_config(os.path.join(work, f"{name}-every5-{r}"), 100, True))
        time.sleep(1)
        daemon.wait(lambda d: d.finished >= 600, 45)
        end, peak = time.time() + 5, (0, 0)
        while time.time() < end:
            peak = max(peak, (daemon.status_kib("VmRSS"), daemon.status_kib("RssAnon")))
            time.sleep(0.25)
        if os.environ.get("BENCH_SMAPS") and r == rounds - 1:
            print(f"  {name}: where the 100-job daemon's memory is (smaps, now):")
            print(smaps.table(daemon.proc.pid, binary), flush=True)
        daemon.stop()
        record("daemon 100 jobs every 5 s: RSS MiB", name, peak[0] / 1024)
        record("daemon 100 jobs every 5 s: RssAnon MiB", name, peak[1] / 1024)
    for name, binary in (names if r % 2 == 0 else names[::-1]):
        daemon = agentlog.EchoJobs(binary, agentlog.echo_jobs_config(os.path.join(work, f"{name}-once-{r}"), 1000, False))
        daemon.wait(lambda d: d.finished >= 1000, 70)
        time.sleep(1.5)
        rss, anon = daemon.status_kib("VmRSS"), daemon.status_kib("RssAnon")
        daemon.stop()
        record("daemon after 1,000 jobs once: RSS MiB", name, rss / 1024)
        record("daemon after 1,000 jobs once: RssAnon MiB", name, anon / 1024)

print(f"bench-builds: {os.cpu_count()} cpus, {rounds} rounds of {groups}; builds: "
      + ", ".join(f"{n}={b}" for n, b in builds), flush=True)
for r in range(rounds):
    print(f"== round {r + 1} ({time.strftime('%H:%M:%S', time.gmtime())} UTC, load "
          f"{open('/proc/loadavg').read().split()[0]})", flush=True)
    for group in groups:
        if group in ("run", "https-ca"):
            measure_run(group, r)
        elif group == "daemon":
            measure_daemon(r)
        else:
            sys.exit(f"bench-builds: unknown group {group}")

print()
names = [n for n, _ in builds]
print(f"| figure (median of {rounds} rounds) | " + " | ".join(names) + " |")
print("|---|" + "---|" * len(names))
figures = []
for figure, _ in results:
    if figure not in figures:
        figures.append(figure)
for figure in figures:
    cells = []
    for name in names:
        values = results.get((figure, name))
        cells.append(f"{statistics.median(values):.3f}" if values else "-")
    print(f"| {figure} | " + " | ".join(cells) + " |")
PY
