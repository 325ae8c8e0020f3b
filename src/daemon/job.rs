//! One task per scheduled job: wait for the next fire time, apply the job's stable jitter,
//! overlap policy and pause (`pause --stop-jobs` skips fires), and start runs. `catch_up` and
//! `@reboot` are decided here at the task's start; [`watch_clock`] notices steps of the wall
//! clock. A fire goes through the local rules ([`crate::run::admission`]) and, for a job the
//! daemon's [`Admission`] decides (in a `[cluster]`, a `run_on = "one"` job), through it: the
//! task wakes once more before such a fire to send it ahead, and the run counts as started
//! only once the admission let it run here.
//!
//! Fire times come from the wall clock (`Utc::now()`) while tokio's timers follow the monotonic
//! clock, which does not see a step of the wall clock nor (on Linux) a suspend. So one task,
//! [`watch_clock`], wakes every [`MAX_SLEEP`] (60 s) and compares how far both clocks moved;
//! when they disagree by more than a second it wakes every job task, which then recomputes. That
//! is the "sleep at most 60 s" of cron, paid once per daemon instead of once per job: 10,000
//! idle jobs cost no wake-ups at all. After a fire at `t`, the next fire is computed from
//! `max(t, now)`: a jump forward over several fire times runs the job once, not once per missed
//! fire. If the wall clock steps back by more than a second, fire times are recomputed from the
//! new time.

use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use sha2::{Digest, Sha256};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use super::state::{DaemonState, JobState, Persisted, Wake};
use crate::config::Job;
use crate::process::children::Children;
use crate::run::admission::{overlap, Admission, Admitted, Elsewhere, Overlapping};
use crate::run::AfterRun;
use crate::watch::Probes;

/// The longest single sleep of a job task.
pub(crate) const MAX_SLEEP: Duration = Duration::from_secs(60);

/// Settings of the agent that a reload may change; runs read the current ones when they start.
#[derive(Debug, Clone)]
pub(super) struct Settings {
    /// `[agent] shutdown_timeout`: the grace between SIGTERM and SIGKILL at shutdown.
    pub shutdown_timeout: Duration,
    /// `[api] api_key_env`, `[cluster] password_env` and the `fail_headers` variables of every
    /// config the daemon ran with since it started: variables children must not see.
    pub secret_env: Vec<String>,
    /// `[agent] outbox_max_age`: how old a pending success may get.
    pub outbox_max_age: Option<Duration>,
}

impl Settings {
    /// These settings, with the secret variables of `before` kept among their own: a reload
    /// that renames `api_key_env` leaves the old variable in the daemon's environment (and
    /// `[cluster] password_env` in use until the next start), so no job may see it either.
    pub(super) fn keeping_secrets_of(mut self, before: &Settings) -> Settings {
        for var in &before.secret_env {
            if !self.secret_env.contains(var) {
                self.secret_env.push(var.clone());
            }
        }
        self
    }
}

/// What every job task and run shares.
pub(super) struct Shared {
    /// Current agent settings.
    pub settings: RwLock<Arc<Settings>>,
    /// The ping URLs sync learned for jobs bound by `check_id`, in memory.
    pub ping_urls: crate::sync::LearnedUrls,
    /// What decides fires beyond the local rules (in a `[cluster]`, the claim), if any.
    pub admission: Option<Arc<dyn Admission>>,
    /// The daemon's files in it.
    pub persisted: Persisted,
    /// The run history under it (each job's `history` says how many runs it keeps), written
    /// by its own low-priority thread.
    pub history: crate::history::Recorder,
    /// The durable outbox under it: pings that could not be delivered wait there for the
    /// drainer task.
    pub outbox: crate::ping::outbox::Outbox,
    /// How runs, the drainer and the probes reach the network.
    pub pings: crate::ping::Sender,
    /// Live job state, read by status.
    pub state: Arc<DaemonState>,
    /// Probe context shared by all watch jobs, made at the first probe (its HTTP client costs
    /// memory a daemon without watch jobs need not spend).
    pub probes: OnceLock<Probes>,
    /// Running job processes (and the PID 1 reaper's exclusion list).
    pub children: Arc<Children>,
    /// Plug-ins told about every run.
    pub after_run: Vec<Arc<dyn AfterRun>>,
    /// Where runs live: shutdown waits for it to empty.
    pub runs: TaskTracker,
    /// Signalled when the last run in progress ends: [`trim_when_quiet`] then gives the memory
    /// of a burst of runs back.
    pub runs_idle: tokio::sync::Notify,
    /// Cancelled at shutdown: every run stops its command (SIGTERM, then SIGKILL).
    pub stop_runs: CancellationToken,
    /// Host name: the pings' `Origin` and the jitter's seed.
    pub host: String,
    /// This boot's id, for `@reboot` (`None` if unreadable).
    pub boot_id: Option<String>,
}

