"""The system under test of scripts/nemesis.sh, and the nemesis that breaks it.

Starts, all on 127.0.0.1 ports it picks: a 3-member etcd, the emulator (the service), and three
agents (real processes of the release binary) that share one config but for their node name,
status socket and etcd endpoints (each agent reaches each etcd member through a TCP proxy of its
own that the nemesis can cut or stall). Their jobs append `<job> <scheduled> <node> <run_id>`
to DIR/ledger and ping with `{run_id}` in the URL.

Then, for the run's duration, the nemesis picks faults at random from a seeded generator (the
same seed gives the same faults at the same offsets), logs each to DIR/nemesis.log (one JSON
object per line: offset, kind, target, how long) and heals it. At the end it heals
everything, waits for every agent's outbox to drain, stops the agents with SIGTERM, delivers
what their outboxes still hold (`outbox flush`: a run that ended just before the stop pings at
the next start), dumps what the emulator received to DIR/pings.jsonl and the agents' histories,
and hands DIR to the checker. The agents are stopped before anything is dumped, so every run a
history holds had its chance to ping: a run between the two dumps would look lost.

Standard library only (asyncio), so it runs wherever python3 does.
"""

import asyncio
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

NODES = ["a1", "a2", "a3"]
LEASE_S = 3
API_KEY = "nemesis-api-key"
# Faults the documented skew bound allows (docs/cluster.md: 25 s either way).
MAX_SKEW_S = 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(method, url, body=None, timeout=5):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("content-type", "application/json")
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        text = answer.read()
        return json.loads(text) if text else None


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over the agent's unix socket (its status endpoint)."""

    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.socket_path)
        self.sock = sock


