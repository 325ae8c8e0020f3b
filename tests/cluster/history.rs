//! One history for the cluster (docs/history.md, "In a cluster"), on real etcd: two agents
//! share a job due every second; `history` and `GET /jobs/{name}/runs` on either node list
//! both nodes' runs, each with its node, newest first, each once (and so do a's `status` strip
//! and dashboard page); a stopped node's runs stay
//! listed; with etcd down `history` answers with the node's own runs and says why; and a job
//! keeps at most its bound of keys per node in etcd however many runs it had.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use serde_json::Value;

use super::agents::{out_dir, Agent, JobShape, Setup};
use crate::util::emulator::Background;
use crate::util::etcd::EtcdCluster;

/// Agents a and b of cluster `name` on `etcd`, sharing `jobs` jobs (`j0`, ...) of `shape`.
fn two_agents(
    etcd: &EtcdCluster,
    name: &str,
    jobs: usize,
    shape: JobShape,
    out: &std::path::Path,
    emulator: &Background,
) -> (Agent, Agent) {
    let setup = Setup {
        cluster: format!(
            "{}\nname = \"{name}\"\nlease = \"5s\"",
            etcd.endpoints_toml()
        ),
        jobs,
        shape,
        out,
        emulator,
    };
    let a = Agent::start(&setup, "a", &[]).terminate_on_drop();
    let b = Agent::start(&setup, "b", &[]).terminate_on_drop();
    (a, b)
}

/// How many runs each node wrote to job `j0`'s output file.
fn written(out: &std::path::Path) -> BTreeMap<String, usize> {
    written_by(out, "j0")
}

/// How many runs each node wrote to `job`'s output file.
fn written_by(out: &std::path::Path, job: &str) -> BTreeMap<String, usize> {
    let text = std::fs::read_to_string(out.join(job)).unwrap_or_default();
    let mut by_node = BTreeMap::new();
    for line in text.lines() {
        let node = line.split(' ').next().unwrap_or_default().to_owned();
        *by_node.entry(node).or_default() += 1;
    }
    by_node
}

/// Waits until nodes a and b each wrote at least `n` runs of every job of `jobs`.
fn wait_for_runs(out: &std::path::Path, jobs: &[String], n: usize, within: Duration) {
    crate::util::eventually_every(
        Duration::from_millis(200),
        within,
        &format!("{n} runs of every job on each node"),
        || {
            let short: Vec<(&String, BTreeMap<String, usize>)> = jobs
                .iter()
                .map(|job| (job, written_by(out, job)))
                .filter(|(_, by_node)| {
                    ["a", "b"]
                        .iter()
                        .any(|node| by_node.get(*node).copied().unwrap_or(0) < n)
                })
                .collect();
            if short.is_empty() {
                Ok(())
            } else {
                Err(format!("short: {short:?}"))
            }
        },
    );
}

/// The run keys of cluster `name` in etcd, counted per (job, node).
fn keys_per_job_and_node(etcd: &EtcdCluster, name: &str) -> BTreeMap<(String, String), usize> {
    let prefix = format!("{name}/runs/");
    let listed = etcd.etcdctl(&["get", "--prefix", "--keys-only", &prefix]);
    let mut per = BTreeMap::new();
    for key in String::from_utf8_lossy(&listed.stdout).lines() {
        let parts: Vec<&str> = key.split('/').collect();
        if let [_, _, job, node, ..] = parts[..] {
            *per.entry((job.to_owned(), node.to_owned())).or_default() += 1;
        }
    }
    per
}

