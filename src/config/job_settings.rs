//! Stage two for the settings that `[defaults]` and each `[[jobs]]` table share (`timeout`,
//! `kill_after`, `overlap`, `run_on`, `env`, `output_tail`, retries, ...): each validated into
//! a [`Settings`] whose `None` means "not set here", and a job's own merged over `[defaults]`
//! key by key. Every problem is collected into the [`Checker`].
//!
//! Its own file because these keys are read the same way in two places (`[defaults]` and a
//! job); `jobs.rs` then checks what only a job has (its name, action and ping target).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use toml::Spanned;

use super::defaults::{OUTPUT_TAIL, OUTPUT_TAIL_MAX};
use super::raw::RawSettings;
use super::values::{At, Checker};
use super::{Overlap, RunOn};

/// Job settings after validation, before defaults are applied: `None` means "not set here".
#[derive(Debug, Default, Clone)]
pub(super) struct Settings {
    pub(super) timeout: Option<Duration>,
    pub(super) kill_after: Option<Duration>,
    pub(super) success_exit_codes: Option<Vec<i32>>,
    pub(super) overlap: Option<Overlap>,
    pub(super) run_on: Option<RunOn>,
    pub(super) jitter: Option<Duration>,
    pub(super) working_dir: Option<PathBuf>,
    pub(super) env: BTreeMap<String, String>,
    pub(super) user: Option<String>,
    pub(super) group: Option<String>,
    pub(super) enabled: Option<bool>,
    pub(super) catch_up: Option<bool>,
    pub(super) output_tail: Option<usize>,
    pub(super) history: Option<usize>,
    pub(super) shell_program: Option<PathBuf>,
    pub(super) retries: super::retries::RetrySettings,
}

/// Validates the settings of `[defaults]` or of one job.
pub(super) fn settings(check: &mut Checker, context: &str, raw: &RawSettings) -> Settings {
    let at = |key| At { context, key };
    let timeout = check.duration(at("timeout"), &raw.timeout);
    if let (Some(Duration::ZERO), Some(value)) = (timeout, &raw.timeout) {
        check.error(
            Some(value.span()),
            at("timeout"),
            "a timeout of zero would stop every run at once",
            Some("remove it for no timeout, or give a positive duration such as \"5m\"".to_owned()),
        );
    }
    for key in ["user", "group"] {
        let value = if key == "user" { &raw.user } else { &raw.group };
        if let (Some(value), false) = (value, check.is_root) {
            let hint = "run the daemon as root, or remove it".to_owned();
            check.warn(
                Some(value.span()),
                at(key),
                format!(
                    "`{key}` only takes effect when the agent runs as root; \
                 jobs run as the current user"
                ),
                Some(hint),
            );
        }
    }
    Settings {
        timeout,
        kill_after: check.duration(at("kill_after"), &raw.kill_after),
        success_exit_codes: exit_codes(check, at("success_exit_codes"), &raw.success_exit_codes),
        overlap: overlap(check, at("overlap"), &raw.overlap),
        run_on: run_on(check, at("run_on"), &raw.run_on),
        jitter: check.duration(at("jitter"), &raw.jitter),
        working_dir: check.path(at("working_dir"), &raw.working_dir),
        env: env(check, context, &raw.env),
        user: check.non_empty(at("user"), &raw.user),
        group: check.non_empty(at("group"), &raw.group),
        enabled: raw.enabled,
        catch_up: raw.catch_up,
        output_tail: output_tail(check, at("output_tail"), &raw.output_tail),
        history: super::validate::history_count(check, at("history"), &raw.history),
        shell_program: check
            .non_empty(at("shell_program"), &raw.shell_program)
            .map(PathBuf::from),
        retries: super::retries::settings(check, context, raw),
    }
}

/// `output_tail`: a size up to [`OUTPUT_TAIL_MAX`]. The tail is kept in memory for every job
/// (the daemon holds each job's last run), so a larger one is refused, not clamped.
fn output_tail(
    check: &mut Checker,
    at: At<'_>,
    raw: &Option<Spanned<super::raw::RawSize>>,
) -> Option<usize> {
    let bytes = check.bytes(at, raw)?;
    match usize::try_from(bytes) {
        Ok(bytes) if bytes <= OUTPUT_TAIL_MAX => Some(bytes),
        _ => {
            let span = raw.as_ref().map(Spanned::span);
            check.error(
                span,
                at,
                format!(
                    "output_tail of {bytes} bytes is more than the most a job keeps, {} MiB",
                    OUTPUT_TAIL_MAX >> 20
                ),
                Some(format!(
                    "give at most \"{}MiB\"; the default is \"{}KiB\"",
                    OUTPUT_TAIL_MAX >> 20,
                    OUTPUT_TAIL >> 10
                )),
            );
            None
        }
    }
}

