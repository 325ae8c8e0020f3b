//! One crontab line, classified as crontab(5) and cronie read it: a comment or blank line, an
//! environment assignment, or a job entry (schedule, user column in system crontabs, command);
//! plus the `%` rules that split a command from its standard input.

/// What one line of a crontab is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Line {
    /// A blank line or a comment (`#` as the first non-blank character).
    Skip,
    /// `NAME=value`, `NAME = value` or `NAME = "value"`: applies to the lines after it.
    Assignment {
        /// The variable name.
        name: String,
        /// The value with cron's quote rules applied.
        value: String,
    },
    /// A job.
    Entry(Entry),
}

/// A job line, its parts as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// cronie's leading `-` (do not log the run to syslog); kept when rewriting.
    pub quiet: bool,
    /// The five time fields joined by one space, or the `@` macro.
    pub schedule: String,
    /// The user column of a system crontab (`/etc/crontab`, `/etc/cron.d/*`).
    pub user: Option<String>,
    /// The command as written, `%` and `\%` still in it.
    pub raw_command: String,
}

/// A command with crontab's `%` rules applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Command {
    /// What the shell runs: up to the first bare `%`, each `\%` turned into `%`.
    pub script: String,
    /// What cron writes to the command's standard input: the text after the first bare `%`,
    /// further bare `%` turned into newlines; `None` when there is no text after it.
    pub stdin: Option<String>,
    /// The raw text from the first bare `%` on (the `%` included), kept verbatim when a line is
    /// rewritten so cron still feeds the same input.
    pub raw_stdin: String,
}

/// The `@` macros crontab(5) and cronie accept.
const MACROS: [&str; 8] = [
    "@reboot",
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];

/// Classifies one line (without its newline); `system` expects the user column. The error says
/// what is wrong with the line and why it cannot be read.
pub(crate) fn classify(line: &str, system: bool) -> Result<Line, String> {
    let text = line.trim_start();
    if text.trim_end().is_empty() || text.starts_with('#') {
        return Ok(Line::Skip);
    }
    if let Some(assignment) = assignment(text)? {
        return Ok(assignment);
    }
    entry(text, system).map(Line::Entry)
}