impl Shared {
    /// The probe context.
    pub(crate) fn probes(&self) -> &Probes {
        self.probes.get_or_init(|| Probes::new(self.pings.net()))
    }

    /// The settings in force.
    pub(crate) fn settings(&self) -> Arc<Settings> {
        Arc::clone(&self.settings.read().unwrap_or_else(|e| e.into_inner()))
    }
}

/// One job's scheduling task.
pub(super) struct JobTask {
    pub job: Arc<Job>,
    pub shared: Arc<Shared>,
    pub state: Arc<JobState>,
}

/// The task: runs until `cancel` (the job was removed or changed, or the daemon stops). Runs it
/// started go on and end by themselves (or through [`Shared::stop_runs`]).
pub(super) async fn run(task: JobTask, cancel: CancellationToken) {
    if task.job.schedule.is_reboot() {
        task.at_boot();
        let mut queued = None;
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                why = task.state.woken() => task.woken(why, &mut queued),
            }
        }
    }
    let job = &task.job;
    // Every fire starts `jitter` late; what status shows as the next run includes it.
    let jitter = jitter_delay(&task.shared.host, &job.name, job.jitter);
    let mut base = Utc::now();
    if let Some(missed) = task.missed_fire(base) {
        info!(job = %job.name, missed = %missed.to_rfc3339(), "catching up a fire missed while the daemon was down");
        task.fire(missed, &mut None);
    }
    let mut queued: Option<DateTime<Utc>> = None;
    // A fire the admission decides is sent ahead of its due time; the fire it was sent for.
    let ahead = task.admission().cloned();
    let mut sent_ahead: Option<DateTime<Utc>> = None;
    let mut last_due: Option<DateTime<Utc>> = None;
    let mut next = job.schedule.next_after(base, job.timezone);
    task.state.set_next_fire(next.map(|fire| fire + jitter));
    loop {
        let Some(fire_at) = next else {
            warn!(job = %job.name, "the schedule has no upcoming fire time; the job is not scheduled");
            cancel.cancelled().await;
            return;
        };
        let now = Utc::now();
        let due = fire_at + jitter;
        if now >= due {
            task.fire(fire_at, &mut queued);
            last_due = Some(due);
            base = fire_at.max(now);
            next = job.schedule.next_after(base, job.timezone);
            task.state.set_next_fire(next.map(|fire| fire + jitter));
            continue;
        }
        if base > now + TimeDelta::seconds(1) {
            debug!(job = %job.name, "the wall clock went back; recomputing the next fire time");
            base = now;
            next = job.schedule.next_after(base, job.timezone);
            task.state.set_next_fire(next.map(|fire| fire + jitter));
            continue;
        }
        let mut wake = due;
        let pending = ahead.as_ref().filter(|_| sent_ahead != Some(fire_at));
        if let Some(at) = pending.and_then(|a| a.ahead_at(job, due, last_due)) {
            if now >= at {
                task.send_ahead(fire_at);
                sent_ahead = Some(fire_at);
            } else {
                wake = at;
            }
        }
        let wait = (wake - now).to_std().unwrap_or_default();
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
            // A requested run, a run's end, or a step of the wall clock (then the loop
            // compares the fire time with the new time).
            why = task.state.woken() => task.woken(why, &mut queued),
        }
    }
}

