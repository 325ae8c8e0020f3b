#!/usr/bin/env bash
# Regenerates packaging/link/run.order, the functions `heartbeat-agent run` executes, and
# packaging/link/daemon.order, the functions the daemon executes once started (its steady path:
# fires, pings, a status scrape), then those of its start-up. build.rs hands both to the linker
# (lld's --symbol-ordering-file) so each path's code sits together at the start of .text.
# Without it they are scattered over 6 MB of code and every first call faults in a 64 KiB window
# around it: about 3 MiB of resident code for a run that executes about 0.5 MiB, and about
# 6 MiB for a daemon that runs jobs (see BENCHMARKS.md and docs/packaging.md).
#
# Names carry the compiler's hashes, so the list is tied to the code, the toolchain (pinned in
# rust-toolchain.toml) and Cargo.lock: a stale entry is ignored by the linker and only costs
# memory. The profiled runs include an https ping (openssl s_server with tests/data/tls), so
# the TLS client is placed as well. CI runs scripts/check-link-order.sh on the release binary,
# which reports how many of the names are left and never fails; this script is one step of the
# release (docs/packaging.md). Needs valgrind (callgrind
# lists every function executed) and python3. With perf (Debian's linux-perf), each command of
# `run` is also run on the real CPU with its page faults recorded, and the functions it faulted
# in that callgrind did not list (paths chosen by CPU features, system calls valgrind lacks)
# join that command's list, and the daemon's faults join its steady list; each regeneration so
# completes the lists of the build it profiles.
# For the same reason, run it twice after a large change: the second pass sees the faults the
# first layout hid (a fault-around window maps the neighbours of the function that faulted).
#
# Usage: scripts/link-order.sh         (builds the release binary, profiles, writes both files)
# LINK_ORDER_NO_BUILD=1 profiles the binary already built; LINK_ORDER_OUT=FILE and
# LINK_ORDER_DAEMON_OUT=FILE write elsewhere. The daemon's profiles take about two minutes
# (two configs, each under callgrind for 20 s after its start-up, then under perf).
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in valgrind callgrind_control python3 openssl curl; do
  command -v "$tool" >/dev/null || { echo "link-order: $tool is required" >&2; exit 1; }
done
[ -n "${LINK_ORDER_NO_BUILD:-}" ] || cargo build --release --quiet
BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/heartbeat-agent"
OUT="${LINK_ORDER_OUT:-packaging/link/run.order}"
DAEMON_OUT="${LINK_ORDER_DAEMON_OUT:-packaging/link/daemon.order}"

. scripts/lib/static-server.sh
make_workdir

mkdir -p "$work/www" "$work/home" "$work/state"
printf 'OK' >"$work/www/TOKEN"
start_static_server "$work/www" "$work/server.out"
cat >"$work/config.toml" <<TOML
[[jobs]]
name = "backup"
schedule = "0 3 * * *"
ping_url = "http://127.0.0.1:$port/TOKEN"
TOML

export HOME="$work/home" STATE_DIRECTORY="$work/state"
unset HEARTBEAT_AGENT_CONFIG HEARTBEAT_AGENT_PING_URL HEARTBEAT_AGENT_LOG XDG_CONFIG_HOME
n=0
profile() {
  n=$((n + 1))
  valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/cg.$n" \
    "$BIN" "$@" >/dev/null 2>&1 || true
  # The same command on the real CPU, its page faults recorded: callgrind runs the program on
  # valgrind's CPU, where code chosen by CPU features (sha2's SHA-NI path, ring's ADX/AVX
  # ones) and system calls valgrind lacks (pidfd_open: tokio's pidfd reaper) take other
  # functions than the real run. A fault in .text outside the functions callgrind listed
  # names a function the real run needs; the python below adds it to this profile's list.
  if [ -n "$perf_ok" ]; then
    perf record -q -e page-faults -c 1 -d -o "$work/pf.$n" "$BIN" "$@" >/dev/null 2>&1 || true
  fi
}
perf_ok=
if command -v perf >/dev/null 2>&1 && perf record -q -e page-faults -c 1 -o "$work/pf.test" true >/dev/null 2>&1; then
  perf_ok=1
else
  echo "link-order: perf cannot record page faults here; the lists hold callgrind's functions only" >&2
