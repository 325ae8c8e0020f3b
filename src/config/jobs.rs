//! Stage two for `[[jobs]]`: each job's name, action (command, shell, watch, or external) and
//! ping target (`ping_url` or `check_id`) checked, and its settings (validated in
//! `job_settings.rs`) applied over `[defaults]` key by key. Every problem is collected into the
//! [`Checker`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use toml::Spanned;

use super::defaults::{FAIL_BODY_MAX, KILL_AFTER, OUTPUT_TAIL, SHELL};
use super::job_settings::{merge, settings, Settings};
use super::parse::RawJobEntry;
use super::problem::Lines;
use super::raw::example;
use super::values::{At, Checker};
use super::{AgentSettings, FailBody, Job, JobAction, PingTarget, RunOn, StartFail};
use crate::schedule::{is_every, Schedule};

/// The longest job name (it names state files).
const MAX_NAME: usize = 100;

/// One job, with defaults applied; `None` when something about it is invalid.
pub(super) fn job(
    check: &mut Checker,
    entry: &RawJobEntry,
    agent: &AgentSettings,
    defaults: &Settings,
    lines: &Lines<'_>,
    names: &mut HashMap<String, usize>,
) -> Option<Job> {
    let context = entry.context.as_str();
    let at = |key| At { context, key };
    let raw = &entry.job.raw;
    let name = job_name(check, entry, lines, names);
    let schedule = match (&raw.schedule, entry.job.broken.contains("schedule")) {
        (Some(value), _) => {
            let parsed = if value.get_ref().trim().is_empty() {
                Err("empty schedule".to_owned())
            } else {
                Schedule::parse(value.get_ref().trim()).map_err(|e| e.message)
            };
            parsed
                .map_err(|message| {
                    // An `@every` error already lists the durations it takes.
                    let hint = if is_every(value.get_ref()) {
                        "write @every with one duration, or a crontab(5) expression such as \
                         \"0 3 * * *\""
                    } else {
                        "use a crontab(5) expression such as \"0 3 * * *\" or \"@daily\""
                    };
                    check.error(
                        Some(value.span()),
                        at("schedule"),
                        message,
                        Some(hint.to_owned()),
                    );
                })
                .ok()
        }
        (None, false) => {
            missing(check, entry.job.span.clone(), context, "schedule");
            None
        }
        (None, true) => None,
    };
    let timezone = check
        .timezone(at("timezone"), &raw.timezone)
        .unwrap_or(agent.timezone);
    let own = settings(check, context, &entry.settings.raw);
    let retries = super::retries::merge(check, entry, own.retries, defaults.retries);
    let merged = merge(own, defaults);
    let action = action(check, entry, &merged);
    let target = ping_target(check, entry);
    let check_settings = super::check::check_settings(check, entry);
    let output_tail = merged.output_tail.unwrap_or(OUTPUT_TAIL);
    let start_fail = start_fail(check, entry, output_tail);
    // A watch probes a local condition: each host has its own check by default.
    let run_on = merged.run_on.unwrap_or(match action.as_ref() {
        Some(JobAction::Watch(_)) => RunOn::All,
        _ => RunOn::One,
    });
    let job = Job {
        name: name?,
        schedule: schedule?,
        timezone,
        action: action?,
        timeout: merged.timeout,
        kill_after: merged.kill_after.unwrap_or(KILL_AFTER),
        success_exit_codes: merged.success_exit_codes.unwrap_or_else(|| vec![0]),
        overlap: merged.overlap.unwrap_or_default(),
        run_on,
        jitter: merged.jitter.unwrap_or_default(),
        working_dir: merged.working_dir,
        env: merged.env,
        user: merged.user,
        group: merged.group,
        enabled: merged.enabled.unwrap_or(true),
        catch_up: merged.catch_up.unwrap_or(false),
        output_tail,
        history: merged.history.unwrap_or(agent.history),
        retries,
        target: target?,
        check: super::shared_default(check_settings?, {
            // The process has one default value (never changed), shared by every job of every
            // loaded config that leaves it unset.
            static DEFAULT: OnceLock<Arc<super::CheckSettings>> = OnceLock::new();
            &DEFAULT
        }),
        start_fail: super::shared_default(start_fail?, {
            // The process has one default value (never changed), shared by every job of every
            // loaded config that leaves it unset.
            static DEFAULT: OnceLock<Arc<super::StartFail>> = OnceLock::new();
            &DEFAULT
        }),
    };
    super::check::check_limits(check, entry, &job);
    super::retries::fit(check, entry, &job);
    Some(job)
}

pub(super) fn missing(
    check: &mut Checker,
    span: Option<std::ops::Range<usize>>,
    context: &str,
    key: &str,
) {
    let hint = example(super::values::leaf(key)).map(|e| format!("add it, for example: {e}"));
    check.error(span, At { context, key }, "missing required key", hint);
}

