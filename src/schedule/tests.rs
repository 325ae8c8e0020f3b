//! Schedule semantics as a table of expressions and expected fire times, the invalid
//! expressions with their messages, and a seeded property test against a brute-force oracle.
//! The tests of `@every` schedules are in `tests/every.rs`.

use super::Zone;
use chrono::{DateTime, TimeDelta, Utc};

use super::*;

mod every;

#[test]
fn tz_names_the_default_zone_as_cron_reads_it() {
    assert_eq!(zone_from_tz(None), Ok(Zone::UTC));
    assert_eq!(zone_from_tz(Some("")), Ok(Zone::UTC));
    assert_eq!(zone_from_tz(Some(" ")), Ok(Zone::UTC));
    let berlin = Ok(Zone::named("Europe/Berlin").expect("a known zone"));
    assert_eq!(zone_from_tz(Some("Europe/Berlin")), berlin);
    assert_eq!(zone_from_tz(Some(":Europe/Berlin")), berlin);
    assert_eq!(
        zone_from_tz(Some("/usr/share/zoneinfo/Europe/Berlin")),
        berlin
    );
    assert_eq!(
        zone_from_tz(Some(":/usr/share/zoneinfo/Europe/Berlin")),
        berlin
    );
    assert_eq!(zone_from_tz(Some("UTC")), Ok(Zone::UTC));
    for bad in [
        "CET-1CEST,M3.5.0,M10.5.0/3",
        "Europe/Berln",
        "/etc/localtime",
    ] {
        let err = zone_from_tz(Some(bad)).unwrap_err();
        assert_eq!(
            err,
            format!(
                "TZ=\"{bad}\" in the environment is not an IANA time zone name (such as \
                 Europe/Berlin or UTC; POSIX rules such as CET-1CEST are not read)"
            )
        );
    }
}

fn zone(name: &str) -> Zone {
    name.parse().unwrap()
}

fn instant(rfc3339: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(rfc3339)
        .unwrap()
        .with_timezone(&Utc)
}

/// The next `n` fire times after `from`, as RFC 3339 in the zone.
fn fires(expr: &str, tz: &str, from: &str, n: usize) -> Vec<String> {
    let tz = zone(tz);
    Schedule::parse(expr)
        .unwrap()
        .fire_times(instant(from), tz)
        .take(n)
        .map(|t| tz.local(t).to_rfc3339())
        .collect()
}

