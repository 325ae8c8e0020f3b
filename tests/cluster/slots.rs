//! Three agents sharing 20 jobs that fire every second: every fire slot runs exactly once, also
//! when one agent's clock is 2 s ahead (Debian's `faketime`), and with 100 jobs due in the same
//! second, whose claims go to etcd in a few transactions per second and agent (group commit),
//! not one per fire; and `@every 2s` jobs name the same slots on every agent. Counted from the
//! jobs' own output and etcd's own metrics.

use std::time::Duration;

use super::agents::{faketime, missing, now, out_dir, slots, twice, Agent, JobShape, Setup, Slots};
use crate::util::emulator::Background;
use crate::util::etcd::{EtcdCluster, SlowFront};

const JOBS: usize = 20;

/// What [`run_three`] saw: the slots written, the window in which every agent was up (with
/// margins), and the agents, still running.
struct Run {
    out: tempfile::TempDir,
    written: Slots,
    from: i64,
    to: i64,
    agents: Vec<Agent>,
}

/// Starts agents a, b, c (a with `env_a`) on etcd at `endpoints` (an `endpoints = [...]` line), lets them run `run`, and reads what they wrote.
fn run_three(
    endpoints: &str,
    name: &str,
    jobs: usize,
    shape: JobShape,
    run: Duration,
    env_a: &[(String, String)],
) -> Run {
    let emulator = Background::start();
    let (dir, out) = out_dir();
    let setup = Setup {
        cluster: format!("{endpoints}\nname = \"{name}\"\nlease = \"5s\""),
        jobs,
        shape,
        out: &out,
        emulator: &emulator,
    };
    let mut agents = vec![
        Agent::start(&setup, "a", env_a),
        Agent::start(&setup, "b", &[]),
        Agent::start(&setup, "c", &[]),
    ];
    for agent in &agents {
        agent.status();
    }
    // From the first whole second at which every agent holds its lease.
    let from = now() + 2;
    std::thread::sleep(run);
    let to = now() - 2;
    for agent in &mut agents {
        assert!(
            agent.alive(),
            "agent {} died; log:\n{}",
            agent.node,
            agent.log()
        );
    }
    std::thread::sleep(Duration::from_secs(1));
    let written = slots(&out, jobs);
    // The runs pinged the service: at least one ping per run written.
    let runs: usize = written.values().map(Vec::len).sum();
    let pinged =
        crate::util::wait_until(Duration::from_secs(10), Duration::from_millis(100), || {
            emulator.pings().len() >= runs
        });
    assert!(pinged, "{} pings for {runs} runs", emulator.pings().len());
    Run {
        out: dir,
        written,
        from,
        to,
        agents,
    }
}

#[test]
fn three_agents_run_every_slot_exactly_once() {
    let Some(cluster) = EtcdCluster::start(3) else {
        return;
    };
    let run = run_three(
        &cluster.endpoints_toml(),
        "slots",
        JOBS,
        JobShape::EVERY_SECOND,
        Duration::from_secs(60),
        &[],
    );
    once(&run.written, JOBS, run.from, run.to, &run.agents);
    assert!(
        run.to - run.from >= 50,
        "the window {}..{} is too short",
        run.from,
        run.to
    );
    // Each agent's status agrees with the files: its claims won are the runs it wrote (the
    // agents go on running: between what was written before and after the status was read).
    let out = run.out.path();
    for agent in &run.agents {
        let ran = || {
            let written = slots(out, JOBS);
            written
                .values()
                .flatten()
                .filter(|n| **n == agent.node)
                .count() as u64
        };
        let before = ran();
        let won: u64 = agent.status()["jobs"]
            .as_array()
            .expect("jobs")
            .iter()
            .map(|j| j["cluster"]["claims_won"].as_u64().expect("claims_won"))
            .sum();
        std::thread::sleep(Duration::from_millis(1500));
        let after = ran();
        assert!(
            before <= won && won <= after,
            "agent {}: {before} <= {won} <= {after}",
            agent.node
        );
    }
}

