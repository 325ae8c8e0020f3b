//! What the daemon publishes of itself to the subsystems that report on it (the status
//! endpoint, the demo's table): a [`DaemonView`] handed to every background task in its
//! [`super::Context`]. It reads copies, never the daemon's own state: each job as a [`JobView`]
//! (next fire, last run, last ping, last skip, runs in progress, runs and skips so far), the
//! main loop's liveness [`Beat`], the reloads by result and the last failed reload's problems
//! ([`ReloadError`]); and it carries the one request a
//! reader may make, running a job now ([`DaemonView::request_run`]).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::state::DaemonState;
/// How many runs the `status` strip shows.
pub(crate) use super::state::RECENT;
use crate::run::{PingRecord, RunRecord};

/// One job as the daemon saw it at one moment.
#[derive(Debug, Clone, Default)]
pub(crate) struct JobView {
    /// When the next run starts: the next fire time plus the job's stable jitter (`None` for
    /// `@reboot`, external or disabled).
    pub next_fire: Option<DateTime<Utc>>,
    /// The most recent run (shared with the daemon, so a copy of every job stays cheap).
    pub last_run: Option<Arc<RunRecord>>,
    /// The most recent ping.
    pub last_ping: Option<PingRecord>,
    /// When a fire was last skipped because the previous run still ran (`overlap = "skip"`).
    pub last_skipped: Option<DateTime<Utc>>,
    /// The outcomes of the job's last runs (at most 20), oldest first: its runs in the
    /// history when the daemon started, then its own.
    pub recent: Vec<crate::run_end::RunOutcome>,
    /// Runs in progress (more than one only with `overlap = "allow"`).
    pub running: usize,
    /// Runs finished since the daemon started (not counting skips).
    pub runs: u64,
    /// Fires skipped because a run was still going, or the job was paused with `--stop-jobs`.
    pub skipped: u64,
}

/// Why the last reload failed, while the running configuration is not the file's: set when a
/// reload finds the file invalid or unreadable (the running configuration is kept), cleared
/// when a reload succeeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReloadError {
    /// When the reload failed.
    pub at: DateTime<Utc>,
    /// Every problem found, one line each (`path:line:col: ...` with a hint).
    pub problems: Vec<String>,
}

/// When the daemon's main loop (which controls scheduling) last ticked, and how often it ticks:
/// a liveness probe compares the two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Beat {
    /// The last tick.
    pub at: DateTime<Utc>,
    /// The interval between ticks.
    pub every: Duration,
}

/// A reader's handle on a running daemon: copies of what it knows, and its requests.
#[derive(Debug, Clone)]
pub(crate) struct DaemonView {
    state: Arc<DaemonState>,
}

impl DaemonView {
    /// The view of `state`.
    pub(super) fn of(state: Arc<DaemonState>) -> DaemonView {
        DaemonView { state }
    }

    /// Job `name` now, if the daemon knows it (every configured job, from start and after each
    /// reload).
    pub(crate) fn job(&self, name: &str) -> Option<JobView> {
        self.state.job(name).map(|job| job.view())
    }

    /// Every job now, by name.
    pub(crate) fn jobs(&self) -> Vec<(String, JobView)> {
        self.state
            .jobs()
            .into_iter()
            .map(|(name, job)| (name, job.view()))
            .collect()
    }

    /// The main loop's last tick (`None` before the first).
    pub(crate) fn beat(&self) -> Option<Beat> {
        self.state.last_beat()
    }

    /// Reloads since start by result, both always present: `ok`, then `invalid` (the running
    /// config kept).
    pub(crate) fn reloads(&self) -> [(&'static str, u64); 2] {
        self.state.reload_counts()
    }

    /// Why the last reload failed, if the running configuration is not the file's (see
    /// [`ReloadError`]).
    pub(crate) fn last_reload_error(&self) -> Option<ReloadError> {
        self.state.last_reload_error()
    }

    /// Asks job `name`'s scheduling task to fire once now (outside the schedule), under the
    /// job's overlap rule. Does nothing for a job without a task (external or disabled) or one
    /// the daemon no longer knows.
    pub(crate) fn request_run(&self, name: &str) {
        if let Some(job) = self.state.job(name) {
            job.request_run();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::state::Wake;
    use crate::run_end::{ProcessEnd, RunEnd, RunOutcome};

    fn finished(at: DateTime<Utc>) -> RunRecord {
        RunRecord {
            scheduled: at,
            started: at,
            ended: at,
            duration: Duration::from_secs(1),
            end: RunEnd::Ended(ProcessEnd::Exited(0)),
            outcome: RunOutcome::Success,
            output_tail: "done".to_owned(),
            attempts: 1,
            run_id: crate::run::RunId::fixed(1),
        }
    }

    #[test]
    fn a_view_copies_each_job_the_beat_and_the_reloads() {
        let state = Arc::new(DaemonState::default());
        let view = DaemonView::of(Arc::clone(&state));
        assert!(view.job("backup").is_none() && view.beat().is_none());
        let job = state.entry("backup");
        job.run_started();
        assert_eq!(
            view.job("backup").map(|j| (j.running, j.runs)),
            Some((1, 0))
        );
        let at = Utc::now();
        job.run_finished(Arc::new(finished(at)));
        job.record_skip(at);
        let seen = view.job("backup").expect("a known job");
        assert_eq!((seen.running, seen.runs, seen.skipped), (0, 1, 1));
        assert_eq!(seen.last_run.as_deref(), Some(&finished(at)));
        assert_eq!(seen.last_skipped, Some(at));
        assert_eq!(view.jobs().len(), 1);
        state.count_reload(Ok(()));
        assert_eq!(view.last_reload_error(), None);
        let problems = ["c.toml:1:1: invalid TOML".to_owned()];
        state.count_reload(Err(&problems));
        state.count_reload(Err(&problems));
        assert_eq!(view.reloads(), [("ok", 1), ("invalid", 2)]);
        let failed = view.last_reload_error().expect("the failed reload is kept");
        assert_eq!(failed.problems, problems);
        state.count_reload(Ok(()));
        assert_eq!(view.last_reload_error(), None, "a good reload clears it");
        state.beat(Duration::from_secs(5));
        assert_eq!(view.beat().map(|b| b.every), Some(Duration::from_secs(5)));
    }

    #[tokio::test]
    async fn a_requested_run_reaches_the_jobs_task() {
        let state = Arc::new(DaemonState::default());
        let view = DaemonView::of(Arc::clone(&state));
        let job = state.entry("backup");
        view.request_run("gone");
        view.request_run("backup");
        let why = tokio::time::timeout(Duration::from_secs(1), job.woken())
            .await
            .expect("the job's task is told to fire");
        assert!(why.has(Wake::RUN_REQUESTED), "{why:?}");
        assert!(!why.has(Wake::RUN_ENDED), "{why:?}");
    }
}
