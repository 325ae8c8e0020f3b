//! `@every` schedules: fires on the epoch's grid of whole multiples of the interval, the same
//! in every zone and whenever asked, a cadence without DST slack, and the interval's one rule
//! (whole seconds from 1 s to 365 days) with its messages.
//!
//! Their own file because `@every` is a second kind of schedule beside the crontab(5)
//! expressions whose table and oracle fill `tests.rs`; the helpers (`zone`, `instant`, `fires`)
//! are that file's.

use super::*;

#[test]
fn every_fires_on_the_epoch_grid_in_any_zone() {
    // 08:00:00Z is a multiple of 90 s since the epoch; of 420 s it is not (the grid of
    // `@every 7m` is the epoch's, not the hour's: 08:03, 08:10, 08:17).
    // A fraction of a second past a fire is after it; the fire itself is not strictly after.
    let cases: [(&str, &str, &[&str]); 5] = [
        (
            "@every 90s",
            "2026-11-26T08:00:00Z",
            &["08:01:30", "08:03:00", "08:04:30"],
        ),
        (
            "@every 7m",
            "2026-11-26T08:00:00Z",
            &["08:03:00", "08:10:00", "08:17:00"],
        ),
        ("@every 90s", "2026-11-26T08:01:29.999Z", &["08:01:30"]),
        ("@every 90s", "2026-11-26T08:01:30Z", &["08:03:00"]),
        (
            "@every 1s",
            "2026-11-26T08:01:30.5Z",
            &["08:01:31", "08:01:32"],
        ),
    ];
    for (expr, from, times) in cases {
        let want: Vec<String> = times
            .iter()
            .map(|t| format!("2026-11-26T{t}+00:00"))
            .collect();
        assert_eq!(
            fires(expr, "UTC", from, times.len()),
            want,
            "{expr} after {from}"
        );
    }
    // The zone changes how a fire is written, never which instant it is, DST day or not: the
    // hour repeated in Berlin on 2026-10-25 has its fires twice, an hour apart in real time.
    for (expr, from) in [
        ("@every 1h", "2026-10-24T23:30:00Z"),
        ("@every 1d", "2026-03-27T12:00:00Z"),
        ("@every 1h30m", "2026-03-29T00:00:00Z"),
    ] {
        let s = Schedule::parse(expr).unwrap();
        let utc: Vec<_> = s.fire_times(instant(from), Zone::UTC).take(50).collect();
        for tz in ["Europe/Berlin", "America/New_York", "Asia/Kolkata"] {
            let zoned: Vec<_> = s.fire_times(instant(from), zone(tz)).take(50).collect();
            assert_eq!(zoned, utc, "{expr} in {tz}");
        }
        assert!(utc
            .windows(2)
            .all(|w| Some((w[1] - w[0]).to_std().unwrap()) == s.every()));
    }
    assert_eq!(
        fires("@every 1h", "Europe/Berlin", "2026-10-24T23:30:00Z", 3),
        [
            "2026-10-25T02:00:00+02:00",
            "2026-10-25T02:00:00+01:00",
            "2026-10-25T03:00:00+01:00"
        ]
    );
    // `@every 1d` fires at 00:00 UTC, which is 19:00 or 20:00 the day before in New York.
    assert_eq!(
        fires("@every 1d", "America/New_York", "2026-10-31T00:00:00Z", 2),
        ["2026-10-31T20:00:00-04:00", "2026-11-01T19:00:00-05:00"]
    );
}

#[test]
fn every_does_not_depend_on_when_it_is_asked() {
    // A restart at any moment finds the same grid: the next fire after any instant within a
    // gap is the gap's end, and the fire before it the gap's start.
    let s = Schedule::parse("@every 5m").unwrap();
    let start = instant("2026-11-26T08:05:00Z");
    let end = instant("2026-11-26T08:10:00Z");
    for ms in [0, 1, 999, 1_000, 150_000, 299_999] {
        let at = start + TimeDelta::milliseconds(ms);
        assert_eq!(s.next_after(at, Zone::UTC), Some(end), "{at}");
        if ms > 0 {
            assert_eq!(s.prev_before(at, Zone::UTC), Some(start), "{at}");
        }
    }
    assert_eq!(
        s.prev_before(start, Zone::UTC),
        Some(instant("2026-11-26T08:00:00Z"))
    );
    // Before the epoch too (a clock set far back), the grid holds.
    assert_eq!(
        s.next_after(instant("1969-12-31T23:58:00Z"), Zone::UTC),
        Some(instant("1970-01-01T00:00:00Z"))
    );
    assert!(!s.is_fixed_time() && !s.is_reboot() && !s.has_seconds());
    assert_eq!(s.every(), Some(std::time::Duration::from_secs(300)));
    assert_eq!(Schedule::parse("@hourly").unwrap().every(), None);
}

