//! Durations in the config, on the command line and in `@every` schedules: strings with a unit
//! (`"30s"`, `"5m"`, `"2h"`, `"1d"`, also `"1h30m"` and `"250ms"`). A bare number is an error
//! that suggests a unit.
//! No duration may exceed [`MAX`] (3650 days, ten times the service's longest heartbeat period,
//! so the check limits keep their own, more precise message): a larger one (such as
//! `"18446744073709551615s"`) is refused here, so no later `now + duration` can overflow.
//!
//! Durations are also written back here, in three notations that every message uses:
//! [`human_duration`] in the parser's own notation (`1h30m`, `45s`, `250ms`: exact to the
//! second, what a user can paste back into the config), [`two_units`] for ages and waits in a
//! table (`1m35s`, `2h1m`: the two largest of hours, minutes and seconds) and [`one_unit`] for a
//! span read at a glance (`45s`, `12m`, `3h`, `2d`: one unit, switching at twice its size).
//! A chart of many durations reads them all in the one unit [`unit_of`] picks for the longest,
//! by [`one_unit`]'s rule.

use std::time::Duration;

/// The longest duration the config or a flag may give: 3650 days.
pub(crate) const MAX: Duration = Duration::from_secs(3650 * 86_400);

/// Parses a duration with units, at most [`MAX`]; the error says what was expected.
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    let total = parse_any(text)?;
    if total > MAX {
        let text = text.trim();
        return Err(format!(
            "duration \"{text}\" is longer than the longest allowed (3650d): give at most \"3650d\""
        ));
    }
    Ok(total)
}

/// Parses a duration with units, of any length (saturating): for a caller that holds it to a
/// bound of its own and says so in its own words.
pub(crate) fn parse_any(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration: expected a number with a unit, such as \"30s\"".to_owned());
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "duration \"{text}\" has no unit: write \"{text}s\", \"{text}m\", \"{text}h\" or \"{text}d\""
        ));
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!(
                "invalid duration \"{text}\": expected a number before \"{rest}\""
            ));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("invalid duration \"{text}\": number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, tail) = rest.split_at(unit_len);
        let piece = match unit {
            "ms" => Duration::from_millis(number),
            "s" => Duration::from_secs(number),
            "m" => Duration::from_secs(number.saturating_mul(60)),
            "h" => Duration::from_secs(number.saturating_mul(3600)),
            "d" => Duration::from_secs(number.saturating_mul(86_400)),
            "" => {
                return Err(format!(
                    "invalid duration \"{text}\": \"{number}\" has no unit (ms, s, m, h or d)"
                ))
            }
            other => {
                return Err(format!(
                    "invalid duration \"{text}\": unknown unit \"{other}\" (use ms, s, m, h or d)"
                ))
            }
        };
        total = total.saturating_add(piece);
        rest = tail;
    }
    Ok(total)
}

/// A duration in the parser's notation: `1h30m`, `45s`, `1d1h1m1s`; below a second,
/// milliseconds (`250ms`, `0ms`). Whole units only: each of days, hours, minutes and seconds
/// that is not zero, largest first.
pub(crate) fn human_duration(duration: Duration) -> String {
    let secs = duration.as_secs();
    if secs == 0 {
        return format!("{}ms", duration.subsec_millis());
    }
    let parts = [
        (secs / 86_400, "d"),
        (secs % 86_400 / 3600, "h"),
        (secs % 3600 / 60, "m"),
        (secs % 60, "s"),
    ];
    let mut out = String::new();
    for (count, unit) in parts.into_iter().filter(|(count, _)| *count > 0) {
        out.push_str(&format!("{count}{unit}"));
    }
    out
}

/// `secs` in its two largest units of hours, minutes and seconds, the second one kept when
/// zero: `5s`, `1m35s`, `1m0s`, `2h1m`, `25h0m` (seconds dropped from an hour on).
pub(crate) fn two_units(secs: u64) -> String {
    match secs {
        0..=59 => format!("{secs}s"),
        60..=3599 => format!("{}m{}s", secs / 60, secs % 60),
        _ => format!("{}h{}m", secs / 3600, secs % 3600 / 60),
    }
}

