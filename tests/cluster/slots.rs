//! Three agents sharing 20 jobs that fire every second: every fire slot runs exactly once, also
//! when one agent's clock is 2 s ahead (Debian's `faketime`). Counted from the jobs' own output.

use std::time::Duration;

use super::agents::{faketime, missing, now, out_dir, slots, twice, Agent, Setup, Slots};
use crate::util::emulator::Background;
use crate::util::etcd::EtcdCluster;

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

/// Starts agents a, b, c (a with `env_a`), lets them run `run`, and reads what they wrote.
fn run_three(cluster: &EtcdCluster, name: &str, run: Duration, env_a: &[(String, String)]) -> Run {
    let emulator = Background::start();
    let (dir, out) = out_dir();
    let setup = Setup {
        cluster: format!(
            "{}\nname = \"{name}\"\nlease = \"5s\"",
            cluster.endpoints_toml()
        ),
        jobs: JOBS,
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
    let written = slots(&out, JOBS);
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
    let run = run_three(&cluster, "slots", Duration::from_secs(60), &[]);
    once(&run.written, run.from, run.to, &run.agents);
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

#[test]
fn an_agent_two_seconds_ahead_still_runs_no_slot_twice() {
    let Some(env) = faketime("+2s") else {
        return;
    };
    let Some(cluster) = EtcdCluster::start(3) else {
        return;
    };
    let run = run_three(&cluster, "skew", Duration::from_secs(20), &env);
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
    once(&run.written, run.from, run.to, agents);
}

/// Asserts that every slot of every job in `from..=to` ran, and none twice.
fn once(written: &Slots, from: i64, to: i64, agents: &[Agent]) {
    let twice = twice(written);
    assert!(twice.is_empty(), "slots run twice: {twice:?}");
    let gaps = missing(written, JOBS, from, to);
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