#[test]
fn every_cadence_is_its_interval_without_dst_slack() {
    let s = Schedule::parse("@every 90s").unwrap();
    let seen = cadence(&s, zone("Europe/Berlin"), instant("2026-03-25T12:00:00Z")).unwrap();
    let interval = std::time::Duration::from_secs(90);
    assert_eq!(
        (seen.shortest, seen.typical, seen.longest, seen.dst_shift),
        (interval, interval, interval, std::time::Duration::ZERO)
    );
    assert_eq!(seen.steady(), Some((interval, std::time::Duration::ZERO)));
    let year = Schedule::parse("@every 365d").unwrap();
    assert_eq!(
        long_gap(&year, Zone::UTC, instant("2026-11-26T08:00:00Z")),
        Some(std::time::Duration::ZERO)
    );
}

#[test]
fn every_takes_whole_seconds_from_one_second_to_365_days() {
    let forms = "@every takes one duration in whole seconds from 1s to 365d: numbers with the \
                 units s, m, h or d, alone or combined (\"@every 90s\", \"@every 5m\", \"@every \
                 1h30m\", \"@every 2d\")";
    let cases = [
        ("@every", "@every needs a duration".to_owned()),
        (
            "@every 0s",
            "an interval of 0s never comes round".to_owned(),
        ),
        (
            "@every 0m",
            "an interval of 0m never comes round".to_owned(),
        ),
        (
            "@every 366d",
            "the interval 366d is longer than 365 days".to_owned(),
        ),
        (
            "@every 8761h",
            "the interval 8761h is longer than 365 days".to_owned(),
        ),
        // Past the duration parser's own ceiling: still the one @every limit, never two.
        (
            "@every 4000d",
            "the interval 4000d is longer than 365 days".to_owned(),
        ),
        (
            "@every 1500ms",
            "the interval 1500ms is not a whole number of seconds".to_owned(),
        ),
        (
            "@every 5",
            "duration \"5\" has no unit: write \"5s\", \"5m\", \"5h\" or \"5d\"".to_owned(),
        ),
        (
            "@every 5x",
            "invalid duration \"5x\": unknown unit \"x\" (use ms, s, m, h or d)".to_owned(),
        ),
        (
            "@every five minutes",
            "invalid duration \"five minutes\": expected a number before \"five minutes\""
                .to_owned(),
        ),
    ];
    for (expr, reason) in cases {
        let err = Schedule::parse(expr).unwrap_err();
        assert_eq!(
            err.message,
            format!("invalid schedule \"{expr}\": {reason}; {forms}"),
            "{expr}"
        );
        assert!(is_every(expr), "{expr}");
    }
    assert_eq!(Schedule::parse("@every 5x").unwrap_err().offset, Some(7));
    assert_eq!(Schedule::parse("@every").unwrap_err().offset, None);
    for (good, secs) in [
        ("@every 1s", 1),
        ("@every 2000ms", 2),
        ("@every 90s", 90),
        ("@EVERY 5m", 300),
        (" @every\t1h30m ", 5_400),
        ("@every 365d", 365 * 86_400),
        ("@every 8760h", 365 * 86_400),
    ] {
        let s = Schedule::parse(good).unwrap();
        assert_eq!(
            s.every(),
            Some(std::time::Duration::from_secs(secs)),
            "{good}"
        );
        assert_eq!(s.as_str(), good);
    }
    // `@everyday` is no `@every`: an unknown macro.
    let err = Schedule::parse("@everyday").unwrap_err();
    assert!(
        err.message.contains("unknown macro \"@everyday\""),
        "{}",
        err.message
    );
    assert!(!is_every("@everyday") && !is_every("0 * * * *"));
}
