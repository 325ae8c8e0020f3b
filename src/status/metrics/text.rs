//! The Prometheus text exposition format (version 0.0.4), written by hand: a family's `HELP`
//! and `TYPE` lines, and samples with their labels escaped (`\\`, `\"`, `\n`).

use std::fmt::Write as _;

/// The exposition text being written.
#[derive(Default)]
pub(super) struct Text(pub(super) String);

impl Text {
    pub(super) fn family(&mut self, name: &str, kind: &str, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    pub(super) fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.0.push_str(name);
        if !labels.is_empty() {
            let parts: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
                .collect();
            let _ = write!(self.0, "{{{}}}", parts.join(","));
        }
        let _ = writeln!(self.0, " {value}");
    }
}

/// A label value with `\`, `"` and newlines escaped.
pub(crate) fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        let mut text = Text::default();
        text.sample("m", &[("job", "x\"y")], 1.5);
        assert_eq!(text.0, "m{job=\"x\\\"y\"} 1.5\n");
    }
}