/// `@every 2s` in a cluster: each agent computes the same grid (the epoch's, not the moment it
/// started), so each fire is one slot that runs exactly once, on whichever agent claims it.
#[test]
fn every_two_seconds_names_the_same_slots_on_every_agent_and_runs_each_once() {
    let Some(cluster) = EtcdCluster::start(1) else {
        return;
    };
    let jobs = 4;
    let shape = JobShape {
        schedule: "@every 2s",
        then: "",
        extra: "",
    };
    let run = run_three(
        &cluster.endpoints_toml(),
        "every",
        jobs,
        shape,
        Duration::from_secs(14),
        &[],
    );
    let twice = twice(&run.written);
    assert!(twice.is_empty(), "slots run twice: {twice:?}");
    let off_grid: Vec<_> = run
        .written
        .keys()
        .filter(|(_, slot)| slot % 2 != 0)
        .collect();
    assert!(off_grid.is_empty(), "slots off the 2 s grid: {off_grid:?}");
    let first = run.from + run.from.rem_euclid(2);
    let gaps: Vec<_> = (0..jobs)
        .flat_map(|j| (first..=run.to).step_by(2).map(move |slot| (j, slot)))
        .filter(|key| !run.written.contains_key(key))
        .collect();
    assert!(
        gaps.is_empty(),
        "slots nobody ran: {gaps:?}\n{}",
        skips(&run.agents)
    );
    assert!(
        run.to - first >= 6,
        "the window {first}..{} is too short",
        run.to
    );
}

#[test]
fn an_agent_two_seconds_ahead_still_runs_no_slot_twice() {
    let Some(env) = faketime("+2s") else {
        return;
    };
    let Some(cluster) = EtcdCluster::start(3) else {
        return;
    };
    let run = run_three(
        &cluster.endpoints_toml(),
        "skew",
        JOBS,
        JobShape::EVERY_SECOND,
        Duration::from_secs(20),
        &env,
    );
    let agents = &run.agents;
    // faketime really moved the agent's clock (LD_PRELOAD reaches the Rust binary's
    // clock_gettime): its status document is dated 2 s ahead of the others'.
    let ahead = |agent: &Agent| {
        let at = agent.status()["generated_at"]
            .as_str()
            .expect("generated_at")
            .to_owned();
        chrono::DateTime::parse_from_rfc3339(&at)
            .expect("RFC 3339")
            .timestamp_millis()
    };
    let (a, b) = (ahead(&agents[0]), ahead(&agents[1]));
    assert!(
        (1_500..3_000).contains(&(a - b)),
        "agent a is {} ms ahead of b",
        a - b
    );
    once(&run.written, JOBS, run.from, run.to, agents);
}

#[test]
fn claims_of_fires_due_together_share_one_etcd_transaction() {
    let Some(cluster) = EtcdCluster::start(3) else {
        return;
    };
    const MANY: usize = 100;
    let txns_before = etcd_txns(&cluster);
    let run = run_three(
        &cluster.endpoints_toml(),
        "batch",
        MANY,
        JobShape::EVERY_SECOND,
        Duration::from_secs(12),
        &[],
    );
    let txns = etcd_txns(&cluster) - txns_before;
    once(&run.written, MANY, run.from, run.to, &run.agents);
    // Every agent claimed every fire it saw (won or lost): the claims asked for, at least
    // 100 jobs x 3 agents per second of the run.
    let claims: u64 = run
        .agents
        .iter()
        .flat_map(|a| a.status()["jobs"].as_array().expect("jobs").clone())
        .map(|j| {
            let c = &j["cluster"];
            c["claims_won"].as_u64().expect("won") + c["claims_lost"].as_u64().expect("lost")
        })
        .sum();
    assert!(claims >= 3 * MANY as u64 * 8, "only {claims} claims");
    eprintln!("{txns} etcd Txns for {claims} claims of 3 agents");
    // One etcd Txn per claim would be `claims` (plus the leader's and the relay's few); group
    // commit sends each agent's fires due together in one or a few.
    assert!(
        txns * 10 < claims,
        "{txns} etcd Txns for {claims} claims: not batched"
    );
}

/// etcd's `Txn` RPCs served so far, summed over the members (their own `/metrics`).
fn etcd_txns(cluster: &EtcdCluster) -> u64 {
    etcd_rpcs(cluster, 3, "Txn")
}

/// etcd's `method` RPCs (`Txn`, `Authenticate`, ...) served so far, summed over the first
/// `members` members (their own `/metrics`).
pub fn etcd_rpcs(cluster: &EtcdCluster, members: usize, method: &str) -> u64 {
    let wanted = format!("grpc_method=\"{method}\"");
    (0..members)
        .map(|i| {
            let endpoint = cluster.endpoint(i);
            let authority = endpoint.trim_start_matches("http://").trim_end_matches('/');
            // HTTP/1.0: the body comes whole, not in chunks that could split a line.
            let (status, body) =
                crate::util::http::exchange(authority, "GET /metrics HTTP/1.0", &[]);
            assert_eq!(status, 200, "{endpoint}/metrics: {body}");
            body.lines()
                .filter(|l| l.starts_with("grpc_server_handled_total{") && l.contains(&wanted))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>() as u64
        })
        .sum()
}

