//! One run of a job: a command (captured output logged line by line, scrubbed of the agent's
//! secrets by [`crate::redact::scrub`], the last `output_tail` bytes kept) or a watch probe,
//! tried again after a failure as the job's `retries` allow (one run, one fire: it counts as
//! running through its waits, and only its last attempt decides the ping); its [`RunRecord`],
//! with the attempts it made; the ping through
//! [`crate::ping::outbox::deliver_or_queue_for`] (the same call as `run` and `ping`); the
//! job's start ping (once per run, before its first attempt) while a command runs and its fail
//! ping after a run that did not succeed (`start_url`, `fail_url`, through the same call); then
//! the after-run hooks.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::job::{millis, Settings, Shared};
use super::state::{JobState, PingRecord, RunRecord};
use crate::config::{Job, JobAction, WatchSpec};
use crate::job::NoPing;
use crate::ping::outbox::{self, PingContext};
use crate::ping::{Budget, Ping, PingMethod, PingOutcome};
use crate::process::{CommandSpec, Control, Io, Limits, LineSink, Outcome};
use crate::run_end::{RunEnd, RunOutcome};

/// What a command or probe came to, before the ping.
struct Ended {
    started: DateTime<Utc>,
    end: RunEnd,
    outcome: RunOutcome,
    output_tail: String,
}

impl Ended {
    fn success(&self) -> bool {
        self.outcome == RunOutcome::Success
    }
}

/// Runs `job` once for the fire at `scheduled`, records it in `state`, pings on success and
/// tells the hooks. `state.run_started()` was called by the caller; `early` is the fire's
/// claim if it was sent ahead (in a cluster).
pub(super) async fn execute(
    job: Arc<Job>,
    shared: Arc<Shared>,
    state: Arc<JobState>,
    scheduled: DateTime<Utc>,
    early: Option<super::cluster::Early>,
) {
    let Some(admitted) = super::cluster::runs_here(&job, &shared, &state, scheduled, early).await
    else {
        return;
    };
    let settings = shared.settings();
    if matches!(job.action, JobAction::External) {
        state.run_finished(record(
            scheduled,
            no_process(refused("an external job is not run")),
            Attempt::FIRST,
        ));
        return;
    }
    let mut start = match &job.action {
        JobAction::Command(_) | JobAction::Shell { .. } => {
            send_start_ping(&job, &shared, &settings)
        }
        _ => None,
    };
    let (ended, attempt) = attempts(&job, &shared, &settings, scheduled).await;
    // The run's own lines name the job in a field; this span puts the name on what the ping
    // and outbox code log too. It is made only around that code: a span on the whole run
    // would cost its set-up and an enter and exit on every poll, for every run.
    let span = || tracing::info_span!("run", job = %job.name);
    if !ended.success() {
        span().in_scope(|| drop_pending_success(&job, &shared, &state));
    }
    // The run ends when its process (or probe) does: the job's next fire must not wait for a
    // slow or hanging ping host, so the ping is sent after the run is recorded as finished.
    let success = ended.success();
    let fail = (!success)
        .then(|| fail_ping(&job, &shared, &ended))
        .flatten();
    state.run_finished(record(scheduled, ended, attempt));
    drop(admitted);
    if let Some(ping) = fail.filter(|_| !shared.stop_runs.is_cancelled()) {
        let send = async {
            // After the start ping, so the service sees them in order.
            if let Some(start) = start.take() {
                let _ = start.await;
            }
            let context = context(&job, &settings);
            outbox::deliver_or_queue_for(&ping, &Budget::default(), Some(&shared.outbox), &context)
                .await
        };
        tokio::select! {
            _ = tracing::Instrument::instrument(send, span()) => {}
            () = shared.stop_runs.cancelled() => {
                warn!(job = %job.name, "fail ping interrupted: the daemon is stopping (the ping stays in the outbox)");
            }
        }
    }
    let pings = job.pings();
    let ping_accepted = if success && pings && !shared.stop_runs.is_cancelled() {
        let ping = async {
            // After the start ping, so the service sees them in order.
            if let Some(start) = start.take() {
                let _ = start.await;
            }
            send_ping(&job, &shared, &state, &settings).await
        };
        tokio::select! {
            accepted = tracing::Instrument::instrument(ping, span()) => accepted,
            () = shared.stop_runs.cancelled() => {
                warn!(job = %job.name, "ping interrupted: the daemon is stopping (the ping stays in the outbox)");
                false
            }
        }
    } else {
        false
    };
    for hook in &shared.after_run {
        hook.after_run(&job, scheduled, ping_accepted);
    }
    // This run's task still counts: 1 means it is the last.
    if shared.runs.len() <= 1 {
        shared.runs_idle.notify_one();
    }
}