/// `history j0 --json --limit 100` on `agent` (its config): exit code, the JSON, stderr.
fn history(agent: &Agent) -> (Option<i32>, Value, String) {
    let out = agent
        .home
        .agent()
        .arg("--config")
        .arg(agent.home.config_path())
        .args(["history", "j0", "--json", "--limit", "100"])
        .output()
        .expect("run history");
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code(),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The runs of a `{"job", "runs"}` answer.
fn runs(answer: &Value) -> Vec<Value> {
    answer["runs"].as_array().cloned().unwrap_or_default()
}

/// Checks that `runs` are newest (by end) first, each with its node, none twice.
fn each_once_newest_first(runs: &[Value], from: &str) {
    let mut ids = HashSet::new();
    for pair in runs.windows(2) {
        assert!(
            pair[0]["ended"].as_str() >= pair[1]["ended"].as_str(),
            "{from}: not newest first: {} before {}",
            pair[0]["ended"],
            pair[1]["ended"]
        );
    }
    for run in runs {
        let id = run["run_id"].as_str().expect("a run id").to_owned();
        assert!(ids.insert(id.clone()), "{from}: run {id} listed twice");
        assert!(
            run["node"].is_string(),
            "{from}: a run without its node: {run}"
        );
    }
}

/// The runs of `node` among `runs`.
fn of_node<'r>(runs: &'r [Value], node: &str) -> Vec<&'r Value> {
    runs.iter().filter(|r| r["node"] == node).collect()
}

#[test]
fn history_and_the_runs_route_of_either_node_list_both_nodes_runs_also_after_one_stopped() {
    let Some(etcd) = EtcdCluster::start(1) else {
        return;
    };
    let emulator = Background::start();
    let (_dir, out) = out_dir();
    let (a, mut b) = two_agents(&etcd, "hist", 1, JobShape::EVERY_SECOND, &out, &emulator);
    wait_for_runs(&out, &["j0".to_owned()], 3, Duration::from_secs(40));
    // `history` on node a lists b's runs too (read from etcd), each once, newest first.
    let listed = crate::util::eventually_every(
        Duration::from_millis(300),
        Duration::from_secs(10),
        "node a's history to list runs of both nodes",
        || {
            let (code, json, stderr) = history(&a);
            let runs = runs(&json);
            let (on_a, on_b) = (of_node(&runs, "a").len(), of_node(&runs, "b").len());
            if code == Some(0) && on_a >= 3 && on_b >= 3 {
                Ok(runs)
            } else {
                Err(format!(
                    "exit {code:?}, {on_a} of a, {on_b} of b; stderr: {stderr}"
                ))
            }
        },
    );
    each_once_newest_first(&listed, "history on a");
    // The table names the node of each run.
    let table = a
        .home
        .agent()
        .arg("--config")
        .arg(a.home.config_path())
        .args(["history", "j0"])
        .output()
        .expect("run history");
    let table = String::from_utf8_lossy(&table.stdout).into_owned();
    let header = table.lines().next().unwrap_or_default();
    assert!(header.contains("NODE"), "{table}");
    assert!(
        table
            .lines()
            .skip(1)
            .any(|l| l.split_whitespace().any(|w| w == "b")),
        "{table}"
    );
    // `GET /jobs/j0/runs` on either node: both nodes' runs, newest first, each once.
    for agent in [&a, &b] {
        let answer = crate::util::eventually_every(
            Duration::from_millis(300),
            Duration::from_secs(10),
            "the runs route to list runs of both nodes",
            || {
                let (status, body) = agent.get("/jobs/j0/runs").ok_or("no answer".to_owned())?;
                let json: Value =
                    serde_json::from_str(&body).map_err(|e| format!("{status}: {e}: {body}"))?;
                let runs = runs(&json);
                if status == 200
                    && !of_node(&runs, "a").is_empty()
                    && !of_node(&runs, "b").is_empty()
                {
                    Ok(runs)
                } else {
                    Err(format!("{status}: {body:.300}"))
                }
            },
        );
        each_once_newest_first(&answer, &format!("/jobs/j0/runs of {}", agent.node));
    }
    // The `status` strip of a counts both nodes' runs (a's alone would be about half), and
    // a's dashboard page of the job names node b.
    let total: usize = written(&out).values().sum();
    crate::util::eventually_every(
        Duration::from_millis(300),
        Duration::from_secs(10),
        "a's status strip to hold both nodes' runs",
        || {
            let recent = a.status()["jobs"][0]["recent"]
                .as_array()
                .map_or(0, Vec::len);
            if recent >= total.min(20) {
                Ok(())
            } else {
                Err(format!("{recent} of {total}"))
            }
        },
    );
    let (status, page) = a.get("/jobs/j0").expect("a's dashboard answers");
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains(">b<"),
        "no run of node b on a's page of the job:\n{page}"
    );
    // Node b stops: every run it recorded is still listed on a (but those that ended in the
    // last seconds before the stop, which its shutdown may not have copied).
    let stopped = chrono::Utc::now() - chrono::TimeDelta::seconds(3);
    b.terminate();
    let (_, json, _) = history(&b);
    let ended_before = |r: &&Value| {
        let ended = r["ended"].as_str().unwrap_or_default();
        chrono::DateTime::parse_from_rfc3339(ended).is_ok_and(|e| e < stopped)
    };
    let own_b = runs(&json);
    let of_b: HashSet<String> = of_node(&own_b, "b")
        .into_iter()
        .filter(ended_before)
        .chain(of_node(&listed, "b"))
        .map(|r| r["run_id"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(of_b.len() >= 3, "b's own history: {json}");
    crate::util::eventually_every(
        Duration::from_millis(300),
        Duration::from_secs(10),
        "every run of the stopped node b in a's history",
        || {
            let (_, json, _) = history(&a);
            let listed: HashSet<String> = runs(&json)
                .iter()
                .filter_map(|r| r["run_id"].as_str().map(str::to_owned))
                .collect();
            let missing: Vec<&String> = of_b.difference(&listed).collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!("missing {missing:?}"))
            }
        },
    );
}