impl JobTask {
    /// The admission that decides this job's fires, if one does.
    fn admission(&self) -> Option<&Arc<dyn Admission>> {
        let admission = self.shared.admission.as_ref()?;
        admission.decides(&self.job).then_some(admission)
    }

    /// What the local rules make of a fire at `now`: `None` when the job is stopped by a
    /// pause, else what its `overlap` makes of the runs that go.
    fn local_rules(&self, now: DateTime<Utc>) -> Option<Overlapping> {
        if self.shared.persisted.stopped_by_pause(&self.job.name, now) {
            return None;
        }
        Some(overlap(&self.job, self.state.running() > 0))
    }

    /// What the task does when woken for `why`: a run's end starts the queued fire if no run
    /// goes now; `POST /jobs/{name}/run` fires now, under the same overlap rule (after the
    /// queued fire, which is older). A step of the wall clock needs nothing here.
    fn woken(&self, why: Wake, queued: &mut Option<DateTime<Utc>>) {
        if why.has(Wake::RUN_ENDED) && self.state.running() == 0 {
            if let Some(fire) = queued.take() {
                self.start(fire);
            }
        }
        if why.has(Wake::RUN_REQUESTED) {
            self.fire(Utc::now(), queued);
        }
    }

    /// A fire at `scheduled`: start a run, or skip/queue it under the local rules.
    fn fire(&self, scheduled: DateTime<Utc>, queued: &mut Option<DateTime<Utc>>) {
        let job = &self.job;
        let now = Utc::now();
        match self.local_rules(now) {
            None => {
                info!(job = %job.name, scheduled = %millis(scheduled), skipped = true, paused = true, "run skipped: the job is paused (pause --stop-jobs)");
                self.state.record_skip(now);
            }
            Some(Overlapping::Skip) => {
                info!(job = %job.name, scheduled = %millis(scheduled), skipped = true, "run skipped: the previous run is still running (overlap = \"skip\")");
                self.state.record_skip(Utc::now());
            }
            Some(Overlapping::Queue) => {
                if queued.replace(scheduled).is_some() {
                    info!(job = %job.name, scheduled = %millis(scheduled), "run already queued: this fire replaces it (overlap = \"queue\")");
                } else {
                    info!(job = %job.name, scheduled = %millis(scheduled), "run queued until the previous run ends (overlap = \"queue\")");
                }
            }
            Some(Overlapping::Go) => self.start(scheduled),
        }
    }

    /// Sends the fire at `fire` ahead to the admission, unless the local rules would not run
    /// it now (a run going that `overlap` makes it skip or queue behind, or a pause): a fire
    /// decided ahead but then not run here would not run elsewhere either.
    fn send_ahead(&self, fire: DateTime<Utc>) {
        let Some(admission) = self.admission() else {
            return;
        };
        if self.local_rules(Utc::now()) == Some(Overlapping::Go) {
            self.shared.runs.spawn(admission.ahead(&self.job, fire));
        }
    }

    /// Starts a run now (on the daemon's run tracker, so it outlives this task); a fire that
    /// the admission decides counts as started only once it runs here.
    fn start(&self, scheduled: DateTime<Utc>) {
        if self.job.catch_up {
            if let Err(err) = self
                .shared
                .persisted
                .set_last_fire(&self.job.name, scheduled)
            {
                warn!(job = %self.job.name, error = %err, "cannot record the fire time for catch_up");
            }
        }
        let (job, shared, state) = (
            Arc::clone(&self.job),
            Arc::clone(&self.shared),
            Arc::clone(&self.state),
        );
        let Some(admission) = self.admission() else {
            let admitted = state.gate.admit_now(&job);
            state.run_started();
            self.shared.runs.spawn(super::job_run::run_job(
                job, shared, state, scheduled, admitted,
            ));
            return;
        };
        let decided = admission.decide(&job, scheduled);
        self.shared.runs.spawn(async move {
            let Some(admitted) = admitted_here(&job, &state, scheduled, decided).await else {
                return;
            };
            state.run_started();
            super::job_run::run_job(job, shared, state, scheduled, admitted).await;
        });
    }

