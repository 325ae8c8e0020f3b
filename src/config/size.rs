//! Sizes in the config: `output_tail = "10KiB"` and `min_free = "10GiB"` or `"15%"`. Units are
//! B, KB/MB/GB/TB (powers of 1000) and KiB/MiB/GiB/TiB (powers of 1024), case-insensitive.

use super::Amount;

const UNITS: [(&str, u64); 9] = [
    ("b", 1),
    ("kb", 1000),
    ("mb", 1000 * 1000),
    ("gb", 1000 * 1000 * 1000),
    ("tb", 1000 * 1000 * 1000 * 1000),
    ("kib", 1 << 10),
    ("mib", 1 << 20),
    ("gib", 1 << 30),
    ("tib", 1 << 40),
];

/// Parses `"10KiB"`, `"512"` or `"2 MB"` into bytes; the error says what was expected.
pub(crate) fn parse_bytes(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let digits = trimmed.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(format!(
            "invalid size \"{text}\": expected a whole number with an optional unit, such as \"10KiB\""
        ));
    }
    let number: u64 = trimmed[..digits]
        .parse()
        .map_err(|_| format!("invalid size \"{text}\": number too large"))?;
    let unit = trimmed[digits..].trim().to_ascii_lowercase();
    if unit.is_empty() {
        return Ok(number);
    }
    let factor = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|(_, factor)| *factor)
        .ok_or_else(|| {
            format!("invalid size \"{text}\": unknown unit (use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)")
        })?;
    number
        .checked_mul(factor)
        .ok_or_else(|| format!("invalid size \"{text}\": too large"))
}

/// Parses a size or a percentage (`"15%"`, 0 to 100).
pub(crate) fn parse_amount(text: &str) -> Result<Amount, String> {
    match text.trim().strip_suffix('%') {
        Some(number) => {
            let percent: f64 = number.trim().parse().map_err(|_| {
                format!(
                    "invalid percentage \"{text}\": expected a number before %, such as \"15%\""
                )
            })?;
            if (0.0..=100.0).contains(&percent) {
                Ok(Amount::Percent(percent))
            } else {
                Err(format!(
                    "percentage \"{text}\" is out of range: expected 0% to 100%"
                ))
            }
        }
        None => parse_bytes(text).map(Amount::Bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_bytes("10KiB"), Ok(10 * 1024));
        assert_eq!(parse_bytes("2 MB"), Ok(2_000_000));
        assert_eq!(parse_bytes("512"), Ok(512));
        assert_eq!(parse_bytes("1gib"), Ok(1 << 30));
    }

    #[test]
    fn rejects_bad_sizes() {
        assert!(parse_bytes("KiB")
            .unwrap_err()
            .contains("expected a whole number"));
        assert!(parse_bytes("10 parsecs")
            .unwrap_err()
            .contains("unknown unit"));
        assert!(parse_bytes("99999999999TiB")
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn parses_percentages() {
        assert_eq!(parse_amount("15%"), Ok(Amount::Percent(15.0)));
        assert_eq!(parse_amount("10GiB"), Ok(Amount::Bytes(10 << 30)));
        assert!(parse_amount("150%").unwrap_err().contains("out of range"));
        assert!(parse_amount("x%")
            .unwrap_err()
            .contains("invalid percentage"));
    }
}
