//! Twenty `kill -9` of the daemon at random moments while jobs run every second: every run
//! that ended well before a kill is in the history, nothing is there that did not run, and
//! each restart reads the history without a crash.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::Value;

use super::{history_json, runs};
use crate::util::daemon::Daemon;
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