/// Reads `NAME=value` the way cronie's `load_env` does: the name runs up to `=` or a blank,
/// blanks around `=` are allowed, a value in matching single or double quotes loses them (and
/// nothing but blanks may follow), an unquoted value runs to the end of the line without its
/// trailing blanks. `Ok(None)` means the line is not an assignment.
fn assignment(text: &str) -> Result<Option<Line>, String> {
    let name_end = text
        .find(|c: char| c == '=' || c.is_whitespace())
        .unwrap_or(text.len());
    let name = &text[..name_end];
    let Some(after_eq) = text[name_end..].trim_start().strip_prefix('=') else {
        return Ok(None);
    };
    if name.is_empty() || name.starts_with('@') || name.chars().any(|c| "*,/".contains(c)) {
        return Ok(None);
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        || name.starts_with(|c: char| c.is_ascii_digit())
    {
        return Err(format!(
            "\"{name}\" is not a valid environment variable name (letters, digits and _, not \
             starting with a digit)"
        ));
    }
    let raw = after_eq.trim();
    let value = match raw.chars().next() {
        Some(quote @ ('"' | '\'')) => {
            let inner = &raw[1..];
            let Some(close) = inner.find(quote) else {
                return Err(format!(
                    "the value of {name} opens a {quote} quote that is not closed on this line"
                ));
            };
            if !inner[close + 1..].trim().is_empty() {
                return Err(format!(
                    "the value of {name} has text after its closing {quote} quote; quote the \
                     whole value"
                ));
            }
            inner[..close].to_owned()
        }
        _ => raw.to_owned(),
    };
    Ok(Some(Line::Assignment {
        name: name.to_owned(),
        value,
    }))
}

/// Reads a job line: a macro or five fields, the user column when `system`, then the command.
fn entry(text: &str, system: bool) -> Result<Entry, String> {
    let (quiet, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let mut rest = text;
    let mut fields = Vec::new();
    let count = if text.starts_with('@') { 1 } else { 5 };
    for _ in 0..count {
        let Some((field, tail)) = next_word(rest) else {
            return Err(format!(
                "a job line needs five time fields (or an @ macro) and a command; this line has \
                 only {} field(s) and no command",
                fields.len()
            ));
        };
        fields.push(field);
        rest = tail;
    }
    if count == 1 && fields[0].eq_ignore_ascii_case("@every") {
        // The daemon's fixed intervals are no crontab(5) form: cron never ran this line.
        return Err(
            "@every is not a crontab(5) macro: cron does not run this line, so there is no \
             job to move; write it into the config by hand as schedule = \"@every ...\""
                .to_owned(),
        );
    }
    if count == 1 && !MACROS.contains(&fields[0]) {
        return Err(format!(
            "unknown schedule macro \"{}\"; crontab(5) knows {}",
            fields[0],
            MACROS.join(", ")
        ));
    }
    let user = if system {
        let Some((user, tail)) = next_word(rest) else {
            return Err(
                "a system crontab line needs a user column and a command after the \
                        schedule; this line has neither"
                    .to_owned(),
            );
        };
        check_user(user)?;
        rest = tail;
        Some(user.to_owned())
    } else {
        None
    };
    let raw_command = rest.trim().to_owned();
    if raw_command.is_empty() {
        return Err(if system {
            "the line has a schedule and a user but no command".to_owned()
        } else {
            "the line has a schedule but no command".to_owned()
        });
    }
    Ok(Entry {
        quiet,
        schedule: fields.join(" "),
        user,
        raw_command,
    })
}

/// The first blank-separated word of `text` and the text after it.
fn next_word(text: &str) -> Option<(&str, &str)> {
    let text = text.trim_start();
    if text.is_empty() {
        return None;
    }
    let end = text.find(char::is_whitespace).unwrap_or(text.len());
    Some((&text[..end], &text[end..]))
}

/// A user column must be a user name as useradd(8) allows it (a trailing `$` included).
fn check_user(user: &str) -> Result<(), String> {
    let name = user.strip_suffix('$').unwrap_or(user);
    let valid = name.len() <= 32
        && name.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if valid {
        return Ok(());
    }
    Err(format!(
        "the user column \"{user}\" is not a user name (letters, digits, `.`, `_`, `-`); a \
         system crontab line is `SCHEDULE USER COMMAND` (is this a user crontab? then leave out \
         --system)"
    ))
}

/// Applies crontab's `%` rules as cronie does: in the command, `\%` becomes `%` (a backslash
/// before anything else stays) and the first bare `%` ends it; in the text after it, bare `%`
/// become newlines and `\%` becomes `%`.
pub(crate) fn split_percent(raw: &str) -> Command {
    let mut script = String::new();
    let mut escaped = false;
    let mut raw_stdin = "";
    for (at, ch) in raw.char_indices() {
        if escaped {
            if ch == '%' {
                script.pop();
            }
            script.push(ch);
            escaped = false;
        } else if ch == '%' {
            raw_stdin = &raw[at..];
            break;
        } else {
            escaped = ch == '\\';
            script.push(ch);
        }
    }
    let data = raw_stdin.get(1..).unwrap_or_default();
    Command {
        script,
        stdin: (!data.is_empty()).then(|| stdin_text(data)),
        raw_stdin: raw_stdin.to_owned(),
    }
}

/// The standard input cron writes for the text after the first bare `%`.
fn stdin_text(data: &str) -> String {
    let mut out = String::new();
    let mut escaped = false;
    for ch in data.chars() {
        let ch = if escaped {
            if ch != '%' {
                out.push('\\');
            }
            ch
        } else if ch == '%' {
            '\n'
        } else {
            ch
        };
        escaped = ch == '\\';
        if !escaped {
            out.push(ch);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assign(line: &str) -> (String, String) {
        match classify(line, false).unwrap() {
            Line::Assignment { name, value } => (name, value),
            other => panic!("{line:?} read as {other:?}"),
        }
    }

    #[test]
    fn assignments_follow_cronie_quoting() {
        assert_eq!(assign("A=b c  "), ("A".into(), "b c".into()));
        assert_eq!(assign("  A = b"), ("A".into(), "b".into()));
        assert_eq!(assign("A = \" x \""), ("A".into(), " x ".into()));
        assert_eq!(assign("A='a\"b'"), ("A".into(), "a\"b".into()));
        assert_eq!(assign("MAILTO=\"\""), ("MAILTO".into(), "".into()));
        assert_eq!(assign("A="), ("A".into(), "".into()));
        assert!(classify("A=\"open", false)
            .unwrap_err()
            .contains("not closed"));
        assert!(classify("A=\"x\" y", false)
            .unwrap_err()
            .contains("after its closing"));
        assert!(classify("1A=x", false).unwrap_err().contains("not a valid"));
    }

    #[test]
    fn entries_with_and_without_user_column() {
        let Line::Entry(e) = classify("  */5  1-3 * jan mon-fri  echo  hi ", false).unwrap() else {
            panic!("not an entry")
        };
        assert_eq!(e.schedule, "*/5 1-3 * jan mon-fri");
        assert_eq!(e.raw_command, "echo  hi");
        assert_eq!(e.user, None);
        let Line::Entry(e) = classify("-@daily root run-parts x", true).unwrap() else {
            panic!("not an entry")
        };
        assert!(e.quiet);
        assert_eq!(
            (e.schedule.as_str(), e.user.as_deref()),
            ("@daily", Some("root"))
        );
        // A value with = in a job line is not an assignment.
        assert!(matches!(
            classify("0 * * * * A=1 cmd", false).unwrap(),
            Line::Entry(_)
        ));
        assert!(classify("@sometimes x", false)
            .unwrap_err()
            .contains("unknown schedule macro"));
        assert!(classify("@every 5m x", false)
            .unwrap_err()
            .starts_with("@every is not a crontab(5) macro: cron does not run this line"));
        assert!(classify("* * * *", false)
            .unwrap_err()
            .contains("only 4 field"));
        assert!(classify("* * * * * ", false)
            .unwrap_err()
            .contains("no command"));
        assert!(classify("* * * * * r:o:o:t x", true)
            .unwrap_err()
            .contains("user column"));
        assert_eq!(classify("   # note", false).unwrap(), Line::Skip);
    }

    #[test]
    fn percent_rules() {
        let c = split_percent(r"date +\%F %line one%line \%two\x");
        assert_eq!(c.script, "date +%F ");
        assert_eq!(c.stdin.as_deref(), Some("line one\nline %two\\x"));
        assert_eq!(c.raw_stdin, r"%line one%line \%two\x");
        let c = split_percent(r"echo a\b");
        assert_eq!((c.script.as_str(), c.stdin), (r"echo a\b", None));
        assert_eq!(split_percent("cat %").stdin, None);
        assert_eq!(split_percent(r"echo \\%in").script, r"echo \\");
    }
}
