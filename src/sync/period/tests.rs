//! Tests of period derivation: steady and irregular schedules, DST, leap years, explicit values.

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::*;
use crate::config::Config;
use crate::schedule::cadence;

const HOUR: u64 = 3_600;

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

/// The first job of a config holding `job` (lines of a `[[jobs]]` table with a check id).
fn job(lines: &str) -> Job {
    let text = format!("[[jobs]]\nname = \"j\"\ncheck_id = \"c1\"\n{lines}\n");
    let loaded = Config::from_text(Path::new("/test.toml"), &text).unwrap();
    (*loaded.config.jobs[0]).clone()
}

fn timing_at(job: &Job, now: &str, acked: Option<&str>) -> Timing {
    let now = at(now);
    let cadence = cadence(&job.schedule, job.timezone, now);
    timing(job, cadence.as_ref(), now, acked.map(at)).unwrap()
}

#[test]
fn every_five_minutes_is_a_five_minute_period() {
    let job = job("schedule = \"*/5 * * * *\"\ntimezone = \"Europe/Berlin\"");
    let t = timing_at(&job, "2026-03-29T00:30:00Z", None);
    assert_eq!(t.period, Duration::from_secs(300));
    // margin: a tenth of the period, at least a minute.
    assert_eq!(t.grace, Duration::from_secs(60));
}

#[test]
fn an_every_schedule_is_a_period_of_its_interval_in_any_zone_and_on_dst_days() {
    for (expr, period, grace) in [
        ("@every 90s", 90, 60),
        ("@every 1h30m", 5_400, 540),
        ("@every 1d", 86_400, HOUR),
    ] {
        let job = job(&format!(
            "schedule = \"{expr}\"\ntimezone = \"Europe/Berlin\""
        ));
        for now in [
            "2026-03-29T00:30:00Z",
            "2026-10-25T00:30:00Z",
            "2026-11-26T08:00:00Z",
        ] {
            let t = timing_at(&job, now, None);
            // No DST slack: a fixed interval is the same in real time on every day.
            assert_eq!(
                (t.period, t.grace),
                (Duration::from_secs(period), Duration::from_secs(grace)),
                "{expr} at {now}"
            );
        }
    }
}

#[test]
fn daily_in_berlin_keeps_one_day_across_both_dst_changes() {
    let job = job("schedule = \"@daily\"\ntimezone = \"Europe/Berlin\"");
    let cad = cadence(&job.schedule, job.timezone, at("2026-03-01T00:00:00Z")).unwrap();
    assert_eq!(cad.shortest, Duration::from_secs(23 * HOUR));
    assert_eq!(cad.longest, Duration::from_secs(25 * HOUR));
    assert_eq!(cad.dst_shift, Duration::from_secs(HOUR));
    for now in [
        "2026-03-27T12:00:00Z",
        "2026-03-28T23:30:00Z", // after the last 24 h day's midnight, before the 23 h one
        "2026-03-29T12:00:00Z",
        "2026-10-24T23:30:00Z", // the 25 h day
        "2026-10-25T12:00:00Z",
        "2026-10-26T12:00:00Z",
    ] {
        let t = timing_at(&job, now, None);
        assert_eq!(t.period, Duration::from_secs(86_400), "at {now}");
        // one hour of margin plus the one hour the autumn day is longer.
        assert_eq!(t.grace, Duration::from_secs(2 * HOUR), "at {now}");
    }
    // No false alarm: every real gap around both changes is within period + grace - margin.
    let t = timing_at(&job, "2026-03-27T12:00:00Z", None);
    for from in ["2026-03-26T00:00:00Z", "2026-10-23T00:00:00Z"] {
        let fires: Vec<_> = job
            .schedule
            .fire_times(at(from), job.timezone)
            .take(5)
            .collect();
        for pair in fires.windows(2) {
            let gap = (pair[1] - pair[0]).to_std().unwrap();
            assert!(
                gap + Duration::from_secs(HOUR) <= t.period + t.grace,
                "gap {gap:?}"
            );
        }
    }
}

