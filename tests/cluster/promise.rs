//! The cluster's at-most-once promise under skewed clocks, restarts and stalls
//! (docs/cluster.md, "Clocks, restarts and stalls"): a claim outlives the agent that won it,
//! so an agent whose clock is behind still finds taken every slot another agent ran, even
//! after that agent stopped (SIGTERM), died (kill -9) or stalled past its lease (SIGSTOP).
//! Counted from the jobs' own output, with clocks moved by libfaketime. And the election's
//! part: a leader key bound to no lease (written by another etcd user) is not followed.

use std::time::Duration;

use nix::sys::signal::Signal;

use super::agents::{faketime, now, out_dir, slots, twice, Agent, JobShape, Setup};
use crate::util::emulator::{token_for, Background};
use crate::util::etcd::EtcdCluster;

/// The largest clock error, ahead or behind, that docs/cluster.md promises: any two agents
/// may then differ by twice that.
const MAX_SKEW_SECS: i64 = 25;

/// How far `agent`'s clock is from the test's, in milliseconds (its status document's date).
fn offset_ms(agent: &Agent) -> i64 {
    let before = chrono::Utc::now().timestamp_millis();
    let at = agent.status()["generated_at"]
        .as_str()
        .expect("generated_at")
        .to_owned();
    let at = chrono::DateTime::parse_from_rfc3339(&at)
        .expect("RFC 3339")
        .timestamp_millis();
    at - before
}

