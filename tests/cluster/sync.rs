//! Cluster mode, "one agent syncs", against a real 3-member etcd cluster on 127.0.0.1, real
//! daemons and the emulator: one agent leads and alone sends sync's PUTs; `kill -9` of the
//! leader hands leadership to another agent within the lease TTL plus a second (measured from
//! the agents' `/status`), sync goes on there with the same ping token, and no PUT changes the
//! check twice; a period change is held until a ping accepted on a follower, then sent by the
//! leader; the leader key and the leader's presence are bound to its one lease, which SIGTERM
//! revokes. The agents are [`super::agents::Agent`]s with a config of this file's own.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::agents::Agent;
use crate::util;
use crate::util::emulator::{token_for, Background};
use crate::util::etcd::EtcdCluster;

const TOKEN: &str = "cluster-status-token";
/// `[cluster] lease` of the agents: the shortest allowed, so takeovers are quick to test.
const LEASE: Duration = Duration::from_secs(2);

/// Writes `agent`'s config: `[cluster]` on `etcd` as its node, `[api]` on the emulator, status
/// on its socket with [`TOKEN`], `jobs`.
pub(super) fn write(agent: &Agent, etcd: &EtcdCluster, emulator: &Background, jobs: &str) {
    let text = format!(
        "[agent]\nstate_dir = \"{state}\"\nshutdown_timeout = \"2s\"\n\n\
         [api]\nbase_url = \"{base}\"\nping_base_url = \"{base}\"\naccount_id = \"{account}\"\n\
         api_key_env = \"EMULATOR_KEY\"\n\n\
         [status]\nlisten = \"{socket}\"\ntoken = \"{TOKEN}\"\n\n\
         [cluster]\n{endpoints}\nname = \"sync-test\"\nnode = \"{node}\"\n\
         lease = \"{lease}s\"\n\n{jobs}",
        state = agent.home.state_dir().display(),
        base = emulator.base_url(),
        account = emulator.account(),
        socket = agent.socket().display(),
        endpoints = etcd.endpoints_toml(),
        node = agent.node,
        lease = LEASE.as_secs(),
    );
    agent.home.write_config(&text);
}

/// The emulator with heartbeat check `c1` (period 1 day).
pub(super) fn emulator() -> Background {
    Background::with_checks(&[("c1", &token_for("c1"))])
}

/// The bodies of the PUTs the emulator received, in order.
fn puts(emulator: &Background) -> Vec<Value> {
    emulator
        .requests()
        .into_iter()
        .filter(|r| r.method == "PUT")
        .map(|r| serde_json::from_str(&r.body).expect("JSON body"))
        .collect()
}

/// Waits for the leader's first PUT of `c1`.
pub(super) fn first_put(emulator: &Background) {
    util::eventually(Duration::from_secs(15), "c1 synced", || {
        match puts(emulator).len() {
            0 => Err("no PUT yet".to_owned()),
            _ => Ok(()),
        }
    });
}

/// A job bound to `c1` that never fires during a test (it runs when triggered), with `check`.
pub(super) fn job(check: &str) -> String {
    format!(
        "[[jobs]]\nname = \"j\"\nschedule = \"0 0 1 1 *\"\ncheck_id = \"c1\"\ncommand = [\"true\"]\n\
         [jobs.check]\n{check}\n"
    )
}

/// Waits until `agent` (a follower) has the ping URL of `j` that the leader learned, through
/// etcd (it sends no PUT of its own).
fn shared_url(agent: &Agent) {
    util::eventually(Duration::from_secs(10), "the URL shared", || {
        let state = agent.home.state_dir().join("sync/j.json");
        let text = std::fs::read_to_string(&state).map_err(|e| e.to_string())?;
        let url = format!("/{}", token_for("c1"));
        text.contains(&url).then_some(()).ok_or(text)
    });
}

/// A PUT's heartbeat period in seconds.
fn period_secs(put: &Value) -> u64 {
    let unit = match put["heartbeat"]["periodUnit"].as_str() {
        Some("seconds") => 1,
        Some("minutes") => 60,
        Some("hours") => 3_600,
        Some("days") => 86_400,
        other => panic!("unit {other:?}"),
    };
    put["heartbeat"]["period"].as_u64().expect("period") * unit
}

