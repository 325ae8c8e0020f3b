//! Agents are told apart by their identity, not their node name: a second live agent under a
//! node name already registered is refused at start (exit 78, naming the other's identity),
//! a restart of the same agent is not, and two agents that share a name anyway (the second
//! started in the window before the first's presence is written) never both run a fire, and
//! the one whose new lease finds the presence taken leaves it and says so.

use std::time::Duration;

use heartbeat_agent::identity::Identity;

use super::agents::{now, out_dir, slots, twice, Agent, JobShape, Setup};
use crate::util::emulator::Background;
use crate::util::etcd::EtcdCluster;

/// The identity the agent in `agent`'s home has (the machine's id and its config path).
fn identity_of(agent: &Agent) -> Identity {
    Identity::of(&agent.home.state_dir(), &agent.home.config_path()).expect("identity")
}

/// The value of `key` in `etcd`, empty when there is none.
fn value(etcd: &EtcdCluster, key: &str) -> String {
    let got = etcd.etcdctl(&["get", key, "--print-value-only"]);
    String::from_utf8_lossy(&got.stdout).trim().to_owned()
}

#[test]
fn a_second_live_agent_with_the_same_node_name_is_refused_and_a_restart_is_not() {
    let Some(etcd) = EtcdCluster::start(1) else {
        return;
    };
    let emulator = Background::start();
    let (_dir, out) = out_dir();
    let setup = Setup {
        cluster: format!("{}\nname = \"dup\"\nlease = \"10s\"", etcd.endpoints_toml()),
        jobs: 1,
        shape: JobShape::EVERY_SECOND,
        out: &out,
        emulator: &emulator,
    };
    let mut first = Agent::start(&setup, "same", &[]);
    let status = first.status();
    let first_id = identity_of(&first);
    assert_eq!(status["identity"], first_id.as_str(), "{status}");
    assert_eq!(status["etcd"]["identity"], first_id.as_str(), "{status}");
    crate::util::eventually(
        Duration::from_secs(10),
        "the first agent's presence",
        || {
            let presence = value(&etcd, "dup/nodes/same");
            presence
                .contains(first_id.as_str())
                .then_some(())
                .ok_or(presence)
        },
    );

    let mut second = Agent::start(&setup, "same", &[]);
    let code = second.exit_code_within(Duration::from_secs(15));
    let log = second.log();
    assert_eq!(code, Some(78), "{log}");
    let expected = format!(
        "heartbeat-agent: {}: another live agent is registered in cluster \"dup\" as node \
         \"same\" with identity {first_id} (this agent is {}); two agents cannot share a node \
         name: set [cluster] node to a name of its own on each agent (it defaults to the host \
         name); the daemon did not start",
        second.home.config_path().display(),
        identity_of(&second),
    );
    assert!(
        log.contains(&expected),
        "expected:\n{expected}\nlog:\n{log}"
    );
    // Nothing of the first was touched: it runs, registered as before.
    assert!(first.alive(), "{}", first.log());
    assert!(value(&etcd, "dup/nodes/same").contains(first_id.as_str()));

    // A restart of the same agent while its old lease still lives (10 s) is not refused.
    first.kill();
    first.spawn(&[]);
    let status = first.status();
    assert_eq!(status["identity"], first_id.as_str(), "{status}");
    std::thread::sleep(Duration::from_secs(2));
    assert!(first.alive(), "{}", first.log());
    assert!(
        !first.log().contains("another live agent"),
        "{}",
        first.log()
    );
}

#[test]
fn two_agents_with_one_node_name_never_both_run_a_fire() {
    let Some(etcd) = EtcdCluster::start(1) else {
        return;
    };
    let emulator = Background::start();
    let (_dir, out) = out_dir();
    let setup = Setup {
        cluster: format!(
            "{}\nname = \"twins\"\nlease = \"5s\"",
            etcd.endpoints_toml()
        ),
        jobs: 1,
        shape: JobShape::EVERY_SECOND,
        out: &out,
        emulator: &emulator,
    };
    let mut first = Agent::start(&setup, "same", &[]);
    first.status();
    crate::util::eventually(
        Duration::from_secs(10),
        "the first agent's presence",
        || {
            let presence = value(&etcd, "twins/nodes/same");
            (!presence.is_empty()).then_some(()).ok_or("none")
        },
    );
    // The window before the first's presence is written, made to last: the second starts as
    // if the first were not registered yet.
    let removed = etcd.etcdctl(&["del", "twins/nodes/same"]);
    assert!(removed.status.success(), "{removed:?}");
    let mut second = Agent::start(&setup, "same", &[]);
    second.status();
    let from = now() + 2;
    std::thread::sleep(Duration::from_secs(22));
    let to = now() - 2;
    assert!(first.alive(), "{}", first.log());
    assert!(second.alive(), "{}", second.log());
    std::thread::sleep(Duration::from_secs(1));
    let written = slots(&out, 1);
    let window: Vec<_> = written
        .iter()
        .filter(|((_, slot), _)| (from..=to).contains(slot))
        .collect();
    assert!(
        window.len() >= 16,
        "{} fires ran in {from}..={to}",
        window.len()
    );
    assert!(
        twice(&written).is_empty(),
        "fires that ran twice: {:?}",
        twice(&written)
    );
    // They did compete for the fires: each agent lost claims to the other (an agent that took
    // the other's claim under the shared name for its own would have won them all).
    let mut lost = Vec::new();
    for agent in [&first, &second] {
        let status = agent.status();
        let n = status["jobs"][0]["cluster"]["claims_lost"].as_u64();
        assert!(n.is_some_and(|n| n > 0), "{status}");
        lost.extend(n);
    }
    eprintln!(
        "two agents named \"same\": {} per-second fires in {from}..={to}, {} ran twice; claims \
         lost {lost:?}",
        window.len(),
        twice(&written).len()
    );

    // The first's lease ends (revoked by hand): its new lease finds the presence held by the
    // second's identity, leaves it and says so.
    let second_id = identity_of(&second);
    let second_lease = super::sync::lease_of(&etcd, "twins/nodes/same").expect("a presence");
    let listed = etcd.etcdctl(&["lease", "list"]);
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    // etcdctl lists lease ids in hex, zero-padded to 16 digits: compare them as numbers.
    let others =
        listed.lines().skip(1).map(str::trim).filter(|l| {
            u64::from_str_radix(l, 16).map_or(true, |id| id.cast_signed() != second_lease)
        });
    for lease in others {
        let revoked = etcd.etcdctl(&["lease", "revoke", lease]);
        assert!(revoked.status.success(), "{revoked:?}");
    }
    crate::util::eventually(Duration::from_secs(15), "the first's ERROR", || {
        let log = first.messages();
        log.contains("another live agent is registered under this node name")
            .then_some(())
            .ok_or(log)
    });
    assert!(value(&etcd, "twins/nodes/same").contains(second_id.as_str()));
    assert!(first.alive() && second.alive());
}
