//! One run of a job in the daemon: the [`Runner`] it gives the run pipeline
//! ([`crate::run::run_with_pings`]). An attempt is a command (its output captured and logged
//! line by line, scrubbed of the agent's secrets by [`crate::redact::scrub`], the last `output_tail`
//! bytes kept) or a watch probe; the daemon's shutdown stops it; the run is recorded in the
//! job's state for status, with its success ping's result; then the after-run hooks are told
//! (its after-ping work).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::job::{millis, Settings, Shared};
use super::state::JobState;
use crate::config::{Job, JobAction, WatchSpec};
use crate::job::NoPing;
use crate::ping::outbox::PingContext;
use crate::ping::{Budget, Ping, PingMethod};
use crate::process::{
    ChildControl, ChildOutcome, ChildRequests, CommandSpec, Io, Limits, LineSink,
};
use crate::run::admission::Admitted;
use crate::run::{AttemptEnd, Notice, PingRecord, Pings, Report, RunAttempt, RunRecord, Runner};
use crate::run_end::{RunEnd, RunOutcome};

/// Runs `job` once for the fire at `scheduled`, admitted by `admitted` (held until the run
/// ends); `state.run_started()` was called by the caller.
pub(super) async fn run_job(
    job: Arc<Job>,
    shared: Arc<Shared>,
    state: Arc<JobState>,
    scheduled: DateTime<Utc>,
    admitted: Admitted,
) {
    let settings = shared.settings();
    if matches!(job.action, JobAction::External) {
        let ended = AttemptEnd::without_process(refused("an external job is not run"));
        state.run_finished(Arc::new(RunRecord::of(
            Some(scheduled),
            &ended,
            RunAttempt::first(),
        )));
        return;
    }
    // The history's writer waits while runs are starting (a burst's spawns go first).
    shared.history.run_starting();
    let pings = pings(&job, &shared, &settings);
    let mut runner = DaemonRun {
        job: &job,
        shared: &shared,
        state: &state,
        settings: &settings,
        scheduled,
        admitted: Some(admitted),
    };
    crate::run::run_with_pings(&mut runner, &job.retries, &pings, &shared.outbox).await;
    // This run's task still counts: 1 means it is the last.
    if shared.runs.len() <= 1 {
        shared.runs_idle.notify_one();
    }
}

/// The pings of a run of `job`: its start ping while a command runs, its fail ping.
fn pings(job: &Job, shared: &Shared, settings: &Settings) -> Pings {
    let start = match &job.action {
        JobAction::Command(_) | JobAction::Shell { .. } => {
            crate::job::start_ping(job, PingMethod::Get, &shared.host).and_then(|ping| {
                ping.inspect_err(|err| warn!(job = %job.name, "job's start_url not used: {err}"))
                    .ok()
            })
        }
        _ => None,
    };
    Pings {
        start,
        fail: job.start_fail.fail_url.clone(),
        fail_body: crate::job::fail_body_bytes(job),
        fail_send: crate::job::fail_send(job, true),
        method: PingMethod::Get,
        source: shared.host.clone(),
        budget: Budget::default(),
        sender: shared.pings.clone(),
        context: PingContext {
            job: Some(job.name.clone()),
            max_age: crate::config::defaults::outbox_max_age(settings.outbox_max_age, Some(job)),
        },
        job_span: true,
    }
}

/// A daemon run as the pipeline sees it.
struct DaemonRun<'a> {
    job: &'a Job,
    shared: &'a Shared,
    state: &'a JobState,
    settings: &'a Settings,
    scheduled: DateTime<Utc>,
    /// What admitted the run: released when the run ends, before its ping.
    admitted: Option<Admitted>,
}