/// Three agents `a`, `b`, `c` on `etcd` with `jobs`, started; returns them once exactly one leads
/// and the others follow it, with the leader's index.
fn cluster_of_three(etcd: &EtcdCluster, emulator: &Background, jobs: &str) -> (Vec<Agent>, usize) {
    let key = [("EMULATOR_KEY".to_owned(), emulator.api_key().to_owned())];
    let mut agents: Vec<Agent> = ["a", "b", "c"]
        .iter()
        .map(|n| Agent::new(n).terminate_on_drop())
        .collect();
    for agent in &mut agents {
        write(agent, etcd, emulator, jobs);
        agent.spawn(&key);
    }
    let leader = util::eventually_every(
        Duration::from_millis(50),
        Duration::from_secs(20),
        "one leader, two followers naming it",
        || {
            let docs: Vec<Option<Value>> = agents.iter().map(Agent::try_status).collect();
            let roles: Vec<Option<&str>> = docs
                .iter()
                .map(|d| d.as_ref().and_then(|d| d["cluster"]["role"].as_str()))
                .collect();
            let leaders: Vec<usize> = (0..3).filter(|&i| roles[i] == Some("leader")).collect();
            let [leader] = leaders[..] else {
                return Err(format!("roles {roles:?}; log of a:\n{}", agents[0].log()));
            };
            let named = docs.iter().all(|d| {
                d.as_ref().and_then(|d| d["cluster"]["leader"].as_str())
                    == Some(agents[leader].node.as_str())
            });
            if named {
                Ok(leader)
            } else {
                Err(format!("not every agent names the leader yet: {docs:?}"))
            }
        },
    );
    (agents, leader)
}

#[test]
fn kill_9_of_the_leader_hands_sync_to_another_agent_within_the_lease_and_a_second() {
    let Some(etcd) = EtcdCluster::start(3) else {
        return;
    };
    let emulator = emulator();
    let (mut agents, leader) = cluster_of_three(&etcd, &emulator, &job("tags = [\"one\"]"));
    // The leader syncs c1 once; the followers send nothing.
    first_put(&emulator);
    let metrics = agents[leader].metrics();
    assert!(
        metrics.contains("heartbeat_agent_cluster_role{role=\"leader\"} 1"),
        "{metrics}"
    );
    let follower = (leader + 1) % 3;
    let metrics = agents[follower].metrics();
    assert!(
        metrics.contains("heartbeat_agent_cluster_role{role=\"follower\"} 1")
            && metrics.contains(&format!(
                "heartbeat_agent_cluster_leader{{node=\"{}\"}} 1",
                agents[leader].node
            )),
        "{metrics}"
    );
    let table = agents[follower]
        .home
        .agent()
        .arg("--config")
        .arg(agents[follower].home.config_path())
        .arg("status")
        .env("NO_COLOR", "1")
        .output()
        .expect("status");
    let first = String::from_utf8_lossy(&table.stdout);
    assert_eq!(
        first.lines().next(),
        Some(
            format!(
                "cluster: node {} is follower (leader: {})",
                agents[follower].node, agents[leader].node
            )
            .as_str()
        ),
        "{first}"
    );
    shared_url(&agents[follower]);
    std::thread::sleep(Duration::from_secs(1));
    let before = puts(&emulator);
    assert_eq!(before.len(), 1, "only the leader PUT: {before:?}");

    // kill -9 of the leader: another agent leads within TTL + 1 s.
    agents[leader].kill();
    let killed = Instant::now();
    let survivors: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let new_leader = util::eventually_every(
        Duration::from_millis(20),
        Duration::from_secs(10),
        "another agent leads",
        || {
            survivors
                .iter()
                .copied()
                .find(|&i| agents[i].role().as_deref() == Some("leader"))
                .ok_or_else(|| "no leader yet".to_owned())
        },
    );
    let takeover = killed.elapsed();
    eprintln!("takeover after kill -9 of the leader: {takeover:?}");
    assert!(
        takeover <= LEASE + Duration::from_secs(1),
        "took {takeover:?}; log:\n{}",
        agents[new_leader].log()
    );
    let other = survivors
        .into_iter()
        .find(|&i| i != new_leader)
        .expect("two survivors");
    util::eventually(
        Duration::from_secs(5),
        "the other follows the new leader",
        || {
            let doc = agents[other].try_status().ok_or("no status")?;
            match doc["cluster"]["leader"].as_str() {
                Some(name) if name == agents[new_leader].node => Ok(()),
                _ => Err(doc["cluster"].to_string()),
            }
        },
    );
    // Taking over sent nothing: the new leader had the old one's record from etcd.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(puts(&emulator).len(), 1, "a takeover alone PUTs nothing");

    // Sync continues on the new leader: a changed tag goes out once, with the same token.
    for &i in &[new_leader, other] {
        write(&agents[i], &etcd, &emulator, &job("tags = [\"two\"]"));
    }
    util::eventually(Duration::from_secs(15), "the new tag PUT", || {
        let all = puts(&emulator);
        match all.last() {
            Some(last) if last["tags"] == json!(["two"]) => Ok(()),
            _ => Err(format!("{all:?}")),
        }
    });
    std::thread::sleep(Duration::from_secs(2));
    let all = puts(&emulator);
    assert_eq!(all.len(), 2, "one PUT per change: {all:?}");
    // The new leader sends the token the old one learned (etcd gave it), so it never rotates,
    // and the period stays: the check's timer is not restarted by the handover.
    assert_eq!(all[1]["heartbeat"]["pingToken"], token_for("c1").as_str());
    assert_eq!(period_secs(&all[1]), period_secs(&before[0]));
    let check = emulator.heartbeat_check("c1").expect("c1");
    assert_eq!(check["tags"], json!(["two"]));
    let url = check["heartbeat"]["pingUrl"].as_str().unwrap_or_default();
    assert!(url.ends_with(&format!("/{}", token_for("c1"))), "{check}");
}

