"""The checker of scripts/nemesis.sh: reads what really happened in DIR and proves the
invariants over the whole history; writes DIR/summary.json and exits 0 only when the musts hold.

Reads:
- DIR/ledger: one line `<job> <scheduled> <node> <run_id>` per attempt of a job's command, its
  own `O_APPEND` write (`scheduled`: the fire's slot in Unix seconds, the same on every agent);
- DIR/agents/<node>/history.json: each agent's run records (`history --json`);
- DIR/pings.jsonl: every request the emulator's ping host received, with its status;
- DIR/nemesis.log: the faults, with their wall-clock times; DIR/crashes.json: agents that
  exited without being told to; DIR/run.json: the jobs and their periods.

Proves:
- ran_twice = 0: no fire (job, scheduled) run by two runs (two run ids: the attempts of one
  run share its id);
- successes_lost = 0: every run an agent recorded as succeeded has a ping carrying its run id
  that the ping host answered 2xx, or a later run of the same job has (the outbox drops a
  pending success once a later one of its check is delivered: the service's timer only needs
  the latest; counted as `successes_coalesced`), or the agent logged that it dropped it by one
  of its two documented rules (docs/outbox.md, "A late success must not lie": a later run of the
  job failed, so sending it would hide that failure; or it grew older than `outbox_max_age`, the
  job's period, so it would claim the job is fine now): the log line names a ping URL's
  fingerprint (the dropped success's; for a later failed run, that run's), which the checker
  computes from the run ids; counted as
  `successes_dropped_by_rule`, by rule;
- crashes = 0: no agent exited unasked (nor logged a panic).
Counts and explains: `missed`, the fires between the start and the heal that no agent ran; a
miss within a fault that stops an agent or its etcd (from its start to the lease plus 5 s
after its heal) is explained by that fault, the others are listed as unexplained.

Standard library only. Run it alone on a kept DIR: `python3 scripts/nemesis/checker.py DIR`.
"""

import collections
import datetime
import hashlib
import json
import os
import sys
from urllib.parse import parse_qs

# Fault kinds that stop an agent or its view of etcd, paired with the event that ends them.
STOPPING = {
    "kill9": "restart",
    "sigterm": "restart",
    "sigstop": "sigcont",
    "etcd_member_stop": "etcd_start",
    "etcd_quorum_lost": "etcd_start",
    "etcd_link_cut": "etcd_link_heal",
    "etcd_link_stall": "etcd_link_heal",
}
# A skewed restart is a restart: the agent is away for the time it takes to start again.
INSTANT = {"skew": 5.0}
HEALS = set(STOPPING.values()) | {"service_heal", "state_dir_heal", "heal", "drained", "outbox_flush",
                                  "end"}


def read_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line for line in f.read().splitlines() if line.strip()]


def log_entries(out, nodes, needle):
    """The JSON log lines of every start of every agent whose text holds `needle`."""
    for node in nodes:
        agent_dir = os.path.join(out, "agents", node)
        for name in sorted(os.listdir(agent_dir)):
            if not (name.startswith("daemon.") and name.endswith(".log")):
                continue
            for line in read_lines(os.path.join(agent_dir, name)):
                if needle not in line:
                    continue
                try:
                    yield json.loads(line)
                except ValueError:
                    continue


def fault_windows(events, lease_s):
    """(from, to, kind, target) in wall-clock seconds for every fault that can explain a miss."""
    windows = []
    open_faults = {}
    for event in events:
        kind, target, wall = event["kind"], event["target"], event["wall"]
        # An agent whose clock is ahead claims (and may have won) fires that far ahead.
        ahead = max(event.get("skew_s", 0), 0)
        if kind in STOPPING:
            open_faults[(STOPPING[kind], target)] = (wall, kind, ahead)
        elif kind in INSTANT:
            windows.append((wall - 1, wall + INSTANT[kind] + lease_s + ahead, kind, target))
        elif (kind, target) in open_faults:
            began, what, ahead = open_faults.pop((kind, target))
            windows.append((began - 1, wall + lease_s + 5 + ahead, what, target))
    end = max((e["wall"] for e in events), default=0)
    for (_, target), (began, what, _) in open_faults.items():
        windows.append((began - 1, end, what, target))
    return windows


