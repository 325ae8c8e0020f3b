//! One field of a crontab(5) expression: its kind (range of values, names) and the parser for
//! its syntax (`*`, `N`, `A-B`, steps `/S`, lists `,`, names such as `mon` or `jan`), giving the
//! set of matching values as a bit set.

/// Which of the fields a value list belongs to; fixes the valid range and the names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// Seconds, 0-59 (only in 6-field expressions).
    Second,
    /// Minutes, 0-59.
    Minute,
    /// Hours, 0-23.
    Hour,
    /// Day of the month, 1-31.
    DayOfMonth,
    /// Month, 1-12 or `jan`-`dec`.
    Month,
    /// Day of the week, 0-7 (0 and 7 are Sunday) or `sun`-`sat`.
    DayOfWeek,
}

const MONTH_NAMES: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAY_NAMES: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

impl FieldKind {
    /// The field's name as used in error messages and the docs.
    pub(crate) fn name(self) -> &'static str {
        match self {
            FieldKind::Second => "second",
            FieldKind::Minute => "minute",
            FieldKind::Hour => "hour",
            FieldKind::DayOfMonth => "day-of-month",
            FieldKind::Month => "month",
            FieldKind::DayOfWeek => "day-of-week",
        }
    }

    /// The smallest and largest value written in this field.
    fn bounds(self) -> (u32, u32) {
        match self {
            FieldKind::Second | FieldKind::Minute => (0, 59),
            FieldKind::Hour => (0, 23),
            FieldKind::DayOfMonth => (1, 31),
            FieldKind::Month => (1, 12),
            FieldKind::DayOfWeek => (0, 7),
        }
    }

    /// Names accepted instead of numbers, with the value of the first one.
    fn names(self) -> Option<(&'static [&'static str], u32)> {
        match self {
            FieldKind::Month => Some((&MONTH_NAMES, 1)),
            FieldKind::DayOfWeek => Some((&DAY_NAMES, 0)),
            _ => None,
        }
    }
}

/// The parsed values of one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Field {
    /// Bit `n` is set when value `n` matches (for day-of-week, 7 is folded into 0).
    pub bits: u64,
    /// The field text starts with `*`: cronie's `*_STAR` flag, which decides the day-field OR
    /// rule and whether a job has a fixed time for the DST rules.
    pub star: bool,
}

impl Field {
    /// Whether value `n` matches.
    pub(crate) fn contains(self, n: u32) -> bool {
        n < 64 && self.bits & (1 << n) != 0
    }

    /// The smallest matching value at least `from`.
    pub(crate) fn next_from(self, from: u32) -> Option<u32> {
        if from >= 64 {
            return None;
        }
        let rest = self.bits >> from << from;
        (rest != 0).then(|| rest.trailing_zeros())
    }

    /// The smallest matching value (every parsed field has at least one).
    pub(crate) fn first(self) -> u32 {
        self.bits.trailing_zeros()
    }
}

/// Parses the text of one field; the error says what is wrong with it, without the field name
/// (the caller adds the context).
pub(crate) fn parse_field(kind: FieldKind, text: &str) -> Result<Field, String> {
    let mut bits = 0u64;
    for item in text.split(',') {
        if item.is_empty() {
            return Err("empty list item (two commas, or a comma at an end)".to_owned());
        }
        bits |= parse_item(kind, item)?;
    }
    if kind == FieldKind::DayOfWeek && bits & (1 << 7) != 0 {
        bits = (bits | 1) & !(1 << 7);
    }
    Ok(Field {
        bits,
        star: text.starts_with('*'),
    })
}