#[test]
fn with_etcd_down_history_shows_the_nodes_own_runs_and_says_the_cluster_part_is_unavailable() {
    let Some(mut etcd) = EtcdCluster::start(1) else {
        return;
    };
    let emulator = Background::start();
    let (_dir, out) = out_dir();
    let (a, _b) = two_agents(&etcd, "down", 1, JobShape::EVERY_SECOND, &out, &emulator);
    // Two runs of a in its history (they are recorded when they end), read while etcd is up.
    let ids_of_a = |json: &Value| -> HashSet<String> {
        of_node(&runs(json), "a")
            .iter()
            .filter_map(|r| r["run_id"].as_str().map(str::to_owned))
            .collect()
    };
    let before = crate::util::eventually_every(
        Duration::from_millis(300),
        Duration::from_secs(40),
        "two runs of node a in its history",
        || {
            let (_, json, stderr) = history(&a);
            let ids = ids_of_a(&json);
            if ids.len() >= 2 {
                Ok(ids)
            } else {
                Err(format!("{json}; stderr: {stderr}"))
            }
        },
    );
    etcd.stop(0);
    let started = std::time::Instant::now();
    let (code, json, stderr) = history(&a);
    assert_eq!(code, Some(0), "history with etcd down: {stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "history waited {:?} for a down etcd",
        started.elapsed()
    );
    assert!(
        stderr.contains("the runs of the cluster's other nodes cannot be read from etcd")
            && stderr.contains("only this node's runs are shown"),
        "{stderr}"
    );
    assert!(json["cluster_unavailable"].is_string(), "{json}");
    let shown = ids_of_a(&json);
    let missing: Vec<&String> = before.difference(&shown).collect();
    assert!(
        missing.is_empty(),
        "a's own runs {missing:?} not shown: {json}"
    );
    // The daemon's route says it too, once its read of etcd failed, and still answers at once.
    crate::util::eventually_every(
        Duration::from_millis(300),
        Duration::from_secs(20),
        "the runs route to say the cluster part is unavailable",
        || {
            let asked = std::time::Instant::now();
            let (status, body) = a.get("/jobs/j0/runs").ok_or("no answer")?;
            let json: Value = serde_json::from_str(&body).map_err(|_| "not JSON")?;
            assert!(
                asked.elapsed() < Duration::from_secs(2),
                "the route waited for etcd"
            );
            if status == 200
                && json["cluster_unavailable"].is_string()
                && !of_node(&runs(&json), "a").is_empty()
            {
                Ok(())
            } else {
                Err(format!("{status}: {body:.300}"))
            }
        },
    );
}