    /// With `catch_up`: the last fire time missed since the recorded last fire, if any.
    fn missed_fire(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if !self.job.catch_up {
            return None;
        }
        let last = self.shared.persisted.last_fire(&self.job.name)?;
        let first_missed = self.job.schedule.next_after(last, self.job.timezone)?;
        (first_missed < now)
            .then(|| self.job.schedule.prev_before(now, self.job.timezone))
            .flatten()
    }

    /// `@reboot`: run once per boot of the machine.
    fn at_boot(&self) {
        let name = &self.job.name;
        let Some(boot) = self.shared.boot_id.as_deref() else {
            warn!(job = %name, "the boot id is unknown; @reboot job not run");
            return;
        };
        if self.shared.persisted.reboot_marker(name).as_deref() == Some(boot) {
            debug!(job = %name, "@reboot job already ran in this boot");
            return;
        }
        // Marked before it runs: a crash during the run must not run it again in this boot.
        if let Err(err) = self.shared.persisted.set_reboot_marker(name, boot) {
            warn!(job = %name, error = %err, "cannot record the boot id; the @reboot job may run again after a restart");
        }
        info!(job = %name, "running @reboot job (first start in this boot)");
        self.start(Utc::now());
    }
}

/// A fire that the admission decides: once it lets it run here, the overlap rule again
/// against the runs that go now (a run of an earlier fire may have started meanwhile).
async fn admitted_here(
    job: &Job,
    state: &JobState,
    scheduled: DateTime<Utc>,
    decided: crate::run::admission::Pending<Result<(), Elsewhere>>,
) -> Option<Admitted> {
    decided.await.ok()?;
    let admitted = state.gate.admit(job).await;
    if admitted.is_none() {
        info!(job = %job.name, scheduled = %millis(scheduled), skipped = true, "run skipped: the previous run is still running (overlap = \"skip\"); its claim was answered after this fire came");
        state.record_skip(Utc::now());
    }
    admitted
}

/// Wakes every [`MAX_SLEEP`] and tells every job's task when the wall clock moved more than a
/// second differently from the monotonic clock (a step, or a suspend), until `cancel`.
pub(super) async fn watch_clock(jobs: Arc<DaemonState>, cancel: CancellationToken) {
    let (mut mono, mut wall) = (Instant::now(), Utc::now());
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(MAX_SLEEP) => {}
        }
        let (mono_now, wall_now) = (Instant::now(), Utc::now());
        let expected = TimeDelta::from_std(mono_now - mono).unwrap_or(TimeDelta::MAX);
        let drift = (wall_now - wall) - expected;
        if drift.abs() > TimeDelta::seconds(1) {
            info!(
                drift_ms = drift.num_milliseconds(),
                "the wall clock stepped (or the machine slept); recomputing fire times"
            );
            for (_, job) in jobs.jobs() {
                job.clock_stepped();
            }
        }
        (mono, wall) = (mono_now, wall_now);
    }
}

/// How long no run may be in progress before freed memory is handed back.
const QUIET: Duration = Duration::from_secs(1);