/// The job's name: present, in the safe charset, unique.
fn job_name(
    check: &mut Checker,
    entry: &RawJobEntry,
    lines: &Lines<'_>,
    names: &mut HashMap<String, usize>,
) -> Option<String> {
    let at = At {
        context: &entry.context,
        key: "name",
    };
    let Some(value) = &entry.job.raw.name else {
        if !entry.job.broken.contains("name") {
            missing(check, entry.job.span.clone(), &entry.context, "name");
        }
        return None;
    };
    let name = value.get_ref();
    let safe = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty()
        || name.len() > MAX_NAME
        || !name.chars().all(safe)
        || !name.starts_with(|c: char| c.is_ascii_alphanumeric())
    {
        let suggestion: String = name
            .trim()
            .chars()
            .map(|c| if safe(c) { c } else { '-' })
            .collect();
        let suggestion = suggestion.trim_start_matches(['-', '.', '_']);
        let hint = if suggestion.is_empty() {
            "for example: name = \"backup\"".to_owned()
        } else {
            format!("for example: name = \"{suggestion}\"")
        };
        let message = format!(
            "job name {name:?} is not allowed: names are 1 to {MAX_NAME} letters, digits, \
             '.', '_' or '-', starting with a letter or digit (they name state files)"
        );
        check.error(Some(value.span()), at, message, Some(hint));
        return None;
    }
    let line = lines.line_col(value.span().start).0;
    if let Some(first) = names.get(name) {
        let message = format!(
            "duplicate job name {name:?}: the first job with this name is at line {first}, \
             this one at line {line}"
        );
        check.error(
            Some(value.span()),
            at,
            message,
            Some("job names must be unique; rename one of them".to_owned()),
        );
        return None;
    }
    names.insert(name.clone(), line);
    Some(name.clone())
}

/// Exactly one of `command`, `shell`, `watch`, or none (an external job).
fn action(check: &mut Checker, entry: &RawJobEntry, settings: &Settings) -> Option<JobAction> {
    let context = entry.context.as_str();
    let raw = &entry.job.raw;
    // The keys that say what the job does, in file order.
    let mut keys: Vec<(&str, Option<std::ops::Range<usize>>)> = entry
        .job
        .keys
        .iter()
        .filter(|(k, _)| k == "command" || k == "shell")
        .map(|(k, span)| (k.as_str(), span.clone()))
        .chain(entry.watch.as_ref().map(|w| ("watch", w.span.clone())))
        .collect();
    keys.sort_by_key(|(_, span)| span.as_ref().map_or(usize::MAX, |s| s.start));
    if let [(first, _), (second, span), ..] = keys.as_slice() {
        let span = span.clone().or(entry.job.span.clone());
        let (first, second) = (*first, *second);
        let message = format!(
            "a job does exactly one of `command`, `shell` or `watch`, \
             but this one has both `{first}` and `{second}`"
        );
        let hint = "keep one; a job with none is external (run elsewhere, \
                    for example by cron through `heartbeat-agent run --job NAME`)";
        check.error(
            span,
            At {
                context,
                key: second,
            },
            message,
            Some(hint.to_owned()),
        );
        return None;
    }
    if let Some(command) = &raw.command {
        if command
            .get_ref()
            .first()
            .map_or(true, |p| p.trim().is_empty())
        {
            let hint = example("command").map(|e| format!("for example: {e}"));
            check.error(
                Some(command.span()),
                At {
                    context,
                    key: "command",
                },
                "the command is empty: expected the program and its arguments",
                hint,
            );
            return None;
        }
        if let Some(n) = command.get_ref().iter().position(|arg| arg.contains('\0')) {
            let which = if n == 0 {
                "the program".to_owned()
            } else {
                format!("argument {n}")
            };
            check.error(
                Some(command.span()),
                At {
                    context,
                    key: "command",
                },
                format!("{which} of the command contains a NUL byte (\\u0000), which no program can be given"),
                Some("remove the \\u0000 from the value".to_owned()),
            );
            return None;
        }
        return Some(JobAction::Command(command.get_ref().clone()));
    }
    if let Some(shell) = &raw.shell {
        let at = At {
            context,
            key: "shell",
        };
        let script = check.non_empty(at, &raw.shell)?;
        if script.contains('\0') {
            check.error(
                Some(shell.span()),
                at,
                "the script contains a NUL byte (\\u0000), which no shell can be given",
                Some("remove the \\u0000 from the value".to_owned()),
            );
            return None;
        }
        let program = settings
            .shell_program
            .clone()
            .unwrap_or_else(|| PathBuf::from(SHELL));
        return Some(JobAction::Shell { program, script });
    }
    match &entry.watch {
        Some(watch) => super::watch::watch_spec(check, context, watch).map(JobAction::Watch),
        None if keys.is_empty() => Some(JobAction::External),
        None => None,
    }
}

