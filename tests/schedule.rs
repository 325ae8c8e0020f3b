//! Integration tests for `schedule`: the output format and exit codes of the real binary.

use std::process::Output;

use crate::util::Home;

fn schedule(args: &[&str]) -> Output {
    let home = Home::new();
    home.agent().arg("schedule").args(args).output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

#[test]
fn prints_fire_times_with_the_zone_offset() {
    let out = schedule(&[
        "30 2 * * *",
        "--tz",
        "Europe/Berlin",
        "--from",
        "2026-03-28T12:00:00Z",
        "--count",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "2026-03-29T03:00:00+02:00\n2026-03-30T02:30:00+02:00\n2026-03-31T02:30:00+02:00\n"
    );
}

#[test]
fn defaults_to_five_times_in_utc_after_now() {
    let before = chrono::Utc::now();
    let out = schedule(&["* * * * * *"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let times: Vec<_> = stdout(&out)
        .lines()
        .map(|line| {
            assert!(line.ends_with("+00:00"), "{line}");
            chrono::DateTime::parse_from_rfc3339(line).unwrap()
        })
        .collect();
    assert_eq!(times.len(), 5);
    assert!(times[0] > before);
    assert!(times.windows(2).all(|w| (w[1] - w[0]).num_seconds() == 1));
}

#[test]
fn weekdays_skip_the_weekend() {
    let out = schedule(&[
        "0 9 * * Mon-Fri",
        "--from",
        "2026-03-27T10:00:00+00:00",
        "--count",
        "1",
    ]);
    assert_eq!(stdout(&out), "2026-03-30T09:00:00+00:00\n");
}

#[test]
fn bad_input_exits_2_with_a_message() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["0 25 * * *"],
            "heartbeat-agent: invalid schedule \"0 25 * * *\": hour field \"25\": value 25 out of range 0-23\n",
        ),
        (
            &["0 * * *"],
            "heartbeat-agent: invalid schedule \"0 * * *\": expected 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds, found 4\n",
        ),
        (
            &["@daily", "--tz", "Mars/Olympus"],
            "heartbeat-agent: unknown time zone \"Mars/Olympus\" in --tz: expected an IANA name such as UTC, Europe/Berlin or America/New_York\n",
        ),
        (
            &["@daily", "--from", "yesterday"],
            "heartbeat-agent: invalid --from \"yesterday\": expected an RFC 3339 time with an offset, such as 2026-03-29T00:00:00+01:00 or 2026-03-28T23:00:00Z\n",
        ),
        (
            &["@daily", "--from", "2026-03-29T00:00:00"],
            "heartbeat-agent: invalid --from \"2026-03-29T00:00:00\": expected an RFC 3339 time with an offset, such as 2026-03-29T00:00:00+01:00 or 2026-03-28T23:00:00Z\n",
        ),
        (
            &["@fortnightly"],
            "heartbeat-agent: invalid schedule \"@fortnightly\": unknown macro \"@fortnightly\"; expected one of @reboot, @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every DURATION\n",
        ),
    ];
    for (args, want) in cases {
        let out = schedule(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(stderr(&out), *want, "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn every_lists_the_epoch_grid_written_in_the_zone() {
    let out = schedule(&[
        "@every 90s",
        "--tz",
        "Europe/Berlin",
        "--from",
        "2026-11-26T08:00:00Z",
        "--count",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "2026-11-26T09:01:30+01:00\n2026-11-26T09:03:00+01:00\n2026-11-26T09:04:30+01:00\n"
    );
    // The same instants in another zone: only how they are written changes.
    let out = schedule(&[
        "@every 90s",
        "--tz",
        "UTC",
        "--from",
        "2026-11-26T08:00:00Z",
        "--count",
        "1",
    ]);
    assert_eq!(stdout(&out), "2026-11-26T08:01:30+00:00\n");
    let out = schedule(&["@every 0s"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with(
            "heartbeat-agent: invalid schedule \"@every 0s\": an interval of 0s never comes \
             round; @every takes one duration in whole seconds from 1s to 365d"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn reboot_explains_itself_and_prints_no_times() {
    let out = schedule(&["@reboot"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    assert!(
        stderr(&out).contains("runs once per boot"),
        "{}",
        stderr(&out)
    );
}

/// Without `--tz`, the schedule is read in the zone `TZ` names (as cron reads it), else UTC;
/// `--tz` wins; a `TZ` that names no zone is refused with what to do.
#[test]
fn without_tz_flag_the_zone_comes_from_tz_else_utc() {
    let home = Home::new();
    let run = |tz: Option<&str>, extra: &[&str]| {
        let mut cmd = home.agent();
        cmd.args([
            "schedule",
            "@daily",
            "--from",
            "2026-01-01T00:00:00Z",
            "--count",
            "1",
        ]);
        cmd.args(extra);
        if let Some(tz) = tz {
            cmd.env("TZ", tz);
        }
        cmd.output().unwrap()
    };
    let utc = run(None, &[]);
    assert_eq!(
        stdout(&utc),
        "2026-01-02T00:00:00+00:00\n",
        "{}",
        stderr(&utc)
    );
    for tz in [
        "America/New_York",
        ":America/New_York",
        "/usr/share/zoneinfo/America/New_York",
    ] {
        let out = run(Some(tz), &[]);
        assert_eq!(
            stdout(&out),
            "2026-01-01T00:00:00-05:00\n",
            "TZ={tz}: {}",
            stderr(&out)
        );
    }
    let flag = run(Some("America/New_York"), &["--tz", "Asia/Tokyo"]);
    assert_eq!(stdout(&flag), "2026-01-02T00:00:00+09:00\n");
    let bad = run(Some("EST5EDT,M3.2.0,M11.1.0"), &[]);
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(stdout(&bad), "");
    assert_eq!(
        stderr(&bad),
        "heartbeat-agent: TZ=\"EST5EDT,M3.2.0,M11.1.0\" in the environment is not an IANA time \
         zone name (such as Europe/Berlin or UTC; POSIX rules such as CET-1CEST are not read): \
         pass --tz ZONE, or fix or unset TZ\n"
    );
}
