#!/usr/bin/env bash
# Every benchmark row of BENCHMARKS.md in one run: each row's value, its anchor measured in the
# same run (the C spawn floor, curl, the ideal convergence time, ...), the ratio and the target.
#
# Usage: scripts/bench.sh [ROUNDS] [GROUP...]     (default 3 rounds; groups below, default `floor`)
#
#   run      `run -- true` against curl: http, https with the system bundle, https to a private CA
#            (scripts/bench-run.sh)
#   burst    1,000 jobs due at one boundary against the C posix_spawn floor (scripts/bench-burst.sh)
#   memory   the daemon's resident memory: after the 1,000-job burst, 100 and 10 jobs every 5 s
#            (scripts/bench-daemon.sh memory)
#   fleet    1,000 agents x 10 checks syncing under one API key against the ideal time
#            (tests/sync/scale.rs; its test binary optimised without LTO, in target/sim)
#   daemon   the daemon's other rows: memory at 100/1,000/10,000 jobs, idle CPU, spawn delay of
#            50 and 1,000 jobs (scripts/bench-daemon.sh)
#   history  a burst with the run history on and off (scripts/bench-history.sh)
#   cluster  3 agents on etcd against one (scripts/bench-cluster.sh; needs etcd: scripts/test-tools.sh)
#   size     the release binary's size
#   floor    = run burst memory fleet (the targets of BENCHMARKS.md's first tables)
#   all      every group
#
# Each round runs every group once, in order; each group's script prints its own detail and one
# `ROW key: ...` line per figure (scripts/lib/benchrow.py). At the end the table: per row the
# median over the rounds of the value, of the anchor and of the per-round ratio (the ratio is
# taken within a round, whose two sides ran side by side), the target, and whether the median
# holds it. The table is printed as Markdown, as BENCHMARKS.md holds it. Exit status 0 when every
# row held, 1 when a row missed, 2 on a usage error.
#
# BENCH_NO_BUILD=1 measures the binaries already built (release binary and, for `fleet`, the
# simulation's test binary; BENCH_TEST_BIN=PATH names another). The machine's load is printed
# before and after: on a shared machine, run it when nothing else runs.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=3
if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then ROUNDS="$1"; shift; fi
GROUPS_WANTED=("$@")
[ ${#GROUPS_WANTED[@]} -gt 0 ] || GROUPS_WANTED=(floor)
expanded=()
for g in "${GROUPS_WANTED[@]}"; do
  case "$g" in
    floor) expanded+=(run burst memory fleet) ;;
    all) expanded+=(run burst memory fleet daemon history cluster size) ;;
    run | burst | memory | fleet | daemon | history | cluster | size) expanded+=("$g") ;;
    *) echo "bench: unknown group '$g' (run burst memory fleet daemon history cluster size floor all)" >&2; exit 2 ;;
  esac
done

# The fleet simulation measures the pacing rule, not the code's speed (it uses a fifth of a
# core): its test binary is built optimised but without LTO and with 16 codegen units, in a
# target directory of its own, so it takes minutes instead of the release profile's 15-45 and
# leaves the release build alone.
SIM_TARGET="${CARGO_TARGET_DIR:-$PWD/target}/sim"
if [ -z "${BENCH_NO_BUILD:-}" ]; then
  cargo build --release --locked --quiet
  if printf '%s\n' "${expanded[@]}" | grep -qx fleet; then
    CARGO_TARGET_DIR="$SIM_TARGET" CARGO_PROFILE_RELEASE_LTO=false \
      CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 CARGO_PROFILE_RELEASE_INCREMENTAL=true \
      cargo test --release --locked --test tests --no-run --quiet
  fi
fi
export BENCH_NO_BUILD=1
BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/heartbeat-agent"
[ -x "$BIN" ] || { echo "bench: no release binary at $BIN (cargo build --release --locked)" >&2; exit 1; }

rows="$(mktemp)"
trap 'rm -f "$rows"' EXIT
export BENCH_ROWS="$rows"

fleet_binary() {
  # BENCH_TEST_BIN, or the newest simulation test binary (cargo names it tests-<hash>).
  if [ -n "${BENCH_TEST_BIN:-}" ]; then
    echo "$BENCH_TEST_BIN"
    return
  fi
  ls -t "$SIM_TARGET"/release/deps/tests-* 2>/dev/null | grep -v '\.d$' | head -1
}