/// `ping_url`, `check_id`, or neither (a warning).
fn ping_target(check: &mut Checker, entry: &RawJobEntry) -> Option<PingTarget> {
    let context = entry.context.as_str();
    let raw = &entry.job.raw;
    match (&raw.ping_url, &raw.check_id) {
        (Some(_), Some(id)) => {
            let hint = "keep `ping_url` for any heartbeat service, \
                        or `check_id` to ping the check whose URL sync learns";
            check.error(
                Some(id.span()),
                At {
                    context,
                    key: "check_id",
                },
                "set either `ping_url` or `check_id`, not both",
                Some(hint.to_owned()),
            );
            None
        }
        (Some(_), None) => check
            .url_template(
                At {
                    context,
                    key: "ping_url",
                },
                &raw.ping_url,
            )
            .map(PingTarget::Url),
        (None, Some(_)) => check
            .non_empty(
                At {
                    context,
                    key: "check_id",
                },
                &raw.check_id,
            )
            .map(PingTarget::Check),
        (None, None) => {
            let creates = (entry.check.as_ref())
                .and_then(|c| c.raw.create.as_ref())
                .is_some_and(|c| *c.get_ref());
            if !creates
                && !entry.job.broken.contains("ping_url")
                && !entry.job.broken.contains("check_id")
            {
                let hint = "add `ping_url` or `check_id` to monitor this job".to_owned();
                check.warn(
                    entry.job.span.clone(),
                    At { context, key: "" },
                    "no `ping_url` or `check_id`: nothing will be pinged",
                    Some(hint),
                );
            }
            Some(PingTarget::None)
        }
    }
}

/// `start_url` (with its `{run_id}`), `fail_url` (with its `{exit_code}` and `{run_id}`),
/// `fail_body`, `fail_method` and `fail_headers`; `None` when one is
/// invalid. The body is the output tail, so a tail larger than a fail body may be is refused
/// at `fail_body`.
fn start_fail(check: &mut Checker, entry: &RawJobEntry, output_tail: usize) -> Option<StartFail> {
    let context = entry.context.as_str();
    let at = |key| At { context, key };
    let raw = &entry.job.raw;
    let start_url = check.url_template(at("start_url"), &raw.start_url);
    let fail_url = check.fail_url(at("fail_url"), &raw.fail_url);
    let fail_body = match &raw.fail_body {
        None => Some(FailBody::Empty),
        Some(value) => match value.get_ref().as_str() {
            "output_tail" | "json" if output_tail > FAIL_BODY_MAX => {
                let message = format!(
                    "fail_body sends the output tail, at most {} KiB, but output_tail is {output_tail} bytes",
                    FAIL_BODY_MAX / 1024
                );
                let hint = format!(
                    "lower output_tail to at most \"{}KiB\"",
                    FAIL_BODY_MAX / 1024
                );
                check.error(Some(value.span()), at("fail_body"), message, Some(hint));
                None
            }
            "output_tail" => Some(FailBody::OutputTail),
            "json" => Some(FailBody::Json),
            other => {
                let hint = "fail_body = \"output_tail\" sends the run's last output with the fail ping, \
                            \"json\" a JSON summary for a chat or generic webhook; leave it out for none";
                check.error(
                    Some(value.span()),
                    at("fail_body"),
                    format!("unknown fail_body \"{other}\": expected \"output_tail\" or \"json\""),
                    Some(hint.to_owned()),
                );
                None
            }
        },
    };
    let with_body = raw.fail_body.is_some();
    let fail_method = super::fail::method(check, at("fail_method"), &raw.fail_method, with_body);
    let fail_headers = super::fail::headers(check, context, &raw.fail_headers);
    for (key, set) in [
        ("fail_body", raw.fail_body.as_ref().map(Spanned::span)),
        ("fail_method", raw.fail_method.as_ref().map(Spanned::span)),
    ] {
        if let (Some(span), None) = (set, &raw.fail_url) {
            check.warn(
                Some(span),
                at(key),
                format!("{key} without fail_url: nothing carries it"),
                Some(format!("add fail_url, or remove {key}")),
            );
        }
    }
    let valid = [
        raw.start_url.is_none() || start_url.is_some(),
        raw.fail_url.is_none() || fail_url.is_some(),
    ];
    Some(StartFail {
        start_url,
        fail_url,
        fail_body: fail_body?,
        fail_method: fail_method.ok()?,
        fail_headers: fail_headers.ok()?,
    })
    .filter(|_| valid.iter().all(|v| *v))
}