#[test]
fn fire_times_follow_crontab5() {
    #[rustfmt::skip]
    let table: &[(&str, &str, &str, &[&str])] = &[
        // Weekday range from a Friday: Monday next, never Sunday.
        ("0 9 * * 1-5", "UTC", "2026-03-27T10:00:00Z", &["2026-03-30T09:00:00+00:00", "2026-03-31T09:00:00+00:00", "2026-04-01T09:00:00+00:00", "2026-04-02T09:00:00+00:00", "2026-04-03T09:00:00+00:00", "2026-04-06T09:00:00+00:00"]),
        ("0 9 * * Mon-Fri", "UTC", "2026-03-27T10:00:00Z", &["2026-03-30T09:00:00+00:00", "2026-03-31T09:00:00+00:00"]),
        // 0 and 7 are both Sunday; 5-7 is Friday to Sunday.
        ("0 0 * * 0", "UTC", "2026-03-27T10:00:00Z", &["2026-03-29T00:00:00+00:00", "2026-04-05T00:00:00+00:00"]),
        ("0 0 * * 7", "UTC", "2026-03-27T10:00:00Z", &["2026-03-29T00:00:00+00:00", "2026-04-05T00:00:00+00:00"]),
        ("0 0 * * 5-7", "UTC", "2026-03-27T10:00:00Z", &["2026-03-28T00:00:00+00:00", "2026-03-29T00:00:00+00:00", "2026-04-03T00:00:00+00:00"]),
        ("0 0 * * sun", "UTC", "2026-03-27T10:00:00Z", &["2026-03-29T00:00:00+00:00"]),
        // Both day fields restricted: either matches.
        ("0 0 1,15 * 5", "UTC", "2026-01-01T00:00:00Z", &["2026-01-02T00:00:00+00:00", "2026-01-09T00:00:00+00:00", "2026-01-15T00:00:00+00:00", "2026-01-16T00:00:00+00:00", "2026-01-23T00:00:00+00:00", "2026-01-30T00:00:00+00:00", "2026-02-01T00:00:00+00:00"]),
        // A day-of-month starting with `*` counts as unrestricted (cronie DOM_STAR): both must match.
        ("0 0 */2 * 5", "UTC", "2026-01-01T00:00:00Z", &["2026-01-09T00:00:00+00:00", "2026-01-23T00:00:00+00:00", "2026-02-13T00:00:00+00:00", "2026-02-27T00:00:00+00:00", "2026-03-13T00:00:00+00:00"]),
        // Names in lists and ranges, any case.
        ("30 8 * JAN,jul Mon-Wed", "UTC", "2026-06-30T12:00:00Z", &["2026-07-01T08:30:00+00:00", "2026-07-06T08:30:00+00:00", "2026-07-07T08:30:00+00:00", "2026-07-08T08:30:00+00:00", "2026-07-13T08:30:00+00:00"]),
        ("0 0 1 feb-apr/2 *", "UTC", "2026-01-01T00:00:00Z", &["2026-02-01T00:00:00+00:00", "2026-04-01T00:00:00+00:00", "2027-02-01T00:00:00+00:00"]),
        // Every macro.
        ("@hourly", "UTC", "2026-01-01T00:30:00Z", &["2026-01-01T01:00:00+00:00", "2026-01-01T02:00:00+00:00"]),
        ("@daily", "UTC", "2026-01-01T00:00:00Z", &["2026-01-02T00:00:00+00:00", "2026-01-03T00:00:00+00:00"]),
        ("@midnight", "UTC", "2026-01-01T00:00:00Z", &["2026-01-02T00:00:00+00:00", "2026-01-03T00:00:00+00:00"]),
        ("@weekly", "UTC", "2026-01-01T00:00:00Z", &["2026-01-04T00:00:00+00:00", "2026-01-11T00:00:00+00:00"]),
        ("@monthly", "UTC", "2026-01-01T00:00:00Z", &["2026-02-01T00:00:00+00:00", "2026-03-01T00:00:00+00:00"]),
        ("@yearly", "UTC", "2026-01-01T00:00:00Z", &["2027-01-01T00:00:00+00:00", "2028-01-01T00:00:00+00:00"]),
        ("@annually", "UTC", "2026-01-01T00:00:00Z", &["2027-01-01T00:00:00+00:00"]),
        ("@reboot", "UTC", "2026-01-01T00:00:00Z", &[]),
        // Steps: `*/N`, `A-B/N`, and cronie's `A/N` (A to the maximum).
        ("*/15 * * * *", "UTC", "2026-01-01T00:07:00Z", &["2026-01-01T00:15:00+00:00", "2026-01-01T00:30:00+00:00", "2026-01-01T00:45:00+00:00", "2026-01-01T01:00:00+00:00"]),
        ("5/20 * * * *", "UTC", "2026-01-01T00:00:00Z", &["2026-01-01T00:05:00+00:00", "2026-01-01T00:25:00+00:00", "2026-01-01T00:45:00+00:00", "2026-01-01T01:05:00+00:00"]),
        ("1-30/7 0 * * *", "UTC", "2026-01-01T00:00:00Z", &["2026-01-01T00:01:00+00:00", "2026-01-01T00:08:00+00:00", "2026-01-01T00:15:00+00:00", "2026-01-01T00:22:00+00:00", "2026-01-01T00:29:00+00:00", "2026-01-02T00:01:00+00:00"]),
        // Strictly after, also from inside a second.
        ("* * * * *", "UTC", "2026-01-01T00:00:00Z", &["2026-01-01T00:01:00+00:00"]),
        ("* * * * *", "UTC", "2026-01-01T00:00:59.999Z", &["2026-01-01T00:01:00+00:00"]),
        // Sparse schedules: leap days (none in 2100), the 31st.
        ("0 0 29 2 *", "UTC", "2026-01-01T00:00:00Z", &["2028-02-29T00:00:00+00:00", "2032-02-29T00:00:00+00:00"]),
        ("0 0 29 2 *", "UTC", "2096-03-01T00:00:00Z", &["2104-02-29T00:00:00+00:00"]),
        ("0 0 31 * *", "UTC", "2026-01-31T00:00:00Z", &["2026-03-31T00:00:00+00:00", "2026-05-31T00:00:00+00:00", "2026-07-31T00:00:00+00:00", "2026-08-31T00:00:00+00:00"]),
        // Seconds field.
        ("*/20 * * * * *", "UTC", "2026-01-01T00:00:00Z", &["2026-01-01T00:00:20+00:00", "2026-01-01T00:00:40+00:00", "2026-01-01T00:01:00+00:00"]),
        ("30 0 12 * * *", "UTC", "2026-01-01T00:00:00Z", &["2026-01-01T12:00:30+00:00", "2026-01-02T12:00:30+00:00"]),
        // Europe/Berlin spring forward (2026-03-29, 02:00 -> 03:00): a fixed time in the gap
        // runs once at the jump; wildcard jobs follow the new local time.
        ("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", &["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"]),
        ("0,30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", &["2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00", "2026-03-30T02:30:00+02:00"]),
        ("0 3 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", &["2026-03-29T03:00:00+02:00", "2026-03-30T03:00:00+02:00"]),
        ("0 * * * *", "Europe/Berlin", "2026-03-29T00:30:00+01:00", &["2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"]),
        ("*/15 * * * *", "Europe/Berlin", "2026-03-29T01:40:00+01:00", &["2026-03-29T01:45:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:15:00+02:00"]),
        ("@daily", "Europe/Berlin", "2026-03-28T00:00:00+01:00", &["2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00"]),
        // Europe/Berlin fall back (2026-10-25, 03:00 -> 02:00): a fixed time runs at the first
        // occurrence only; wildcard jobs run in both repeated hours.
        ("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", &["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]),
        ("0 * * * *", "Europe/Berlin", "2026-10-25T01:30:00+02:00", &["2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T03:00:00+01:00"]),
        ("*/30 2 * * *", "Europe/Berlin", "2026-10-25T01:00:00+02:00", &["2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T02:30:00+01:00", "2026-10-26T02:00:00+01:00"]),
        // America/New_York spring forward (2026-03-08, 02:00 -> 03:00).
        ("30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", &["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"]),
        ("0 * * * *", "America/New_York", "2026-03-08T00:30:00-05:00", &["2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00"]),
        // America/New_York fall back (2026-11-01, 02:00 -> 01:00).
        ("30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", &["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"]),
        ("30 1 * * *", "America/New_York", "2026-11-01T01:00:00-05:00", &["2026-11-02T01:30:00-05:00"]),
        ("0 * * * *", "America/New_York", "2026-11-01T00:30:00-04:00", &["2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"]),
        ("*/15 * * * *", "America/New_York", "2026-11-01T01:40:00-04:00", &["2026-11-01T01:45:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T01:15:00-05:00"]),
        // A 30-minute DST shift (Lord Howe Island, 2026-10-04 02:00 -> 02:30).
        ("15 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00:00+10:30", &["2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"]),
    ];
    for (expr, tz, from, want) in table {
        let got = fires(expr, tz, from, want.len().max(1));
        let got = &got[..want.len().min(got.len())];
        assert_eq!(got, *want, "{expr} in {tz} after {from}");
    }
}

#[test]
fn invalid_expressions_name_the_bad_field() {
    let fields5 =
        "expected 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds";
    let cases: &[(&str, String)] = &[
        ("0 25 * * *", r#"invalid schedule "0 25 * * *": hour field "25": value 25 out of range 0-23"#.into()),
        ("0 * * *", format!(r#"invalid schedule "0 * * *": {fields5}, found 4"#)),
        ("", format!(r#"invalid schedule "": {fields5}, found 0"#)),
        ("1 2 3 4 5 6 7", format!(r#"invalid schedule "1 2 3 4 5 6 7": {fields5}, found 7"#)),
        ("@fortnightly", r#"invalid schedule "@fortnightly": unknown macro "@fortnightly"; expected one of @reboot, @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every DURATION"#.into()),
        ("60 * * * *", r#"invalid schedule "60 * * * *": minute field "60": value 60 out of range 0-59"#.into()),
        ("61 * * * * *", r#"invalid schedule "61 * * * * *": second field "61": value 61 out of range 0-59"#.into()),
        ("* * 0 * *", r#"invalid schedule "* * 0 * *": day-of-month field "0": value 0 out of range 1-31"#.into()),
        ("* * * 13 *", r#"invalid schedule "* * * 13 *": month field "13": value 13 out of range 1-12"#.into()),
        ("* * * * 8", r#"invalid schedule "* * * * 8": day-of-week field "8": value 8 out of range 0-7"#.into()),
        ("* * * * Mon-Fry", r#"invalid schedule "* * * * Mon-Fry": day-of-week field "Mon-Fry": unknown name "Fry"; expected a number 0-7 or one of sun, mon, tue, wed, thu, fri, sat"#.into()),
        ("* * * foo *", r#"invalid schedule "* * * foo *": month field "foo": unknown name "foo"; expected a number 1-12 or one of jan, feb, mar, apr, may, jun, jul, aug, sep, oct, nov, dec"#.into()),
        ("*/0 * * * *", r#"invalid schedule "*/0 * * * *": minute field "*/0": step 0 out of range 1-59"#.into()),
        ("5-1 * * * *", r#"invalid schedule "5-1 * * * *": minute field "5-1": range 5-1 starts after it ends; write it as a list, e.g. "5-59,0-1""#.into()),
        ("1,,2 * * * *", r#"invalid schedule "1,,2 * * * *": minute field "1,,2": empty list item (two commas, or a comma at an end)"#.into()),
        ("x * * * *", r#"invalid schedule "x * * * *": minute field "x": "x" is not a number 0-59"#.into()),
        ("0 0 31 2 *", r#"invalid schedule "0 0 31 2 *": day-of-month field "31" names no day that exists in month field "2", so the schedule would never fire"#.into()),
        ("0 0 30 2 *", r#"invalid schedule "0 0 30 2 *": day-of-month field "30" names no day that exists in month field "2", so the schedule would never fire"#.into()),
        ("0 0 31 apr,jun,sep,nov *", r#"invalid schedule "0 0 31 apr,jun,sep,nov *": day-of-month field "31" names no day that exists in month field "apr,jun,sep,nov", so the schedule would never fire"#.into()),
    ];
    for (expr, want) in cases {
        let err = Schedule::parse(expr).unwrap_err();
        assert_eq!(&err.message, want, "{expr}");
    }
    let err = Schedule::parse("0 25 * * *").unwrap_err();
    assert_eq!((err.field, err.offset), (Some(FieldKind::Hour), Some(2)));
    let err = Schedule::parse("  0 0 31\t2 *").unwrap_err();
    assert_eq!(
        (err.field, err.offset),
        (Some(FieldKind::DayOfMonth), Some(6))
    );
    let err = Schedule::parse("0 * * *").unwrap_err();
    assert_eq!((err.field, err.offset), (None, None));
    let err = "@hourlyy".parse::<Schedule>().unwrap_err();
    assert_eq!((err.field, err.offset), (None, None));
    // With the weekday OR rule these can fire, so they are valid.
    assert!(Schedule::parse("0 0 31 2 1").is_ok());
}

#[test]
fn flags_describe_the_expression() {
    let s = |e: &str| Schedule::parse(e).unwrap();
    assert!(s("@reboot").is_reboot());
    assert!(!s("@daily").is_reboot());
    assert!(s("*/5 * * * * *").has_seconds());
    assert!(!s("*/5 * * * *").has_seconds());
    assert!(s("30 2 * * *").is_fixed_time());
    assert!(s("@daily").is_fixed_time());
    assert!(s("0-59 2 * * *").is_fixed_time());
    assert!(!s("@hourly").is_fixed_time());
    assert!(!s("*/15 2 * * *").is_fixed_time());
    assert!(!s("0 */2 * * *").is_fixed_time());
    assert!(!s("@reboot").is_fixed_time());
    assert_eq!(s(" @daily ").as_str(), " @daily ");
}

#[test]
fn prev_before_is_the_fire_before() {
    let tz = zone("Europe/Berlin");
    let s = Schedule::parse("0 9 * * 1-5").unwrap();
    let monday = instant("2026-03-30T08:00:00+02:00");
    assert_eq!(
        s.prev_before(monday, tz),
        Some(instant("2026-03-27T09:00:00+01:00"))
    );
    let leap = Schedule::parse("0 0 29 2 *").unwrap();
    assert_eq!(
        leap.prev_before(instant("2031-01-01T00:00:00Z"), Zone::UTC),
        Some(instant("2028-02-29T00:00:00Z"))
    );
    assert_eq!(
        Schedule::parse("@reboot").unwrap().prev_before(monday, tz),
        None
    );
}

#[test]
fn gaps_follow_real_time() {
    let berlin = zone("Europe/Berlin");
    let hours = |h: u64| std::time::Duration::from_secs(h * 3600);
    let daily = Schedule::parse("@daily").unwrap();
    let spring = instant("2026-03-29T00:00:00+01:00");
    assert_eq!(daily.gap_after(spring, berlin), Some(hours(23)));
    let fall = instant("2026-10-25T00:00:00+02:00");
    assert_eq!(daily.gap_after(fall, berlin), Some(hours(25)));
    // Across both changes of the year, a daily job's gaps in real time are 23, 24 and 25 hours:
    // steady, with a period of one day and one hour of slack.
    let seen = cadence(&daily, berlin, instant("2026-03-25T12:00:00Z")).unwrap();
    assert_eq!(
        (seen.shortest, seen.typical, seen.longest, seen.dst_shift),
        (hours(23), hours(24), hours(25), hours(1))
    );
    assert_eq!(seen.steady(), Some((hours(24), hours(1))));
    let utc = cadence(&daily, Zone::UTC, instant("2026-03-25T12:00:00Z")).unwrap();
    assert_eq!(
        (utc.shortest, utc.longest, utc.dst_shift),
        (hours(24), hours(24), hours(0))
    );

    let weekdays = Schedule::parse("0 9 * * 1-5").unwrap();
    let friday = instant("2026-03-27T09:00:00Z");
    assert_eq!(weekdays.gap_after(friday, Zone::UTC), Some(hours(72)));
    let seen = cadence(&weekdays, Zone::UTC, friday).unwrap();
    assert_eq!(
        (seen.shortest, seen.typical, seen.longest),
        (hours(24), hours(24), hours(72))
    );
    assert_eq!(seen.steady(), None);

    let every5 = Schedule::parse("*/5 * * * *").unwrap();
    let seen = cadence(&every5, berlin, spring).unwrap();
    let five = std::time::Duration::from_secs(300);
    assert_eq!((seen.shortest, seen.longest), (five, five));
    assert_eq!(
        Schedule::parse("@reboot")
            .unwrap()
            .gap_after(spring, berlin),
        None
    );

    let yearly = Schedule::parse("@yearly").unwrap();
    let new_year = instant("2028-01-01T00:00:00Z");
    assert_eq!(yearly.gap_after(new_year, Zone::UTC), Some(hours(366 * 24)));
    let every_second = Schedule::parse("* * * * * *").unwrap();
    // A per-second schedule is measured over a bounded number of fires, not a year of them.
    let seen = cadence(&every_second, Zone::UTC, spring).unwrap();
    let second = std::time::Duration::from_secs(1);
    assert_eq!((seen.shortest, seen.longest), (second, second));
    assert_eq!(
        cadence(&Schedule::parse("@reboot").unwrap(), Zone::UTC, spring),
        None
    );
    // Gaps over a year: none for a yearly job outside a leap year, four years for a leap day.
    let june = instant("2026-06-01T00:00:00Z");
    assert_eq!(
        long_gap(&yearly, Zone::UTC, june),
        Some(std::time::Duration::ZERO)
    );
    let leap_day = Schedule::parse("0 0 29 2 *").unwrap();
    assert_eq!(
        long_gap(&leap_day, Zone::UTC, june),
        Some(hours(4 * 365 * 24 + 24))
    );
}

#[test]
fn sparse_schedules_are_fast() {
    let started = std::time::Instant::now();
    let s = Schedule::parse("0 0 29 2 *").unwrap();
    let berlin = zone("Europe/Berlin");
    let mut from = instant("2026-01-01T00:00:00Z");
    for _ in 0..20 {
        from = s.next_after(from, berlin).unwrap();
    }
    assert_eq!(from, instant("2108-02-29T00:00:00+01:00"));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

/// A small deterministic generator (xorshift), so the property test needs no extra crate.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u32) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % u64::from(n)) as u32
    }

    fn field(&mut self, min: u32, max: u32) -> String {
        let value = |r: &mut Rng| min + r.below(max - min + 1);
        match self.below(6) {
            0 => "*".to_owned(),
            1 => format!("*/{}", 1 + self.below(max.min(20))),
            2 => value(self).to_string(),
            3 => {
                let (a, b) = (value(self), value(self));
                format!("{}-{}", a.min(b), a.max(b))
            }
            4 => {
                let (a, b) = (value(self), value(self));
                format!("{}-{}/{}", a.min(b), a.max(b), 1 + self.below(5))
            }
            _ => format!("{},{}", value(self), value(self)),
        }
    }
}

/// cron(8) by brute force, minute by minute: the fires in `(from, to)`, in the zone as
/// chrono-tz's own compiled reading of the IANA database has it (an oracle independent of
/// [`Zone`]'s).
fn oracle(s: &Schedule, tz: &str, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    use chrono::{Offset, TimeZone};
    let tz: chrono_tz::Tz = tz.parse().unwrap();
    let offset = |t: DateTime<Utc>| tz.offset_from_utc_datetime(&t.naive_utc()).fix();
    let mut out = Vec::new();
    let mut t = from + TimeDelta::minutes(1);
    while t < to {
        let local = t.with_timezone(&tz).naive_local();
        let first = tz
            .from_local_datetime(&local)
            .earliest()
            .map(|e| e.with_timezone(&Utc));
        let mut fire = s.matches_local(local) && (!s.is_fixed_time() || first == Some(t));
        let (old, new) = (offset(t - TimeDelta::minutes(1)), offset(t));
        let jump = i64::from(new.local_minus_utc() - old.local_minus_utc()) / 60;
        if s.is_fixed_time() && jump > 0 {
            fire |= (1..=jump).any(|m| s.matches_local(local - TimeDelta::minutes(m)));
        }
        if fire {
            out.push(t);
        }
        t += TimeDelta::minutes(1);
    }
    out
}

#[test]
fn random_schedules_agree_with_brute_force() {
    let zones = [
        "UTC",
        "Europe/Berlin",
        "America/New_York",
        "Australia/Lord_Howe",
        "Asia/Kolkata",
    ];
    let transitions = [
        "2026-03-29T01:00:00Z",
        "2026-10-25T01:00:00Z",
        "2026-03-08T07:00:00Z",
        "2026-11-01T06:00:00Z",
        "2026-10-03T15:30:00Z",
        "2026-04-04T15:00:00Z",
    ];
    let mut rng = Rng(0x5eed_cafe_f00d);
    for case in 0..300 {
        // Hours and days biased towards the DST changes' night hours and every day.
        let night = ["1", "2", "3", "1-2", "2,3", "0-3/2", "*"];
        let hour = match rng.below(2) {
            0 => night[rng.below(night.len() as u32) as usize].to_owned(),
            _ => rng.field(0, 23),
        };
        let day = |r: &mut Rng, min, max| match r.below(2) {
            0 => "*".to_owned(),
            _ => r.field(min, max),
        };
        let (dom, dow) = (day(&mut rng, 1, 31), day(&mut rng, 0, 7));
        let expr = format!("{} {hour} {dom} * {dow}", rng.field(0, 59));
        let s = Schedule::parse(&expr).unwrap();
        let name = zones[rng.below(zones.len() as u32) as usize];
        let tz = zone(name);
        let near = instant(transitions[rng.below(transitions.len() as u32) as usize]);
        let from = near - TimeDelta::minutes(i64::from(rng.below(36 * 60)));
        let to = from + TimeDelta::days(2);
        let want = oracle(&s, name, from, to);
        let got: Vec<_> = s.fire_times(from, tz).take_while(|t| *t < to).collect();
        assert_eq!(got, want, "case {case}: {expr} in {tz} after {from}");
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "{expr}: not increasing"
        );
    }
}

#[test]
fn seconds_schedules_match_their_local_times() {
    let mut rng = Rng(42);
    let berlin = zone("Europe/Berlin");
    for _ in 0..100 {
        let expr = format!(
            "{} {} {} * * *",
            rng.field(0, 59),
            rng.field(0, 59),
            rng.field(0, 23)
        );
        let s = Schedule::parse(&expr).unwrap();
        let from =
            instant("2026-10-24T22:00:00Z") + TimeDelta::seconds(i64::from(rng.below(86_400)));
        let got: Vec<_> = s.fire_times(from, berlin).take(50).collect();
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "{expr}: not increasing"
        );
        for t in got {
            assert!(
                s.matches_local(berlin.local(t).naive_local()),
                "{expr}: {t}"
            );
        }
    }
}