#[test]
fn a_period_change_waits_for_a_ping_accepted_on_a_follower_then_the_leader_sends_it() {
    let Some(etcd) = EtcdCluster::start(3) else {
        return;
    };
    let emulator = emulator();
    // Besides `j`, a job that fires every second: its claims are timed.
    let tick = "[[jobs]]\nname = \"tick\"\nschedule = \"* * * * * *\"\ncommand = [\"true\"]\n";
    let jobs = |check: &str| format!("{tick}\n{}", job(check));
    let (agents, leader) = cluster_of_three(&etcd, &emulator, &jobs("period = \"1d\""));
    first_put(&emulator);
    let follower = (leader + 1) % 3;
    shared_url(&agents[follower]);
    util::eventually(Duration::from_secs(10), "claims timed", || {
        let metrics = agents[follower].metrics();
        let count = metrics
            .lines()
            .find_map(|l| l.strip_prefix("heartbeat_agent_cluster_claim_seconds_count "))
            .and_then(|n| n.parse::<f64>().ok())
            .unwrap_or(0.0);
        (count >= 1.0
            && metrics.contains("heartbeat_agent_cluster_claim_seconds_bucket{le=\"+Inf\"}"))
        .then_some(())
        .ok_or(metrics)
    });
    // A new period on every agent: held by the leader (it would restart the service's timer
    // and hide a failure for up to a whole period), until an accepted ping of the check.
    for agent in &agents {
        write(agent, &etcd, &emulator, &jobs("period = \"2h\""));
    }
    util::eventually(
        Duration::from_secs(10),
        "the leader holds the change",
        || {
            let doc = agents[leader].try_status().ok_or("no status")?;
            let all = doc["jobs"].as_array().cloned().unwrap_or_default();
            let sync = all.iter().find(|j| j["name"] == "j").map(|j| &j["sync"]);
            sync.filter(|s| s["state"] == "pending" && s["last_attempt"].is_string())
                .map(|_| ())
                .ok_or_else(|| doc.to_string())
        },
    );
    std::thread::sleep(Duration::from_secs(2));
    let held = puts(&emulator);
    assert!(
        held.iter().all(|p| period_secs(p) == 86_400),
        "the period went out before any ping: {held:?}"
    );
    // The job runs on a follower; its ping is accepted there; the leader sends the period.
    let pings_before = emulator.pings().len();
    agents[follower].trigger("j", TOKEN);
    util::eventually(Duration::from_secs(15), "the new period PUT", || {
        let all = puts(&emulator);
        match all.last() {
            Some(last) if period_secs(last) == 7_200 => Ok(()),
            _ => Err(format!("{all:?}; leader log:\n{}", agents[leader].log())),
        }
    });
    let log = emulator.requests();
    let ping = log
        .iter()
        .filter(|r| r.listener == heartbeat_agent::emulator::Listener::Ping)
        .nth(pings_before)
        .expect("the follower's ping")
        .seq;
    let put = log
        .iter()
        .rfind(|r| r.method == "PUT")
        .expect("the period PUT")
        .seq;
    assert!(ping < put, "the period went out before the follower's ping");
    assert_eq!(
        emulator.pings().len(),
        pings_before + 1,
        "one run, on the follower only"
    );
    let all = puts(&emulator);
    assert_eq!(
        all.iter().filter(|p| period_secs(p) == 7_200).count(),
        1,
        "the new period sent once: {all:?}"
    );
}