fi
# The common cases first: a success with a ping, a failure, a job from the config, a ping that
# cannot be delivered (the outbox), then --help (clap's whole tree, for errors and help).
profile run --ping-url "http://127.0.0.1:$port/TOKEN" -- true
profile run --ping-url "http://127.0.0.1:$port/TOKEN" -- false
profile --config "$work/config.toml" run --job backup -- true
profile run --ping-url "http://127.0.0.1:1/TOKEN" --ping-timeout 1s -- true
# An https ping with a whole system-sized trust store (the system bundle plus the test CA, as
# scripts/bench-run.sh measures it): the TLS client's code is placed too.
tls_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
openssl s_server -quiet -www -accept "127.0.0.1:$tls_port" -cert tests/data/tls/server.pem \
  -key tests/data/tls/server.key >/dev/null 2>&1 &
tls_pid=$!
trap 'kill $tls_pid 2>/dev/null || true; stop_workdir' EXIT
for f in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/cert.pem; do
  [ -f "$f" ] && { cat "$f" >"$work/bundle.pem"; break; }
done
cat tests/data/tls/ca.pem >>"$work/bundle.pem"
for _ in $(seq 1 100); do
  curl -fsS -o /dev/null --cacert "$work/bundle.pem" "https://127.0.0.1:$tls_port/" 2>/dev/null && break
  sleep 0.05
done
SSL_CERT_FILE="$work/bundle.pem" profile run --ping-url "https://127.0.0.1:$tls_port/TOKEN" -- true
profile run --help

# The daemon: ten jobs every 2 s, one of them pinging, one failing with a fail ping, and a
# scrape of the status endpoint. Callgrind dumps its counts once the daemon has started
# (start-up) and again before it is stopped (the steady path); the stop itself is not kept.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
status_port="$(free_port)"
{
  printf '[agent]\nstate_dir = "%s"\nshutdown_timeout = "5s"\n\n' "$work/daemon-state"
  printf '[status]\nlisten = "127.0.0.1:%s"\n\n' "$status_port"
  for i in $(seq 1 8); do
    printf '[[jobs]]\nname = "job-%s"\nschedule = "*/2 * * * * *"\ncommand = ["echo", "ok"]\n\n' "$i"
  done
  printf '[[jobs]]\nname = "pinged"\nschedule = "*/2 * * * * *"\ncommand = ["echo", "ok"]\n'
  printf 'ping_url = "http://127.0.0.1:%s/TOKEN"\n\n' "$port"
  printf '[[jobs]]\nname = "failing"\nschedule = "*/2 * * * * *"\ncommand = ["false"]\n'
  printf 'ping_url = "http://127.0.0.1:%s/TOKEN"\n\n' "$port"
} >"$work/daemon.toml"
# The same daemon logging JSON (what log shippers read: its formatter, float and escaping code)
# with its status endpoint on a unix socket (the other listener), as scripts/bench-builds.sh
# runs it. Without this run, a JSON-logging daemon kept windows of unlisted code resident
# (BENCHMARKS.md, "What a process costs").
sed -e "s|^listen = .*|listen = \"$work/status.sock\"|" -e "s|daemon-state|daemon-json-state|" \
  "$work/daemon.toml" >"$work/daemon-json.toml"