#[test]
fn a_jobs_keys_in_etcd_stay_at_its_bound_per_node_however_many_runs() {
    let Some(etcd) = EtcdCluster::start(1) else {
        return;
    };
    let emulator = Background::start();
    let (_dir, out) = out_dir();
    let shape = JobShape {
        extra: "history = 3",
        ..JobShape::EVERY_SECOND
    };
    let (_a, _b) = two_agents(&etcd, "bound", 1, shape, &out, &emulator);
    wait_for_runs(&out, &["j0".to_owned()], 6, Duration::from_secs(60));
    // Each node keeps its last 3 runs of the job: 3 keys per node, whatever ran since.
    crate::util::eventually_every(
        Duration::from_millis(300),
        Duration::from_secs(10),
        "3 keys per node under bound/runs/j0/",
        || {
            let per = keys_per_job_and_node(&etcd, "bound");
            let expected = BTreeMap::from([
                (("j0".to_owned(), "a".to_owned()), 3),
                (("j0".to_owned(), "b".to_owned()), 3),
            ]);
            if per == expected {
                Ok(())
            } else {
                Err(format!("{per:?}"))
            }
        },
    );
}

/// Twenty jobs due in the same second on two agents: their runs are copied in batches (one
/// transaction for the runs that wait together, a run and its pings put once); every job still
/// keeps exactly its bound of keys per node that ran it at least that often, and the jobs'
/// histories on a list b's runs.
#[test]
fn runs_ending_together_are_copied_in_batches_within_each_jobs_bound() {
    let Some(etcd) = EtcdCluster::start(1) else {
        return;
    };
    let emulator = Background::start();
    let (_dir, out) = out_dir();
    let shape = JobShape {
        extra: "history = 3",
        ..JobShape::EVERY_SECOND
    };
    let (a, _b) = two_agents(&etcd, "burst", 20, shape, &out, &emulator);
    let jobs: Vec<String> = (0..20).map(|j| format!("j{j}")).collect();
    wait_for_runs(&out, &jobs, 3, Duration::from_secs(60));
    crate::util::eventually_every(
        Duration::from_millis(500),
        Duration::from_secs(15),
        "3 keys per job and node",
        || {
            let per = keys_per_job_and_node(&etcd, "burst");
            let wrong: Vec<_> = jobs
                .iter()
                .flat_map(|job| ["a", "b"].map(|node| (job.clone(), node.to_owned())))
                .filter(|k| per.get(k).copied() != Some(3))
                .collect();
            if wrong.is_empty() && per.len() == 40 {
                Ok(())
            } else {
                Err(format!("{per:?}"))
            }
        },
    );
    let out = a
        .home
        .agent()
        .arg("--config")
        .arg(a.home.config_path())
        .args(["history", "--json"])
        .output()
        .expect("run history");
    let json: Value = serde_json::from_slice(&out.stdout).expect("history JSON");
    // Each job shows its newest 3 runs of the cluster: b's among them for most jobs (all 3 of
    // a job are a's one time in 8 when the nodes win fires alike).
    let with_b = json["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .filter(|job| !of_node(&runs(job), "b").is_empty())
        .count();
    assert!(
        with_b >= 10,
        "{with_b} of 20 jobs list a run of b on a: {json:.2000}"
    );
}