impl Runner for DaemonRun<'_> {
    async fn attempt(&mut self, attempt: RunAttempt) -> AttemptEnd {
        match &self.job.action {
            JobAction::Watch(spec) => probe(self.job, self.shared, spec, attempt).await,
            _ => {
                run_command(
                    self.job,
                    self.shared,
                    self.settings,
                    self.scheduled,
                    attempt,
                )
                .await
            }
        }
    }

    fn stop_asked(&self) -> bool {
        self.shared.stop_runs.is_cancelled()
    }

    async fn stopped(&mut self) {
        self.shared.stop_runs.cancelled().await;
    }

    fn notice(&self, notice: Notice<'_>) {
        let job = &self.job.name;
        match notice {
            Notice::Retrying {
                attempt,
                ended,
                wait,
            } => {
                let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
                info!(job = %job, attempt = attempt.number, attempts = attempt.of, outcome = ended.outcome.as_str(), wait_ms, "attempt failed; retrying");
            }
            Notice::NoFurtherAttempt { attempt, .. } => {
                info!(job = %job, attempt = attempt.number, attempts = attempt.of, "no further attempt: the daemon is stopping");
            }
            Notice::PingInterrupted { fail: true } => {
                warn!(job = %job, "fail ping interrupted: the daemon is stopping (the ping stays in the outbox)");
            }
            Notice::PingInterrupted { fail: false } => {
                warn!(job = %job, "ping interrupted: the daemon is stopping (the ping stays in the outbox)");
            }
            // Each attempt's end is logged by the attempt itself.
            Notice::AllFailed { .. } | Notice::SucceededAfter { .. } => {}
        }
    }

    fn success_ping(&self) -> Option<Ping> {
        job_ping(self.job, self.shared, self.state)
    }

    fn pings_allowed(&self) -> bool {
        !self.shared.stop_runs.is_cancelled()
    }

    fn scheduled(&self) -> Option<DateTime<Utc>> {
        Some(self.scheduled)
    }

    fn stop_grace(&self) -> std::time::Duration {
        crate::ping::STOP_GRACE
    }

    fn ended(&mut self, record: &Arc<RunRecord>, pinging: bool) {
        // The run ends when its process (or probe) does: the job's next fire must not wait
        // for a slow or hanging ping host, so the ping is sent after this. The history has
        // the run from now on too; its pings' outcome follows (`after_ping`).
        self.state.run_finished(Arc::clone(record));
        self.admitted = None;
        let node = self.shared.admission.as_ref().and_then(|a| a.node());
        let run = crate::history::Run::ended(record, node, pinging);
        self.shared
            .history
            .record(&self.job.name, self.job.history, run);
    }

    fn pinged(&mut self, ping: &PingRecord) {
        self.state.record_ping(ping.clone());
    }

    async fn after_ping(&mut self, report: &Report) {
        self.shared.history.pinged(&self.job.name, report);
        for hook in &self.shared.after_run {
            hook.after_run(self.job, self.scheduled, report.ping_accepted);
        }
    }
}

/// A run that could not start for `reason` (the program is there or was never looked up).
fn refused(reason: impl Into<String>) -> RunEnd {
    RunEnd::NotStarted {
        reason: reason.into(),
        missing: false,
    }
}

async fn run_command(
    job: &Job,
    shared: &Shared,
    settings: &Settings,
    scheduled: DateTime<Utc>,
    attempt: RunAttempt,
) -> AttemptEnd {
    let spec = match command_spec(job, shared, settings, scheduled, attempt) {
        Ok(spec) => spec,
        Err(reason) => {
            warn!(job = %job.name, error = %reason, "job not started");
            return AttemptEnd::without_process(refused(reason.to_string()));
        }
    };
    let running = match shared.children.spawn_on_spawner(spec).await {
        Ok(running) => running,
        Err(err) => {
            warn!(job = %job.name, error = %err, "job not started");
            return AttemptEnd::without_process(RunEnd::from(&err));
        }
    };
    // Counts as a start again once the process exists: in a burst the runs all begin at the
    // fire, but their spawns queue for the spawner threads for up to a second after it, and the
    // history's writer must wait until the last of them, not until 100 ms after the fire.
    shared.history.run_starting();
    let started = Utc::now();
    let pid = running.pid();
    let delay_ms = (started - scheduled).num_microseconds().unwrap_or(0) as f64 / 1000.0;
    let RunAttempt { number, of, run } = attempt;
    info!(job = %job.name, run_id = %run, pid, scheduled = %millis(scheduled), spawned = %millis(started), delay_ms, attempt = number, attempts = of, "job started");
    let limits = Limits {
        timeout: job.timeout,
        kill_after: job.kill_after,
    };
    let stop = StopAtShutdown {
        shutdown: Some(shared.stop_runs.clone()),
        grace: settings.shutdown_timeout,
    };
    let outcome = running.supervise(limits, stop).await;
    shared.children.ended(pid);
    finished(job, started, &outcome, attempt)
}

/// The daemon's one request to a running command: at shutdown (`shutdown` cancelled), stop it,
/// with SIGKILL after `grace` (`shutdown_timeout`); then nothing more.
struct StopAtShutdown {
    shutdown: Option<CancellationToken>,
    grace: std::time::Duration,
}

impl ChildRequests for StopAtShutdown {
    async fn next(&mut self) -> Option<ChildControl> {
        let shutdown = self.shutdown.as_ref()?;
        shutdown.cancelled().await;
        self.shutdown = None;
        Some(ChildControl::Stop { grace: self.grace })
    }
}