#[test]
fn records_in_etcd_that_are_not_the_agents_are_warned_about_once_and_a_deleted_leader_key_is_retaken(
) {
    let Some(etcd) = EtcdCluster::start(3) else {
        return;
    };
    let emulator = emulator();
    let (agents, leader) = cluster_of_three(&etcd, &emulator, &job("tags = [\"one\"]"));
    let follower = (leader + 1) % 3;
    shared_url(&agents[follower]);
    for (key, value) in [
        ("sync-test/urls/j", "not json"),
        ("sync-test/accepted/j", "{"),
    ] {
        let put = etcd.etcdctl(&["put", key, value]);
        assert!(put.status.success(), "{put:?}");
    }
    // Several rounds of the relay (every half second with a 2 s lease).
    std::thread::sleep(Duration::from_secs(3));
    let warning = "a record in etcd is not what this agent writes there";
    let count = |log: &str, key: &str| {
        log.lines()
            .filter(|l| l.contains(warning) && l.contains(&format!("\"key\":\"{key}\"")))
            .count()
    };
    let follower_log = agents[follower].log();
    assert_eq!(
        count(&follower_log, "sync-test/urls/j"),
        1,
        "{follower_log}"
    );
    let leader_log = agents[leader].log();
    assert_eq!(
        count(&leader_log, "sync-test/accepted/j"),
        1,
        "{leader_log}"
    );
    // Nothing lost: the follower keeps the URL it had, the agents keep their roles, and no
    // log holds the ping token.
    shared_url(&agents[follower]);
    assert_eq!(agents[leader].role().as_deref(), Some("leader"));
    assert_eq!(agents[follower].role().as_deref(), Some("follower"));
    for agent in &agents {
        assert!(!agent.log().contains(&token_for("c1")), "{}", agent.log());
    }
    // The leader key deleted by hand: its holder stops leading, and one agent leads again.
    let deleted = etcd.etcdctl(&["del", "sync-test/leader"]);
    assert!(deleted.status.success(), "{deleted:?}");
    util::eventually(Duration::from_secs(5), "the old leader stops", || {
        agents[leader]
            .log()
            // "the leader key is gone: ..." or, when another agent took the key before the
            // old leader's next tick, "another agent holds the leader key: ...".
            .contains("this agent stops leading (no more sync)")
            .then_some(())
            .ok_or("not yet")
    });
    util::eventually(Duration::from_secs(10), "one leader again", || {
        let roles: Vec<Option<String>> = agents.iter().map(Agent::role).collect();
        let leaders = roles
            .iter()
            .filter(|r| r.as_deref() == Some("leader"))
            .count();
        (leaders == 1).then_some(()).ok_or(format!("{roles:?}"))
    });
}

