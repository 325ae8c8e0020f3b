//! `@every` schedules in a running daemon: fires on the epoch's grid plus the job's stable
//! jitter, whatever the job's zone; a run longer than the interval follows `overlap`.

use super::*;

/// The Unix time in milliseconds of an RFC 3339 field of a log line.
fn millis_of(line: &Value, field: &str) -> i64 {
    let text = line[field].as_str().unwrap_or_default();
    chrono::DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|e| panic!("{field} of {line}: {e}"))
        .timestamp_millis()
}

#[test]
fn every_two_seconds_fires_on_the_epoch_grid_plus_the_stable_jitter() {
    let home = Home::new();
    // A zone with a 45-minute offset: it must not move the grid.
    home.write_jobs(
        r#"
[[jobs]]
name = "tick"
schedule = "@every 2s"
timezone = "Asia/Kathmandu"
jitter = "1s"
command = ["true"]
"#,
    );
    let daemon = home.start();
    let started = daemon.wait_for(3, 10 * SECOND, |l| is(l, "job started", "tick"));
    daemon.stop();
    let scheduled: Vec<i64> = started.iter().map(|l| millis_of(l, "scheduled")).collect();
    for fire in &scheduled {
        assert_eq!(fire % 2_000, 0, "a fire off the 2 s grid: {scheduled:?}");
    }
    assert!(
        scheduled.windows(2).all(|w| w[1] - w[0] == 2_000),
        "fires not 2 s apart: {scheduled:?}"
    );
    // Each run starts the same jitter (under 1 s) after its fire, plus a little latency.
    let delays: Vec<i64> = started
        .iter()
        .map(|l| millis_of(l, "spawned") - millis_of(l, "scheduled"))
        .collect();
    let (low, high) = (delays.iter().min(), delays.iter().max());
    let (Some(&low), Some(&high)) = (low, high) else {
        panic!("no delays");
    };
    assert!(high - low < 300, "the jitter is not stable: {delays:?}");
    assert!(
        (0..1_300).contains(&low),
        "a start outside fire + [0, 1s) jitter: {delays:?}"
    );
}

#[test]
fn an_every_run_longer_than_its_interval_follows_overlap() {
    let home = Home::new();
    home.write_jobs(
        r#"
[[jobs]]
name = "slow"
schedule = "@every 1s"
overlap = "skip"
command = ["sleep", "2.5"]
"#,
    );
    let daemon = home.start();
    let skipped = daemon.wait_for(2, 6 * SECOND, |l| is(l, "run skipped", "slow"));
    assert_eq!(skipped[0]["skipped"], true);
    assert_eq!(
        daemon.count(|l| is(l, "job started", "slow")),
        1,
        "{}",
        daemon.text()
    );
    daemon.stop();
}
