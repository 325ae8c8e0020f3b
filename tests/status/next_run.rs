//! `next_run` in `/status` is when the next run really starts: the schedule's fire plus the
//! job's stable jitter (a delay in `[0, jitter)` fixed by the host and the job's name).

use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};

use super::{job, status_doc, StatusHome};
use crate::util::Home;

fn time(value: &serde_json::Value) -> DateTime<Utc> {
    value
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .unwrap_or_else(|| panic!("an RFC 3339 time: {value}"))
        .with_timezone(&Utc)
}

#[test]
fn next_run_includes_the_jobs_stable_jitter_and_the_run_starts_then() {
    let home = Home::new();
    home.write(
        None,
        &format!("listen = \"{}\"", home.socket().display()),
        "[[jobs]]\nname = \"spread\"\nschedule = \"*/10 * * * * *\"\njitter = \"8s\"\n\
         command = [\"true\"]\n",
    );
    let daemon = home.daemon("unused");
    let endpoint = home.endpoint();
    let doc = status_doc(&endpoint, false);
    let next_run = time(&job(&doc, "spread")["next_run"]);
    // The jitter (under 8 s) is less than the 10 s between fires: the fire is the 10 s
    // boundary before next_run, and next_run is that fire plus this job's delay.
    let fire = next_run
        .duration_trunc(TimeDelta::seconds(10))
        .expect("a time rounds to 10 s");
    let delay = next_run - fire;
    assert!(
        delay > TimeDelta::zero() && delay < TimeDelta::seconds(8),
        "next_run {next_run} is not a fire of */10 s plus a jitter under 8 s"
    );
    // The run of that fire starts at next_run, not at the bare fire time.
    let run = daemon.until(
        "the run of the announced fire",
        Duration::from_secs(25),
        || {
            let doc = status_doc(&endpoint, false);
            let run = job(&doc, "spread")["last_run"].clone();
            (run.is_object() && time(&run["scheduled"]) >= fire).then_some(run)
        },
    );
    assert_eq!(time(&run["scheduled"]), fire, "{run}");
    let started = time(&run["started"]);
    assert!(
        started >= next_run - TimeDelta::milliseconds(50)
            && started < next_run + TimeDelta::milliseconds(1500),
        "announced {next_run}, started {started}"
    );
}