# Waits (up to 2 minutes) for the daemon logging to $1 to have started.
wait_started() {
  for _ in $(seq 1 1200); do
    grep -q 'daemon started' "$1" && return 0
    sleep 0.1
  done
  echo "link-order: the daemon did not start (its log: $1)" >&2
  exit 1
}
# The steady path's workload: 20 s of fires, with scrapes of the status endpoint.
# $1 is the config (daemon.toml: scrapes over TCP; daemon-json.toml: over its unix socket).
steady_workload() {
  local via=(--unix-socket "$work/status.sock" "http://localhost")
  [ "$1" = daemon.toml ] && via=("http://127.0.0.1:$status_port")
  for _ in 1 2 3 4; do
    sleep 5
    curl -fsS -o /dev/null "${via[@]}/metrics" || true
    curl -fsS -o /dev/null "${via[@]}/status" || true
  done
}
# Profiles the daemon on config $1 (daemon.toml or daemon-json.toml), any further arguments
# given to it: callgrind dumps `$1.cg.1` (start-up) and `$1.cg.2` (steady path); then the same
# daemon and workload on the real CPU, its page faults recorded in `$1.pf` (as for `run`
# above): the functions it faulted in that callgrind did not list join the steady path's list.
# Without them, each such first touch maps a window of unlisted code (64 KiB, or a whole large
# folio of the page cache) for the daemon's life.
profile_daemon() {
  local config=$1
  shift
  valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/$config.cg" \
    "$BIN" daemon --config "$work/$config" "$@" >/dev/null 2>"$work/$config.log" &
  daemon_pid=$!
  wait_started "$work/$config.log"
  callgrind_control -d "$daemon_pid" >/dev/null 2>&1
  steady_workload "$config"
  callgrind_control -d "$daemon_pid" >/dev/null 2>&1
  kill -TERM "$daemon_pid"
  wait "$daemon_pid" || true
  [ -f "$work/$config.cg.1" ] && [ -f "$work/$config.cg.2" ] ||
    { echo "link-order: callgrind did not dump the daemon's profile ($config)" >&2; exit 1; }
  if [ -n "$perf_ok" ]; then
    rm -rf "$work/daemon-state" "$work/daemon-json-state"
    # With a hundred more jobs every second: 2,000 runs in the workload's 20 s reach what a
    # daemon does only after many runs (its random generator's reseed, queues that grow). The
    # faults are stamped with the wall clock, so that those of the stop (after `$1.pf.end`)
    # are left out: the stop's code is not the steady path's.
    cp "$work/$config" "$work/$config.perf"
    for i in $(seq 1 100); do
      printf '[[jobs]]\nname = "every-second-%s"\nschedule = "* * * * * *"\ncommand = ["true"]\n\n' "$i"
    done >>"$work/$config.perf"
    perf record -q -k realtime -e page-faults -c 1 -d -o "$work/$config.pf" \
      "$BIN" daemon --config "$work/$config.perf" "$@" >/dev/null 2>"$work/$config-perf.log" &
    perf_pid=$!
    wait_started "$work/$config-perf.log"
    steady_workload "$config"
    date +%s.%N >"$work/$config.pf.end"
    pkill -TERM -P "$perf_pid" || true
    wait "$perf_pid" || true
  fi
  rm -rf "$work/daemon-state" "$work/daemon-json-state"
}
profile_daemon daemon.toml
profile_daemon daemon-json.toml --log-format json

python3 - "$BIN" "$OUT" "$DAEMON_OUT" "$work" <<'PY'
import bisect, glob, os, re, subprocess, sys
binary, out, daemon_out, work = sys.argv[1:5]