/// Asserts that every slot of every job in `from..=to` ran, and none twice.
fn once(written: &Slots, jobs: usize, from: i64, to: i64, agents: &[Agent]) {
    let twice = twice(written);
    assert!(twice.is_empty(), "slots run twice: {twice:?}");
    let gaps = missing(written, jobs, from, to);
    assert!(
        gaps.is_empty(),
        "slots nobody ran: {gaps:?}\n{}",
        skips(agents)
    );
}

/// What the agents logged about fires they did not run, for messages.
fn skips(agents: &[Agent]) -> String {
    let mut out = String::new();
    for agent in agents {
        let messages = agent.messages();
        let lines: Vec<&str> = messages
            .lines()
            .filter(|l| l.contains("skipped") || l.contains("etcd") || l.contains("lease"))
            .collect();
        out.push_str(&format!(
            "agent {}: {} such lines; first: {:?}\n",
            agent.node,
            lines.len(),
            &lines[..lines.len().min(8)]
        ));
    }
    out
}

/// A fire's claim is in etcd before the fire is due; the agent that holds it, killed then,
/// takes the fire with it: no other agent runs it (docs/cluster.md: a fire whose winner died
/// is not run again, and its check alarms), and the next fire runs on a survivor.
#[test]
fn a_fire_is_claimed_before_it_is_due_and_dies_with_its_winner() {
    let Some(cluster) = EtcdCluster::start(3) else {
        return;
    };
    const EVERY: i64 = 4;
    let emulator = Background::start();
    let (_dir, out) = out_dir();
    let setup = Setup {
        cluster: format!(
            "{}\nname = \"early\"\nlease = \"5s\"",
            cluster.endpoints_toml()
        ),
        jobs: 1,
        shape: JobShape {
            schedule: "*/4 * * * * *",
            then: "",
            extra: "",
        },
        out: &out,
        emulator: &emulator,
    };
    let mut agents: Vec<Agent> = ["a", "b", "c"]
        .iter()
        .map(|node| Agent::start(&setup, node, &[]))
        .collect();
    for agent in &agents {
        agent.status();
    }
    // The lease is 5 s, so a fire is claimed 1.25 s before it is due. Watch the claim key
    // of a coming fire from 1.2 s before it; once it names its holder (and the fire is still
    // 150 ms away), kill the holder.
    let millis = || chrono::Utc::now().timestamp_millis();
    let mut killed = None;
    for _ in 0..6 {
        let fire = (now() + 2) / EVERY * EVERY + EVERY;
        let watch_from = fire * 1000 - 1200;
        std::thread::sleep(Duration::from_millis(
            u64::try_from(watch_from - millis()).unwrap_or(0),
        ));
        let key = format!("early/claims/j0/{fire}");
        while millis() < fire * 1000 - 150 {
            let got = cluster.etcdctl(&["get", &key, "--print-value-only"]);
            // `NODE IDENTITY`: the node names the agent.
            let value = String::from_utf8_lossy(&got.stdout).trim().to_owned();
            let holder = value.split(' ').next().unwrap_or_default().to_owned();
            if !holder.is_empty() && millis() < fire * 1000 - 150 {
                let agent = agents.iter_mut().find(|a| a.node == holder);
                agent.expect("the holder is an agent").kill();
                killed = Some((fire, holder));
                break;
            }
        }
        if killed.is_some() {
            break;
        }
    }
    let Some((fire, holder)) = killed else {
        panic!("no fire of 6 was claimed 150 ms before it was due");
    };
    // Past the next fire, and its run.
    let next = fire + EVERY;
    std::thread::sleep(Duration::from_millis(
        u64::try_from((next + 2) * 1000 - millis()).unwrap_or(0),
    ));
    let written = slots(&out, 1);
    assert_eq!(
        written.get(&(0, fire)),
        None,
        "the fire at {fire}, claimed by {holder} who was killed before it, ran elsewhere"
    );
    let ran = written.get(&(0, next)).cloned().unwrap_or_default();
    assert_eq!(ran.len(), 1, "the next fire at {next} ran on {ran:?}");
    assert_ne!(ran[0], holder, "the next fire ran on the killed agent");
}

