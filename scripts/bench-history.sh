#!/usr/bin/env bash
# The run history's cost on a burst: 1,000 jobs `echo ok` due in the same second (`*/10` in
# the seconds field, three bursts per daemon), with `[agent] history = 100` (the default) and
# with `history = 0` (off), ROUNDS rounds, the two interleaved and their order swapped every
# round. Prints each daemon's spawn delay p50/p99 (the `delay_ms` of `job started`, from the
# scheduled second to the spawn) and the daemon's CPU per run, then the median p99 of each
# side and their ratio (target: history on within 10% of off, docs/history.md), and that figure
# as a `ROW` line (scripts/lib/benchrow.py, collected by scripts/bench.sh).
#
# Usage: scripts/bench-history.sh [ROUNDS]     (default 3)
# BENCH_NO_BUILD=1 measures the binary already built; BENCH_BIN=PATH another binary.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-3}"
. scripts/lib/bench-env.sh

python3 - "$BIN" "$work" "$ROUNDS" <<'PY'
import os, statistics, sys

sys.dont_write_bytecode = True
sys.path.insert(0, "scripts/lib")
import agentlog
import benchrow
from agentlog import pct

BIN, WORK, ROUNDS = sys.argv[1], sys.argv[2], int(sys.argv[3])
TICK = os.sysconf("SC_CLK_TCK")
N, STEP, BURSTS = 1000, 10, 3

class Daemon(agentlog.Runs):
    expected = ("nothing will be pinged",)

    def __init__(self, config):
        super().__init__(BIN, config)

    def cpu(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK

def write_config(name, history):
    d = os.path.join(WORK, name)
    os.makedirs(d)
    path = os.path.join(d, "config.toml")
    with open(path, "w") as f:
        f.write(f'[status]\nlisten = "{d}/status.sock"\n\n[agent]\nstate_dir = "{d}/state"\nshutdown_timeout = "5s"\nhistory = {history}\n\n')
        for i in range(N):
            f.write(f'[[jobs]]\nname = "job-{i:05d}"\nschedule = "*/{STEP} * * * * *"\ncommand = ["echo", "ok"]\n\n')
    return path

print(f"machine: {os.cpu_count()} cpus; {N} jobs due together, {BURSTS} bursts per daemon, {ROUNDS} rounds")
p99s = {"off": [], "on": []}
for r in range(ROUNDS):
    for side in (("off", "on") if r % 2 == 0 else ("on", "off")):
        daemon = Daemon(write_config(f"{side}-{r}", 100 if side == "on" else 0))
        daemon.wait(lambda d: d.started > 0, STEP + 5)
        cpu0, runs0 = daemon.cpu(), daemon.finished
        daemon.wait(lambda d: d.started >= N * BURSTS, STEP * (BURSTS + 2) + 5)
        daemon.wait(lambda d: d.finished >= N * BURSTS, 10)
        cpu, runs = daemon.cpu() - cpu0, daemon.finished - runs0
        daemon.stop()
        d = daemon.delays[: N * BURSTS]
        p99s[side].append(pct(d, 99))
        print(f"round {r} history {side:>3}: {len(d)} spawns, delay p50 {pct(d, 50):.1f} ms, "
              f"p99 {pct(d, 99):.1f} ms; daemon CPU {cpu * 1000 / max(runs, 1):.3f} ms per run", flush=True)
off, on = statistics.median(p99s["off"]), statistics.median(p99s["on"])
print(f"median p99: history off {off:.1f} ms, on {on:.1f} ms; on/off {on / off:.3f} (target <= 1.10)")
benchrow.emit("history.burst.p99", "1,000 jobs due together, history = 100, spawn delay p99", on, "ms",
              "ratio<=1.10", off, "history = 0")
PY