/// One list item: `*`, `N`, `A-B`, each optionally with `/STEP`; `N/STEP` means `N-max/STEP`
/// as in cronie.
fn parse_item(kind: FieldKind, item: &str) -> Result<u64, String> {
    let (min, max) = kind.bounds();
    let (range, step) = match item.split_once('/') {
        Some((range, step)) => (range, Some(parse_step(kind, step)?)),
        None => (item, None),
    };
    let (start, end) = if range == "*" {
        (min, max)
    } else if let Some((a, b)) = range.split_once('-') {
        let (a, b) = (parse_value(kind, a)?, parse_value(kind, b)?);
        if a > b {
            return Err(format!(
                "range {range} starts after it ends; write it as a list, e.g. \"{a}-{max},{min}-{b}\""
            ));
        }
        (a, b)
    } else {
        let value = parse_value(kind, range)?;
        (value, if step.is_some() { max } else { value })
    };
    let step = step.unwrap_or(1);
    Ok((start..=end)
        .step_by(step as usize)
        .fold(0u64, |bits, v| bits | 1 << v))
}

fn parse_step(kind: FieldKind, text: &str) -> Result<u32, String> {
    let (_, max) = kind.bounds();
    let step: u32 = text
        .parse()
        .ok()
        .filter(|_| text.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| format!("step \"{text}\" is not a number"))?;
    if step == 0 || step > max {
        return Err(format!("step {step} out of range 1-{max}"));
    }
    Ok(step)
}

fn parse_value(kind: FieldKind, text: &str) -> Result<u32, String> {
    let (min, max) = kind.bounds();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        let value: u32 = text.parse().unwrap_or(u32::MAX);
        if value < min || value > max {
            return Err(format!("value {text} out of range {min}-{max}"));
        }
        return Ok(value);
    }
    match kind.names() {
        Some((names, first)) => names
            .iter()
            .position(|name| name.eq_ignore_ascii_case(text))
            .map(|i| first + i as u32)
            .ok_or_else(|| {
                format!(
                    "unknown name \"{text}\"; expected a number {min}-{max} or one of {}",
                    names.join(", ")
                )
            }),
        None if text.is_empty() => Err("missing number".to_owned()),
        None => Err(format!("\"{text}\" is not a number {min}-{max}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(kind: FieldKind, text: &str) -> Vec<u32> {
        let field = parse_field(kind, text).unwrap();
        (0..64).filter(|&n| field.contains(n)).collect()
    }

    #[test]
    fn parses_ranges_steps_lists_and_names() {
        use FieldKind::*;
        assert_eq!(values(Minute, "*/15"), [0, 15, 30, 45]);
        assert_eq!(values(DayOfMonth, "1-30/7"), [1, 8, 15, 22, 29]);
        assert_eq!(values(Minute, "50/5"), [50, 55]);
        assert_eq!(values(Hour, "1,3,5-7"), [1, 3, 5, 6, 7]);
        assert_eq!(values(DayOfWeek, "Mon-Fri"), [1, 2, 3, 4, 5]);
        assert_eq!(values(DayOfWeek, "5-7"), [0, 5, 6]);
        assert_eq!(values(DayOfWeek, "7"), [0]);
        assert_eq!(values(DayOfWeek, "*"), [0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(values(Month, "jan,JUL"), [1, 7]);
        assert_eq!(values(Month, "feb-apr/2"), [2, 4]);
        assert!(parse_field(DayOfMonth, "*/2").unwrap().star);
        assert!(!parse_field(DayOfMonth, "1-31").unwrap().star);
    }

    #[test]
    fn rejects_bad_items_with_a_reason() {
        use FieldKind::*;
        let cases = [
            (Hour, "25", "value 25 out of range 0-23"),
            (DayOfMonth, "0", "value 0 out of range 1-31"),
            (Minute, "*/0", "step 0 out of range 1-59"),
            (Minute, "*/x", "step \"x\" is not a number"),
            (Minute, "1,,2", "empty list item"),
            (Minute, "a", "\"a\" is not a number 0-59"),
            (DayOfWeek, "mon-fry", "unknown name \"fry\""),
            (DayOfWeek, "5-1", "range 5-1 starts after it ends"),
            (Hour, "1-", "missing number"),
        ];
        for (kind, text, want) in cases {
            let err = parse_field(kind, text).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
