//! The daemon's runs in the history: newest first, bounded, served by `GET /jobs/{name}/runs`
//! and `history` alike, read as a table; the `status` strip; a removed job's history.

use std::time::Duration;

use heartbeat_agent::status::client::Endpoint;
use serde_json::Value;

use super::{agent, history_json, runs, table};
use crate::util::daemon::Daemon;
use crate::util::Home;

const KEY: &str = "hb-history-secret-key-0123456789";

/// A config with a passing job (keeping 3 runs), a failing one that prints the API key, and
/// one that times out; the status endpoint on a unix socket.
fn write_config(home: &Home) -> Endpoint {
    let socket = home.path("status.sock");
    home.write_config(&format!(
        "[agent]\nstate_dir = \"{state}\"\nshutdown_timeout = \"2s\"\n\n\
         [api]\napi_key_env = \"HB_KEY\"\n\n\
         [status]\nlisten = \"{socket}\"\n\n\
         [[jobs]]\nname = \"fine\"\nschedule = \"* * * * * *\"\nhistory = 3\n\
         command = [\"sh\", \"-c\", \"echo all good\"]\n\n\
         [[jobs]]\nname = \"broken\"\nschedule = \"* * * * * *\"\n\
         command = [\"sh\", \"-c\", \"echo key is $HB_LEAK; echo oops >&2; exit 3\"]\n\
         env = {{ HB_LEAK = \"{KEY}\" }}\n\n\
         [[jobs]]\nname = \"slow\"\nschedule = \"*/2 * * * * *\"\ntimeout = \"300ms\"\n\
         command = [\"sleep\", \"5\"]\n",
        state = home.path("state").display(),
        socket = socket.display(),
    ));
    Endpoint::Unix(socket)
}

fn get(endpoint: &Endpoint, path: &str) -> (u16, String) {
    let answer = endpoint
        .request("GET", path, None, Duration::from_secs(10))
        .expect("request");
    (answer.status, answer.body)
}

fn runs_of(endpoint: &Endpoint, path: &str) -> Value {
    let (status, body) = get(endpoint, path);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).expect("JSON")
}