run_group() {
  local group="$1" round="$2"
  echo "== round $round: $group ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
  case "$group" in
    run) bash scripts/bench-run.sh "${BENCH_RUN_N:-100}" ;;
    burst) bash scripts/bench-burst.sh 1 ;;
    memory) bash scripts/bench-daemon.sh memory ;;
    daemon) bash scripts/bench-daemon.sh "${BENCH_IDLE:-10}" ;;
    history) bash scripts/bench-history.sh 1 ;;
    cluster) bash scripts/bench-cluster.sh 2 ;;
    fleet)
      local tests
      tests="$(fleet_binary)"
      [ -n "$tests" ] || { echo "bench: no simulation test binary under $SIM_TARGET (run without BENCH_NO_BUILD, or set BENCH_TEST_BIN)" >&2; return 1; }
      local out
      out="$(mktemp)"
      SIM_AGENTS="${SIM_AGENTS:-1000}" SIM_JOBS="${SIM_JOBS:-10}" SIM_LIMIT="${SIM_LIMIT:-600}" \
        SIM_SCALE="${SIM_SCALE:-10}" "$tests" sync::scale --ignored --nocapture --test-threads 1 \
        | tee "$out" || true
      # The row: the emulated minutes until every check was in sync, against the ideal time.
      python3 - "$out" <<'PY'
import re, sys
sys.path.insert(0, "scripts/lib")
import benchrow
text = open(sys.argv[1]).read()
setup = re.search(r"agents=(\d+) jobs=(\d+)", text)
done = re.search(r"(\d+)/(\d+) in sync after ([\d.]+) emulated minutes \(ideal ([\d.]+)", text)
if not (setup and done):
    sys.exit("bench: the simulation printed no result")
agents, jobs = int(setup[1]), int(setup[2])
minutes = float(done[3]) if done[1] == done[2] else float("inf")
benchrow.emit(f"sync.fleet.{agents}x{jobs}",
              f"fleet sync, {agents:,} agents x {jobs} checks, minutes until all in sync",
              minutes, "min", "ratio<=1.5", float(done[4]), "the ideal: agents x checks / 600 per min")
PY
      rm -f "$out"
      ;;
    size)
      python3 -c '
import os, sys
sys.path.insert(0, "scripts/lib")
import benchrow
size = os.stat(sys.argv[1]).st_size
benchrow.emit("size.binary", "release binary size", size / 1048576, "MiB", None)
' "$BIN"
      ;;
  esac
}

echo "bench: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo '+changes'), $(nproc) cpus, $(uname -sr), $(rustc --version 2>/dev/null)"
echo "bench: $ROUNDS round(s) of: ${expanded[*]}"
for round in $(seq 1 "$ROUNDS"); do
  for group in "${expanded[@]}"; do
    run_group "$group" "$round" || echo "bench: group $group failed in round $round" >&2
  done
done
echo "bench: done at $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$rows" "$ROUNDS" <<'PY'
import json, statistics, sys

path, rounds = sys.argv[1], int(sys.argv[2])
rows = {}
order = []
with open(path) as f:
    for line in f:
        row = json.loads(line)
        if row["key"] not in rows:
            order.append(row["key"])
        rows.setdefault(row["key"], []).append(row)

def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None

def num(v, unit=""):
    if v is None:
        return "-"
    text = f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}"
    return f"{text} {unit}".strip()

print()
print(f"| row | value (median of {rounds}) | anchor, same run | ratio (median) | target | held | per round |")
print("|---|---|---|---|---|---|---|")
failed = False
for key in order:
    runs = rows[key]
    first = runs[0]
    value, anchor, ratio = med(r["value"] for r in runs), med(r["anchor"] for r in runs), med(r["ratio"] for r in runs)
    target = first["target"]
    if target is None:
        held, per = True, ", ".join(num(r["value"]) for r in runs)
    elif target.startswith("ratio<="):
        held = ratio is not None and ratio <= float(target[7:])
        per = ", ".join(f"{r['ratio']:.3f}" if r["ratio"] is not None else "-" for r in runs)
    else:
        held = value <= float(target[2:])
        per = ", ".join(num(r["value"]) for r in runs)
    failed |= not held
    anchor_text = f"{num(anchor, first['unit'])} ({first['anchor_what']})" if anchor is not None else "none"
    ratio_text = f"{ratio:.3f}" if ratio is not None else "-"
    shown_target = (target or "none (tracked)").replace("<=", " <= ").strip()
    if target and not target.startswith("ratio"):
        shown_target += f" {first['unit']}"
    print(f"| {first['what']} (`{key}`) | {num(value, first['unit'])} | {anchor_text} | {ratio_text} "
          f"| {shown_target} | {'yes' if held else '**no**'} | {per} |")
    if len(runs) != rounds:
        print(f"|   (`{key}` measured in {len(runs)} of {rounds} rounds) | | | | | | |")
sys.exit(1 if failed or not order else 0)
PY
