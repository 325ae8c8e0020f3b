//! What an import prints: `[[jobs]]` tables (serialized with the `toml` crate, so strings are
//! always escaped correctly) and rewritten crontab lines.

use std::collections::BTreeMap;

use serde::Serialize;

use super::line::{Command, Entry};
use super::Rewrite;

/// One `[[jobs]]` table, with the config's key names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct JobTable {
    /// `name`: derived from the command, unique in this import.
    pub name: String,
    /// `schedule`: the crontab's fields or macro.
    pub schedule: String,
    /// `timezone`: from `CRON_TZ`; absent means `[agent] timezone`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// `shell`: the command, its `%` standard input included; absent for external jobs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    /// `shell_program`: from `SHELL`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shell_program: Option<String>,
    /// `user`: the user column of a system crontab.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// `jitter`: from cronie's `RANDOM_DELAY` (minutes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<String>,
    /// `env`: the crontab's other assignments in effect at the line.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

/// The document a table is serialized in, so it comes out as `[[jobs]]`.
#[derive(Serialize)]
struct Document<'a> {
    /// The one table.
    jobs: [&'a JobTable; 1],
}

impl JobTable {
    /// An external job: cron runs it (through `run --job`), the daemon only syncs and shows it.
    pub(crate) fn external(
        name: String,
        schedule: String,
        timezone: Option<String>,
        jitter: Option<String>,
    ) -> JobTable {
        JobTable {
            name,
            schedule,
            timezone,
            shell: None,
            shell_program: None,
            user: None,
            jitter,
            env: BTreeMap::new(),
        }
    }

    /// The table as TOML, `[[jobs]]` header included.
    pub(crate) fn to_toml(&self) -> String {
        toml::to_string(&Document { jobs: [self] })
            .expect("a table of strings and a string map always serializes")
    }
}

/// The `shell` value of a command: the script itself, or with standard input
/// `printf '%s' 'DATA' | {` on its own line, the script, and `}` on the last line, so the
/// whole script (all its commands) reads the same bytes cron would have written.
pub(crate) fn shell_script(command: &Command) -> String {
    match &command.stdin {
        None => command.script.clone(),
        Some(data) => format!(
            "printf '%s' {} | {{\n{}\n}}",
            quote(data),
            command.script.trim_end()
        ),
    }
}

/// A crontab line running `entry` through `PROGRAM run --job NAME -- SHELL -c 'SCRIPT'`, its
/// schedule, user column and `%` standard input unchanged; `shell` is cron's `SHELL`. The script
/// is quoted for the shell, then each `%` in it is escaped as `\%` so cron passes it through.
pub(crate) fn wrap(entry: &Entry, name: &str, shell: Option<&str>, rewrite: &Rewrite) -> String {
    let command = super::line::split_percent(&entry.raw_command);
    let shell = shell.unwrap_or("/bin/sh");
    let mut line = String::new();
    if entry.quiet {
        line.push('-');
    }
    line.push_str(&entry.schedule);
    line.push(' ');
    if let Some(user) = &entry.user {
        line.push_str(user);
        line.push(' ');
    }
    let wrapped = format!(
        "{} run --job {} -- {} -c {}",
        quote(&rewrite.program),
        quote(name),
        quote(shell),
        quote(&command.script)
    );
    line.push_str(&wrapped.replace('%', "\\%"));
    line.push_str(&command.raw_stdin);
    line
}

/// `text` as one POSIX shell word: unchanged when it is made of safe characters, else in single
/// quotes (a `'` inside written as `'\''`).
pub(crate) fn quote(text: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-./:=@+,".contains(c);
    if !text.is_empty() && text.chars().all(safe) {
        return text.to_owned();
    }
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote("/bin/sh"), "/bin/sh");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("it's $x"), "'it'\\''s $x'");
    }

    #[test]
    fn stdin_becomes_a_printf_pipe_into_a_group() {
        let command = super::super::line::split_percent("sort; wc -l %b%a");
        assert_eq!(
            shell_script(&command),
            "printf '%s' 'b\na' | {\nsort; wc -l\n}"
        );
    }
}
