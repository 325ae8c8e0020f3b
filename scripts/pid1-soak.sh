#!/usr/bin/env bash
# The daemon as PID 1 of a new PID namespace (as in a container without an init), through RUNS
# job runs that each leave orphans behind: no zombie may stay, and every run's exit status must
# be the one its command exited with (the orphan reaper must never take a job's own status).
#
# Usage: scripts/pid1-soak.sh [RUNS (default 1000)] [JOBS (default 25)]
# Needs root (or user namespaces) and util-linux's unshare. Exits 0 when every check passes.
# JOBS jobs fire every second; job i runs `sleep 0.2 & (sleep 0.3 &) ; exit CODE` with
# CODE = i % 5 (0 is a success, 1-4 failures), so each run orphans two sleeps (one of them a
# grandchild) that PID 1 must reap.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1000}
jobs=${2:-25}

if ! unshare --pid --fork --mount-proc true 2>/dev/null; then
  echo "pid1-soak: cannot create a PID namespace here (needs root and util-linux unshare)" >&2
  exit 1
fi
cargo build --quiet --bin heartbeat-agent
bin=${CARGO_TARGET_DIR:-$PWD/target}/debug/heartbeat-agent

work=$(mktemp -d)
daemon_pid=
cleanup() {
  if [ -n "$daemon_pid" ]; then kill -TERM "$daemon_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

config=$work/config.toml
{
  echo '[agent]'
  echo "state_dir = \"$work/state\""
  echo 'shutdown_timeout = "2s"'
  for i in $(seq 1 "$jobs"); do
    printf '\n[[jobs]]\nname = "job-%d"\nschedule = "* * * * * *"\n' "$i"
    printf 'shell = "sleep 0.2 & (sleep 0.3 &) ; exit %d"\n' $((i % 5))
  done
} >"$config"
# (Warnings about jobs that ping nothing are expected: only the runs matter here.)
"$bin" config check --config "$config" >/dev/null 2>&1 || "$bin" config check --config "$config"

log=$work/daemon.log
env -u NOTIFY_SOCKET -u HEARTBEAT_AGENT_CONFIG HEARTBEAT_AGENT_LOG=info \
  unshare --pid --fork --mount-proc "$bin" daemon --config "$config" --log-format json \
  2>"$log" &
unshare_pid=$!

# The daemon's host pid: the only child of unshare.
for _ in $(seq 1 100); do
  daemon_pid=$(cut -d' ' -f1 <"/proc/$unshare_pid/task/$unshare_pid/children" 2>/dev/null || true)
  [ -n "$daemon_pid" ] && break
  sleep 0.05
done
[ -n "$daemon_pid" ] || { echo "pid1-soak: the daemon did not start" >&2; cat "$log" >&2; exit 1; }

ended() { jq -c 'select(.message == "job finished" or (.message | startswith("job failed")))' "$log" | wc -l; }
zombies() { # zombie children of the daemon (host pids)
  for stat in /proc/[0-9]*/stat; do
    awk -v parent="$daemon_pid" '{ sub(/^.*\) /, ""); if ($1 == "Z" && $2 == parent) print FILENAME }' \
      "$stat" 2>/dev/null || true
  done | sed 's|/proc/||; s|/stat||' | sort
}

started=$(date +%s)
leaked=0
samples=0
max_seen=0
while [ "$(ended)" -lt "$runs" ]; do
  # A zombie seen twice, 400 ms apart, is one the reaper left (orphans are reaped on SIGCHLD).
  first=$(zombies)
  sleep 0.4
  second=$(zombies)
  samples=$((samples + 1))
  seen=$(printf '%s\n' "$first" | grep -c . || true)
  [ "$seen" -gt "$max_seen" ] && max_seen=$seen
  both=$(comm -12 <(printf '%s\n' "$first") <(printf '%s\n' "$second") | grep -c . || true)
  leaked=$((leaked + both))
  if [ $(($(date +%s) - started)) -gt $((runs / jobs * 4 + 60)) ]; then
    echo "pid1-soak: only $(ended) of $runs runs ended in time" >&2
    exit 1
  fi
done
sleep 0.5 # the last runs' orphans (0.3 s) have exited and must be reaped by now
final_zombies=$(zombies | grep -c . || true)

kill -TERM "$daemon_pid"
status=0
wait "$unshare_pid" || status=$?
daemon_pid=

# Every run's status: job-i exits i % 5.
wrong=$(jq -r 'select(.message == "job finished" or (.message | startswith("job failed")))
  | [.job, (.exit_code // "none")] | @tsv' "$log" |
  awk -F'\t' '{ split($1, p, "-"); if ($2 != p[2] % 5) print }' | wc -l)
total=$(ended)
finished=$(jq -c 'select(.message == "job finished")' "$log" | wc -l)
stolen=$(grep -c "cannot get the command's exit status" "$log" || true)
pid1=$(jq -r 'select(.message == "daemon started") | .pid' "$log")

echo "pid1-soak: daemon pid in its namespace: $pid1"
echo "pid1-soak: runs ended: $total ($finished succeeded, $((total - finished)) failed as configured)"
echo "pid1-soak: runs with a wrong exit status: $wrong; statuses lost: $stolen"
echo "pid1-soak: zombie samples: $samples, most zombies in one sample: $max_seen (exited orphans not yet reaped)"
echo "pid1-soak: zombies seen in two samples 400 ms apart (leaked): $leaked; zombies at the end: $final_zombies"
echo "pid1-soak: daemon exit status after SIGTERM: $status"
if [ "$pid1" = 1 ] && [ "$total" -ge "$runs" ] && [ "$wrong" = 0 ] && [ "$stolen" = 0 ] \
  && [ "$leaked" = 0 ] && [ "$final_zombies" = 0 ] && [ "$status" = 0 ]; then
  echo "pid1-soak: ok"
else
  echo "pid1-soak: FAILED" >&2
  exit 1
fi
