//! Durations in the config and on the command line: strings with a unit (`"30s"`, `"5m"`,
//! `"2h"`, `"1d"`, also `"1h30m"` and `"250ms"`). A bare number is an error that suggests a unit.
//! No duration may exceed [`MAX`] (3650 days, ten times the service's longest heartbeat period,
//! so the check limits keep their own, more precise message): a larger one (such as
//! `"18446744073709551615s"`) is refused here, so no later `now + duration` can overflow.

use std::time::Duration;

/// The longest duration the config or a flag may give: 3650 days.
pub(crate) const MAX: Duration = Duration::from_secs(3650 * 86_400);

/// Parses a duration with units, at most [`MAX`]; the error says what was expected.
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
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
    if total > MAX {
        return Err(format!(
            "duration \"{text}\" is longer than the longest allowed (3650d): give at most \"3650d\""
        ));
    }
    Ok(total)
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
}
