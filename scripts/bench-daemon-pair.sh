#!/usr/bin/env bash
# Resident memory of two daemon builds side by side: the memory phase of bench-daemon.sh (100
# and 1,000 jobs `echo ok`, each due once, spread over the seconds after start; VmRSS 1.5 s
# after every job's `job finished` line), run ROUNDS times per build, the two builds
# interleaved and their order swapped every round so that load drifts hit both alike. Prints
# each run and the median per build and size. One run each is too few for a difference of a
# few tenths of a MiB (the run-to-run noise); five interleaved rounds tell it.
#
# Usage: scripts/bench-daemon-pair.sh BIN_A BIN_B [ROUNDS]     (default 5)
# For instance BIN_A a copy of an earlier commit's release build, BIN_B the current one.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 BIN_A BIN_B [ROUNDS]" >&2; exit 2; }
A="$1" B="$2" ROUNDS="${3:-5}"
BENCH_BIN="$A" . scripts/lib/bench-env.sh

python3 - "$A" "$B" "$ROUNDS" "$work" <<'PY'
import os, statistics, sys, time
from datetime import datetime, timedelta, timezone

sys.dont_write_bytecode = True
sys.path.insert(0, "scripts/lib")
import agentlog

A, B, ROUNDS, WORK = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

class Daemon(agentlog.Daemon):
    expected = ("nothing will be pinged",)

    def __init__(self, binary, config):
        self.finished = 0
        super().__init__(binary, config)

    def on_event(self, event):
        msg = event.get("message", "")
        if msg == "job finished":
            self.finished += 1
        return msg in ("job started", "job finished")

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))

def write_config(name, n):
    d = os.path.join(WORK, name)
    os.makedirs(d)
    spread = max(2, n // 500)
    base = datetime.now(timezone.utc) + timedelta(seconds=4 + n // 400)
    path = os.path.join(d, "config.toml")
    with open(path, "w") as f:
        f.write(f'[agent]\nstate_dir = "{d}/state"\nshutdown_timeout = "5s"\n\n')
        for i in range(n):
            t = base + timedelta(seconds=(i * spread) // n)
            f.write(f'[[jobs]]\nname = "job-{i:05d}"\nschedule = "{t.second} {t.minute} {t.hour} * * *"\n'
                    f'command = ["echo", "ok"]\n\n')
    return path

print(f"machine: {os.cpu_count()} cpus; A = {A}; B = {B}; {ROUNDS} rounds")
rss = {}
for r in range(ROUNDS):
    for n in (100, 1000):
        for side, binary in ((("A", A), ("B", B)) if r % 2 == 0 else (("B", B), ("A", A))):
            daemon = Daemon(binary, write_config(f"{side}-{n}-{r}", n))
            ok = daemon.wait(lambda d: d.finished >= n, 70)
            time.sleep(1.5)
            kib = daemon.rss_kib()
            daemon.stop()
            rss.setdefault((side, n), []).append(kib / 1024)
            print(f"round {r} {side} {n:>5} jobs: {kib / 1024:.2f} MiB" + ("" if ok else " (not all ran)"), flush=True)
for n in (100, 1000):
    a, b = (statistics.median(rss[(s, n)]) for s in "AB")
    print(f"{n:>5} jobs: median A {a:.2f} MiB, B {b:.2f} MiB, B - A {b - a:+.2f} MiB ({b / a:.3f}x)")
PY