#[test]
fn with_all_of_etcd_down_nobody_syncs_and_everything_resumes_when_it_is_back() {
    let Some(mut etcd) = EtcdCluster::start(3) else {
        return;
    };
    let emulator = emulator();
    let (mut agents, _) = cluster_of_three(&etcd, &emulator, &job("tags = [\"one\"]"));
    first_put(&emulator);
    for i in 0..3 {
        etcd.stop(i);
    }
    util::eventually(Duration::from_secs(10), "every agent unavailable", || {
        let roles: Vec<Option<String>> = agents.iter().map(Agent::role).collect();
        roles
            .iter()
            .all(|r| r.as_deref() == Some("unavailable"))
            .then_some(())
            .ok_or_else(|| format!("{roles:?}"))
    });
    let metrics = agents[0].metrics();
    assert!(
        metrics.contains("heartbeat_agent_cluster_role{role=\"unavailable\"} 1"),
        "{metrics}"
    );
    let doc = agents[0].try_status().expect("status");
    assert!(
        doc["cluster"]["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("127.0.0.1")),
        "the error names the endpoint: {doc}"
    );
    // A change while nobody leads is not sent by anyone.
    for agent in &agents {
        write(agent, &etcd, &emulator, &job("tags = [\"two\"]"));
    }
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(puts(&emulator).len(), 1, "nobody syncs while etcd is down");
    // etcd back: one agent leads again without a restart, and sends the change once.
    for i in 0..3 {
        etcd.start_member(i);
    }
    util::eventually(
        Duration::from_secs(20),
        "the change sent after etcd is back",
        || {
            let all = puts(&emulator);
            match all.last() {
                Some(last) if last["tags"] == json!(["two"]) => Ok(()),
                _ => Err(format!(
                    "{all:?}; roles {:?}; log of a:\n{}",
                    agents.iter().map(Agent::role).collect::<Vec<_>>(),
                    agents[0].log()
                )),
            }
        },
    );
    let leaders = agents
        .iter()
        .filter(|a| a.role().as_deref() == Some("leader"))
        .count();
    assert_eq!(leaders, 1);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(puts(&emulator).len(), 2, "{:?}", puts(&emulator));
    for agent in &mut agents {
        assert!(
            agent.alive() && agent.try_status().is_some(),
            "still running"
        );
    }
}

/// The lease `key` is bound to (etcdctl's JSON), `None` when the key is absent.
pub(super) fn lease_of(etcd: &EtcdCluster, key: &str) -> Option<i64> {
    let out = etcd.etcdctl(&["get", key, "-w", "json"]);
    assert!(out.status.success(), "{out:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("etcdctl JSON");
    doc["kvs"][0]["lease"].as_i64()
}

#[test]
fn the_leader_key_and_the_presence_share_one_lease_which_sigterm_revokes() {
    let Some(etcd) = EtcdCluster::start(3) else {
        return;
    };
    let emulator = emulator();
    let (mut agents, leader) = cluster_of_three(&etcd, &emulator, &job("tags = [\"one\"]"));
    let node = agents[leader].node.clone();
    let presence = format!("sync-test/nodes/{node}");
    let bound = lease_of(&etcd, "sync-test/leader");
    assert!(bound.is_some(), "the leader key is bound to a lease");
    assert_eq!(bound, lease_of(&etcd, &presence), "one lease per agent");
    // SIGTERM: the lease is revoked at shutdown, its keys go with it before the agent exits.
    agents[leader].terminate();
    let log = agents[leader].log();
    assert!(log.contains("cluster lease revoked at shutdown"), "{log}");
    assert_eq!(
        lease_of(&etcd, &presence),
        None,
        "presence after the revoke"
    );
    let out = etcd.etcdctl(&["get", "sync-test/leader", "--print-value-only"]);
    let holder = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert_ne!(holder, node, "the leader key after the revoke");
    let survivors: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    util::eventually(Duration::from_secs(5), "another agent leads", || {
        survivors
            .iter()
            .find(|&&i| agents[i].role().as_deref() == Some("leader"))
            .map(drop)
            .ok_or("no leader yet")
    });
}

#[test]
fn in_a_cluster_only_the_leader_creates_the_check_and_every_agent_pings_it() {
    let Some(etcd) = EtcdCluster::start(3) else {
        return;
    };
    let emulator = Background::start();
    let jobs = "[[jobs]]\nname = \"tick\"\nschedule = \"* * * * * *\"\nrun_on = \"all\"\n\
                command = [\"true\"]\n[jobs.check]\ncreate = true\nperiod = \"1m\"\n";
    let (agents, _leader) = cluster_of_three(&etcd, &emulator, jobs);
    // The scope is the cluster: one tag, one check for the three agents.
    let tag = "heartbeat-agent:sync-test/tick";
    util::eventually(
        Duration::from_secs(20),
        "every agent pings the created check",
        || {
            let posts = emulator
                .requests()
                .iter()
                .filter(|r| r.method == "POST" && r.path == "/v1/checks/heartbeat")
                .count();
            let state: Vec<String> = agents
                .iter()
                .map(|a| std::fs::read_to_string(a.home.state_dir().join("sync/tick.json")))
                .collect::<Result<_, _>>()
                .map_err(|e| format!("{posts} POSTs; a record is missing: {e}"))?;
            let ids: Vec<Value> = state
                .iter()
                .map(|text| serde_json::from_str::<Value>(text).expect("JSON")["checkId"].clone())
                .collect();
            if posts != 1 || ids.iter().any(|id| id != &ids[0]) {
                return Err(format!("{posts} POSTs, ids {ids:?}"));
            }
            let check = emulator
                .heartbeat_check(ids[0].as_str().expect("an id"))
                .ok_or_else(|| "the check is gone".to_owned())?;
            if !check["tags"]
                .as_array()
                .expect("tags")
                .iter()
                .any(|t| t == tag)
            {
                return Err(format!("not tagged {tag}: {check}"));
            }
            // Every agent's own runs ping it (run_on = "all"), and its status shows the id.
            for agent in &agents {
                let doc = agent.try_status().ok_or_else(|| "no status".to_owned())?;
                let job = &doc["jobs"][0];
                if job["check_id"] != ids[0] || job["last_ping"]["result"] != "accepted" {
                    return Err(format!("{}: {job}", agent.node));
                }
            }
            Ok(())
        },
    );
}