#[test]
fn weekdays_get_three_days_on_friday_and_one_day_back_after_mondays_ping() {
    let job = job("schedule = \"0 9 * * 1-5\"");
    let day = Duration::from_secs(86_400);
    // Thursday after its run: one day.
    assert_eq!(timing_at(&job, "2026-11-19T10:00:00Z", None).period, day);
    // Friday's fire: three days at once (a longer period can never fail the check).
    let friday = timing_at(&job, "2026-11-20T09:00:00Z", None);
    assert_eq!(friday.period, 3 * day);
    assert_eq!(
        timing_at(&job, "2026-11-22T12:00:00Z", None).period,
        3 * day
    );
    // Monday's fire: still three days until Monday's ping is accepted ...
    let monday = "2026-11-23T09:00:30Z";
    assert_eq!(
        timing_at(&job, monday, Some("2026-11-20T09:00:00Z")).period,
        3 * day
    );
    // ... then one day.
    assert_eq!(
        timing_at(&job, monday, Some("2026-11-23T09:00:00Z")).period,
        day
    );
    // Without news of Monday's ping, Tuesday's fire brings it back to one day.
    assert_eq!(timing_at(&job, "2026-11-24T09:00:01Z", None).period, day);
}

#[test]
fn twice_a_day_alternates_between_the_two_gaps() {
    let job = job("schedule = \"0 9,17 * * *\"");
    let evening = timing_at(&job, "2026-11-20T17:00:05Z", Some("2026-11-20T17:00:00Z"));
    assert_eq!(evening.period, Duration::from_secs(16 * HOUR));
    let morning = timing_at(&job, "2026-11-21T09:00:05Z", Some("2026-11-21T09:00:00Z"));
    assert_eq!(morning.period, Duration::from_secs(8 * HOUR));
    let unacked = timing_at(&job, "2026-11-21T09:00:05Z", Some("2026-11-20T17:00:00Z"));
    assert_eq!(unacked.period, Duration::from_secs(16 * HOUR));
}

#[test]
fn yearly_across_a_leap_day_is_clamped_with_the_rest_in_grace() {
    let job = job("schedule = \"@yearly\"");
    let t = timing_at(&job, "2028-06-01T00:00:00Z", None);
    assert_eq!(t.period, MAX_PERIOD);
    // 366 days: one day over the limit goes into grace, with the one-hour margin.
    assert_eq!(t.grace, Duration::from_secs(86_400 + HOUR));
}

#[test]
fn explicit_period_and_grace_are_sent_as_given() {
    let job = job("schedule = \"0 9 * * 1-5\"\n[jobs.check]\nperiod = \"2d\"\ngrace = \"90s\"");
    let t = timing_at(&job, "2026-11-20T09:00:00Z", None);
    assert_eq!(t.period, Duration::from_secs(2 * 86_400));
    assert_eq!(t.grace, Duration::from_secs(90));
}

#[test]
fn auto_grace_adds_timeout_and_jitter_to_the_margin() {
    let job = job("schedule = \"0 3 * * *\"\ntimeout = \"2h\"\njitter = \"90s\"");
    let t = timing_at(&job, "2026-11-20T09:00:00Z", None);
    // 2 h + 90 s + 1 h margin, rounded up to a minute.
    assert_eq!(t.grace, Duration::from_secs(3 * HOUR + 120));
}

#[test]
fn auto_grace_covers_every_retry_at_its_timeout_and_capped_wait() {
    let job = job("schedule = \"0 3 * * *\"\ntimeout = \"10m\"\nretries = 3\n\
         retry_delay = \"1m\"\nretry_delay_max = \"3m\"");
    let t = timing_at(&job, "2026-11-20T09:00:00Z", None);
    // 4 attempts × 10 m + waits of 1 + 2 + 3 m + 1 h margin.
    assert_eq!(t.grace, Duration::from_secs(40 * 60 + 6 * 60 + HOUR));
    let without = job_without_retries(&job);
    let t = timing_at(&without, "2026-11-20T09:00:00Z", None);
    assert_eq!(t.grace, Duration::from_secs(10 * 60 + HOUR));
}

fn job_without_retries(job: &Job) -> Job {
    Job {
        retries: crate::retries::Retries::default(),
        ..job.clone()
    }
}

#[test]
fn short_irregular_schedules_keep_their_longest_gap() {
    let job = job("schedule = \"0,10 * * * * *\"");
    let t = timing_at(&job, "2026-11-20T09:00:00Z", None);
    assert_eq!(t.period, Duration::from_secs(50));
}
