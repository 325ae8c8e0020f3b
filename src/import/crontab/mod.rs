//! `import crontab`: translates a user or system crontab into `[[jobs]]` tables, or rewrites it
//! so that each job runs through `heartbeat-agent run --job NAME` and the tables describe them as
//! external jobs.
//!
//! - `line`: one line's syntax and the `%` rules; `name`: job names from commands;
//! - `render`: TOML tables and rewritten crontab lines.

mod line;
mod name;
mod render;

use std::collections::BTreeMap;

use crate::schedule::Zone;

use crate::schedule::Schedule;
use line::{Entry, Line};
pub(crate) use render::JobTable;

/// How to read the crontab and what to produce.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The `/etc/crontab` and `/etc/cron.d` format: a user column after the schedule.
    pub system: bool,
    /// Rewrite the crontab instead of translating the commands into the config.
    pub rewrite: Option<Rewrite>,
}

/// `--rewrite`: how the wrapped lines call the agent.
#[derive(Debug, Clone)]
pub struct Rewrite {
    /// The agent as cron finds it: `heartbeat-agent` on cron's `PATH`, or a full path.
    pub program: String,
}

/// Something in the crontab that was not translated, or not translated fully.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The 1-based line number.
    pub line: usize,
    /// What was not translated and why.
    pub message: String,
}

impl Problem {
    /// `SOURCE:LINE: message`, the way the CLI reports it.
    pub(crate) fn render(&self, source: &str) -> String {
        format!("{source}:{}: {}", self.line, self.message)
    }
}

/// The result of an import.
#[derive(Debug, Clone, Default)]
pub struct Import {
    /// `[[jobs]]` tables, each preceded by a `# from SOURCE:LINE` comment; empty when no job
    /// line was translated.
    pub jobs: String,
    /// How many jobs `jobs` holds.
    pub job_count: usize,
    /// With `--rewrite`: the whole crontab, job lines wrapped, every other line unchanged.
    pub crontab: Option<String>,
    /// Every line or assignment that was not translated, in line order.
    pub problems: Vec<Problem>,
}

/// Cron's settings in effect at a line: assignments apply to the lines after them.
#[derive(Debug, Default)]
struct Settings {
    /// `SHELL`.
    shell: Option<String>,
    /// `CRON_TZ`, or the line of an invalid one (the jobs under it are not translated).
    zone: Option<Result<Zone, usize>>,
    /// cronie's `RANDOM_DELAY`, in minutes.
    random_delay: Option<u64>,
    /// Every other assignment.
    env: BTreeMap<String, String>,
}

/// Variables cron uses for mailing output; the agent does not mail, so they are reported.
const MAIL_VARIABLES: [&str; 4] = [
    "MAILTO",
    "MAILFROM",
    "CONTENT_TYPE",
    "CONTENT_TRANSFER_ENCODING",
];

/// Translates `text`, read from `source` (named in the `# from` comments).
pub fn import(text: &str, source: &str, options: &Options) -> Import {
    let mut out = Import::default();
    let mut settings = Settings::default();
    let mut names = name::Names::default();
    let mut crontab = String::new();
    for (index, text_line) in text.lines().enumerate() {
        let number = index + 1;
        let mut report = |message: String| {
            out.problems.push(Problem {
                line: number,
                message,
            })
        };
        let mut wrapped = None;
        match line::classify(text_line, options.system) {
            Ok(Line::Skip) => {}
            Ok(Line::Assignment { name, value }) => {
                if let Some(problem) = settings.assign(name, value, number) {
                    report(problem);
                }
            }
            Ok(Line::Entry(entry)) => match job_table(&entry, &settings, &mut names, options) {
                Ok(table) => {
                    out.jobs.push_str(&format!("# from {source}:{number}\n"));
                    out.jobs.push_str(&table.to_toml());
                    out.jobs.push('\n');
                    out.job_count += 1;
                    if let Some(rewrite) = &options.rewrite {
                        wrapped = Some(render::wrap(
                            &entry,
                            &table.name,
                            settings.shell.as_deref(),
                            rewrite,
                        ));
                    }
                }
                Err(why) => report(not_translated(why, options)),
            },
            Err(why) => report(not_translated(why, options)),
        }
        crontab.push_str(wrapped.as_deref().unwrap_or(text_line));
        crontab.push('\n');
    }
    if options.rewrite.is_some() {
        out.crontab = Some(crontab);
    }
    out
}

