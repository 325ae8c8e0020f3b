//! A job with `retries` in the real daemon: a command failing twice (a counter file) then
//! succeeding is one run of three attempts, still running through its waits (a trigger during
//! them is refused by the overlap rule), pinged once after the last attempt; `/status`, the
//! `status` table, `/metrics` and the log show the attempts.

use super::*;
use crate::util::{flaky_script as flaky, runs_counted as count};

#[test]
fn a_run_retried_twice_is_one_run_of_three_attempts_pinged_once() {
    let emulator = emulator_with_check();
    let home = Home::new();
    let counter = home.path("counter");
    let ping = format!(
        "{}/c1000000-0000-4000-8000-0000000000c1",
        emulator.ping_url()
    );
    let jobs = format!(
        "[[jobs]]\nname = \"flaky\"\nschedule = \"0 0 1 1 *\"\nshell = \"{}\"\n\
         ping_url = \"{ping}\"\nretries = 2\nretry_delay = \"1s\"\nretry_delay_max = \"2s\"\n",
        flaky(&counter, 3)
    );
    home.write(None, &listen_with_token(&home), &jobs);
    let daemon = home.daemon("");
    let endpoint = home.endpoint();
    let started = home.output(&["trigger", "flaky"], "");
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    daemon.until("the first attempt failed", Duration::from_secs(5), || {
        (count(&counter) == 1).then_some(())
    });
    // Waiting before its retry, the run is still running: a second fire is refused.
    let busy = home.output(&["trigger", "flaky"], "");
    assert_eq!(
        busy.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&busy.stderr)
    );
    assert!(String::from_utf8_lossy(&busy.stderr).contains("HTTP 409"));
    assert_eq!(job(&status_doc(&endpoint, false), "flaky")["running"], 1);
    assert!(
        emulator.pings().is_empty(),
        "no ping before the last attempt"
    );
    let doc = daemon.until("the run ended", Duration::from_secs(10), || {
        let doc = status_doc(&endpoint, false);
        (job(&doc, "flaky")["runs"] == 1).then_some(doc)
    });
    let run = &job(&doc, "flaky")["last_run"];
    assert_eq!(run["outcome"], "success", "{run}");
    assert_eq!(run["attempts"], 3, "{run}");
    assert_eq!(run["output_tail"], "attempt 3\n", "{run}");
    assert_eq!(count(&counter), 3);
    // The run spans its attempts and their waits (at least 0.5 s + 1 s).
    assert!(
        run["duration_ms"].as_u64().is_some_and(|ms| ms >= 1_500),
        "{run}"
    );
    let pinged = daemon.until("the ping arrived", Duration::from_secs(5), || {
        let pings = emulator.pings();
        (!pings.is_empty()).then_some(pings)
    });
    assert_eq!(pinged.len(), 1, "{pinged:?}");
    let table = home.output(&["status"], "");
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("success after 3 attempts"), "{table}");
    let body = get(&endpoint, "/metrics").body;
    let samples = parse_metrics(&body);
    let flaky = [("job", "flaky")];
    assert_eq!(
        sample(&samples, "heartbeat_agent_job_attempts_total", &flaky),
        Some(3.0),
        "{body}"
    );
    assert_eq!(
        sample(&samples, "heartbeat_agent_job_last_run_attempts", &flaky),
        Some(3.0)
    );
    let success = [("job", "flaky"), ("outcome", "success")];
    assert_eq!(
        sample(&samples, "heartbeat_agent_runs_total", &success),
        Some(1.0)
    );
    let failed = [("job", "flaky"), ("outcome", "failed")];
    assert_eq!(
        sample(&samples, "heartbeat_agent_runs_total", &failed),
        Some(0.0)
    );
    promtool(&body);
    // The log: each attempt's line carries its number, each retry its wait.
    let log = daemon.text();
    let lines: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let with = |message: &str| -> Vec<&Value> {
        lines
            .iter()
            .filter(|l| {
                l["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(message))
            })
            .collect()
    };
    let retrying = with("attempt failed; retrying");
    assert_eq!(retrying.len(), 2, "{log}");
    assert_eq!(
        (
            retrying[0]["attempt"].as_u64(),
            retrying[0]["attempts"].as_u64()
        ),
        (Some(1), Some(3))
    );
    assert!(
        retrying[1]["wait_ms"]
            .as_u64()
            .is_some_and(|ms| (1_000..=2_000).contains(&ms)),
        "{log}"
    );
    let failed = with("job failed");
    assert_eq!(failed.len(), 2, "{log}");
    let finished = with("job finished");
    assert_eq!(finished.len(), 1, "{log}");
    assert_eq!(finished[0]["attempt"], 3, "{log}");
}