#[test]
fn a_daemons_runs_are_kept_bounded_newest_first_and_read_alike_by_every_reader() {
    let home = Home::new();
    let endpoint = write_config(&home);
    let daemon = Daemon::on(&home)
        .env("HB_KEY", KEY)
        .terminate_on_drop()
        .start();
    daemon.until(
        "five runs of fine, two of broken and one of slow",
        Duration::from_secs(30),
        || {
            let body = |path: &str| {
                endpoint
                    .request("GET", path, None, Duration::from_secs(10))
                    .map(|a| a.body)
                    .unwrap_or_default()
            };
            let count = |job: &str| {
                body(&format!("/jobs/{job}/runs?limit=100"))
                    .matches("\"seq\"")
                    .count()
            };
            // The newest run kept (its `seq`), not `/status`'s count: a run is counted when
            // it ends and reaches the history a moment later, from a writer thread.
            let fine = serde_json::from_str::<Value>(&body("/jobs/fine/runs?limit=1"))
                .ok()
                .and_then(|doc| doc["runs"][0]["seq"].as_u64())
                .unwrap_or(0);
            (fine >= 5 && count("broken") >= 2 && count("slow") >= 1).then_some(())
        },
    );

    // The endpoint: at most the job's `history`, newest first; `limit`; errors.
    let fine = runs_of(&endpoint, "/jobs/fine/runs");
    assert_eq!(fine["job"], "fine");
    let list = runs(&fine);
    assert_eq!(list.len(), 3, "history = 3 keeps three runs: {fine}");
    let seqs: Vec<u64> = list
        .iter()
        .map(|r| r["seq"].as_u64().expect("seq"))
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[0] == w[1] + 1),
        "newest first: {seqs:?}"
    );
    assert!(seqs[0] >= 5, "runs are numbered from 1: {seqs:?}");
    assert_eq!(list[0]["outcome"], "success");
    assert_eq!(list[0]["output_tail"], "all good\n");
    assert_eq!(list[0]["ping"], Value::Null, "no ping configured");
    assert_eq!(
        runs(&runs_of(&endpoint, "/jobs/fine/runs?limit=1")).len(),
        1
    );
    let (status, body) = get(&endpoint, "/jobs/fine/runs?limit=many");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("limit must be a whole number"), "{body}");
    let (status, body) = get(&endpoint, "/jobs/nope/runs");
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("no job named \\\"nope\\\""), "{body}");

    let broken = runs_of(&endpoint, "/jobs/broken/runs");
    let first = &runs(&broken)[0];
    assert_eq!(
        (first["outcome"].as_str(), first["exit_code"].as_i64()),
        (Some("failed"), Some(3))
    );
    let tail = first["output_tail"].as_str().expect("tail");
    assert!(
        tail.contains("oops") && tail.contains("[redacted]"),
        "{tail}"
    );
    let slow = runs_of(&endpoint, "/jobs/slow/runs");
    assert_eq!(runs(&slow)[0]["outcome"], "timed_out", "{slow}");
    assert_eq!(runs(&slow)[0]["timed_out"], true);

    // `history --json` reads the same files: the same runs (the daemon may have run more).
    let files = history_json(&home, &["broken"]);
    assert_eq!(files["job"], "broken");
    assert_eq!(runs(&files)[0]["exit_code"], 3);
    let all = history_json(&home, &[]);
    let names: Vec<&str> = all["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| j["job"].as_str().expect("job"))
        .collect();
    assert_eq!(names, ["fine", "broken", "slow"]);
    // And through the endpoint.
    let socket = home.path("status.sock");
    let via = history_json(&home, &["--url", socket.to_str().expect("utf-8"), "broken"]);
    assert_eq!(runs(&via)[0]["exit_code"], 3);

    // No reader shows the key.
    for text in [
        get(&endpoint, "/jobs/broken/runs").1,
        files.to_string(),
        String::from_utf8_lossy(&agent(&home, &["history"]).stdout).into_owned(),
    ] {
        assert!(!text.contains(KEY), "the API key leaked: {text}");
    }

    // The table, read as a person reads it: one timeline, newest first.
    let out = agent(&home, &["history", "--ascii", "--limit", "2"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let rows = table(&text);
    assert_eq!(
        rows[0],
        ["JOB", "STARTED", "DURATION", "RESULT", "PING", "OUTPUT"],
        "{text}"
    );
    let row = |job: &str| {
        rows.iter()
            .find(|r| r[0] == job)
            .unwrap_or_else(|| panic!("a row of {job}: {text}"))
    };
    assert_eq!(row("broken")[3], "x failed (exit 3)", "{text}");
    // The last line of its output: stdout and stderr are read apart, either may come last.
    assert!(
        ["oops", "key is [redacted]"].contains(&row("broken")[5].as_str()),
        "{text}"
    );
    assert_eq!(row("slow")[3], "x timed_out", "{text}");
    assert_eq!(row("fine")[3], "+ success", "{text}");
    assert_eq!(rows.len(), 1 + 6, "two runs per job: {text}");
    let started: Vec<&str> = rows[1..].iter().map(|r| r[1].as_str()).collect();
    assert!(
        started.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {text}"
    );
    let failed =
        String::from_utf8_lossy(&agent(&home, &["history", "--failed"]).stdout).into_owned();
    assert!(
        !failed.contains("success") && failed.contains("exit 3"),
        "{failed}"
    );
    let later = agent(&home, &["history", "--since", "2999-01-01"]);
    assert_eq!(String::from_utf8_lossy(&later.stdout), "no runs recorded\n");

    // `status`: the RECENT strip, in ASCII without a UTF-8 locale, with marks in one.
    let status = |locale: &str| {
        let out = home
            .agent()
            .arg("--config")
            .arg(home.config_path())
            .arg("status")
            .env("LC_ALL", locale)
            .env("NO_COLOR", "1")
            .output()
            .expect("status");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let text = status("C");
    let rows = table(&text);
    assert_eq!(rows[0][3], "RECENT", "{text}");
    let strip = |rows: &[Vec<String>], job: &str| {
        rows.iter()
            .find(|r| r[0] == job)
            .map(|r| r[3].clone())
            .unwrap_or_else(|| panic!("{job}'s row: {text}"))
    };
    let broken = strip(&rows, "broken");
    assert!(
        broken.len() >= 2 && broken.chars().all(|c| c == 'x'),
        "{text}"
    );
    let fine = strip(&rows, "fine");
    assert!(fine.len() >= 5 && fine.chars().all(|c| c == '+'), "{text}");
    let text = status("C.UTF-8");
    let broken = strip(&table(&text), "broken");
    assert!(
        !broken.is_empty() && broken.chars().all(|c| c == '✗'),
        "{text}"
    );
}

#[test]
fn a_removed_jobs_history_goes_at_the_first_start_after_history_keep_removed() {
    let home = Home::new();
    let state = home.path("state");
    let config = |jobs: &[&str], keep: &str| {
        let mut text = format!(
            "[agent]\nstate_dir = \"{}\"\nshutdown_timeout = \"2s\"\n{keep}\n",
            state.display()
        );
        for job in jobs {
            text.push_str(&format!(
                "[[jobs]]\nname = \"{job}\"\nschedule = \"@daily\"\ncommand = [\"true\"]\n\n"
            ));
        }
        home.write_config(&text);
    };
    config(&["kept", "gone"], "");
    for job in ["kept", "gone"] {
        let out = agent(&home, &["run", "--job", job, "--", "true"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let dir = |job: &str| state.join("history").join(job);
    assert!(dir("gone").join("runs.jsonl").is_file());
    // Removed from the config: kept for 7 days by default.
    config(&["kept"], "");
    let restart = || {
        let daemon = Daemon::on(&home).start();
        daemon.wait_for(1, Duration::from_secs(10), |l| {
            l["message"] == "daemon started"
        });
        daemon.stop()
    };
    restart();
    assert!(dir("gone").is_dir(), "removed before its keep time");
    std::thread::sleep(Duration::from_millis(1200));
    config(&["kept"], "history_keep_removed = \"1s\"");
    let log = restart();
    assert!(!dir("gone").exists(), "still there after its keep time");
    assert!(dir("kept").is_dir());
    assert!(
        log.iter().any(|l| l["message"]
            .as_str()
            .is_some_and(|m| m.contains("removed the history"))
            && l["job"] == "gone"),
        "the removal is logged: {log:?}"
    );
}

/// A burst's history is written after its last process started: 400 jobs due at one second
/// begin their runs together, but their spawns take the spawner threads a while, and the
/// history's writer (whose first append of a job creates its directory and files) must not
/// compete with them (docs/dev/profiles/profile-burst.md). Each job's first record is the
/// file's modification time; each child's start is what it wrote.
#[test]
fn a_bursts_history_is_written_after_its_last_process_started() {
    const JOBS: usize = 400;
    let home = Home::new();
    let state = home.path("state");
    let starts = home.path("starts");
    std::fs::write(&starts, "").unwrap();
    // Due at a whole second a few seconds ahead, in UTC (a fire due before the daemon is up
    // would not run: the margin is for a loaded machine).
    let due = chrono::Utc::now() + chrono::Duration::seconds(7);
    let schedule = due.format("%S %M %H * * *").to_string();
    let mut config = format!(
        "[agent]\nstate_dir = \"{}\"\ntimezone = \"UTC\"\nshutdown_timeout = \"5s\"\n\n",
        state.display()
    );
    for i in 0..JOBS {
        config.push_str(&format!(
            "[[jobs]]\nname = \"job-{i:04}\"\nschedule = \"{schedule}\"\n\
             shell = \"date +%s.%N >> {}\"\n\n",
            starts.display()
        ));
    }
    home.write_config(&config);
    let daemon = Daemon::on(&home).terminate_on_drop().start();
    let history = |i: usize| {
        state
            .join("history")
            .join(format!("job-{i:04}"))
            .join("runs.jsonl")
    };
    daemon.until(
        "every job ran and is in the history",
        Duration::from_secs(60),
        || (0..JOBS).all(|i| history(i).is_file()).then_some(()),
    );
    let started: Vec<f64> = std::fs::read_to_string(&starts)
        .unwrap()
        .split_whitespace()
        .map(|t| t.parse().unwrap())
        .collect();
    assert_eq!(started.len(), JOBS, "one start per job");
    let last_start = started.iter().copied().fold(f64::MIN, f64::max);
    let written: Vec<f64> = (0..JOBS)
        .map(|i| {
            let modified = std::fs::metadata(history(i)).unwrap().modified().unwrap();
            modified
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64()
        })
        .collect();
    let early = written.iter().filter(|&&w| w < last_start).count();
    let first = written.iter().copied().fold(f64::MAX, f64::min);
    let spread = last_start - started.iter().copied().fold(f64::MAX, f64::min);
    // A spawn may stall past the writer's 100 ms of quiet on a loaded machine: a few records
    // may slip in, not the burst's (0 in three runs; 28, the first 463 ms before the last
    // start, when the writer counted only the runs' beginnings).
    assert!(
        early <= JOBS / 40,
        "{early} of {JOBS} histories written before the last process started (the first \
         {:.0} ms before it; the starts spread over {:.0} ms)",
        (last_start - first) * 1000.0,
        spread * 1000.0
    );
}