/// Which attempt of a run this is, of how many at most.
#[derive(Debug, Clone, Copy)]
struct Attempt {
    /// 1 for the first attempt.
    number: u32,
    /// `retries + 1`.
    of: u32,
}

impl Attempt {
    const FIRST: Attempt = Attempt { number: 1, of: 1 };
}

/// The run's attempts: the command or probe, tried again after a failure while `retries` allow
/// (waiting [`crate::retries::Retries::delay_before`] between attempts). A stop of the daemon
/// during a wait ends the run at once with the last attempt's result. Returns the last
/// attempt's end (its `started` is the first attempt's) and which attempt it was.
async fn attempts(
    job: &Job,
    shared: &Shared,
    settings: &Settings,
    scheduled: DateTime<Utc>,
) -> (Ended, Attempt) {
    let mut attempt = Attempt {
        number: 1,
        of: job.retries.attempts(),
    };
    let mut first_started = None;
    loop {
        let mut ended = match &job.action {
            JobAction::Watch(spec) => probe(job, shared, spec, attempt).await,
            _ => run_command(job, shared, settings, scheduled, attempt).await,
        };
        let first = *first_started.get_or_insert(ended.started);
        ended.started = first;
        if ended.success()
            || attempt.number >= attempt.of
            || ended.end.stopped()
            || shared.stop_runs.is_cancelled()
        {
            return (ended, attempt);
        }
        let wait = job.retries.delay_before(attempt.number - 1);
        let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        info!(job = %job.name, attempt = attempt.number, attempts = attempt.of, outcome = ended.outcome.as_str(), wait_ms, "attempt failed; retrying");
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = shared.stop_runs.cancelled() => {
                info!(job = %job.name, attempt = attempt.number, attempts = attempt.of, "no further attempt: the daemon is stopping");
                return (ended, attempt);
            }
        }
        attempt.number += 1;
    }
}

fn record(scheduled: DateTime<Utc>, ended: Ended, attempt: Attempt) -> RunRecord {
    let now = Utc::now();
    RunRecord {
        attempts: attempt.number,
        scheduled,
        started: ended.started,
        ended: now,
        duration: (now - ended.started).to_std().unwrap_or_default(),
        end: ended.end,
        outcome: ended.outcome,
        output_tail: ended.output_tail,
    }
}