/// The message of a line that is not translated, saying what happens to it.
fn not_translated(why: String, options: &Options) -> String {
    if options.rewrite.is_some() {
        format!("{why}; the line is left unchanged and not imported")
    } else {
        format!("{why}; the line is not imported")
    }
}

impl Settings {
    /// Applies `NAME=value`; returns the problem when it is not translated.
    fn assign(&mut self, name: String, value: String, line: usize) -> Option<String> {
        if value.contains('\0') {
            // No process environment can hold it (and the config refuses it).
            return Some(format!(
                "the value of {name} contains a NUL byte; it is not imported"
            ));
        }
        match name.as_str() {
            "SHELL" if value.trim().is_empty() => {
                self.shell = None;
                return Some(
                    "SHELL is empty; the jobs after it run with /bin/sh (the default)".to_owned(),
                );
            }
            "SHELL" => self.shell = Some(value),
            "CRON_TZ" => match value.parse::<Zone>() {
                Ok(tz) => self.zone = Some(Ok(tz)),
                Err(_) => {
                    self.zone = Some(Err(line));
                    return Some(format!(
                        "CRON_TZ=\"{value}\" is not an IANA time zone (such as Europe/Berlin); \
                         the jobs after it are not imported until the next valid CRON_TZ"
                    ));
                }
            },
            "RANDOM_DELAY" => match value.parse::<u64>() {
                Ok(minutes) => self.random_delay = Some(minutes),
                Err(_) => {
                    self.random_delay = None;
                    return Some(format!(
                        "RANDOM_DELAY=\"{value}\" is not a number of minutes; the jobs after it \
                         get no jitter"
                    ));
                }
            },
            mail if MAIL_VARIABLES.contains(&mail) => {
                return Some(format!(
                    "{name} is not translated: the agent does not mail job output (failures \
                     show in status and on the heartbeat check)"
                ));
            }
            _ => {
                self.env.insert(name, value);
            }
        }
        None
    }
}

/// The `[[jobs]]` table of a job line, or why it cannot be translated.
fn job_table(
    entry: &Entry,
    settings: &Settings,
    names: &mut name::Names,
    options: &Options,
) -> Result<JobTable, String> {
    Schedule::parse(&entry.schedule).map_err(|err| err.to_string())?;
    if entry.raw_command.contains('\0') || entry.user.as_deref().is_some_and(|u| u.contains('\0')) {
        // No program can be given it (and the config refuses it).
        return Err("the line contains a NUL byte".to_owned());
    }
    let timezone = match settings.zone {
        Some(Err(line)) => {
            return Err(format!(
                "the CRON_TZ in effect (line {line}) is not a valid time zone"
            ))
        }
        Some(Ok(tz)) => Some(tz.name().to_owned()),
        None => None,
    };
    let command = line::split_percent(&entry.raw_command);
    if command.script.trim().is_empty() {
        return Err("the command before the first % is empty".to_owned());
    }
    if is_wrapped(&command.script) {
        return Err(
            "the command already runs through `heartbeat-agent run` (a rewritten \
                    crontab?); its job belongs in the config as it is"
                .to_owned(),
        );
    }
    let name = names.unique_for(&command.script);
    let jitter = settings
        .random_delay
        .filter(|m| *m > 0)
        .map(|m| format!("{m}m"));
    if options.rewrite.is_some() {
        return Ok(JobTable::external(
            name,
            entry.schedule.clone(),
            timezone,
            jitter,
        ));
    }
    Ok(JobTable {
        name,
        schedule: entry.schedule.clone(),
        timezone,
        shell: Some(render::shell_script(&command)),
        shell_program: settings.shell.clone(),
        user: entry.user.clone(),
        jitter,
        env: settings.env.clone(),
    })
}

/// Whether `script` is a line `--rewrite` already wrapped: wrapping it again would nest runs.
fn is_wrapped(script: &str) -> bool {
    let mut words = script.split_whitespace();
    let program = words.next().unwrap_or_default();
    program.rsplit('/').next() == Some("heartbeat-agent") && words.next() == Some("run")
}

#[cfg(test)]
mod tests;
