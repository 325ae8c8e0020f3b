//! Twenty `kill -9` of the daemon at random moments while jobs run every second: every run
//! that ended well before a kill is in the history, nothing is there that did not run, and
//! each restart reads the history without a crash; and a `kill -9` while the ping host hangs
//! loses no run that had ended (its ping `pending`).

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::Value;

use super::{agent, history_json, runs};
use crate::util::daemon::Daemon;
use crate::util::http::{FakeServer, Mode};
use crate::util::Home;

const JOBS: [&str; 3] = ["a", "b", "c"];

fn time(line: &Value) -> DateTime<Utc> {
    line["timestamp"]
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .expect("a timestamp")
        .with_timezone(&Utc)
}

#[test]
fn history_survives_twenty_kill_9_of_the_daemon_at_random_moments() {
    let home = Home::new();
    let mut text = format!(
        "[agent]\nstate_dir = \"{}\"\nhistory = 1000\n\n",
        home.path("state").display()
    );
    for job in JOBS {
        text.push_str(&format!(
            "[[jobs]]\nname = \"{job}\"\nschedule = \"* * * * * *\"\n\
             command = [\"sh\", \"-c\", \"echo {job} ran\"]\n\n"
        ));
    }
    home.write_config(&text);
    // A cheap, reproducible spread of kill moments between 0.3 s and 1.5 s.
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut finished_before_kill: HashMap<String, usize> = HashMap::new();
    let mut finished_at_all: HashMap<String, usize> = HashMap::new();
    for cycle in 0..20 {
        let daemon = Daemon::on(&home).start();
        daemon.wait_for(1, Duration::from_secs(10), |l| {
            l["message"] == "daemon started"
        });
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(300 + seed % 1200));
        let killed = Utc::now();
        let log = daemon.log().clone();
        let mut daemon = daemon;
        daemon.signal(nix::sys::signal::Signal::SIGKILL);
        daemon.exit_within(Duration::from_secs(5));
        assert!(
            !log.text().contains("panicked"),
            "cycle {cycle}: the daemon panicked:\n{}",
            log.text()
        );
        for line in log.lines() {
            if line["message"] != "job finished" {
                continue;
            }
            let job = line["job"].as_str().expect("job").to_owned();
            *finished_at_all.entry(job.clone()).or_default() += 1;
            // The run is recorded right after this line (no ping): 200 ms is plenty.
            if time(&line) + TimeDelta::milliseconds(200) <= killed {
                *finished_before_kill.entry(job).or_default() += 1;
            }
        }
    }
    let doc = history_json(&home, &["--limit", "1000"]);
    for job in doc["jobs"].as_array().expect("jobs") {
        let name = job["job"].as_str().expect("job");
        let list = runs(job);
        let kept = list.len();
        let (before, all) = (
            finished_before_kill.get(name).copied().unwrap_or(0),
            finished_at_all.get(name).copied().unwrap_or(0),
        );
        assert!(
            kept >= before && kept <= all,
            "job {name}: {kept} runs in the history, {before} ended well before a kill, {all} ended at all"
        );
        let seqs: Vec<u64> = list
            .iter()
            .map(|r| r["seq"].as_u64().expect("seq"))
            .collect();
        assert!(
            seqs.windows(2).all(|w| w[0] > w[1]),
            "job {name}: numbers go down: {seqs:?}"
        );
        assert!(
            list.iter()
                .all(|r| r["output_tail"] == format!("{name} ran\n")),
            "job {name}: {job}"
        );
    }
    assert!(
        finished_before_kill.values().sum::<usize>() >= 20,
        "too few runs to tell: {finished_before_kill:?}"
    );
}

/// The run ids of the runs that ended (`job finished`) at least `before` ahead of `killed`.
fn ended_before(log: &[Value], killed: DateTime<Utc>, before: TimeDelta) -> Vec<String> {
    log.iter()
        .filter(|l| l["message"] == "job finished" && time(l) + before <= killed)
        .map(|l| l["run_id"].as_str().expect("run_id").to_owned())
        .collect()
}

#[test]
fn a_kill_9_while_the_ping_host_hangs_loses_no_run_that_had_ended() {
    let home = Home::new();
    // Takes every ping and never answers: each run's ping waits out the 30 s budget.
    let host = FakeServer::start(Mode::Hang);
    home.write_config(&format!(
        "[agent]\nstate_dir = \"{}\"\n\n[[jobs]]\nname = \"a\"\nschedule = \"* * * * * *\"\n\
         command = [\"sh\", \"-c\", \"echo a ran\"]\nping_url = \"{}\"\n",
        home.path("state").display(),
        host.url("/ping/hang-token-1234567890"),
    ));
    let daemon = Daemon::on(&home).start();
    daemon.wait_for(5, Duration::from_secs(30), |l| {
        l["message"] == "job finished"
    });
    std::thread::sleep(Duration::from_millis(3200));
    let killed = Utc::now();
    let log = daemon.log().clone();
    let mut daemon = daemon;
    daemon.signal(nix::sys::signal::Signal::SIGKILL);
    daemon.exit_within(Duration::from_secs(5));
    let ended = ended_before(&log.lines(), killed, TimeDelta::seconds(3));
    assert!(ended.len() >= 5, "too few runs to tell: {ended:?}");
    assert!(
        host.requests().len() >= ended.len(),
        "every ended run's ping reached the hanging host: {} pings",
        host.requests().len()
    );
    let doc = history_json(&home, &["a", "--limit", "1000"]);
    let kept: HashMap<&str, &Value> = runs(&doc)
        .iter()
        .map(|r| (r["run_id"].as_str().expect("run_id"), r))
        .collect();
    let lost: Vec<&String> = ended
        .iter()
        .filter(|id| !kept.contains_key(id.as_str()))
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} runs that ended 3 s before the kill are missing: {doc}",
        lost.len(),
        ended.len()
    );
    for id in &ended {
        let run = kept[id.as_str()];
        assert_eq!(
            (&run["ping"], &run["ping_pending"], &run["output_tail"]),
            (&Value::Null, &Value::Bool(true), &Value::from("a ran\n")),
            "a run whose ping never came back: {run}"
        );
    }
    let out = agent(&home, &["history", "a", "--limit", "1000"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.lines().filter(|l| l.contains("pending")).count() >= ended.len(),
        "PING reads `pending`: {table}"
    );
}