/// Logs the end of a command and turns its outcome into an [`AttemptEnd`].
fn finished(
    job: &Job,
    started: DateTime<Utc>,
    outcome: &ChildOutcome,
    attempt: RunAttempt,
) -> AttemptEnd {
    let end = &outcome.end;
    let (code, signal) = (end.exit_code(), end.signal());
    let (timed_out, stopped, killed) = (end.timed_out(), end.stopped(), end.killed());
    let run_outcome = end.outcome(&job.success_exit_codes);
    let success = run_outcome == RunOutcome::Success;
    let duration_ms = u64::try_from(outcome.elapsed.as_millis()).unwrap_or(u64::MAX);
    let check_id = job.check_id();
    let RunAttempt { number, of, run } = attempt;
    if success {
        info!(job = %job.name, run_id = %run, check_id, exit_code = code, duration_ms, success, attempt = number, attempts = of, "job finished");
    } else if let Some(process_end) = end.process_end() {
        // A run the daemon's shutdown stopped did not fail by itself (a job that exits 0 on
        // SIGTERM did not "fail"); it is not a success either, so no ping follows.
        let what = if stopped {
            "job stopped at shutdown"
        } else {
            "job failed"
        };
        warn!(job = %job.name, run_id = %run, check_id, exit_code = code, signal, timed_out, stopped, killed, duration_ms, success, attempt = number, attempts = of, "{what}: {process_end}");
    }
    let output_tail = outcome
        .tail
        .as_ref()
        .map(|tail| tail.text().into_bytes())
        .unwrap_or_default();
    AttemptEnd {
        started,
        end: outcome.end.clone(),
        outcome: run_outcome,
        output_tail,
    }
}

async fn probe(job: &Job, shared: &Shared, spec: &WatchSpec, attempt: RunAttempt) -> AttemptEnd {
    let started = Utc::now();
    let probe = tokio::select! {
        probe = shared.probes().probe(spec) => probe,
        () = shared.stop_runs.cancelled() => {
            return AttemptEnd::without_process(RunEnd::Stopped { end: None, killed: false });
        }
    };
    let check_id = job.check_id();
    let RunAttempt { number, of, run } = attempt;
    if probe.healthy {
        info!(job = %job.name, run_id = %run, check_id, healthy = true, reason = %probe.reason, attempt = number, attempts = of, "watch healthy");
    } else {
        warn!(job = %job.name, run_id = %run, check_id, healthy = false, reason = %probe.reason, attempt = number, attempts = of, "watch unhealthy: not pinging");
    }
    let end = RunEnd::from(probe);
    AttemptEnd {
        started,
        outcome: end.outcome(&job.success_exit_codes),
        end,
        output_tail: Vec::new(),
    }
}

/// The child of a command or shell job: its command and hygiene (see [`crate::job`]), its
/// output captured and logged line by line, the user it runs as; the fire's slot
/// (`HEARTBEAT_AGENT_SCHEDULED`), the run's id (`HEARTBEAT_AGENT_RUN_ID`) and, in a cluster,
/// the node (`HEARTBEAT_AGENT_NODE`).
fn command_spec(
    job: &Job,
    shared: &Shared,
    settings: &Settings,
    scheduled: DateTime<Utc>,
    attempt: RunAttempt,
) -> Result<CommandSpec, crate::job::CommandError> {
    let mut spec = crate::job::command(job)?;
    let slot = scheduled.timestamp().to_string();
    spec.env_set
        .push((crate::process::SCHEDULED_ENV.into(), slot.into()));
    spec.env_set
        .push((crate::process::RUN_ID_ENV.into(), attempt.run.text().into()));
    if let Some(node) = shared.admission.as_ref().and_then(|a| a.node()) {
        spec.env_set
            .push((crate::process::NODE_ENV.into(), node.to_owned().into()));
    }
    crate::job::hygiene(&mut spec, Some(&job.name), Some(job), &settings.secret_env);
    spec.io = Io::Capture {
        tail_bytes: job.output_tail,
    };
    let name = job.name.clone();
    spec.output_lines = Some(LineSink::new(move |stream, line| {
        // The line goes through the same scrubber as the output shown by `/status`.
        let line = crate::redact::job_output(line, usize::MAX);
        info!(job = %name, stream = stream.as_str(), line = %line, "output");
    }));
    spec.run_as = crate::job::run_as(job)?;
    Ok(spec)
}

/// The job's ping, if it has a usable target now (for `check_id`: once sync learned the URL;
/// the first miss is logged, once per job).
fn job_ping(job: &Job, shared: &Shared, state: &JobState) -> Option<Ping> {
    let learned = |check: &str| shared.ping_urls.get(&job.name, check);
    match crate::job::ping(job, learned, PingMethod::Get, &shared.host) {
        Ok(ping) => Some(ping),
        Err(NoPing::NoTarget { .. }) => None,
        Err(NoPing::NotLearned { check, .. }) => {
            if !state.warned_no_url.swap(true, Ordering::Relaxed) {
                warn!(job = %job.name, check_id = %check, "no ping URL learned for the job's check yet (sync learns it); not pinging until then");
            }
            None
        }
        Err(NoPing::Invalid { error, .. }) => {
            warn!(job = %job.name, "job's ping target not used: {error}");
            None
        }
    }
}