/// Hands freed heap memory back to the system once no run has been in progress for [`QUIET`],
/// until `cancel`. A burst of thousands of runs leaves the heap full of freed holes that glibc
/// keeps (it only trims the top of the heap by itself); without this the daemon's resident size
/// would stay at the burst's peak. At most once per quiet period, and never while idle: an idle
/// daemon has no runs ending.
pub(super) async fn trim_when_quiet(shared: Arc<Shared>, cancel: CancellationToken) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = shared.runs_idle.notified() => {}
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(QUIET) => {}
        }
        // Runs that started meanwhile signal again when they end.
        if shared.runs.is_empty() {
            super::release_free_memory();
        }
    }
}

/// A delay in `[0, jitter)` that depends only on the host and the job, so restarts keep each
/// job's slot while a fleet of hosts spreads out.
pub(crate) fn jitter_delay(host: &str, job: &str, jitter: Duration) -> TimeDelta {
    let span = u64::try_from(jitter.as_millis()).unwrap_or(u64::MAX);
    if span == 0 {
        return TimeDelta::zero();
    }
    let digest = Sha256::new()
        .chain_update(host.as_bytes())
        .chain_update([0])
        .chain_update(job.as_bytes())
        .finalize();
    let mut seed = [0u8; 8];
    seed.copy_from_slice(&digest[..8]);
    let millis = u64::from_le_bytes(seed) % span;
    TimeDelta::milliseconds(i64::try_from(millis).unwrap_or(0))
}

/// RFC 3339 with milliseconds, for log fields.
pub(crate) fn millis(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reload_keeps_every_secret_variable_of_the_daemons_life() {
        let settings = |vars: &[&str]| Settings {
            shutdown_timeout: Duration::from_secs(1),
            secret_env: vars.iter().map(|v| (*v).to_owned()).collect(),
            outbox_max_age: None,
        };
        let first = settings(&["OLD_KEY", "ETCD_PASSWORD", "HOOK"]);
        let second = settings(&["NEW_KEY", "HOOK"]).keeping_secrets_of(&first);
        assert_eq!(
            second.secret_env,
            ["NEW_KEY", "HOOK", "OLD_KEY", "ETCD_PASSWORD"]
        );
        let third = settings(&["NEWER_ETCD"]).keeping_secrets_of(&second);
        assert_eq!(
            third.secret_env,
            ["NEWER_ETCD", "NEW_KEY", "HOOK", "OLD_KEY", "ETCD_PASSWORD"]
        );
    }

    /// Tokio's clock (the monotonic one here) moves 61 s while the wall clock does not: as
    /// after a step of the wall clock back, every job's task is woken to recompute its fire,
    /// and told why.
    #[tokio::test(start_paused = true)]
    async fn a_clock_step_wakes_every_jobs_task() {
        let jobs = Arc::new(DaemonState::default());
        let (a, b) = (jobs.entry("a"), jobs.entry("b"));
        let cancel = CancellationToken::new();
        let watcher = tokio::spawn(watch_clock(Arc::clone(&jobs), cancel.clone()));
        tokio::time::sleep(MAX_SLEEP + Duration::from_secs(1)).await;
        for job in [a, b] {
            let why = tokio::time::timeout(Duration::from_secs(1), job.woken())
                .await
                .expect("the job's task is woken");
            assert!(why.has(Wake::CLOCK_STEPPED), "{why:?}");
            assert!(!why.has(Wake::RUN_REQUESTED), "{why:?}");
        }
        cancel.cancel();
        watcher.await.expect("the watcher ends when cancelled");
    }

    #[test]
    fn jitter_is_stable_bounded_and_spread() {
        let max = Duration::from_secs(60);
        let a = jitter_delay("web-1", "backup", max);
        assert_eq!(a, jitter_delay("web-1", "backup", max));
        assert!(a >= TimeDelta::zero() && a < TimeDelta::seconds(60), "{a}");
        let distinct: std::collections::HashSet<_> = (0..20)
            .map(|i| jitter_delay(&format!("web-{i}"), "backup", max))
            .collect();
        assert!(distinct.len() > 15, "{distinct:?}");
        assert_eq!(jitter_delay("h", "j", Duration::ZERO), TimeDelta::zero());
    }
}