def check(out):
    run = json.load(open(os.path.join(out, "run.json")))
    events = [json.loads(line) for line in read_lines(os.path.join(out, "nemesis.log"))]
    start = next(e["wall"] for e in events if e["kind"] == "start")
    heal = next((e["wall"] for e in events if e["kind"] == "heal"), events[-1]["wall"])

    # The ledger: who ran which fire.
    fires = collections.defaultdict(set)  # (job, scheduled) -> {run_id}
    run_of = {}  # run_id -> (job, scheduled)
    nodes_of = collections.defaultdict(set)
    attempts = 0
    for line in read_lines(os.path.join(out, "ledger")):
        job, scheduled, node, run_id = line.split()
        fires[(job, int(scheduled))].add(run_id)
        run_of[run_id] = (job, int(scheduled))
        nodes_of[(job, int(scheduled))].add(node)
        attempts += 1
    twice = sorted(f for f, ids in fires.items() if len(ids) > 1)

    # Fires an agent skipped by the job's `overlap = "skip"` (its previous run, retrying, still
    # ran): the agent's choice, not a miss of the cluster's.
    skipped = set()
    for entry in log_entries(out, run["nodes"], "run skipped"):
        try:
            at = datetime.datetime.fromisoformat(entry["scheduled"].replace("Z", "+00:00"))
        except (ValueError, KeyError):
            continue
        skipped.add((entry.get("job"), int(at.timestamp())))

    # Fires due while the nemesis ran (after a warm-up of 5 s), and the ones no agent ran.
    windows = fault_windows(events, run["lease_s"])
    missed, explained, unexplained = [], collections.Counter(), []
    for job, period in run["jobs"].items():
        first = int(start) + 5
        for slot in range(first + (-first) % period, int(heal), period):
            if (job, slot) in fires:
                continue
            missed.append((job, slot))
            why = [w for w in windows if w[0] <= slot <= w[1]]
            if (job, slot) in skipped:
                explained["overlap_skip"] += 1
            elif why:
                explained[why[0][2]] += 1
            else:
                unexplained.append({"job": job, "scheduled": slot})

    # The agents' records, and the pings that reached the service.
    accepted = set()
    for line in read_lines(os.path.join(out, "pings.jsonl")):
        ping = json.loads(line)
        status = ping.get("status") or 0
        for rid in parse_qs(ping.get("query") or "").get("rid", []):
            if 200 <= status < 300:
                accepted.add(rid)
    latest = {}  # job -> the latest fire whose ping the service accepted
    for rid in accepted:
        if rid in run_of:
            job, slot = run_of[rid]
            latest[job] = max(latest.get(job, slot), slot)
    # Pending successes an agent dropped by rule, by the fingerprint of the URL it would ping
    # (redact::fingerprint: the first 4 bytes of the SHA-256 of the URL, in hex).
    dropped_by = {}
    for entry in log_entries(out, run["nodes"], "pending success dropped"):
        fingerprint = entry.get("target_url", "").rpartition("#")[2]
        message = entry.get("message", "")
        dropped_by[fingerprint] = message.partition(": ")[2] or message

    def fingerprint(job, rid):
        url = run.get("ping_urls", {}).get(job, "") + "?rid=" + str(rid)
        return hashlib.sha256(url.encode()).hexdigest()[:8]

    # "a later run failed" names the failing run's URL: a success of the job before that run
    # was dropped by the rule.
    by_fingerprint = {fingerprint(job, rid): (job, slot) for rid, (job, slot) in run_of.items()}
    failed_after = collections.defaultdict(list)  # job -> slots of runs that dropped successes
    for fp, rule in dropped_by.items():
        if rule == "a later run failed" and fp in by_fingerprint:
            job, slot = by_fingerprint[fp]
            failed_after[job].append(slot)

    dropped = collections.Counter()
    successes, coalesced, lost, unrecorded = 0, 0, [], []
    for node in run["nodes"]:
        path = os.path.join(out, "agents", node, "history.json")
        text = open(path).read() if os.path.exists(path) else ""
        doc = json.loads(text) if text.strip() else {"jobs": []}
        for job in doc.get("jobs", []):
            for record in job.get("runs", []):
                if record.get("outcome") != "success":
                    continue
                successes += 1
                rid = record.get("run_id")
                job_slot = run_of.get(rid)
                if rid in accepted:
                    pass
                elif job_slot and latest.get(job_slot[0], job_slot[1]) > job_slot[1]:
                    coalesced += 1
                elif fingerprint(job.get("job"), rid) in dropped_by:
                    dropped[dropped_by[fingerprint(job.get("job"), rid)]] += 1
                elif job_slot and any(f > job_slot[1] for f in failed_after[job_slot[0]]):
                    dropped["a later run failed"] += 1
                else:
                    lost.append({"node": node, "job": job.get("job"), "run_id": rid,
                                 "scheduled": record.get("scheduled")})
                if not any(rid in ids for ids in fires.values()):
                    unrecorded.append(rid)

    crashes = json.load(open(os.path.join(out, "crashes.json")))
    for node in run["nodes"]:
        agent_dir = os.path.join(out, "agents", node)
        for name in sorted(os.listdir(agent_dir)):
            if name.startswith("daemon.") and name.endswith(".log"):
                text = open(os.path.join(agent_dir, name), errors="replace").read()
                if "panicked" in text:
                    crashes.append({"node": node, "log": name, "exit": "panicked"})

    faults = collections.Counter(
        e["kind"] for e in events
        if e["kind"] not in HEALS and e["kind"] not in ("start", "crash")
    )
    summary = {
        "seed": run["seed"],
        "duration_s": run["duration_s"],
        "faults": dict(sorted(faults.items())),
        "fires": len(fires),
        "attempts": attempts,
        "ran_twice": len(twice),
        "missed": len(missed),
        "missed_explained": dict(sorted(explained.items())),
        "missed_unexplained": unexplained,
        "successes": successes,
        "successes_lost": len(lost),
        "successes_coalesced": coalesced,
        "successes_dropped_by_rule": dict(sorted(dropped.items())),
        "successes_not_in_ledger": len(unrecorded),
        "crashes": len(crashes),
    }
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1))
    ok = not twice and not lost and not crashes
    if not ok:
        near = lambda wall: [e for e in events if abs(e["wall"] - wall) <= 10]  # noqa: E731
        for job, slot in twice:
            print(f"RAN TWICE: {job} at {slot} by {sorted(nodes_of[(job, slot)])}; "
                  f"faults around it: {near(slot)}")
        for item in lost:
            print(f"SUCCESS LOST: {item}")
        for crash in crashes:
            print(f"CRASH: {crash}")
    return ok


if __name__ == "__main__":
    sys.exit(0 if check(sys.argv[1]) else 1)
