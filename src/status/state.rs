//! The one state model of a job and its check, and the words for it that every view uses: the
//! `status` table, `/status`, `/metrics`, the dashboard, `history` and the demo. A view decides
//! where a word goes and how it is coloured (its [`Tone`]); the word comes from here, one
//! spelling per state (docs/status.md, "States").
//!
//! - A run: its outcome's word ([`RunOutcome::as_str`]: `success`, `failed`, `timed_out`,
//!   `signaled`, `not_started`, `stopped`, `unhealthy`), with what ended it and its attempts:
//!   [`run_phrase`] (`failed (exit 3)`, `signaled (signal 9)`, `success after 3 attempts`).
//! - A check: [`CheckState`], decided by [`CheckFacts::state`] from everything known of it, in
//!   this order: a check the service answered 404 for (the job's ping, sync, or the remote
//!   view's read: [`MissingBy`]) is `missing`, whatever sync last recorded and whether the job
//!   names it by `check_id` or sync created it; a check that records another agent's identity
//!   as its owner is `owned_by_other`; otherwise sync's state (`in_sync`, `pending`, `failed`).
//!   The same facts come from the daemon ([`CheckFacts`] built by the endpoint and the demo) or
//!   from a `/status` document ([`CheckFacts::of_doc`], what `status` reads), so the table of
//!   an older daemon's document tells the same state.
//! - The service's view of the check: [`ServiceState`] (`up`, `failing`, `not_listed`,
//!   `unknown` for a check not read yet or unreadable, `no_check` for a job bound to none, and
//!   `missing` for a missing check).
//! - A job as a summary counts it: [`job_word`] (`paused`, `disabled`, `never`, else its last
//!   run's outcome), so "3 jobs: 1 failed, 2 success" uses the words above.

use std::path::Path;

use chrono::{DateTime, Utc};

use super::doc::{JobDoc, Remote};
use crate::run_end::RunOutcome;
use crate::sync::SyncState;

/// How every view colours a state: green, red, yellow or not at all (ANSI in the table, a CSS
/// class on the dashboard, the alarm mark of the demo).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tone {
    /// Nothing to say (no check, never ran).
    Plain,
    /// As it should be.
    Good,
    /// Wrong: someone should look.
    Bad,
    /// In between: pending, running, paused.
    Warn,
}

/// Where a job's check stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum CheckState {
    /// Sync has not reconciled it since start, or a change waits for the next pass.
    Pending,
    /// The service has the desired definition.
    InSync,
    /// Sync's last attempt failed; it is retried.
    Failed,
    /// The service answered 404 for it: deleted, or a wrong `check_id`.
    Missing,
    /// The check records another agent's identity as its owner: this agent does not ping it.
    OwnedByOther,
}

impl CheckState {
    /// Every state, in the order of the metric's samples.
    pub(crate) const ALL: [CheckState; 5] = [
        CheckState::InSync,
        CheckState::Pending,
        CheckState::Failed,
        CheckState::Missing,
        CheckState::OwnedByOther,
    ];

    /// Its word: `/status` (`sync.state`), the `state` label of `heartbeat_agent_sync_jobs`,
    /// the table, the dashboard and the demo.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CheckState::Pending => "pending",
            CheckState::InSync => "in_sync",
            CheckState::Failed => "failed",
            CheckState::Missing => "missing",
            CheckState::OwnedByOther => "owned_by_other",
        }
    }

    /// The state whose word is `word`.
    pub(crate) fn named(word: &str) -> Option<CheckState> {
        CheckState::ALL.into_iter().find(|s| s.as_str() == word)
    }

    /// How it is coloured.
    pub(crate) fn tone(self) -> Tone {
        match self {
            CheckState::InSync => Tone::Good,
            CheckState::Pending => Tone::Warn,
            CheckState::Failed | CheckState::Missing | CheckState::OwnedByOther => Tone::Bad,
        }
    }
}

impl From<SyncState> for CheckState {
    fn from(state: SyncState) -> CheckState {
        match state {
            SyncState::Pending => CheckState::Pending,
            SyncState::InSync => CheckState::InSync,
            SyncState::Failed => CheckState::Failed,
            SyncState::Missing => CheckState::Missing,
        }
    }
}

/// Which answer said the service has no such check: the first of them counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MissingBy {
    /// The ping host answered 404 to the job's last ping.
    Ping,
    /// Sync's `PUT` (or its read) answered 404.
    Sync,
    /// The remote view's read of the check answered 404.
    Remote,
}

