//! Parsing a whole expression: the `@` macros, `@every DURATION`, splitting into 5 or 6 fields,
//! and the check that the schedule can fire at all. Errors name the expression and the bad
//! field (or, for `@every`, the duration and the forms it accepts).

use std::time::Duration;

use super::fields::{parse_field, Field, FieldKind};
use super::ScheduleError;
use crate::duration;

/// The macro of fixed-interval schedules, followed by a duration.
const EVERY: &str = "@every";

/// The longest `@every` interval: 365 days, the service's longest heartbeat period.
const EVERY_MAX: Duration = Duration::from_secs(365 * 86_400);

/// What `@every` accepts, for its errors.
const EVERY_FORMS: &str = "@every takes one duration in whole seconds from 1s to \
     365d: numbers with the units s, m, h or d, alone or combined (\"@every 90s\", \"@every \
     5m\", \"@every 1h30m\", \"@every 2d\")";

/// The `@` macros of crontab(5) and what they stand for (`None`: `@reboot`, no time at all).
pub(crate) const MACROS: [(&str, Option<&str>); 8] = [
    ("@reboot", None),
    ("@yearly", Some("0 0 1 1 *")),
    ("@annually", Some("0 0 1 1 *")),
    ("@monthly", Some("0 0 1 * *")),
    ("@weekly", Some("0 0 * * 0")),
    ("@daily", Some("0 0 * * *")),
    ("@midnight", Some("0 0 * * *")),
    ("@hourly", Some("0 * * * *")),
];

/// The matching values of every field of a time-based schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fields {
    /// Seconds; `{0}` for a 5-field expression.
    pub second: Field,
    /// Minutes.
    pub minute: Field,
    /// Hours.
    pub hour: Field,
    /// Days of the month.
    pub dom: Field,
    /// Months.
    pub month: Field,
    /// Days of the week, 0 = Sunday.
    pub dow: Field,
}

/// What an expression describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// `@reboot`: once per boot of the machine, no clock time.
    Reboot,
    /// `@every DURATION`: every this many seconds from the Unix epoch, in any time zone.
    Every(u64),
    /// Clock times; `seconds` says whether a seconds field was written.
    Times {
        /// The matching values.
        fields: Fields,
        /// A leading seconds field was written (6 fields).
        seconds: bool,
    },
}

/// Parses an expression; `expr` is quoted in every error.
pub(crate) fn parse(expr: &str) -> Result<Parsed, ScheduleError> {
    let text = expr.trim();
    if let Some(rest) = every_argument(text) {
        return parse_every(expr, rest);
    }
    if text.starts_with('@') {
        return match MACROS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(text))
        {
            Some((_, None)) => Ok(Parsed::Reboot),
            Some((_, Some(fields))) => parse_fields(expr, fields),
            None => {
                let names: Vec<&str> = MACROS.iter().map(|(name, _)| *name).collect();
                Err(error(
                    expr,
                    None,
                    format!(
                        "unknown macro \"{text}\"; expected one of {} or {EVERY} DURATION",
                        names.join(", ")
                    ),
                ))
            }
        };
    }
    parse_fields(expr, text)
}

/// Whether `expr` is an `@every` schedule, valid or not (its errors list the forms it takes).
pub(crate) fn is_every(expr: &str) -> bool {
    every_argument(expr.trim()).is_some()
}

/// The text after `@every` (any case) when `text` starts with that word.
fn every_argument(text: &str) -> Option<&str> {
    let head = text.get(..EVERY.len())?;
    let rest = &text[EVERY.len()..];
    (head.eq_ignore_ascii_case(EVERY) && (rest.is_empty() || rest.starts_with(char::is_whitespace)))
        .then(|| rest.trim_start())
}