fn exit_codes(
    check: &mut Checker,
    at: At<'_>,
    raw: &Option<Spanned<Vec<Spanned<i64>>>>,
) -> Option<Vec<i32>> {
    let raw = raw.as_ref()?;
    if raw.get_ref().is_empty() {
        check.error(
            Some(raw.span()),
            at,
            "empty list: no run would count as success",
            Some("for example: success_exit_codes = [0]".to_owned()),
        );
        return None;
    }
    let mut codes = Vec::new();
    for code in raw.get_ref() {
        match i32::try_from(*code.get_ref()) {
            Ok(c) if (0..=255).contains(&c) => codes.push(c),
            _ => check.error(
                Some(code.span()),
                at,
                format!(
                    "exit code {} is out of range: exit codes are 0 to 255",
                    code.get_ref()
                ),
                Some("for example: success_exit_codes = [0, 3]".to_owned()),
            ),
        }
    }
    (codes.len() == raw.get_ref().len()).then_some(codes)
}

/// `run_on`: `one` or `all`.
fn run_on(check: &mut Checker, at: At<'_>, raw: &Option<Spanned<String>>) -> Option<RunOn> {
    let raw = raw.as_ref()?;
    match raw.get_ref().as_str() {
        "one" => Some(RunOn::One),
        "all" => Some(RunOn::All),
        other => {
            let hint = "in a [cluster], \"one\" runs each fire on one agent (the default for \
                        commands), \"all\" on every agent (the default for watches)";
            let message = format!("unknown run_on \"{other}\": expected \"one\" or \"all\"");
            check.error(Some(raw.span()), at, message, Some(hint.to_owned()));
            None
        }
    }
}

fn overlap(check: &mut Checker, at: At<'_>, raw: &Option<Spanned<String>>) -> Option<Overlap> {
    let raw = raw.as_ref()?;
    match raw.get_ref().as_str() {
        "skip" => Some(Overlap::Skip),
        "queue" => Some(Overlap::Queue),
        "allow" => Some(Overlap::Allow),
        other => {
            let hint = "\"skip\" (default) skips a run while the last one runs, \
                        \"queue\" runs it after, \"allow\" runs both";
            check.error(
                Some(raw.span()),
                at,
                format!("unknown overlap \"{other}\": expected \"skip\", \"queue\" or \"allow\""),
                Some(hint.to_owned()),
            );
            None
        }
    }
}

fn env(
    check: &mut Checker,
    context: &str,
    raw: &Option<BTreeMap<String, Spanned<String>>>,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for (name, value) in raw.iter().flatten() {
        let key = format!("env.{name}");
        let at = At { context, key: &key };
        if name.is_empty() || name.contains(['=', '\0']) {
            check.error(
                Some(value.span()),
                at,
                "an environment variable name must not be empty or contain '=' or NUL",
                Some("for example: env = { PATH = \"/usr/bin:/bin\" }".to_owned()),
            );
        } else if value.get_ref().contains('\0') {
            check.error(
                Some(value.span()),
                at,
                "an environment value must not contain NUL",
                None,
            );
        } else {
            env.insert(name.clone(), value.get_ref().clone());
        }
    }
    env
}

/// A job's own settings over `[defaults]`; `env` is merged key by key.
pub(super) fn merge(own: Settings, defaults: &Settings) -> Settings {
    let d = defaults.clone();
    let mut env = d.env;
    env.extend(own.env);
    Settings {
        timeout: own.timeout.or(d.timeout),
        kill_after: own.kill_after.or(d.kill_after),
        success_exit_codes: own.success_exit_codes.or(d.success_exit_codes),
        overlap: own.overlap.or(d.overlap),
        run_on: own.run_on.or(d.run_on),
        jitter: own.jitter.or(d.jitter),
        working_dir: own.working_dir.or(d.working_dir),
        env,
        user: own.user.or(d.user),
        group: own.group.or(d.group),
        enabled: own.enabled.or(d.enabled),
        catch_up: own.catch_up.or(d.catch_up),
        output_tail: own.output_tail.or(d.output_tail),
        history: own.history.or(d.history),
        shell_program: own.shell_program.or(d.shell_program),
        // Merged with its own rule (and its own error) by `retries::merge`.
        retries: own.retries,
    }
}