impl MissingBy {
    const ALL: [MissingBy; 3] = [MissingBy::Ping, MissingBy::Sync, MissingBy::Remote];

    /// Its word: `missing.by` of `/status`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            MissingBy::Ping => "ping",
            MissingBy::Sync => "sync",
            MissingBy::Remote => "remote",
        }
    }

    /// Which 404 came, in the order of the variants: the job's last ping (`ping_404`), sync
    /// (`sync` is `missing`), the remote view (`remote_gone`).
    pub(crate) fn first(
        ping_404: bool,
        sync: Option<CheckState>,
        remote_gone: bool,
    ) -> Option<MissingBy> {
        let said = [ping_404, sync == Some(CheckState::Missing), remote_gone];
        MissingBy::ALL
            .into_iter()
            .zip(said)
            .find_map(|(by, said)| said.then_some(by))
    }
}

/// Whether job `job`'s last ping, sent at `at` and answered `status` (`accepted`: 2xx), says
/// that its check `id` is gone: a 404 that the service has not contradicted since, by
/// accepting the definition of that check (sync's record, [`crate::sync::state`], naming `id`
/// and accepted after the ping: a check made again after its deletion, or a `PUT` answered
/// 200). The record is read only after a 404.
pub(crate) fn ping_says_gone(
    state_dir: &Path,
    job: &str,
    id: &str,
    (at, accepted, status): (DateTime<Utc>, bool, Option<u16>),
) -> bool {
    !accepted
        && status == Some(404)
        && !crate::sync::state::load(state_dir, job)
            .filter(|record| record.check_id == id)
            .and_then(|record| record.accepted_at)
            .is_some_and(|since| since > at)
}

/// Everything known of a job's check, from each source: the input of [`CheckFacts::state`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CheckFacts<'a> {
    /// Sync's own state of the check (`None`: sync does not manage it or does not run).
    pub sync: Option<CheckState>,
    /// The first 404 the service gave for the check, if any ([`MissingBy::first`]).
    pub missing: Option<MissingBy>,
    /// The identity of another agent that the check records as its owner (`JobDoc::owned_by`);
    /// `None` when the check is this agent's or records no owner.
    pub owned_by: Option<&'a str>,
}

impl<'a> CheckFacts<'a> {
    /// The check's state (`None`: the job has no check that anything knows of).
    pub(crate) fn state(&self) -> Option<CheckState> {
        if self.missing.is_some() {
            Some(CheckState::Missing)
        } else if self.owned_by.is_some() {
            Some(CheckState::OwnedByOther)
        } else {
            self.sync
        }
    }

    /// The facts a `/status` document tells of `job` (also one from an older daemon, whose
    /// `sync.state` may not say `missing` yet).
    pub(crate) fn of_doc(job: &'a JobDoc) -> CheckFacts<'a> {
        CheckFacts {
            sync: job.sync.as_ref().and_then(|s| CheckState::named(&s.state)),
            missing: job.missing.as_ref().map(|m| {
                MissingBy::ALL
                    .into_iter()
                    .find(|by| by.as_str() == m.by)
                    .unwrap_or(MissingBy::Remote)
            }),
            owned_by: job.owned_by.as_deref(),
        }
    }
}

/// The SYNC cell of a job's check: the state's word, or, while drift waits for its repair,
/// `drift: FIELD, ...` (not for a missing check or one another agent owns: there is nothing
/// to repair).
pub(crate) fn sync_cell(state: Option<CheckState>, drift: &[String]) -> (String, Tone) {
    match state {
        None => ("-".to_owned(), Tone::Plain),
        Some(state @ (CheckState::Missing | CheckState::OwnedByOther)) => {
            (state.as_str().to_owned(), state.tone())
        }
        Some(_) if !drift.is_empty() => (format!("drift: {}", drift.join(", ")), Tone::Warn),
        Some(state) => (state.as_str().to_owned(), state.tone()),
    }
}

/// What the service says of a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServiceState {
    /// Listed, not failing.
    Up,
    /// Listed with failures or errors.
    Failing,
    /// Known, but absent from the service's list of check statuses.
    NotListed,
    /// Not known now (no API, the API is down, not fetched yet).
    Unknown,
    /// The service has no such check ([`CheckState::Missing`]).
    Missing,
    /// The job is bound to no check (no `check_id`, none created): nothing to ask.
    NoCheck,
}

