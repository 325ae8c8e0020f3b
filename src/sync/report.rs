//! What a reconciliation pass is asked to do ([`SyncOptions`]) and what it answers: a
//! [`SyncReport`] of one [`JobReport`] per bound check considered, each with its [`Action`] and
//! [`SyncOutcome`], and the questions the callers ask of a report (did a PUT fail, would
//! anything change).
//!
//! Its own file because these types are the pass's contract with its callers (`heartbeat-agent
//! sync`, the daemon's task, `send.rs`) and, through serde, the shape of `sync --json`; how a
//! pass reaches them is `reconcile.rs`.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::desired::Change;

/// How a pass runs.
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// Show the differences, send nothing.
    pub dry_run: bool,
    /// PUT even where nothing differs (repairs changes made outside the agent).
    pub force: bool,
    /// Only this job (`--job NAME`).
    pub job: Option<String>,
    /// The time the desired definitions are computed for.
    pub now: DateTime<Utc>,
    /// Jobs whose definition is sent even when the local record matches (the daemon's
    /// re-assertion: the API has no `GET` to notice a change made elsewhere).
    pub reassert: BTreeSet<String>,
    /// Jobs left out of this pass (the daemon's: a check the service answered 404 for, until
    /// its next re-assertion).
    pub hold: BTreeSet<String>,
    /// Read every check from the service first (`GET /v1/checks/{id}`) and compare the config
    /// with what it has, not with the local record (`heartbeat-agent sync`; the daemon reads
    /// the checks it re-asserts).
    pub read: bool,
}

impl SyncOptions {
    /// A normal pass at `now`: every job, PUT where needed.
    pub fn at(now: DateTime<Utc>) -> Self {
        SyncOptions {
            dry_run: false,
            force: false,
            job: None,
            now,
            reassert: BTreeSet::new(),
            hold: BTreeSet::new(),
            read: false,
        }
    }
}

/// Why a job's check is being changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// The job is in the config: its definition is kept true to it.
    Update,
    /// The job left the config (or no longer has `check_id`): its check is deactivated.
    Deactivate,
}

/// What became of one job in a pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "result", content = "error")]
pub enum SyncOutcome {
    /// The service already has the desired definition: nothing sent.
    InSync,
    /// The PUT was accepted.
    Updated,
    /// A job with `create = true`: this pass created its check (`POST /v1/checks/heartbeat`
    /// accepted, and the lookup after it found it the oldest carrying the job's tag); the
    /// changes list the fields it was created with.
    Created,
    /// Nothing to send now: the only changes would restart the service's timer, and wait for
    /// the job's next accepted ping (listed in `held`).
    Held,
    /// `--dry-run`: a PUT would be sent.
    WouldUpdate,
    /// `--dry-run`, a job with `create = true` whose check the service does not have yet: the
    /// `POST /v1/checks/heartbeat` whose body the changes list would be sent.
    WouldCreate,
    /// The PUT (or saving its answer) failed; the message names the job and check.
    Failed(String),
    /// The service answered 404: it has no such check (deleted in the web UI, or a wrong
    /// `check_id`). The message names the job and check and says what to do.
    Missing(String),
    /// Not sent: the API kept answering 429 to an earlier PUT of this pass, and more requests
    /// would only prolong that (429 answers count against the limit), or an earlier PUT of this
    /// pass could not reach the API at all, or the daemon's pacing after a 429 does not allow
    /// the next PUT yet. Retried later.
    Deferred(String),
}

/// One job's part of a pass.
#[derive(Debug, Clone, Serialize)]
pub struct JobReport {
    /// The job's name.
    pub job: String,
    /// The check id.
    pub check_id: String,
    /// Keep in sync, or deactivate.
    pub action: Action,
    /// The fields that differ between last accepted and what is sent.
    pub changes: Vec<Change>,
    /// Changes that would restart the service's timer, held until the job's next accepted
    /// ping (`super::timer`); not in the JSON when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<Change>,
    /// The fields edited on the service since it last accepted this agent's definition (read
    /// with `GET /v1/checks/{id}`); each is also an entry of `changes` or `held`, whose `old` is
    /// the service's value. Not in the JSON when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<String>,
    /// Why the check could not be read from the service, when the pass tried (the local record
    /// was compared instead); not in the JSON when it was read or not asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unread: Option<String>,
    /// What happened.
    #[serde(flatten)]
    pub outcome: SyncOutcome,
    /// The PUT was answered 429: the failure is the pacing's business, not the retry
    /// backoff's (not part of the JSON output).
    #[serde(skip)]
    pub rate_limited: bool,
}

/// The result of a pass, one entry per bound check considered.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SyncReport {
    /// In config order, then the deactivated ones by name.
    pub jobs: Vec<JobReport>,
}

impl SyncReport {
    /// Whether any PUT failed.
    pub fn failed(&self) -> bool {
        self.jobs.iter().any(|j| {
            matches!(
                j.outcome,
                SyncOutcome::Failed(_) | SyncOutcome::Deferred(_) | SyncOutcome::Missing(_)
            )
        })
    }

    /// Whether anything would change or was changed: a PUT sent or due, or a change held
    /// (`sync --exit-code`).
    pub fn changes(&self) -> bool {
        self.jobs.iter().any(|j| {
            !j.changes.is_empty()
                || !j.held.is_empty()
                || matches!(
                    j.outcome,
                    SyncOutcome::Updated | SyncOutcome::Created | SyncOutcome::WouldUpdate
                )
        })
    }

    /// Whether a PUT failed for another reason than a 429 (those call for a retry backoff;
    /// 429s and deferred PUTs are left to the pacing; a missing check is not retried).
    pub fn failed_otherwise(&self) -> bool {
        self.jobs
            .iter()
            .any(|j| matches!(j.outcome, SyncOutcome::Failed(_)) && !j.rate_limited)
    }
}
