#!/usr/bin/env bash
# Benchmark of cluster mode (docs/cluster.md; targets in BENCHMARKS.md, "Cluster mode"):
#
#   1. spawn delay: 500 jobs due in the same second (`*/10` in the seconds field, BURSTS bursts),
#      first on one agent without `[cluster]`, then on 3 agents sharing one config through a
#      real 3-member etcd cluster on 127.0.0.1, side by side in this one run. The delay from
#      the scheduled time to the child's spawn is the `delay_ms` field of each agent's
#      "job started" log line (JSON logs); in the cluster it includes the fire's claim.
#      Target: the cluster's p99 <= 1.5 x the single agent's.
#   2. etcd transactions: the `Txn` RPCs the members served during the bursts (etcd's own
#      `grpc_server_handled_total{grpc_method="Txn"}`, summed over the members), per fire and
#      agent. Target: at most 1 (the cost bound; claims of fires due together share one
#      transaction, so fewer is better).
#   3. the claim's own latency (p50, p99; each agent's `heartbeat_agent_cluster_claim_seconds`
#      histogram), next to `etcdctl check perf --load s` against the same members.
#
# Usage: scripts/bench-cluster.sh [BURSTS]     (default 3)
# BENCH_NO_BUILD=1 measures the release binary already built; BENCH_BIN=PATH another binary.
# Needs etcd and etcdctl (scripts/test-tools.sh installs them) and python3.
# The agent's JSON log is read by scripts/lib/agentlog.py (shared with bench-daemon.sh).
# Each figure is also printed as a `ROW` line (scripts/lib/benchrow.py, collected by scripts/bench.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in python3 etcd etcdctl; do
  command -v "$tool" >/dev/null || { echo "bench-cluster: $tool is required (scripts/test-tools.sh)" >&2; exit 1; }
done

BURSTS="${1:-3}"
. scripts/lib/bench-env.sh

python3 - "$BIN" "$work" "$BURSTS" <<'PY'
import os, re, socket, subprocess, sys, time, urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the checkout
sys.path.insert(0, "scripts/lib")
import agentlog
import benchrow
from agentlog import pct

BIN, WORK, BURSTS = sys.argv[1], sys.argv[2], int(sys.argv[3])
JOBS, STEP = 500, 10

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

