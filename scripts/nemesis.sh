#!/usr/bin/env bash
# A seeded, randomized nemesis against a real cluster, and a checker of what happened.
#
#   bash scripts/nemesis.sh [--duration SECONDS] [--seed N] [--out DIR]
#
# Starts on loopback a 3-member etcd, the emulator and three agents with one config (real
# processes of the release binary; HEARTBEAT_AGENT_BIN names another), faults them at random for
# the duration (kill -9, SIGTERM, SIGSTOP past the lease, a restart with the clock skewed,
# etcd members stopped and quorum lost, the links to etcd cut or stalled, the ping host
# answering 503, hanging or resetting, the state directory full or unwritable), heals
# everything, waits for the outboxes to drain, and checks: no fire ran twice, no recorded
# success lost, no agent crashed (scripts/nemesis/checker.py; DIR/summary.json). The same seed
# injects the same faults at the same offsets. Defaults: 180 s, a random seed (printed), a new
# directory. Exit 0 only when the checks hold. Needs etcd, etcdctl and faketime
# (scripts/test-tools.sh installs them as root).
set -euo pipefail
cd "$(dirname "$0")/.."
duration=180
seed=$(( (RANDOM << 15) | RANDOM ))
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "nemesis: unknown argument '$1' (--duration SECONDS, --seed N, --out DIR)" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || out=$(mktemp -d /tmp/nemesis.XXXXXX)
mkdir -p "$out"
out=$(cd "$out" && pwd)
bin=${HEARTBEAT_AGENT_BIN:-target/release/heartbeat-agent}
if [ -z "${HEARTBEAT_AGENT_BIN:-}" ]; then
  cargo build --release --locked --quiet
fi
for tool in etcd etcdctl python3; do
  command -v "$tool" >/dev/null || { echo "nemesis: $tool is missing: run scripts/test-tools.sh as root" >&2; exit 2; }
done
echo "nemesis: seed $seed, $duration s, out $out (replay: bash scripts/nemesis.sh --seed $seed --duration $duration)"
python3 scripts/nemesis/harness.py "$out" "$seed" "$duration" "$(realpath "$bin")"
status=0
python3 scripts/nemesis/checker.py "$out" || status=$?
# An independent count of the ledger (awk, not the checker): fires, and fires run by two runs.
fires=$(awk '{ print $1, $2 }' "$out/ledger" | sort -u | wc -l)
twice=$(awk '{ print $1, $2, $4 }' "$out/ledger" | sort -u | awk '{ print $1, $2 }' | uniq -d | wc -l)
echo "nemesis: the ledger counted apart: $fires fires, $twice run twice"
python3 - "$out/summary.json" "$fires" "$twice" <<'PY' || status=1
import json, sys
summary = json.load(open(sys.argv[1]))
if (summary["fires"], summary["ran_twice"]) != (int(sys.argv[2]), int(sys.argv[3])):
    sys.exit(f"nemesis: the checker's count {summary['fires']}/{summary['ran_twice']} "
             f"disagrees with the ledger's {sys.argv[2]}/{sys.argv[3]}")
PY
exit "$status"