/// `@every DURATION`: the duration is read by the config's one duration parser, then held to
/// whole seconds from 1 s to [`EVERY_MAX`] (a fire time is a whole second, as for the fields).
fn parse_every(expr: &str, text: &str) -> Result<Parsed, ScheduleError> {
    let fail = |reason: String| ScheduleError {
        message: format!("invalid schedule \"{expr}\": {reason}; {EVERY_FORMS}"),
        field: None,
        offset: if text.is_empty() {
            None
        } else {
            offset_in(expr, text)
        },
    };
    if text.is_empty() {
        return Err(fail(format!("{EVERY} needs a duration")));
    }
    let interval = duration::parse_any(text).map_err(fail)?;
    if interval.is_zero() {
        return Err(fail(format!("an interval of {text} never comes round")));
    }
    if interval.subsec_nanos() != 0 {
        return Err(fail(format!(
            "the interval {text} is not a whole number of seconds"
        )));
    }
    if interval > EVERY_MAX {
        return Err(fail(format!("the interval {text} is longer than 365 days")));
    }
    Ok(Parsed::Every(interval.as_secs()))
}

fn parse_fields(expr: &str, text: &str) -> Result<Parsed, ScheduleError> {
    use FieldKind::*;
    let words: Vec<&str> = text.split_ascii_whitespace().collect();
    let (kinds, seconds): (&[FieldKind], bool) = match words.len() {
        5 => (&[Minute, Hour, DayOfMonth, Month, DayOfWeek], false),
        6 => (&[Second, Minute, Hour, DayOfMonth, Month, DayOfWeek], true),
        found => {
            return Err(error(
                expr,
                None,
                format!(
                    "expected 5 fields (minute hour day-of-month month day-of-week) or 6 with \
                     seconds, found {found}"
                ),
            ))
        }
    };
    let mut parsed = Vec::with_capacity(6);
    for (&kind, word) in kinds.iter().zip(&words) {
        let field = parse_field(kind, word).map_err(|reason| {
            error(
                expr,
                Some((kind, word)),
                format!("{} field \"{word}\": {reason}", kind.name()),
            )
        })?;
        parsed.push(field);
    }
    let zero_seconds = Field {
        bits: 1,
        star: false,
    };
    let [second, minute, hour, dom, month, dow] = match parsed[..] {
        [s, m, h, dom, mon, dow] => [s, m, h, dom, mon, dow],
        [m, h, dom, mon, dow] => [zero_seconds, m, h, dom, mon, dow],
        _ => unreachable!("the match on the word count allows only 5 or 6 fields"),
    };
    let fields = Fields {
        second,
        minute,
        hour,
        dom,
        month,
        dow,
    };
    check_some_date_exists(expr, &words[words.len() - 3..], &fields)?;
    Ok(Parsed::Times { fields, seconds })
}

/// Rejects schedules whose day fields can never meet their month field, such as `0 0 30 2 *`:
/// they would never fire. Only possible when the day-of-week field is `*` (otherwise either the
/// OR rule applies or day-of-month is `*`, which includes the 1st).
fn check_some_date_exists(expr: &str, words: &[&str], f: &Fields) -> Result<(), ScheduleError> {
    const DAYS_IN_MONTH: [u32; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let possible = (1..=12u32).any(|m| {
        f.month.contains(m)
            && f.dom
                .next_from(1)
                .is_some_and(|d| d <= DAYS_IN_MONTH[m as usize - 1])
    });
    if possible || !f.dow.star {
        return Ok(());
    }
    Err(error(
        expr,
        Some((FieldKind::DayOfMonth, words[0])),
        format!(
            "day-of-month field \"{}\" names no day that exists in month field \"{}\", so the \
             schedule would never fire",
            words[0], words[1]
        ),
    ))
}

fn error(expr: &str, field: Option<(FieldKind, &str)>, reason: String) -> ScheduleError {
    ScheduleError {
        message: format!("invalid schedule \"{expr}\": {reason}"),
        field: field.map(|(kind, _)| kind),
        offset: field.and_then(|(_, word)| offset_in(expr, word)),
    }
}

/// The byte offset of `part` in `whole` when `part` is a slice of it (a macro's expansion is
/// not), so a config error can point at the column of the bad field.
fn offset_in(whole: &str, part: &str) -> Option<usize> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    (start + part.len() <= whole.len()).then_some(start)
}