/// A job still running with `overlap = "skip"` sends no early claim: the agent that will skip
/// the fire must not win it, or no agent runs it. Jobs due every 2 s run for 3 s, so each fire
/// comes while the previous fire's agent is busy: every slot still runs exactly once.
#[test]
fn a_busy_agent_leaves_the_next_fire_to_the_others() {
    let Some(cluster) = EtcdCluster::start(3) else {
        return;
    };
    const BUSY_JOBS: usize = 3;
    let shape = JobShape {
        schedule: "*/2 * * * * *",
        then: "; sleep 3",
        extra: "overlap = \"skip\"",
    };
    let run = run_three(
        &cluster.endpoints_toml(),
        "busy",
        BUSY_JOBS,
        shape,
        Duration::from_secs(24),
        &[],
    );
    // The last slots' runs end 3 s after they start.
    std::thread::sleep(Duration::from_secs(3));
    let written = slots(run.out.path(), BUSY_JOBS);
    let twice = twice(&written);
    assert!(twice.is_empty(), "slots run twice: {twice:?}");
    let from = run.from + run.from % 2;
    let gaps: Vec<String> = (0..BUSY_JOBS)
        .flat_map(|j| (from..=run.to).step_by(2).map(move |s| (j, s)))
        .filter(|key| !written.contains_key(key))
        .map(|(j, s)| format!("j{j}@{s}"))
        .collect();
    assert!(
        gaps.is_empty(),
        "slots nobody ran: {gaps:?}\n{}",
        skips(&run.agents)
    );
}

/// An etcd whose answers take 1.2 s (a member under load, or far away): every claim is still
/// pending when the job's next fire comes (every second). That fire is not held back by it
/// (it is not a run that goes: its agent may lose it), so every slot still runs exactly once
/// instead of every agent skipping it as "still running".
#[test]
fn a_claim_slower_than_the_period_does_not_skip_the_next_fire() {
    let Some(cluster) = EtcdCluster::start(3) else {
        return;
    };
    let slow = SlowFront::start(&cluster.endpoint(0), Duration::from_millis(1200));
    let endpoints = format!("endpoints = [\"{}\"]", slow.url());
    const SLOW_JOBS: usize = 4;
    // The agents' leases and first claims take a few slow round trips: the window starts later.
    std::thread::sleep(Duration::from_secs(1));
    let mut run = run_three(
        &endpoints,
        "slow",
        SLOW_JOBS,
        JobShape::EVERY_SECOND,
        Duration::from_secs(24),
        &[],
    );
    run.from += 6;
    // The last fires' claims are answered 1.2 s late.
    std::thread::sleep(Duration::from_secs(2));
    let written = slots(run.out.path(), SLOW_JOBS);
    once(&written, SLOW_JOBS, run.from, run.to, &run.agents);
}

/// `overlap = "skip"` holds for runs, not for claims: with claims answered 1.8 s late, a fire
/// may start waiting for its claim before the previous fire's run has begun. When its claim is
/// won while that run goes, it is skipped then (and says why): never two runs at once.
#[test]
fn a_fire_whose_claim_is_won_while_the_previous_run_goes_is_skipped() {
    let Some(cluster) = EtcdCluster::start(3) else {
        return;
    };
    let slow = SlowFront::start(&cluster.endpoint(0), Duration::from_millis(1800));
    let emulator = Background::start();
    let (_dir, out) = out_dir();
    // Each run takes a lock directory for 1.5 s; a run that finds it taken writes `overlap`.
    let then = format!(
        "; mkdir {0}/busy 2>/dev/null || echo overlap >> {0}/overlaps; sleep 1.5; rmdir {0}/busy",
        out.display()
    );
    let setup = Setup {
        // The lease of 9 s gives etcd requests 3 s.
        cluster: format!(
            "endpoints = [\"{}\"]\nname = \"overlap\"\nlease = \"9s\"",
            slow.url()
        ),
        jobs: 1,
        shape: JobShape {
            schedule: "*/1 * * * * *",
            then: Box::leak(then.into_boxed_str()),
            extra: "overlap = \"skip\"",
        },
        out: &out,
        emulator: &emulator,
    };
    let agent = Agent::start(&setup, "a", &[]);
    agent.status();
    std::thread::sleep(Duration::from_secs(20));
    let written = slots(&out, 1);
    assert!(
        written.len() >= 4,
        "only {} runs in 20 s: {written:?}\n{}",
        written.len(),
        agent.messages()
    );
    let overlaps = std::fs::read_to_string(out.join("overlaps")).unwrap_or_default();
    assert_eq!(overlaps, "", "two runs of the job went at once");
    let messages = agent.messages();
    assert!(
        messages.contains("its claim was answered after this fire came"),
        "no fire was skipped after its claim:\n{messages}"
    );
}
