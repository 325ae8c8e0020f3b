#!/usr/bin/env bash
# Soak test of the daemon: JOBS jobs (default 200) on seconds-level schedules for DURATION
# seconds (default 600), pinging a local emulator. Samples the daemon's resident memory (VmRSS,
# and its anonymous and file-backed parts), open file descriptors and zombie children at start
# (after WARMUP seconds), every INTERVAL seconds (default 60) and at the end, and prints one
# line per sample plus a summary. Jobs fire in bursts, so one sample can catch runs in flight
# (their pipes, children not reaped yet, more so on a loaded machine): the start and end
# figures compared are *settled*: the fewest fds over SETTLE samples (default 10, 0.5 s apart)
# and the zombies present in every one of them (same pid: not reaped for SETTLE/2 seconds).
# Exit 1 when the daemon died or panicked, when zombies lingered at the end, or when settled
# fds grew by more than FD_SLACK (default 8).
#
#   DURATION=600 JOBS=200 bash scripts/soak.sh            # uses target/release if built, else debug
#   BIN=target/debug/heartbeat-agent DURATION=60 bash scripts/soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-600}
JOBS=${JOBS:-200}
WARMUP=${WARMUP:-20}
INTERVAL=${INTERVAL:-60}
FD_SLACK=${FD_SLACK:-8}
SETTLE=${SETTLE:-10}
if [[ -z "${BIN:-}" ]]; then
  target=${CARGO_TARGET_DIR:-target}
  if [[ -x $target/release/heartbeat-agent ]]; then BIN=$target/release/heartbeat-agent
  else cargo build --quiet; BIN=$target/debug/heartbeat-agent; fi
fi
work=$(mktemp -d)
emu_pid=""; daemon_pid=""
cleanup() {
  [[ -n "$daemon_pid" ]] && kill "$daemon_pid" 2>/dev/null || true
  [[ -n "$emu_pid" ]] && kill "$emu_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  [[ -n "${KEEP:-}" ]] || rm -rf "$work"
}
trap cleanup EXIT

"$BIN" emulator --listen 127.0.0.1:0 --ping-listen 127.0.0.1:0 \
  --fixtures config/emulator-fixtures.json >"$work/emu.out" 2>"$work/emu.err" &
emu_pid=$!
for _ in $(seq 100); do [[ $(wc -l <"$work/emu.out") -ge 2 ]] && break; sleep 0.1; done
ping_url=$(sed -n 's/^ping_url=//p' "$work/emu.out")
[[ -n "$ping_url" ]] || { echo "soak: the emulator did not start" >&2; cat "$work/emu.err" >&2; exit 1; }

{
  printf '[agent]\nstate_dir = "%s/state"\nshutdown_timeout = "5s"\n\n' "$work"
  # Its own status socket (not the default 127.0.0.1:9465, which another daemon may hold): the
  # endpoint is part of what runs, and /metrics gives the figures of the summary.
  printf '[status]\nlisten = "%s/status.sock"\n\n' "$work"
  for i in $(seq 1 "$JOBS"); do
    step=$(( (i % 5) + 1 ))        # every 1..5 seconds
    printf '[[jobs]]\nname = "soak-%d"\nschedule = "*/%d * * * * *"\n' "$i" "$step"
    case $(( i % 4 )) in
      0) printf 'shell = "echo out-%d; echo err-%d >&2"\nping_url = "%s/3f2a9c1e-5b7d-4e8f-9a6b-1c2d3e4f5a01"\n' "$i" "$i" "$ping_url" ;;
      1) printf 'command = ["/bin/true"]\nping_url = "%s/3f2a9c1e-5b7d-4e8f-9a6b-1c2d3e4f5a01"\n' "$ping_url" ;;
      2) printf 'command = ["/bin/false"]\n' ;;
      3) printf 'shell = "sleep 0.3 & exit 0"\n' ;;   # leaves an orphan behind for a moment
    esac
    printf '\n'
  done
} >"$work/config.toml"

