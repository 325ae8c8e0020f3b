//! One state, one word: the same jobs, in each state a run and a check can be in, read through
//! every view the daemon has (`/status`, the `status` table, the dashboard's rows as a reader
//! sees them, the metrics parsed, `history`) tell each state with the same word
//! (docs/status.md, "States"). The demo and `status` tell the same words of one daemon in
//! `demo::demo_names_its_directory_and_serves_the_status_it_tells_to_try`.

use std::time::Duration;

use crate::util::Home;

use super::dashboard::cell_text;
use super::{
    emulator_with_check, get, job, listen_with_token, parse_metrics, sample, status_doc, table_row,
    StatusHome,
};

/// Each job, triggered once (its schedule is yearly), and the words its run and its check get.
const JOBS: [(&str, &str, &str); 5] = [
    ("good", "success", "in_sync"),
    ("bad", "failed (exit 3)", "-"),
    ("slow", "timed_out", "-"),
    ("killed", "signaled (signal 9)", "-"),
    ("gone", "never", "missing"),
];

#[test]
fn every_view_tells_each_state_with_the_same_word() {
    let emulator = emulator_with_check();
    let key = emulator.api_key().to_owned();
    let home = Home::new();
    let yearly = "schedule = \"0 0 1 1 *\"";
    let jobs = format!(
        "[[jobs]]\nname = \"good\"\n{yearly}\nshell = \"true\"\ncheck_id = \"c1\"\n\
         [jobs.check]\nperiod = \"1d\"\n\n\
         [[jobs]]\nname = \"bad\"\n{yearly}\nshell = \"exit 3\"\n\n\
         [[jobs]]\nname = \"slow\"\n{yearly}\ntimeout = \"1s\"\ncommand = [\"sleep\", \"30\"]\n\n\
         [[jobs]]\nname = \"killed\"\n{yearly}\nshell = \"kill -9 $$\"\n\n\
         [[jobs]]\nname = \"gone\"\n{yearly}\nshell = \"true\"\ncheck_id = \"no-such-check\"\n"
    );
    home.write(Some(&emulator), &listen_with_token(&home), &jobs);
    let daemon = home.daemon(&key);
    let endpoint = home.endpoint();
    for (name, _, _) in &JOBS[..4] {
        let out = home.output(&["trigger", name], &key);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
    let doc = daemon.until("every state reached", Duration::from_secs(20), || {
        let doc = status_doc(&endpoint, true);
        let ran = JOBS[..4]
            .iter()
            .all(|(name, _, _)| job(&doc, name)["last_run"].is_object());
        let good = job(&doc, "good");
        let settled = ran
            && JOBS
                .iter()
                .all(|(name, _, _)| job(&doc, name)["running"] == 0)
            && good["sync"]["state"] == "in_sync"
            && good["remote"]["state"] == "available"
            && job(&doc, "gone")["missing"].is_object();
        settled.then_some(doc)
    });
    let table = home.output(&["status"], &key);
    let page = get(&endpoint, "/").body;
    let history = home.output(&["history", "--limit", "1"], &key);
    let history = String::from_utf8_lossy(&history.stdout).into_owned();
    for (name, run, check) in JOBS {
        let shown = job(&doc, name);
        let cells = table_row(&table, name);
        // /status: the check's word is `sync.state`; the run's is its outcome's.
        let state = shown["sync"]["state"].as_str().unwrap_or("-");
        assert_eq!(state, check, "/status of {name}: {shown}");
        let outcome = shown["last_run"]["outcome"].as_str().unwrap_or("never");
        assert!(run.starts_with(outcome), "{name}: {outcome} is not {run}");
        // The table, after the last run's age.
        assert_eq!(cells[5], check, "the table's SYNC of {name}: {cells:?}");
        let last = cells[2]
            .split_once(" ago ")
            .map_or(cells[2].as_str(), |(_, w)| w);
        assert_eq!(last, run, "the table's LAST RUN of {name}: {cells:?}");
        // The dashboard, as a reader sees the row.
        assert_eq!(cell_text(&page, name, "sync"), check, "dashboard: {name}");
        assert_eq!(cell_text(&page, name, "last run"), run, "dashboard: {name}");
        let service = cell_text(&page, name, "check");
        assert_eq!(
            service.split(' ').next(),
            cells[6].split(' ').next(),
            "the service's state of {name}: {service} / {cells:?}"
        );
        // `history`: the job's newest run, after its mark.
        if run != "never" {
            let result = &crate::util::table_row(&history, name)[3];
            assert_eq!(
                result.split_once(' ').map(|(_, w)| w),
                Some(run),
                "{history}"
            );
        }
    }
    assert_eq!(table_row(&table, "good")[6].split(' ').next(), Some("up"));
    assert_eq!(table_row(&table, "gone")[6], "missing");
    // A job bound to no check has a word of its own, not `unknown` (a check not read).
    assert_eq!(table_row(&table, "bad")[6], "no_check");
    assert_eq!(cell_text(&page, "bad", "check"), "no_check");
    // The metrics count each check state as /status tells it.
    let metrics = parse_metrics(&get(&endpoint, "/metrics").body);
    for state in ["in_sync", "pending", "failed", "missing", "owned_by_other"] {
        let told = JOBS.iter().filter(|(_, _, check)| *check == state).count();
        assert_eq!(
            sample(&metrics, "heartbeat_agent_sync_jobs", &[("state", state)]),
            Some(told as f64),
            "heartbeat_agent_sync_jobs{{state=\"{state}\"}}"
        );
    }
    assert_eq!(
        sample(&metrics, "heartbeat_agent_checks_missing", &[]),
        Some(1.0)
    );
    drop(daemon);
}
