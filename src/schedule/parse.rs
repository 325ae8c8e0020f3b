//! Parsing a whole expression: the `@` macros, splitting into 5 or 6 fields, and the check that
//! the schedule can fire at all. Errors name the expression and the bad field.

use super::fields::{parse_field, Field, FieldKind};
use super::ScheduleError;

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
                        "unknown macro \"{text}\"; expected one of {}",
                        names.join(", ")
                    ),
                ))
            }
        };
    }
    parse_fields(expr, text)
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