class Etcd:
    """A 3-member etcd cluster on 127.0.0.1, data in WORK (tmpfs or not: the machine's disk)."""
    def __init__(self, n=3):
        self.members = [(f"m{i}", free_port(), free_port()) for i in range(n)]
        initial = ",".join(f"{m}=http://127.0.0.1:{p}" for m, _, p in self.members)
        self.procs = []
        for name, client, peer in self.members:
            self.procs.append(subprocess.Popen(
                ["etcd", "--name", name, "--data-dir", f"{WORK}/etcd-{name}",
                 "--listen-client-urls", f"http://127.0.0.1:{client}",
                 "--advertise-client-urls", f"http://127.0.0.1:{client}",
                 "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                 "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                 "--initial-cluster", initial, "--initial-cluster-state", "new",
                 "--initial-cluster-token", "bench"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        end = time.time() + 30
        while subprocess.run(["etcdctl", "--endpoints", self.endpoints(), "endpoint", "health"],
                             capture_output=True).returncode != 0:
            if time.time() > end:
                sys.exit("bench-cluster: etcd did not become healthy")
            time.sleep(0.2)

    def endpoints(self):
        return ",".join(f"http://127.0.0.1:{c}" for _, c, _ in self.members)

    def txns(self):
        total = 0
        for _, client, _ in self.members:
            text = urllib.request.urlopen(f"http://127.0.0.1:{client}/metrics").read().decode()
            for line in text.splitlines():
                if line.startswith("grpc_server_handled_total{") and 'grpc_method="Txn"' in line:
                    total += float(line.rsplit(" ", 1)[1])
        return total

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait(timeout=30)

def write_config(name, cluster=""):
    d = os.path.join(WORK, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "config.toml")
    with open(path, "w") as f:
        f.write(f'[agent]\nstate_dir = "{d}/state"\nshutdown_timeout = "5s"\n\n')
        f.write(f'[status]\nlisten = "{d}/status.sock"\n\n{cluster}\n')
        for i in range(JOBS):
            f.write(f'[[jobs]]\nname = "job-{i:05d}"\nschedule = "*/{STEP} * * * * *"\n'
                    f'command = ["echo", "ok"]\n\n')
    return d, path

class Agent(agentlog.Daemon):
    label = "agent"
    expected = ("nothing will be pinged",)

    def __init__(self, home, config):
        self.home = home
        self.delays = []
        super().__init__(BIN, config)

    def on_event(self, event):
        if event.get("message") != "job started":
            return False
        self.delays.append((event.get("scheduled", ""), event["delay_ms"]))
        return True

    def metrics(self):
        out = subprocess.run(["curl", "-s", "--unix-socket", f"{self.home}/status.sock",
                              "http://localhost/metrics"], capture_output=True, text=True)
        return out.stdout

def bursts(agents, count):
    """Waits for the next burst boundary, then `count` bursts; the delays of those fires."""
    while int(time.time()) % STEP != STEP - 2:
        time.sleep(0.05)
    for a in agents:
        with a.lock:
            a.delays.clear()
    time.sleep(STEP * count + 1)
    out = []
    for a in agents:
        with a.lock:
            out.extend(d for _, d in a.delays)
    return out

def claim_quantiles(texts):
    """p50 and p99 (seconds) of the merged claim histogram of every agent."""
    buckets = {}
    for text in texts:
        for m in re.finditer(r'^heartbeat_agent_cluster_claim_seconds_bucket\{le="([^"]+)"\} (\S+)$', text, re.M):
            le = float("inf") if m.group(1) == "+Inf" else float(m.group(1))
            buckets[le] = buckets.get(le, 0) + float(m.group(2))
    if not buckets:
        return None
    total = buckets[float("inf")]
    def q(p):
        return next(le for le in sorted(buckets) if buckets[le] >= total * p)
    return total, q(0.5), q(0.99)

print(f"machine: {os.cpu_count()} cpus, {os.uname().sysname} {os.uname().release}; "
      f"{JOBS} jobs due every {STEP} s, {BURSTS} bursts each")

home, config = write_config("single")
single = Agent(home, config)
time.sleep(2)
alone = bursts([single], BURSTS)
single.stop()
print(f"single agent:  {len(alone)} spawns, delay p50 {pct(alone, 50):.1f} ms, "
      f"p99 {pct(alone, 99):.1f} ms, max {max(alone):.1f} ms")

etcd = Etcd()
agents = []
for node in ("a", "b", "c"):
    cluster = (f'[cluster]\nendpoints = [{", ".join(repr(e) for e in etcd.endpoints().split(","))}]\n'
               f'name = "bench"\nnode = "{node}"\n').replace("'", '"')
    home, config = write_config(f"agent-{node}", cluster)
    agents.append(Agent(home, config))
time.sleep(3)
txn0 = etcd.txns()
shared = bursts(agents, BURSTS)
txns = etcd.txns() - txn0
fires = JOBS * BURSTS
claims = claim_quantiles([a.metrics() for a in agents])
for a in agents:
    a.stop()
ratio = pct(shared, 99) / max(pct(alone, 99), 0.001)
print(f"3 agents:      {len(shared)} spawns (of {fires} fires), delay p50 {pct(shared, 50):.1f} ms, "
      f"p99 {pct(shared, 99):.1f} ms, max {max(shared):.1f} ms")
print(f"p99 ratio cluster / single: {ratio:.2f} (target <= 1.5)")
print(f"etcd Txn RPCs during the bursts: {txns:.0f} = {txns / (fires * 3):.2f} per fire and agent (target <= 1)")
if claims:
    n, p50, p99 = claims
    print(f"claim latency over {n:.0f} claims: p50 <= {p50 * 1000:.1f} ms, p99 <= {p99 * 1000:.1f} ms "
          f"(histogram bucket bounds)")
else:
    print("claim latency: the agents export no heartbeat_agent_cluster_claim_seconds histogram")
perf = subprocess.run(["etcdctl", "--endpoints", etcd.endpoints(), "check", "perf", "--load", "s"],
                      capture_output=True, text=True)
print("etcdctl check perf --load s (same members, same machine):")
for line in (perf.stdout + perf.stderr).splitlines():
    if line.strip() and "%" not in line:
        print("   ", line.strip())
etcd.stop()
ok = ratio <= 1.5 and len(shared) == fires and txns / (fires * 3) <= 1.0
benchrow.emit("cluster.burst.p99", f"{JOBS} jobs due together on 3 agents on etcd, spawn delay p99",
              pct(shared, 99), "ms", "ratio<=1.5", max(pct(alone, 99), 0.001), "one agent")
benchrow.emit("cluster.txn", "etcd transactions per fire and agent", txns / (fires * 3), "Txn", "<=1")
benchrow.emit("cluster.fires", "fires spawned exactly once, missing ones", fires - len(shared), "fires", "<=0")
print("verdict:", "all targets met" if ok else "some target missed")
PY
