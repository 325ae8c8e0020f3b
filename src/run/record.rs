//! What a run is remembered as: its record (how it ended, when, with its output tail) and
//! its success ping's result, as the daemon keeps them for status and metrics.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::run_end::{RunEnd, RunOutcome};

/// One run of a job, as status shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunRecord {
    /// The fire time the run belongs to (before jitter).
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
}

impl RunRecord {
    /// Whether it counts as a success (and so was pinged).
    pub(crate) fn success(&self) -> bool {
        self.outcome == RunOutcome::Success
    }
}

/// The last ping of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PingRecord {
    /// When it was sent.
    pub at: DateTime<Utc>,
    /// Whether the server accepted it (2xx).
    pub accepted: bool,
    /// What happened, e.g. `HTTP 200` or the error (never the URL).
    pub detail: String,
    /// The ping host's HTTP status, when it answered (404: the service has no such check).
    pub status: Option<u16>,
}