impl ServiceState {
    /// Its word, in every view.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ServiceState::Up => "up",
            ServiceState::Failing => "failing",
            ServiceState::NotListed => "not_listed",
            ServiceState::Unknown => "unknown",
            ServiceState::Missing => "missing",
            ServiceState::NoCheck => "no_check",
        }
    }

    /// How it is coloured.
    pub(crate) fn tone(self) -> Tone {
        match self {
            ServiceState::Up => Tone::Good,
            ServiceState::Failing | ServiceState::Missing => Tone::Bad,
            ServiceState::NotListed | ServiceState::Unknown => Tone::Warn,
            ServiceState::NoCheck => Tone::Plain,
        }
    }

    /// From the check's entry of the service's check statuses: its `hasFailures` or
    /// `hasErrors` (`None`: not listed).
    pub(crate) fn listed(failing: Option<bool>) -> ServiceState {
        match failing {
            Some(true) => ServiceState::Failing,
            Some(false) => ServiceState::Up,
            None => ServiceState::NotListed,
        }
    }

    /// The service's state of `job`'s check as a `/status` document tells it: `no_check` for
    /// a job that names no check and has none that anything knows of, else [`ServiceState::of`].
    pub(crate) fn of_doc(job: &JobDoc) -> ServiceState {
        let check = CheckFacts::of_doc(job).state();
        if job.check_id.is_none() && check.is_none() {
            ServiceState::NoCheck
        } else {
            ServiceState::of(&job.remote, check)
        }
    }

    /// The service's view `remote` of a check in state `check`.
    pub(crate) fn of(remote: &Remote, check: Option<CheckState>) -> ServiceState {
        match remote {
            _ if check == Some(CheckState::Missing) => ServiceState::Missing,
            Remote::Unavailable { .. } => ServiceState::Unknown,
            Remote::Available { check_status, .. } => ServiceState::listed(
                check_status
                    .as_ref()
                    .map(|s| s.has_failures || s.has_errors),
            ),
        }
    }
}

/// A job with a run going now (its last run's state is shown once it ends).
pub(crate) const RUNNING: &str = "running";
/// A job with no run since the daemon started, nor in its history.
pub(crate) const NEVER: &str = "never";
/// A job the daemon does not schedule (`enabled = false`).
pub(crate) const DISABLED: &str = "disabled";

/// A ping the ping host accepted (`last_ping.result` of `/status`).
pub(crate) const PING_ACCEPTED: &str = "accepted";
/// A ping that was not accepted and waits in the outbox.
pub(crate) const PING_QUEUED: &str = "queued";
/// A ping that was not accepted (`last_ping.result` of `/status`).
pub(crate) const PING_FAILED: &str = "failed";

/// The word a summary counts `job` under, and its tone: its pause's (`paused`, `resuming`)
/// while paused, `disabled`, `never` before its first run, else its last run's outcome
/// (`success`, `failed`, ...). A running job keeps its last run's word.
pub(crate) fn job_word(job: &JobDoc) -> (&str, Tone) {
    match (&job.paused, &job.last_run) {
        (Some(pause), _) => (pause.state.as_str(), Tone::Warn),
        _ if !job.enabled => (DISABLED, Tone::Plain),
        (None, None) => (NEVER, Tone::Plain),
        (None, Some(run)) => (run.outcome.as_str(), run_tone(&run.outcome)),
    }
}

/// A run's state in words: its outcome's word, with the exit code of a failure or the signal
/// that ended a `signaled` run (`failed (exit 3)`, `signaled (signal 9)`; a timeout's own
/// SIGTERM is the supervisor's, not news: `timed_out`), then `after N attempts` when it retried.
pub(crate) fn run_phrase(
    outcome: &str,
    exit_code: Option<i32>,
    signal: Option<i32>,
    attempts: u32,
) -> String {
    let mut phrase = match (RunOutcome::named(outcome), exit_code, signal) {
        (Some(RunOutcome::Failed), Some(code), _) => format!("failed (exit {code})"),
        (Some(RunOutcome::Signaled), _, Some(signal)) => format!("signaled (signal {signal})"),
        _ => outcome.to_owned(),
    };
    if attempts > 1 {
        phrase.push_str(&format!(" after {attempts} attempts"));
    }
    phrase
}

/// The tone of a run's outcome: a success is good, a shutdown's stop is in between, every
/// other end is bad.
pub(crate) fn run_tone(outcome: &str) -> Tone {
    match RunOutcome::named(outcome) {
        Some(RunOutcome::Success) => Tone::Good,
        Some(RunOutcome::Stopped) => Tone::Warn,
        _ => Tone::Bad,
    }
}

#[cfg(test)]
#[path = "state/tests.rs"]
mod tests;