/// The claims `agent` lost so far, over its jobs.
fn lost(agent: &Agent) -> u64 {
    agent.status()["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| j["cluster"]["claims_lost"].as_u64().unwrap_or(0))
        .sum()
}

/// Four agents of one cluster: `a` ahead by `skew` seconds, `b` behind by as much, `c` and `d`
/// on time. For `run`, every 5 s one of `a`, `c`, `d` (in turn) is stopped, by SIGTERM and by
/// `kill -9` alternately, and started again a second later; `b`, which asks for every slot
/// last, stays. No slot of the two jobs (one every second, one every 2 s) runs twice.
fn restarts_under_skew(skew: i64, run: Duration, name: &str) {
    let ahead = format!("+{skew}s");
    let behind = format!("-{skew}s");
    let (Some(ahead), Some(behind)) = (faketime(&ahead), faketime(&behind)) else {
        return;
    };
    let Some(cluster) = EtcdCluster::start(3) else {
        return;
    };
    let emulator = Background::start();
    let (_dir, out) = out_dir();
    let cluster = format!(
        "{}\nname = \"{name}\"\nlease = \"5s\"",
        cluster.endpoints_toml()
    );
    let envs = [ahead, behind, Vec::new(), Vec::new()];
    let mut agents: Vec<Agent> = ["a", "b", "c", "d"]
        .iter()
        .zip(&envs)
        .map(|(node, env)| two_jobs(&cluster, &emulator, &out, node, env))
        .collect();
    for agent in &agents {
        agent.status();
    }
    let (a, b) = (offset_ms(&agents[0]), offset_ms(&agents[1]));
    let want = skew * 1000;
    assert!(
        (a - want).abs() < 1_000 && (b + want).abs() < 1_000,
        "faketime did not move the clocks: a {a} ms, b {b} ms off"
    );
    let started = std::time::Instant::now();
    let (mut terms, mut kills) = (0, 0);
    let mut turn = 0;
    while started.elapsed() < run {
        std::thread::sleep(Duration::from_secs(4));
        let i = [0, 2, 3][turn % 3];
        let agent = &mut agents[i];
        if turn % 2 == 0 {
            agent.terminate();
            terms += 1;
        } else {
            agent.kill();
            kills += 1;
        }
        std::thread::sleep(Duration::from_secs(1));
        agent.spawn(&envs[i]);
        turn += 1;
    }
    // The behind agent asks for the last slots `skew` s after they ran.
    std::thread::sleep(Duration::from_secs(u64::try_from(skew).unwrap_or(0) + 3));
    let written = slots(&out, 2);
    let every_second: Vec<_> = written.iter().filter(|((j, _), _)| *j == 0).collect();
    let every_two: Vec<_> = written.iter().filter(|((j, _), _)| *j == 1).collect();
    let twice = twice(&written);
    assert!(
        twice.is_empty(),
        "after {terms} SIGTERM and {kills} kill -9 restarts, slots run twice (j0 every \
         second, j1 every 2 s): {twice:?}"
    );
    assert!(terms >= 3 && kills >= 3, "{terms} SIGTERM, {kills} kill -9");
    // The test could see a double fire: the slots ran, and the agent behind asked for them.
    assert!(
        every_second.len() >= 30,
        "only {} slots of the job every second ran",
        every_second.len()
    );
    let b_lost = lost(&agents[1]);
    assert!(b_lost >= 30, "agent b lost {b_lost} claims");
    eprintln!(
        "±{skew} s: {} + {} slots, {terms} SIGTERM and {kills} kill -9 restarts, 0 run twice",
        every_second.len(),
        every_two.len()
    );
}

/// Agent `node` of `cluster` (the `[cluster]` lines besides `node`) with two jobs that
/// append `NODE SLOT` to `out/j0` (`each`, every second) and `out/j1` (`even`, every 2 s).
fn two_jobs(
    cluster: &str,
    emulator: &Background,
    out: &std::path::Path,
    node: &str,
    env: &[(String, String)],
) -> Agent {
    let mut agent = Agent::new(node);
    let mut config = agent.config_head(cluster);
    for (i, (name, schedule)) in [("each", "*/1 * * * * *"), ("even", "*/2 * * * * *")]
        .iter()
        .enumerate()
    {
        config.push_str(&format!(
            "\n[[jobs]]\nname = \"{name}\"\nschedule = \"{schedule}\"\nshell = \"echo \
             \\\"$HEARTBEAT_AGENT_NODE $HEARTBEAT_AGENT_SCHEDULED\\\" >> {}\"\nping_url = \
             \"{}/{}\"\n",
            out.join(format!("j{i}")).display(),
            emulator.ping_url(),
            token_for(name),
        ));
    }
    agent.home.write_config(&config);
    agent.spawn(env);
    agent
}

#[test]
fn agents_five_seconds_ahead_and_behind_run_no_slot_twice_through_restarts() {
    restarts_under_skew(5, Duration::from_secs(60), "skew5");
}

#[test]
fn agents_at_the_documented_maximum_skew_run_no_slot_twice_through_restarts() {
    // The agent behind asks for the last slots 25 s after they ran: a shorter loop keeps
    // the test within 75 s.
    restarts_under_skew(MAX_SKEW_SECS, Duration::from_secs(42), "skewmax");
}

/// An agent stopped (SIGSTOP) for 5 s, past its 3 s lease, six times: its claims stay in etcd,
/// so the agent 5 s behind never wins a slot the stalled agent ran (or holds), and the stalled
/// agent never runs a slot the other ran.
#[test]
fn a_stalled_agent_and_one_behind_run_no_slot_twice() {
    let Some(behind) = faketime("-5s") else {
        return;
    };
    let Some(cluster) = EtcdCluster::start(3) else {
        return;
    };
    let emulator = Background::start();
    let (_dir, out) = out_dir();
    let setup = Setup {
        cluster: format!(
            "{}\nname = \"stall\"\nlease = \"3s\"",
            cluster.endpoints_toml()
        ),
        jobs: 2,
        shape: JobShape::EVERY_SECOND,
        out: &out,
        emulator: &emulator,
    };
    let a = Agent::start(&setup, "a", &[]);
    let b = Agent::start(&setup, "b", &behind);
    a.status();
    b.status();
    let from = now();
    for _ in 0..6 {
        std::thread::sleep(Duration::from_secs(3));
        a.signal(Signal::SIGSTOP);
        std::thread::sleep(Duration::from_secs(5));
        a.signal(Signal::SIGCONT);
    }
    std::thread::sleep(Duration::from_secs(8));
    let written = slots(&out, 2);
    let twice = twice(&written);
    assert!(
        twice.is_empty(),
        "slots run twice around 6 stalls of 5 s: {twice:?}"
    );
    // Both agents ran slots: b took over during the stalls.
    let ran = |node: &str| written.values().filter(|n| n[0] == node).count();
    assert!(
        ran("a") >= 20 && ran("b") >= 20,
        "a ran {}, b ran {} slots since {from}",
        ran("a"),
        ran("b")
    );
    let messages = a.messages();
    assert!(
        messages.contains("lease"),
        "agent a never noticed its lease: {messages}"
    );
}

/// `NAME/leader` written by another etcd user without a lease, naming an agent: no agent takes
/// it as the leader; it is reported and replaced by a key bound to a lease, and when that
/// leader is killed another agent leads within the lease.
#[test]
fn a_leader_key_bound_to_no_lease_is_replaced() {
    let Some(cluster) = EtcdCluster::start(1) else {
        return;
    };
    let put = cluster.etcdctl(&["put", "ghost/leader", "a"]);
    assert!(put.status.success(), "{put:?}");
    let emulator = Background::start();
    let (_dir, out) = out_dir();
    let setup = Setup {
        cluster: format!(
            "{}\nname = \"ghost\"\nlease = \"3s\"",
            cluster.endpoints_toml()
        ),
        jobs: 1,
        shape: JobShape::EVERY_SECOND,
        out: &out,
        emulator: &emulator,
    };
    let mut agents = [
        Agent::start(&setup, "a", &[]),
        Agent::start(&setup, "b", &[]),
    ];
    let leader = |agents: &[Agent]| {
        crate::util::wait_until(Duration::from_secs(10), Duration::from_millis(100), || {
            agents.iter().any(|a| a.role().as_deref() == Some("leader"))
        });
        agents
            .iter()
            .position(|a| a.role().as_deref() == Some("leader"))
    };
    let first = leader(&agents).expect("an agent leads");
    // The key is now bound to a lease.
    let got = cluster.etcdctl(&["get", "ghost/leader", "-w", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&got.stdout).expect("etcdctl JSON");
    let lease = json["kvs"][0]["lease"].as_i64().unwrap_or(0);
    assert_ne!(
        lease, 0,
        "the leader key is still bound to no lease: {json}"
    );
    let told: String = agents.iter().map(Agent::messages).collect();
    assert!(
        told.contains("the leader key is bound to no lease"),
        "not reported:\n{told}"
    );
    // Killed, its lease expires and the other agent leads.
    agents[first].kill();
    let other = 1 - first;
    let took_over =
        crate::util::wait_until(Duration::from_secs(8), Duration::from_millis(100), || {
            agents[other].role().as_deref() == Some("leader")
        });
    assert!(
        took_over,
        "agent {} does not lead 8 s after the leader was killed:\n{}",
        agents[other].node,
        agents[other].messages()
    );
}

/// What a stop does (docs/cluster.md, docs/daemon.md: "revokes its lease when it stops"): the
/// presence goes with the revoked lease at once, and the claims the agent won stay, bound to no
/// lease.
#[test]
fn a_stopped_agent_revokes_its_lease_and_its_claims_stay() {
    let Some(cluster) = EtcdCluster::start(1) else {
        return;
    };
    let emulator = Background::start();
    let (_dir, out) = out_dir();
    let setup = Setup {
        cluster: format!(
            "{}\nname = \"stop\"\nlease = \"10s\"",
            cluster.endpoints_toml()
        ),
        jobs: 1,
        shape: JobShape::EVERY_SECOND,
        out: &out,
        emulator: &emulator,
    };
    let mut agent = Agent::start(&setup, "a", &[]);
    agent.status();
    std::thread::sleep(Duration::from_secs(3));
    agent.terminate();
    assert!(
        agent.log().contains("cluster lease revoked at shutdown"),
        "{}",
        agent.log()
    );
    let keys = |prefix: &str| {
        let got = cluster.etcdctl(&["get", "--prefix", prefix, "-w", "json"]);
        let json: serde_json::Value = serde_json::from_slice(&got.stdout).expect("etcdctl JSON");
        json["kvs"].as_array().cloned().unwrap_or_default()
    };
    assert!(
        keys("stop/nodes/").is_empty(),
        "the presence outlived the stop"
    );
    let claims = keys("stop/claims/j0/");
    let ran = slots(&out, 1).len();
    assert!(
        ran >= 2 && claims.len() >= ran,
        "{ran} fires ran, {} claims stayed after the stop",
        claims.len()
    );
    assert!(
        claims
            .iter()
            .all(|kv| kv["lease"].as_i64().unwrap_or(0) == 0),
        "claims bound to a lease: {claims:?}"
    );
}

/// An agent restarted with its clock set back (an NTP step at boot, a VM restored): it asks
/// again for the fires its previous start ran ahead of time. Those claims name it, but an
/// earlier start of it, so it does not run them again; the fires after them it runs.
#[test]
fn an_agent_restarted_with_its_clock_set_back_does_not_run_its_fires_again() {
    let Some(ahead) = faketime("+6s") else {
        return;
    };
    let Some(etcd) = EtcdCluster::start(1) else {
        return;
    };
    let emulator = Background::start();
    let (_dir, out) = out_dir();
    let setup = Setup {
        cluster: format!(
            "{}\nname = \"setback\"\nlease = \"3s\"",
            etcd.endpoints_toml()
        ),
        jobs: 1,
        shape: JobShape::EVERY_SECOND,
        out: &out,
        emulator: &emulator,
    };
    let mut agent = Agent::start(&setup, "a", &ahead);
    agent.status();
    std::thread::sleep(Duration::from_secs(4));
    agent.terminate();
    let last_ahead = slots(&out, 1).keys().map(|(_, slot)| *slot).max();
    let last_ahead = last_ahead.expect("the agent 6 s ahead ran fires");
    assert!(
        last_ahead > now() + 3,
        "{last_ahead} is not ahead of {}",
        now()
    );
    // The same agent (same config, same state: same identity), its clock right again.
    agent.spawn(&[]);
    agent.status();
    let after = last_ahead + 3;
    crate::util::eventually(Duration::from_secs(20), "fires after the set-back", || {
        let ran = slots(&out, 1).keys().any(|(_, slot)| *slot >= after);
        ran.then_some(()).ok_or("none yet")
    });
    let written = slots(&out, 1);
    assert!(
        twice(&written).is_empty(),
        "fires run twice after the clock was set back: {:?}\n{}",
        twice(&written),
        agent.log()
    );
    // It asked for them and lost them to its earlier start.
    assert!(lost(&agent) > 0, "{}", agent.status());
}