/// What a run that had no process of its own came to: it did not start, or a probe was
/// abandoned at shutdown.
fn no_process(end: RunEnd) -> Ended {
    Ended {
        started: Utc::now(),
        outcome: end.outcome(&[]),
        end,
        output_tail: String::new(),
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
    attempt: Attempt,
) -> Ended {
    let spec = match command_spec(job, shared, settings, scheduled) {
        Ok(spec) => spec,
        Err(reason) => {
            warn!(job = %job.name, error = %reason, "job not started");
            return no_process(refused(reason.to_string()));
        }
    };
    let running = match shared.children.spawn(&spec) {
        Ok(running) => running,
        Err(err) => {
            warn!(job = %job.name, error = %err, "job not started");
            return no_process(RunEnd::from(&err));
        }
    };
    let started = Utc::now();
    let pid = running.pid();
    let delay_ms = (started - scheduled).num_microseconds().unwrap_or(0) as f64 / 1000.0;
    let Attempt { number, of } = attempt;
    info!(job = %job.name, pid, scheduled = %millis(scheduled), spawned = %millis(started), delay_ms, attempt = number, attempts = of, "job started");
    let limits = Limits {
        timeout: job.timeout,
        kill_after: job.kill_after,
    };
    let (control, requests) = mpsc::unbounded_channel();
    let supervised = running.supervise(limits, requests);
    tokio::pin!(supervised);
    let mut stopping = false;
    let outcome = loop {
        tokio::select! {
            outcome = &mut supervised => break outcome,
            () = shared.stop_runs.cancelled(), if !stopping => {
                stopping = true;
                let _ = control.send(Control::Stop { grace: settings.shutdown_timeout });
            }
        }
    };
    shared.children.ended(pid);
    finished(job, started, &outcome, attempt)
}

/// Logs the end of a command and turns its outcome into an [`Ended`].
fn finished(job: &Job, started: DateTime<Utc>, outcome: &Outcome, attempt: Attempt) -> Ended {
    let end = &outcome.end;
    let (code, signal) = (end.exit_code(), end.signal());
    let (timed_out, stopped, killed) = (end.timed_out(), end.stopped(), end.killed());
    let run_outcome = end.outcome(&job.success_exit_codes);
    let success = run_outcome == RunOutcome::Success;
    let duration_ms = u64::try_from(outcome.elapsed.as_millis()).unwrap_or(u64::MAX);
    let check_id = job.check_id();
    let Attempt { number, of } = attempt;
    if success {
        info!(job = %job.name, check_id, exit_code = code, duration_ms, success, attempt = number, attempts = of, "job finished");
    } else if let Some(process_end) = end.process_end() {
        warn!(job = %job.name, check_id, exit_code = code, signal, timed_out, stopped, killed, duration_ms, success, attempt = number, attempts = of, "job failed: {process_end}");
    }
    let output_tail = outcome
        .tail
        .as_ref()
        .map(|t| String::from_utf8_lossy(&t.contents()).into_owned())
        .unwrap_or_default();
    Ended {
        started,
        end: outcome.end.clone(),
        outcome: run_outcome,
        output_tail,
    }
}

async fn probe(job: &Job, shared: &Shared, spec: &WatchSpec, attempt: Attempt) -> Ended {
    let started = Utc::now();
    let probe = tokio::select! {
        probe = shared.probes().probe(spec) => probe,
        () = shared.stop_runs.cancelled() => {
            return no_process(RunEnd::Stopped { end: None, killed: false });
        }
    };
    let check_id = job.check_id();
    let Attempt { number, of } = attempt;
    if probe.healthy {
        info!(job = %job.name, check_id, healthy = true, reason = %probe.reason, attempt = number, attempts = of, "watch healthy");
    } else {
        warn!(job = %job.name, check_id, healthy = false, reason = %probe.reason, attempt = number, attempts = of, "watch unhealthy: not pinging");
    }
    let end = RunEnd::from(probe);
    Ended {
        started,
        outcome: end.outcome(&job.success_exit_codes),
        end,
        output_tail: String::new(),
    }
}

/// The child of a command or shell job: its command and hygiene (see [`crate::job`]), its
/// output captured and logged line by line, the user it runs as; the fire's slot
/// (`HEARTBEAT_AGENT_SCHEDULED`) and, in a cluster, the node (`HEARTBEAT_AGENT_NODE`).
fn command_spec(
    job: &Job,
    shared: &Shared,
    settings: &Settings,
    scheduled: DateTime<Utc>,
) -> Result<CommandSpec, crate::job::CommandError> {
    let mut spec = crate::job::command(job)?;
    let slot = scheduled.timestamp().to_string();
    spec.env_set
        .push((crate::process::SCHEDULED_ENV.into(), slot.into()));
    if let Some(node) = &shared.cluster {
        let name = node.name.clone();
        spec.env_set
            .push((crate::process::NODE_ENV.into(), name.into()));
    }
    crate::job::hygiene(
        &mut spec,
        Some(&job.name),
        Some(job),
        settings.api_key_env.as_deref(),
    );
    spec.io = Io::Capture {
        tail_bytes: job.output_tail,
    };
    let name = job.name.clone();
    spec.output_lines = Some(LineSink::new(move |stream, line| {
        // The line goes through the same scrubber as the output shown by `/status`.
        let line = crate::redact::scrub(&String::from_utf8_lossy(line));
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

/// A failed run: a pending success of the job in the outbox would claim it is fine; drop it.
fn drop_pending_success(job: &Job, shared: &Shared, state: &JobState) {
    let ping = job_ping(job, shared, state);
    if let Err(err) = shared
        .outbox
        .drop_after_failure(Some(&job.name), ping.as_ref())
    {
        warn!(job = %job.name, error = %err, "cannot drop the pending success of this failed run");
    }
}

/// The job and age limit stored with its pings in the outbox.
fn context(job: &Job, settings: &Settings) -> PingContext {
    PingContext {
        job: Some(job.name.clone()),
        max_age: crate::config::defaults::outbox_max_age(settings.outbox_max_age, Some(job)),
    }
}

/// Sends the job's start ping (`start_url`) in a task of its own, so the command starts at
/// once; never through the outbox (see [`outbox::deliver_or_queue_for`]).
fn send_start_ping(
    job: &Job,
    shared: &Shared,
    settings: &Settings,
) -> Option<tokio::task::JoinHandle<PingOutcome>> {
    let ping = crate::job::start_ping(job, PingMethod::Get, &shared.host)?
        .inspect_err(|err| warn!(job = %job.name, "job's start_url not used: {err}"))
        .ok()?;
    let context = context(job, settings);
    let send = async move {
        outbox::deliver_or_queue_for(&ping, &Budget::default(), None, &context).await
    };
    Some(tokio::spawn(tracing::Instrument::instrument(
        send,
        tracing::info_span!("run", job = %job.name),
    )))
}

/// The fail ping of a run that did not succeed (`fail_url`, its `{exit_code}` the status `run`
/// would exit with, and with `fail_body` the run's output tail), if the job has one.
fn fail_ping(job: &Job, shared: &Shared, ended: &Ended) -> Option<Ping> {
    let url = job.start_fail.fail_url.as_ref()?;
    let output = crate::job::fail_body_bytes(job).map(|max| (ended.output_tail.as_bytes(), max));
    let status = ended.end.exit_status();
    crate::job::fail_ping(url, status, output, PingMethod::Get, &shared.host)
        .inspect_err(|err| warn!(job = %job.name, "fail ping not sent: {err}"))
        .ok()
}

/// Pings the job's target after a success, through the outbox (kept there when it cannot be
/// delivered now); returns whether the server accepted it.
async fn send_ping(job: &Job, shared: &Shared, state: &JobState, settings: &Settings) -> bool {
    let Some(ping) = job_ping(job, shared, state) else {
        return false;
    };
    let context = context(job, settings);
    let at = Utc::now();
    let outcome =
        outbox::deliver_or_queue_for(&ping, &Budget::default(), Some(&shared.outbox), &context)
            .await;
    let (accepted, detail) = match &outcome {
        PingOutcome::Delivered { status, .. } => (true, format!("HTTP {status}")),
        PingOutcome::Retryable { error, .. } | PingOutcome::Permanent { error, .. } => {
            (false, error.to_string())
        }
    };
    state.record_ping(PingRecord {
        at,
        accepted,
        detail,
    });
    accepted
}
