//! What a run is remembered as: its record (its id, how it ended, when, with its output tail), its
//! final ping's result, and the documented JSON form of a run ([`RunDoc`]: `/status`'s
//! `last_run`, and each run of the history, docs/status.md), made here once for every reader.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{AttemptEnd, RunAttempt, RunId};
use crate::ping::{PingKind, PingOutcome};
use crate::run_end::{RunEnd, RunOutcome};

/// One run of a job, as status and the history show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunRecord {
    /// The fire time the run belongs to (before jitter); a run of `heartbeat-agent run` has
    /// no fire: its start.
    pub scheduled: DateTime<Utc>,
    /// When it started (the child was spawned, the probe began, or the skip was decided).
    pub started: DateTime<Utc>,
    /// When it ended.
    pub ended: DateTime<Utc>,
    /// How long it ran.
    pub duration: Duration,
    /// How it ended.
    pub end: RunEnd,
    /// What that counts as, judged against the job's `success_exit_codes` when it ended (a
    /// later reload does not rewrite a past run).
    pub outcome: RunOutcome,
    /// The last `output_tail` bytes of its output (lossy UTF-8, scrubbed by
    /// [`crate::redact::job_output`]), only as long as the output was.
    pub output_tail: String,
    /// How many attempts it made (1 without retries); the fields above but `started` are the
    /// last attempt's.
    pub attempts: u32,
    /// The run's id (its command's `HEARTBEAT_AGENT_RUN_ID`, its URLs' `{run_id}`).
    pub run_id: RunId,
}

impl RunRecord {
    /// The record of a run for the fire at `scheduled` (its start when `None`) that ended now
    /// as `ended`, on attempt `attempt`.
    pub(crate) fn of(
        scheduled: Option<DateTime<Utc>>,
        ended: &AttemptEnd,
        attempt: RunAttempt,
    ) -> RunRecord {
        let now = Utc::now();
        RunRecord {
            attempts: attempt.number,
            run_id: attempt.run,
            scheduled: scheduled.unwrap_or(ended.started),
            started: ended.started,
            ended: now,
            duration: (now - ended.started).to_std().unwrap_or_default(),
            end: ended.end.clone(),
            outcome: ended.outcome,
            // Scrubbed where it is recorded, so no reader of the record (status, the history)
            // can show a secret; status scrubs again what it shows, for secrets learned later.
            output_tail: crate::redact::job_output(&ended.output_tail, usize::MAX),
        }
    }

    /// Whether it counts as a success (and so was pinged).
    pub(crate) fn success(&self) -> bool {
        self.outcome == RunOutcome::Success
    }
}

/// One of a run's pings (its start, success or fail ping): what the service (or the network)
/// answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PingRecord {
    /// When it was sent.
    pub at: DateTime<Utc>,
    /// The start, success or fail ping.
    pub kind: PingKind,
    /// Whether the server accepted it (2xx).
    pub accepted: bool,
    /// What happened, e.g. `HTTP 200` or the error (never the URL).
    pub detail: String,
    /// The ping host's HTTP status, when it answered (404: the service has no such check).
    pub status: Option<u16>,
    /// Whether it waits in the outbox (not delivered yet; a later pass sends it).
    pub queued: bool,
}

impl PingRecord {
    /// The `kind` ping sent at `at` that came to `outcome`.
    pub(crate) fn of(at: DateTime<Utc>, kind: PingKind, outcome: &PingOutcome) -> PingRecord {
        let (accepted, queued, detail) = match outcome {
            PingOutcome::Delivered { status, .. } => (true, false, format!("HTTP {status}")),
            PingOutcome::Retryable { error, .. } => (false, true, error.to_string()),
            PingOutcome::Permanent { error, .. } => (false, false, error.to_string()),
        };
        let status = match outcome {
            PingOutcome::Delivered { status, .. } => Some(*status),
            PingOutcome::Retryable { error, .. } | PingOutcome::Permanent { error, .. } => {
                match error {
                    crate::ping::PingError::Status(status) => Some(*status),
                    _ => None,
                }
            }
        };
        PingRecord {
            at,
            kind,
            accepted,
            detail,
            status,
            // A start ping is never kept in the outbox.
            queued: queued && kind != PingKind::Start,
        }
    }

    /// The `kind` ping cut short by a stop: it stays in the outbox.
    pub(crate) fn interrupted(kind: PingKind) -> PingRecord {
        PingRecord {
            at: Utc::now(),
            kind,
            accepted: false,
            detail: "interrupted by a stop".to_owned(),
            status: None,
            queued: true,
        }
    }
}

/// One run, as documented (docs/status.md: `/status`'s `last_run` and each run of the
/// history).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RunDoc {
    /// The fire time it belongs to.
    pub scheduled: DateTime<Utc>,
    /// When it started.
    pub started: DateTime<Utc>,
    /// When it ended.
    pub ended: DateTime<Utc>,
    /// How long it ran, in milliseconds.
    pub duration_ms: u64,
    /// `success`, `failed`, `timed_out`, `signaled`, `not_started`, `stopped` or `unhealthy`
    /// (the names of [`crate::run_end::RunOutcome`]).
    pub outcome: String,
    /// The exit code, when the command exited by itself.
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// Whether it ran past `timeout`.
    pub timed_out: bool,
    /// Whether the daemon's shutdown stopped it.
    pub stopped: bool,
    /// Why it could not start, or what a watch probe measured.
    pub reason: Option<String>,
    /// The last `output_tail` bytes of its output (lossy UTF-8; the agent's secrets removed).
    pub output_tail: String,
    /// How many attempts the run made (1 without `retries`; absent from older daemons); the
    /// fields above but `started` are its last attempt's.
    #[serde(default = "one")]
    pub attempts: u32,
    /// The run's id, a UUID (its command's `HEARTBEAT_AGENT_RUN_ID`, its URLs' `{run_id}`;
    /// absent from runs recorded by older daemons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

fn one() -> u32 {
    1
}

impl RunDoc {
    /// The document of `run`, its texts scrubbed of the agent's secrets.
    pub(crate) fn of(run: &RunRecord) -> RunDoc {
        RunDoc {
            scheduled: run.scheduled,
            started: run.started,
            ended: run.ended,
            duration_ms: u64::try_from(run.duration.as_millis()).unwrap_or(u64::MAX),
            outcome: run.outcome.as_str().to_owned(),
            exit_code: run.end.exit_code(),
            signal: run.end.signal(),
            timed_out: run.end.timed_out(),
            stopped: run.end.stopped(),
            reason: run.end.reason().map(crate::redact::scrub),
            output_tail: crate::redact::scrub(&run.output_tail),
            attempts: run.attempts,
            run_id: Some(run.run_id.text()),
        }
    }
}