"$BIN" daemon --config "$work/config.toml" --log-format json --log-level warn \
  >/dev/null 2>"$work/daemon.err" &
daemon_pid=$!

# RSS is split into anonymous memory (the heap: where a leak shows) and file-backed pages (the
# binary's code and data, paged in as new code paths run: large for a debug build).
sample() { # label
  local rss anon file fds zombies
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$daemon_pid/status")
  anon=$(awk '/^RssAnon/ {print $2}' "/proc/$daemon_pid/status")
  file=$(awk '/^RssFile/ {print $2}' "/proc/$daemon_pid/status")
  fds=$(ls "/proc/$daemon_pid/fd" | wc -l)
  zombies=$(ps -o stat= --ppid "$daemon_pid" | grep -c '^Z' || true)
  echo "$1 t=$(( SECONDS ))s rss_kib=$rss anon_kib=$anon file_kib=$file fds=$fds zombies=$zombies"
}

# The fewest open fds and the zombie children present in every one of SETTLE samples.
settled() { # label
  local min="" lingering="" fds z
  for i in $(seq "$SETTLE"); do
    fds=$(ls "/proc/$daemon_pid/fd" | wc -l)
    [[ -z $min || $fds -lt $min ]] && min=$fds
    z=$(ps -o pid=,stat= --ppid "$daemon_pid" | awk '$2 ~ /^Z/ {print $1}' | sort)
    if (( i == 1 )); then lingering=$z; else lingering=$(comm -12 <(echo "$lingering") <(echo "$z")); fi
    sleep 0.5
  done
  echo "$1 settled_fds=$min lingering_zombies=$(grep -c . <<<"$lingering" || true)"
}

sleep "$WARMUP"
kill -0 "$daemon_pid" || { echo "soak: the daemon died" >&2; cat "$work/daemon.err" >&2; exit 1; }
sample start
start_line=$(settled start); echo "$start_line"
start_fds=$(sed 's/.*settled_fds=\([0-9]*\).*/\1/' <<<"$start_line")
end=$(( SECONDS + DURATION ))
while (( SECONDS < end )); do
  sleep $(( end - SECONDS < INTERVAL ? end - SECONDS : INTERVAL ))
  kill -0 "$daemon_pid" || { echo "soak: the daemon died" >&2; tail -20 "$work/daemon.err" >&2; exit 1; }
  sample sample
done
sample end
end_line=$(settled end); echo "$end_line"
end_fds=$(sed 's/.*settled_fds=\([0-9]*\).*/\1/' <<<"$end_line")
lingering=$(sed 's/.*lingering_zombies=\([0-9]*\).*/\1/' <<<"$end_line")
metric() { # name: the sum of its samples in the daemon's /metrics
  curl -s --unix-socket "$work/status.sock" http://localhost/metrics |
    awk -v m="$1" '$1 == m || index($1, m "{") == 1 {s += $2} END {print s + 0}'
}
runs=$(metric heartbeat_agent_runs_total)
persist_failures=$(metric heartbeat_agent_persist_failures_total)
base_url=$(sed -n 's/^base_url=//p' "$work/emu.out")
pings=$(curl -s "$base_url/_emulator/pings" | grep -o '"seq"' | wc -l || true)
echo "summary jobs=$JOBS duration_s=$DURATION runs=$runs persist_failures=$persist_failures pings_received=$pings failed_runs_logged=$(grep -c 'job failed' "$work/daemon.err" || true) lingering_zombies=$lingering panics=$(grep -c panicked "$work/daemon.err" || true)"
status=0
(( end_fds - start_fds > FD_SLACK )) && { echo "soak: fds grew from $start_fds to $end_fds" >&2; status=1; }
(( lingering > 0 )) && { echo "soak: $lingering zombies not reaped for $((SETTLE / 2)) s" >&2; status=1; }
grep -q panicked "$work/daemon.err" && { echo "soak: the daemon panicked" >&2; status=1; }
exit $status