class Proxy:
    """A TCP proxy from one agent to one etcd member: `pass`, `cut` (open connections are
    reset, new ones closed at once) or `stall` (bytes are held until it passes again)."""

    def __init__(self, target_port):
        self.target = target_port
        self.mode = "pass"
        self.port = None
        self.server = None
        self.links = set()
        self.flowing = asyncio.Event()
        self.flowing.set()

    async def start(self):
        self.server = await asyncio.start_server(self.accept, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    def set(self, mode):
        self.mode = mode
        if mode == "stall":
            self.flowing.clear()
        else:
            self.flowing.set()
        if mode == "cut":
            for writer in list(self.links):
                transport = writer.transport
                if transport is not None:
                    transport.abort()
            self.links.clear()

    async def accept(self, reader, writer):
        if self.mode == "cut":
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.transport.abort()
            return
        self.links.update([writer, up_writer])
        await asyncio.gather(
            self.pipe(reader, up_writer), self.pipe(up_reader, writer), return_exceptions=True
        )
        for w in (writer, up_writer):
            self.links.discard(w)
            w.transport.abort()

    async def pipe(self, reader, writer):
        while True:
            data = await reader.read(65536)
            if not data:
                break
            await self.flowing.wait()
            if self.mode == "cut":
                break
            writer.write(data)
            await writer.drain()
        writer.transport.abort()


class Agent:
    def __init__(self, harness, node, index):
        self.harness = harness
        self.node = node
        self.index = index
        self.dir = os.path.join(harness.out, "agents", node)
        self.state = os.path.join(self.dir, "state")
        self.config = os.path.join(self.dir, "config.toml")
        # A unix socket: a TCP port picked ahead could be taken meanwhile (an outgoing
        # connection's local port) and another server would answer for the agent.
        self.socket = os.path.join(self.dir, "status.sock")
        self.proxies = []
        self.process = None
        self.expected_exit = False
        self.skew_s = 0
        self.starts = 0

    def write_config(self, template):
        endpoints = ", ".join(f'"http://127.0.0.1:{p.port}"' for p in self.proxies)
        text = template.format(
            node=self.node,
            status_socket=self.socket,
            endpoints=endpoints,
        )
        with open(self.config, "w") as f:
            f.write(text)
        os.chmod(self.config, 0o600)

    async def start(self, skew_s=0):
        self.skew_s = skew_s
        self.starts += 1
        self.expected_exit = False
        env = dict(os.environ)
        env["HEARTBEAT_AGENT_API_KEY"] = API_KEY
        # Three hosts, not one: each agent its own machine id.
        env["HEARTBEAT_AGENT_MACHINE_ID_FILE"] = os.path.join(self.dir, "machine-id")
        command = [self.harness.binary, "daemon", "--config", self.config]
        command += ["--state-dir", self.state, "--log-format", "json"]
        if skew_s:
            # libfaketime itself rather than the `faketime` script, so signals reach the agent.
            env["LD_PRELOAD"] = self.harness.libfaketime
            env["FAKETIME"] = f"{skew_s:+d}s"
        log = open(os.path.join(self.dir, f"daemon.{self.starts}.log"), "wb")
        self.process = await asyncio.create_subprocess_exec(
            *command, stdout=log, stderr=log, env=env, start_new_session=True
        )
        log.close()

    def signal(self, signum):
        if self.process and self.process.returncode is None:
            self.process.send_signal(signum)

    def status(self):
        connection = UnixHTTPConnection(self.socket, timeout=2)
        try:
            connection.request("GET", "/status")
            answer = connection.getresponse()
            if answer.status != 200:
                raise RuntimeError(f"/status of {self.node}: HTTP {answer.status}")
            return json.loads(answer.read())
        finally:
            connection.close()


class Harness:
    def __init__(self, out, seed, duration, binary):
        self.out = out
        self.seed = seed
        self.duration = duration
        self.binary = binary
        self.started = None
        self.etcd = []  # [name, client_port, peer_port, process]
        self.emulator = None
        self.api_port = free_port()
        self.ping_port = free_port()
        self.agents = [Agent(self, node, i) for i, node in enumerate(NODES)]
        self.events = open(os.path.join(out, "nemesis.log"), "w")
        self.crashes = []
        self.state_mounts = []
        libs = [os.path.join(d, "faketime/libfaketime.so.1") for d in
                ["/usr/lib"] + [os.path.join("/usr/lib", x) for x in os.listdir("/usr/lib")]]
        found = [lib for lib in libs if os.path.exists(lib)]
        if not found:
            raise SystemExit("nemesis: libfaketime not found: run scripts/test-tools.sh as root")
        self.libfaketime = found[0]

    def offset(self):
        return round(time.monotonic() - self.started, 3) if self.started else 0.0

    def log(self, kind, target, **more):
        event = {"at": self.offset(), "wall": time.time(), "kind": kind, "target": target}
        event.update(more)
        self.events.write(json.dumps(event) + "\n")
        self.events.flush()
        print(f"nemesis: {event['at']:8.2f}s {kind} {target} {more or ''}", flush=True)

    # -- the system under test ------------------------------------------------------------

    async def start_etcd_member(self, member):
        """Starts (or starts again: etcd ignores the `--initial-*` flags once its data directory
        holds the member) one member of the cluster."""
        name, client, peer, _ = member
        cluster = ",".join(f"{n}=http://127.0.0.1:{p}" for n, _, p, _ in self.etcd)
        data = os.path.join(self.out, "etcd", name)
        log = open(os.path.join(self.out, "etcd", f"{name}.log"), "ab")
        process = await asyncio.create_subprocess_exec(
            "etcd", "--name", name, "--data-dir", data,
            "--listen-client-urls", f"http://127.0.0.1:{client}",
            "--advertise-client-urls", f"http://127.0.0.1:{client}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", cluster, "--initial-cluster-state", "new",
            "--initial-cluster-token", "nemesis",
            "--heartbeat-interval", "50", "--election-timeout", "500",
            stdout=log, stderr=log, start_new_session=True,
        )
        log.close()
        member[3] = process

    async def start_system(self):
        os.makedirs(os.path.join(self.out, "etcd"), exist_ok=True)
        self.etcd = [[f"e{i}", free_port(), free_port(), None] for i in range(1, 4)]
        for member in self.etcd:
            await self.start_etcd_member(member)
        emulator_log = open(os.path.join(self.out, "emulator.log"), "wb")
        self.emulator = await asyncio.create_subprocess_exec(
            self.binary, "emulator",
            "--listen", f"127.0.0.1:{self.api_port}",
            "--ping-listen", f"127.0.0.1:{self.ping_port}",
            "--api-key", API_KEY,
            "--state-dir", os.path.join(self.out, "emulator-state"),
            stdout=emulator_log, stderr=emulator_log, start_new_session=True,
        )
        emulator_log.close()
        await self.until("the emulator answers", lambda: http_json("GET", self.admin("clock")))
        checks = {}
        for job in ("tick", "tock", "slow"):
            check = http_json(
                "POST", self.admin("heartbeat-checks"), {"name": f"nemesis {job}"}
            )
            checks[job] = check["heartbeat"]["pingUrl"]
        self.ping_urls = checks
        template = self.config_template(checks)
        ledger = os.path.join(self.out, "ledger")
        open(ledger, "w").close()
        for agent in self.agents:
            os.makedirs(agent.dir, exist_ok=True)
            with open(os.path.join(agent.dir, "machine-id"), "w") as f:
                f.write(uuid.uuid4().hex + "\n")
            self.mount_state(agent)
            for _, client, _, _ in self.etcd:
                proxy = Proxy(client)
                await proxy.start()
                agent.proxies.append(proxy)
            agent.write_config(template)
        await self.until("etcd has a leader", self.etcd_healthy)
        for agent in self.agents:
            await agent.start()
        for agent in self.agents:
            await self.until(f"agent {agent.node} answers", agent.status)

    def mount_state(self, agent):
        """The state directory on a small tmpfs of its own where mounting is allowed (so the
        nemesis can fill it); a plain directory otherwise."""
        os.makedirs(agent.state, exist_ok=True)
        if os.geteuid() != 0 or shutil.which("mount") is None:
            return
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", agent.state],
            capture_output=True,
        )
        if done.returncode == 0:
            self.state_mounts.append(agent.state)

    def config_template(self, checks):
        ledger = os.path.join(self.out, "ledger")
        line = '$HEARTBEAT_AGENT_JOB $HEARTBEAT_AGENT_SCHEDULED $HEARTBEAT_AGENT_NODE ' \
            '$HEARTBEAT_AGENT_RUN_ID'
        append = f'echo "{line}" >> {ledger}'

        def ping(job):
            return checks[job] + "?rid={{run_id}}"

        return f"""# scripts/nemesis.sh: one config for three agents, but for node, listen, endpoints.
[api]
base_url = "http://127.0.0.1:{self.api_port}"
api_key_env = "HEARTBEAT_AGENT_API_KEY"

[agent]
# Every run of the whole run kept, for the checker (the default keeps the last 100 per job).
history = 10000

[status]
listen = "{{status_socket}}"

[cluster]
name = "nemesis"
node = "{{node}}"
endpoints = [{{endpoints}}]
lease = "{LEASE_S}s"

[[jobs]]
name = "tick"
schedule = "* * * * * *"
shell = '{append}'
ping_url = "{ping('tick')}"

[[jobs]]
name = "tock"
schedule = "*/3 * * * * *"
shell = '{append}; test $(( 1$(date +%N) % 4 )) -ne 0'
retries = 2
ping_url = "{ping('tock')}"

[[jobs]]
name = "slow"
schedule = "*/5 * * * * *"
shell = '{append}; sleep $(( 1$(date +%N) % 3 ))'
timeout = "2s"
ping_url = "{ping('slow')}"
"""

    def admin(self, path):
        return f"http://127.0.0.1:{self.api_port}/_emulator/{path}"

    def etcd_healthy(self):
        endpoints = ",".join(f"127.0.0.1:{c}" for _, c, _, _ in self.etcd)
        done = subprocess.run(
            ["etcdctl", "--endpoints", endpoints, "endpoint", "health"],
            capture_output=True, env=dict(os.environ, ETCDCTL_API="3"), timeout=10,
        )
        return done.returncode == 0

    async def until(self, what, probe, timeout=30):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                value = await asyncio.to_thread(probe)
                if value:
                    return value
            except Exception as err:  # noqa: BLE001 - the last error is reported below
                last = err
            await asyncio.sleep(0.2)
        raise RuntimeError(f"waited {timeout} s for {what}; last: {last!r}")

    # -- the watch for crashes ------------------------------------------------------------

    async def watch(self, agent):
        """Restarts an agent that exited; one the nemesis did not stop is a crash."""
        while True:
            process = agent.process
            code = await process.wait()
            if self.stopping:
                return
            if not agent.expected_exit:
                log = os.path.join(agent.dir, f"daemon.{agent.starts}.log")
                self.crashes.append(
                    {"node": agent.node, "at": self.offset(), "exit": code, "log": log}
                )
                self.log("crash", agent.node, exit=code)
                await agent.start()
                continue
            while agent.process is process and not self.stopping:
                await asyncio.sleep(0.05)
            if self.stopping:
                return

    # -- the faults -----------------------------------------------------------------------

    async def fault_kill9(self, agent, rng):
        await self.stop_and_restart(agent, "kill9", signal.SIGKILL, rng.uniform(0.5, 4))

    async def fault_term(self, agent, rng):
        await self.stop_and_restart(agent, "sigterm", signal.SIGTERM, rng.uniform(0.2, 2))

    async def stop_and_restart(self, agent, kind, signum, pause):
        """Stops `agent` with `signum`, waits for its exit and `pause` seconds, starts it again
        (on the same clock)."""
        self.log(kind, agent.node, skew_s=agent.skew_s)
        agent.expected_exit = True
        agent.signal(signum)
        await agent.process.wait()
        await asyncio.sleep(pause)
        await agent.start(agent.skew_s)
        self.log("restart", agent.node)

    async def fault_stop(self, agent, rng):
        held = round(rng.uniform(LEASE_S + 1, LEASE_S + 5), 2)
        self.log("sigstop", agent.node, seconds=held, skew_s=agent.skew_s)
        agent.signal(signal.SIGSTOP)
        await asyncio.sleep(held)
        agent.signal(signal.SIGCONT)
        self.log("sigcont", agent.node)

    async def fault_skew(self, agent, rng):
        skew = rng.choice([-1, 1]) * rng.randint(2, MAX_SKEW_S)
        skew = 0 if agent.skew_s else skew  # a skewed agent is put back on time
        self.log("skew", agent.node, seconds=skew, skew_s=agent.skew_s)
        agent.expected_exit = True
        agent.signal(signal.SIGTERM)
        await agent.process.wait()
        await agent.start(skew)

    async def fault_etcd_member(self, _agent, rng):
        quorum = rng.random() < 0.25
        members = rng.sample(self.etcd, 2 if quorum else 1)
        held = round(rng.uniform(1, 3 if quorum else 6), 2)
        names = ",".join(m[0] for m in members)
        self.log("etcd_quorum_lost" if quorum else "etcd_member_stop", names, seconds=held)
        for member in members:
            member[3].send_signal(signal.SIGTERM)
        for member in members:
            await member[3].wait()
        await asyncio.sleep(held)
        for member in members:
            await self.start_etcd_member(member)
        self.log("etcd_start", names)

    async def fault_partition(self, agent, rng):
        mode = rng.choice(["cut", "stall"])
        held = round(rng.uniform(1, 8), 2)
        self.log(f"etcd_link_{mode}", agent.node, seconds=held)
        for proxy in agent.proxies:
            proxy.set(mode)
        await asyncio.sleep(held)
        for proxy in agent.proxies:
            proxy.set("pass")
        self.log("etcd_link_heal", agent.node)

    async def fault_service(self, _agent, rng):
        kind = rng.choice(["status", "hang", "drop"])
        held = round(rng.uniform(1, 6), 2)
        fault = {"kind": kind, "listener": "ping"}
        if kind == "status":
            fault["status"] = 503
        self.log(f"service_{kind}", "ping host", seconds=held)
        await asyncio.to_thread(http_json, "POST", self.admin("faults"), fault)
        await asyncio.sleep(held)
        await asyncio.to_thread(http_json, "DELETE", self.admin("faults"))
        self.log("service_heal", "ping host")

    async def fault_disk(self, agent, rng):
        held = round(rng.uniform(1, 5), 2)
        if agent.state in self.state_mounts:
            filler = os.path.join(agent.state, "nemesis-filler")
            self.log("state_dir_full", agent.node, seconds=held)
            subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M"], capture_output=True)
            await asyncio.sleep(held)
            os.remove(filler)
        else:
            self.log("state_dir_unwritable", agent.node, seconds=held)
            os.chmod(agent.state, 0o500)
            await asyncio.sleep(held)
            os.chmod(agent.state, 0o700)
        self.log("state_dir_heal", agent.node)

    FAULTS = ["kill9", "term", "stop", "skew", "etcd_member", "partition", "service", "disk"]
    # The longest each kind lasts (s), for the plan to keep two faults off one target.
    LONGEST = {"kill9": 5, "term": 4, "stop": LEASE_S + 6, "skew": 3, "etcd_member": 8,
               "partition": 9, "service": 7, "disk": 6}
    GLOBAL = ("etcd_member", "service")

    def plan(self):
        """The faults of the run, from the seed alone: offsets, kinds, targets, and a seed of
        each fault's own draws (durations, modes), so a replay injects the same whatever the
        timing. At most two at once, never two on one target."""
        rng = random.Random(self.seed)
        faults, at = [], 0.0
        while True:
            at += rng.uniform(0.5, 4)
            if at >= self.duration - 5:
                return faults
            kind, node = rng.choice(self.FAULTS), rng.choice(NODES)
            target = kind if kind in self.GLOBAL else node
            draws = rng.randrange(2**32)
            lasting = [f for f in faults if f["until"] > at]
            if len(lasting) >= 2 or any(f["target"] == target for f in lasting):
                continue
            until = at + self.LONGEST[kind]
            faults.append({"at": round(at, 3), "kind": kind, "target": target, "node": node,
                           "draws": draws, "until": until})

    async def nemesis(self):
        """Injects the plan: each fault at its offset; one whose target is still in an
        earlier fault (it lasted longer than planned) waits for it."""
        plan = self.plan()
        with open(os.path.join(self.out, "plan.json"), "w") as f:
            json.dump(plan, f, indent=1)
        by_target = {}
        for fault in plan:
            delay = self.started + fault["at"] - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            agent = self.agents[NODES.index(fault["node"])]
            earlier = by_target.get(fault["target"])
            if earlier is not None and not earlier.done():
                await earlier
            run = getattr(self, f"fault_{fault['kind']}")
            by_target[fault["target"]] = asyncio.create_task(
                run(agent, random.Random(fault["draws"]))
            )
        await asyncio.gather(*by_target.values())

    # -- the end --------------------------------------------------------------------------

    async def heal_and_drain(self):
        self.log("heal", "all")
        for agent in self.agents:
            for proxy in agent.proxies:
                proxy.set("pass")
            agent.signal(signal.SIGCONT)
        await asyncio.to_thread(http_json, "DELETE", self.admin("faults"))
        for agent in self.agents:
            if agent.skew_s:
                agent.expected_exit = True
                agent.signal(signal.SIGTERM)
                await agent.process.wait()
                await agent.start(0)

        def drained():
            return all(
                sum(j.get("outbox_pending", 1) for j in a.status()["jobs"]) == 0
                for a in self.agents
            )

        await self.until("every outbox drained", drained, timeout=120)
        self.log("drained", "all")

    async def stop_agents(self):
        self.stopping = True
        for agent in self.agents:
            agent.expected_exit = True
            agent.signal(signal.SIGTERM)
        for agent in self.agents:
            if agent.process:
                try:
                    await asyncio.wait_for(agent.process.wait(), 15)
                except asyncio.TimeoutError:
                    agent.signal(signal.SIGKILL)
                    self.crashes.append({"node": agent.node, "at": self.offset(),
                                         "exit": "hung at SIGTERM"})

    async def flush_outboxes(self):
        for agent in self.agents:
            done = await asyncio.to_thread(
                subprocess.run,
                [self.binary, "outbox", "flush", "--config", agent.config,
                 "--state-dir", agent.state],
                capture_output=True, env=dict(os.environ, HEARTBEAT_AGENT_API_KEY=API_KEY),
            )
            self.log("outbox_flush", agent.node, exit=done.returncode)

    async def stop(self):
        await self.stop_agents()
        for process in [self.emulator] + [m[3] for m in self.etcd]:
            if process and process.returncode is None:
                process.send_signal(signal.SIGTERM)
                await process.wait()
        for mount in self.state_mounts:
            subprocess.run(["umount", "-l", mount], capture_output=True)

    async def run(self):
        self.stopping = False
        watchers = []
        try:
            await self.start_system()
            self.started = time.monotonic()
            self.log("start", "all", seed=self.seed, duration=self.duration)
            watchers = [asyncio.create_task(self.watch(a)) for a in self.agents]
            await self.nemesis()
            remaining = self.started + self.duration - time.monotonic()
            if remaining > 0:
                await asyncio.sleep(remaining)
            await self.heal_and_drain()
            # Pings and histories of the last fires settle.
            await asyncio.sleep(3)
            await self.stop_agents()
            await self.flush_outboxes()
            self.log("end", "all")
            await self.dump()
        finally:
            await self.stop()
            for w in watchers:
                w.cancel()
        return self.crashes

    async def dump(self):
        pings = await asyncio.to_thread(http_json, "GET", self.admin("pings"))
        with open(os.path.join(self.out, "pings.jsonl"), "w") as f:
            for ping in pings:
                f.write(json.dumps(ping) + "\n")
        for agent in self.agents:
            done = subprocess.run(
                [self.binary, "history", "--json", "--limit", "100000",
                 "--config", agent.config, "--state-dir", agent.state],
                capture_output=True, env=dict(os.environ, HEARTBEAT_AGENT_API_KEY=API_KEY),
            )
            with open(os.path.join(agent.dir, "history.json"), "wb") as f:
                f.write(done.stdout)
            if done.returncode != 0:
                print(f"nemesis: history of {agent.node} failed: {done.stderr.decode()}",
                      file=sys.stderr)
        with open(os.path.join(self.out, "crashes.json"), "w") as f:
            json.dump(self.crashes, f, indent=1)
        with open(os.path.join(self.out, "run.json"), "w") as f:
            json.dump({"seed": self.seed, "duration_s": self.duration,
                       "nodes": NODES, "lease_s": LEASE_S,
                       "jobs": {"tick": 1, "tock": 3, "slow": 5},
                       "ping_urls": self.ping_urls}, f)


def main():
    out, seed, duration, binary = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    harness = Harness(out, seed, duration, binary)
    asyncio.run(harness.run())


if __name__ == "__main__":
    main()
