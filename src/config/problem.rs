//! One problem found in a configuration file, and how it is shown:
//! `path:line:col: job "backup": key `schedule`: what is wrong; hint: what to do`.
//!
//! Problems carry byte spans into the file text; they become line and column (1-based, columns
//! counted in characters) only when rendered, through the [`Lines`] of the text they came from:
//! the line starts are found once, so rendering every problem of a file with thousands of them
//! takes time linear in the file, not in the file times the problems.

use std::ops::Range;
use std::path::Path;

/// Something wrong (or worth a warning) at a place in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    /// Byte range in the file text; `None` when the problem has no single place.
    pub span: Option<Range<usize>>,
    /// The section it is in: `[agent]`, `job "backup"`, `job #3`, or empty for the whole file.
    pub context: String,
    /// The key the problem is about, as written in the file (`watch.kind`).
    pub key: Option<String>,
    /// What is wrong, lowercase, never containing a secret.
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
}

impl Problem {
    /// A problem at `span` in section `context`.
    pub(crate) fn new(
        span: Option<Range<usize>>,
        context: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Problem {
            span,
            context: context.into(),
            key: None,
            message: message.into(),
            hint: None,
        }
    }

    /// The same problem, about `key`.
    pub(crate) fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// The same problem, with a hint.
    pub(crate) fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The one-line message: `path:line:col: context: key `k`: message; hint: ...`.
    pub(crate) fn render(&self, path: &Path, lines: &Lines<'_>) -> String {
        let mut out = path.display().to_string();
        if let Some(span) = &self.span {
            let (line, col) = lines.line_col(span.start);
            out.push_str(&format!(":{line}:{col}"));
        }
        out.push_str(": ");
        if !self.context.is_empty() {
            out.push_str(&self.context);
            out.push_str(": ");
        }
        if let Some(key) = &self.key {
            out.push_str(&format!("key `{key}`: "));
        }
        out.push_str(&self.message);
        if let Some(hint) = &self.hint {
            out.push_str("; hint: ");
            out.push_str(hint);
        }
        out
    }
}

/// The start of every line of a text, found once: line and column of a byte offset by binary
/// search.
#[derive(Debug)]
pub(crate) struct Lines<'a> {
    text: &'a str,
    /// Byte offset of the start of each line; the first is 0.
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    /// The lines of `text`.
    pub(crate) fn new(text: &'a str) -> Lines<'a> {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Lines { text, starts }
    }

    /// The 1-based line and column (in characters) of byte `offset`.
    pub(crate) fn line_col(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        // The last line starting at or before `offset`.
        let line = self.starts.partition_point(|&start| start <= offset);
        let line_start = self.starts[line - 1];
        let col = self.text[line_start..offset].chars().count() + 1;
        (line, col)
    }
}

/// The candidate closest to `word` by edit distance, when it is close enough to be a likely
/// typo (at most a third of the word's length, and at least 1, 2 for longer words).
pub(crate) fn closest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).clamp(1, 3);
    candidates
        .into_iter()
        .map(|c| (edit_distance(&word.to_lowercase(), &c.to_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Edit distance between two strings, by characters, where swapping two neighbours counts as
/// one edit (optimal string alignment): `nmae` is one edit from `name`.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // d[i][j]: distance between the first i characters of a and the first j of b.
    let mut d = vec![vec![0; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based_in_characters() {
        let lines = Lines::new("a = 1\nbé = \"x\"\n");
        assert_eq!(lines.line_col(0), (1, 1));
        assert_eq!(lines.line_col(5), (1, 6));
        assert_eq!(lines.line_col(6), (2, 1));
        // "bé = " is 6 bytes but 5 characters: the value starts at column 6.
        assert_eq!(lines.line_col(6 + 6), (2, 6));
        // Inside the two bytes of 'é': the character's own column.
        assert_eq!(lines.line_col(6 + 2), (2, 2));
        assert_eq!(lines.line_col(999), (3, 1));
        assert_eq!(Lines::new("").line_col(3), (1, 1));
    }

    #[test]
    fn renders_every_part() {
        let p = Problem::new(Some(6..7), "job \"backup\"", "bad")
            .key("schedule")
            .hint("fix it");
        assert_eq!(
            p.render(Path::new("c.toml"), &Lines::new("a = 1\nb = 2\n")),
            "c.toml:2:1: job \"backup\": key `schedule`: bad; hint: fix it"
        );
        let bare = Problem::new(None, "", "empty");
        assert_eq!(
            bare.render(Path::new("c.toml"), &Lines::new("")),
            "c.toml: empty"
        );
    }

    #[test]
    fn closest_finds_typos_only() {
        let keys = ["schedule", "shell", "timezone"];
        assert_eq!(closest("schedul", keys), Some("schedule"));
        assert_eq!(closest("shel", keys), Some("shell"));
        assert_eq!(closest("Timezone", keys), Some("timezone"));
        assert_eq!(closest("colour", keys), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("nmae", "name"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