/// `secs` in one unit, rounded down, the next unit taken from twice its size on: seconds below
/// 2 minutes, minutes below 2 hours, hours below 2 days, then days (`45s`, `12m`, `30h`, `2d`).
pub(crate) fn one_unit(secs: u64) -> String {
    // Seconds at least: a span read at a glance has no milliseconds.
    let (unit, size) = unit_of(Duration::from_secs(secs.max(2)));
    format!("{}{unit}", u128::from(secs) * 1000 / u128::from(size))
}

/// The unit to read durations up to `longest` in, and its size in milliseconds: the rule of
/// [`one_unit`] (the next unit from twice its size on), from milliseconds below 2 s (`ms`,
/// `s`, `m`, `h`, `d`: the parser's units).
pub(crate) fn unit_of(longest: Duration) -> (&'static str, u64) {
    match longest.as_millis() {
        ms if ms < 2_000 => ("ms", 1),
        ms if ms < 120_000 => ("s", 1000),
        ms if ms < 7_200_000 => ("m", 60_000),
        ms if ms < 172_800_000 => ("h", 3_600_000),
        _ => ("d", 86_400_000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_compounds() {
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse("1d"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
    }

    #[test]
    fn durations_beyond_ten_years_are_refused() {
        assert_eq!(parse("3650d"), Ok(MAX));
        assert_eq!(parse("87600h"), Ok(MAX));
        for text in [
            "3651d",
            "18446744073709551615s",
            "10000000000d",
            "87600h1ms",
        ] {
            let err = parse(text).unwrap_err();
            assert_eq!(
                err,
                format!("duration \"{text}\" is longer than the longest allowed (3650d): give at most \"3650d\"")
            );
        }
        let err = parse("99999999999999999999999s").unwrap_err();
        assert!(err.contains("number too large"), "{err}");
    }

    #[test]
    fn bare_number_suggests_unit() {
        let err = parse("30").unwrap_err();
        assert!(err.contains("\"30s\""), "{err}");
    }

    #[test]
    fn unknown_unit_is_named() {
        let err = parse("3w").unwrap_err();
        assert!(err.contains("unknown unit \"w\""), "{err}");
        assert!(parse("s").is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn durations_use_config_notation() {
        assert_eq!(human_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(human_duration(Duration::from_secs(45)), "45s");
        assert_eq!(human_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(human_duration(Duration::from_secs(90_061)), "1d1h1m1s");
        assert_eq!(human_duration(Duration::from_secs(7200)), "2h");
        for text in ["250ms", "45s", "1h30m", "1d1h1m1s", "2h"] {
            let parsed = parse(text).expect("valid");
            assert_eq!(human_duration(parsed), text, "written back as read");
        }
    }

    #[test]
    fn short_notations_keep_their_units() {
        assert_eq!(two_units(5), "5s");
        assert_eq!(two_units(95), "1m35s");
        assert_eq!(two_units(60), "1m0s");
        assert_eq!(two_units(7300), "2h1m");
        assert_eq!(one_unit(45), "45s");
        assert_eq!(one_unit(119), "119s");
        assert_eq!(one_unit(12 * 60), "12m");
        assert_eq!(one_unit(30 * 3600), "30h");
        assert_eq!(one_unit(2 * 86_400), "2d");
        assert_eq!(one_unit(0), "0s");
        assert_eq!(one_unit(u64::MAX), format!("{}d", u64::MAX / 86_400));
    }

    #[test]
    fn a_chart_reads_its_durations_in_the_unit_of_the_longest() {
        let unit = |ms| unit_of(Duration::from_millis(ms)).0;
        assert_eq!(unit(0), "ms");
        assert_eq!(unit(1999), "ms");
        assert_eq!(unit(2000), "s");
        assert_eq!(unit(119_999), "s");
        assert_eq!(unit(120_000), "m");
        assert_eq!(unit(7_200_000), "h");
        assert_eq!(unit(172_800_000), "d");
    }
}
