#!/usr/bin/env bash
# A burst of pings from one daemon: N jobs (default 1,000) `true` due at the same wall-clock
# second, each pinging its own URL on a local server, over https to a private CA (`[api]
# ca_file`; the TLS handshakes run on the daemon's one runtime thread) or over http. Per
# binary and scheme, in interleaved rounds (results in BENCHMARKS.md, "A burst of pings"):
#   pings    when they arrived after the due second: p50, p99 and the last (ms)
#   cpu      the daemon's CPU (utime + stime) over the burst, per job (ms): the spawn of
#            `true` and the ping
#   status   the latency of GET /status on the daemon's unix socket, asked every 20 ms from
#            1 s before the due second until the last ping: p50, p99 and max (ms), i.e. how
#            long the status endpoint waited behind the burst on the same thread
# The server is python's asyncio with the test CA's certificate (tests/data/tls), in its own
# process: its own handshake cost is the same for every binary, so compare binaries side by
# side in one run, not with other runs.
#
# Usage: scripts/bench-pings.sh ROUNDS BIN [BIN...]   (PINGS_JOBS=N changes the number of jobs,
# PINGS_SCHEMES the schemes, default "https http"). Needs python3.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 ROUNDS BIN [BIN...]" >&2; exit 2; }
command -v python3 >/dev/null || { echo "bench-pings: python3 is required" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
unset SSL_CERT_FILE SSL_CERT_DIR HEARTBEAT_AGENT_PING_URL HEARTBEAT_AGENT_CONFIG

python3 - "$work" "$PWD/tests/data/tls" "${PINGS_JOBS:-1000}" "${PINGS_SCHEMES:-https http}" "$@" <<'PY'
import os, signal, socket, statistics, subprocess, sys, time

sys.dont_write_bytecode = True
sys.path.insert(0, "scripts/lib")
from agentlog import cpu_seconds as cpu, pct, start_due_jobs

WORK, TLS, N, SCHEMES = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split()
ROUNDS, BINS = int(sys.argv[5]), sys.argv[6:]

SERVER = r'''
import asyncio, ssl, sys, time
port_file, log_file, tls_dir, scheme = sys.argv[1:5]
log = open(log_file, "a", buffering=1)
async def handle(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            if length:
                await reader.readexactly(length)
            log.write(f"{time.time():.6f} {head.split(b' ')[1].decode()}\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()
async def main():
    context = None
    if scheme == "https":
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(f"{tls_dir}/server.pem", f"{tls_dir}/server.key")
    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context, backlog=4096)
    open(port_file, "w").write(str(server.sockets[0].getsockname()[1]))
    await server.serve_forever()
asyncio.run(main())
'''

def status_once(sock_path):
    start = time.monotonic()
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(sock_path)
    s.sendall(b"GET /status HTTP/1.0\r\nHost: localhost\r\n\r\n")
    while s.recv(65536):
        pass
    s.close()
    return (time.monotonic() - start) * 1000

def burst(binary, scheme, tag):
    d = os.path.join(WORK, tag)
    os.makedirs(d)
    port_file, log_file = os.path.join(d, "port"), os.path.join(d, "pings")
    open(log_file, "w").close()
    server = subprocess.Popen([sys.executable, "-c", SERVER, port_file, log_file, TLS, scheme])
    try:
        for _ in range(200):
            if os.path.exists(port_file) and open(port_file).read():
                break
            time.sleep(0.05)
        port = int(open(port_file).read())
        due = int(time.time()) + 6 + N // 250
        proc = start_due_jobs(binary, d, N, due, lambda i: 'command = ["true"]\n'
                              f'ping_url = "{scheme}://127.0.0.1:{port}/ping-{i:05d}"\n',
                              head=f'[api]\nca_file = "{TLS}/ca.pem"\n\n')
        time.sleep(max(0, due - 1 - time.time()))
        if proc.poll() is not None:
            sys.exit(f"bench-pings: the daemon exited early; see {d}/log")
        cpu0 = cpu(proc.pid)
        latencies, arrived, end = [], [], time.time() + 60
        while time.time() < end:
            latencies.append(status_once(os.path.join(d, "status.sock")))
            with open(log_file) as f:
                arrived = [line.split() for line in f if "/ping-" in line]
            if len(arrived) >= N:
                break
            time.sleep(0.02)
        used = cpu(proc.pid) - cpu0
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        if len(arrived) < N:
            sys.exit(f"bench-pings: only {len(arrived)} of {N} pings arrived ({binary}, {scheme})")
        if len({path for _, path in arrived}) < N:
            sys.exit(f"bench-pings: a job's ping is missing ({binary}, {scheme})")
        times = [(float(t) - due) * 1000 for t, _ in arrived]
        return times, used * 1000 / N, latencies
    finally:
        server.terminate()
        server.wait()

print(f"machine: {os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}; {N} jobs due together pinging, {ROUNDS} rounds")
results = {}
for r in range(ROUNDS):
    order = BINS[r % len(BINS):] + BINS[: r % len(BINS)]
    print(f"round {r + 1} ({time.strftime('%H:%M:%S', time.gmtime())} UTC, load {os.getloadavg()[0]:.2f}):", flush=True)
    for scheme in SCHEMES:
        for i, binary in enumerate(order):
            t, per, lat = burst(binary, scheme, f"{r}-{scheme}-{i}")
            row = (pct(t, 50), pct(t, 99), max(t), per, pct(lat, 50), pct(lat, 99), max(lat))
            results.setdefault((scheme, binary), []).append(row)
            print(f"  {scheme:5} {binary}: pings p50 {row[0]:.0f} ms, p99 {row[1]:.0f} ms, last {row[2]:.0f} ms; "
                  f"CPU per ping {row[3]:.3f} ms; /status p50 {row[4]:.1f} ms, p99 {row[5]:.1f} ms, "
                  f"max {row[6]:.1f} ms ({len(lat)} asked)", flush=True)
print("\nmedians over the rounds:")
print("| scheme | binary | pings p50 ms | p99 ms | last ms | CPU per ping ms | /status p50 ms | p99 ms | max ms |")
print("|---|---|---|---|---|---|---|---|---|")
for (scheme, binary), rows in results.items():
    m = [statistics.median(col) for col in zip(*rows)]
    print(f"| {scheme} | {binary} | {m[0]:.0f} | {m[1]:.0f} | {m[2]:.0f} | {m[3]:.3f} | {m[4]:.1f} | {m[5]:.1f} | {m[6]:.1f} |")
PY