def functions(files):
    """The binary's functions (mangled) that the callgrind profiles in `files` executed."""
    order, seen = [], set()
    for path in files:
        names, obs, ob = {}, {}, None
        for line in open(path, errors="replace"):
            m = re.match(r"^(c?ob)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
            if m:
                if m.group(3):
                    obs[m.group(2)] = m.group(3)
                if m.group(1) == "ob":
                    ob = obs.get(m.group(2))
                continue
            m = re.match(r"^(c?fn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
            if not m:
                continue
            if m.group(3):
                names[m.group(2)] = m.group(3)
            # Callgrind names a function's recursive activations (or a member of a call cycle)
            # `name'2`, `name'3`, ...: the symbol is `name`.
            name = re.sub(r"'[0-9]+$", "", names.get(m.group(2), ""))
            # Any symbol of the binary's code: Rust's mangled names, and C ones (`main`, ring's
            # C and assembly functions), not callgrind's own labels such as `0x0001c2f0`.
            if m.group(1) == "fn" and ob == binary and name in NAMES and name not in seen:
                seen.add(name)
                order.append(name)
    return order

def text_symbols():
    """The binary's functions (mangled) by address: [(start, end, name)]."""
    out = subprocess.run(["nm", "-S", "-n", binary], capture_output=True, text=True).stdout
    symbols = []
    for line in out.splitlines():
        parts = line.split()
        # A symbol without a size (crt's `frame_dummy`, ...) ends where the next one starts.
        if len(parts) == 3 and parts[1] in "tTwW":
            symbols.append([int(parts[0], 16), None, parts[2]])
        elif len(parts) == 4 and parts[2] in "tTwW" and int(parts[1], 16) > 0:
            start = int(parts[0], 16)
            symbols.append([start, start + int(parts[1], 16), parts[3]])
    for this, after in zip(symbols, symbols[1:] + [[None, None, None]]):
        if this[1] is None:
            this[1] = after[0] if after[0] is not None else this[0] + 1
    return [tuple(s) for s in symbols]

SYMBOLS = text_symbols()
NAMES = {name for _, _, name in SYMBOLS}
STARTS = [s for s, _, _ in SYMBOLS]

def first_load():
    """The address the binary's first loadable segment (file offset 0) is linked at: 0 for a PIE."""
    out = subprocess.run(["readelf", "-lW", binary], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if parts[:1] == ["LOAD"] and int(parts[1], 16) == 0:
            return int(parts[2], 16)
    return 0

FIRST_LOAD = first_load()

def load_base(path):
    """Where the run recorded in `path` mapped the binary's first page: a PIE is loaded at a
    random address, and the faults' addresses are the process's, not the symbol table's."""
    out = subprocess.run(["perf", "script", "-i", path, "--show-mmap-events"],
                         capture_output=True, text=True).stdout
    real = os.path.realpath(binary)
    for line in out.splitlines():
        m = re.search(r"PERF_RECORD_MMAP2? [^[]*\[(0x[0-9a-f]+)\(0x[0-9a-f]+\) @ (0x[0-9a-f]+|0) .*\]: \S+ (\S+)$", line)
        if m and int(m.group(2), 16) == 0 and os.path.realpath(m.group(3)) == real:
            return int(m.group(1), 16)
    return None

def faulted(path):
    """The binary's functions in whose code the real run (perf, `pf.N`) took a page fault;
    when `PATH.end` holds a time, only those of faults before it."""
    if not os.path.exists(path):
        return []
    base = load_base(path)
    if base is None:
        return []
    end = float(open(path + ".end").read()) if os.path.exists(path + ".end") else None
    fields = "time,addr" if end is not None else "addr"
    out = subprocess.run(["perf", "script", "-i", path, "-F", fields],
                         capture_output=True, text=True).stdout
    names = []
    for line in out.splitlines():
        parts = line.replace(":", " ").split()
        if not parts:
            continue
        try:
            if end is not None and float(parts[0]) > end:
                break
            addr = int(parts[-1], 16) - base + FIRST_LOAD
        except ValueError:
            continue
        i = bisect.bisect_right(STARTS, addr) - 1
        if i >= 0 and SYMBOLS[i][0] <= addr < SYMBOLS[i][1] and SYMBOLS[i][2] not in names:
            names.append(SYMBOLS[i][2])
    return names

def profiles():
    """Each profiled command's functions: callgrind's, then those only the real CPU took."""
    paths = sorted(glob.glob(os.path.join(work, "cg.[0-9]*")), key=lambda p: int(p.rsplit(".", 1)[1]))
    order, seen = [], set()
    for path in paths:
        listed = functions([path])
        extra = [f for f in faulted(path.replace("cg.", "pf.")) if f not in set(listed)]
        for name in listed + extra:
            if name not in seen:
                seen.add(name)
                order.append(name)
    return order

run = profiles()
with open(out, "w") as f:
    f.write("# Functions `heartbeat-agent run` executes, placed first in .text by the linker.\n")
    f.write("# Generated by scripts/link-order.sh; do not edit by hand.\n")
    f.write("\n".join(run) + "\n")
print(f"link-order: {len(run)} functions written to {out}", file=sys.stderr)

# The steady path's names that page faults found (those after the FAULTED line): a function the
# real CPU runs and valgrind's does not (sha2's SHA-NI path, tokio's pidfd reaper, a thread
# pool's timeouts) faults only while its window is not yet mapped, so once placed among the listed code it is seen no more. Such names stay from one
# regeneration to the next while the binary has them and callgrind does not list them; delete
# the list to start afresh.
FAULTED = "# found by page faults (kept across regenerations)"

def previous_faulted():
    names, found = [], False
    if os.path.exists(daemon_out):
        for line in (l.strip() for l in open(daemon_out)):
            if line == "# start-up":
                break
            if line == FAULTED:
                found = True
            elif found and line and not line.startswith("#"):
                names.append(line)
    return names

CONFIGS = ("daemon.toml", "daemon-json.toml")
steady = functions([os.path.join(work, f"{c}.cg.2") for c in CONFIGS])
known = set(steady)
start = [name for name in functions([os.path.join(work, f"{c}.cg.1") for c in CONFIGS])
         if name not in known]
known.update(start)
faults = []
for c in CONFIGS:
    faults += [name for name in faulted(os.path.join(work, f"{c}.pf")) if name not in known]
    known.update(faults)
kept = [name for name in previous_faulted() if name in NAMES and name not in known]
faults += kept
print(f"link-order: {len(faults) - len(kept)} names found by page faults, {len(kept)} kept "
      "from the previous list", file=sys.stderr)
with open(daemon_out, "w") as f:
    f.write("# Functions the daemon executes once started, then (after the marker line) those of\n")
    f.write("# its start-up; build.rs places them after `run`'s, sharing the code both run.\n")
    f.write("# Generated by scripts/link-order.sh; do not edit by hand.\n")
    f.write("\n".join(steady) + f"\n{FAULTED}\n" + "\n".join(faults) + "\n# start-up\n")
    f.write("\n".join(start) + "\n")
print(f"link-order: {len(steady) + len(faults)} + {len(start)} functions written to {daemon_out}", file=sys.stderr)
PY
