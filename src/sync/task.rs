//! The daemon's side of sync: [`Reconciler`], a cloneable handle whose [`Reconciler::run`] task
//! waits a random `0..sync_jitter`, then reconciles every `resync_interval` (plus jitter), on
//! demand (right after a run's accepted ping, on reload), sooner after a
//! failure (capped backoff), and, while PUTs are paced after a 429 ([`Pacer`]), as soon as the
//! pace allows the next one, and at the deadline of a pause ([`crate::pause`]), which that
//! pass ends. Per-job status is kept for the status endpoint, which may also ask for a pass
//! ([`SyncStatus::request_pass`]: `pause` and `resume`).
//!
//! Re-assertion: a check edited in the web UI or deleted would go unnoticed while the local
//! record says "in sync". Each bound check is therefore re-asserted once soon after start (at a random
//! point of the first [`REASSERT_START_SPREAD`] from the task's start, or of `reassert_interval`
//! when that is shorter) and then every `reassert_interval` plus a random tenth of it, per
//! check; a `PUT` (whose answer is what a re-assertion reads) starts the interval again: a fleet
//! restarted together spreads its PUTs instead of sending them at once (1000 checks over 10
//! minutes is 100 per minute, far under the shared 600 per 60 s). A re-assertion reads the check
//! first (`GET /v1/checks/{id}`, [`super::drift`]) and sends only what differs, so nothing is
//! sent when nothing was edited; a field edited on the service is drift: logged as a warning
//! naming the job, check and fields, counted (`heartbeat_agent_sync_drift_total{job}`) and shown
//! in the job's status until repaired. Against a service that does not serve the read, the
//! definition is sent whatever the record says. A check the service answers 404 for is
//! `missing`: it is held (no PUT) until its next re-assertion or a reload, never retried in a
//! loop.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::pace::{PaceRule, Pacer};
use super::reconcile::{sync_paced, CadenceCache};
use super::report::{SyncOptions, SyncOutcome, SyncReport};
use super::state::LearnedUrls;
use super::timer;
use crate::api::ApiClient;
use crate::backoff;
use crate::config::{CheckDuration, Config, PingTarget};
use crate::net::RetryPolicy;

/// Where a job's check stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncState {
    /// Not yet reconciled since start (or a change is waiting for the next pass).
    Pending,
    /// The service has the desired definition.
    InSync,
    /// The last PUT failed; it is retried.
    Failed,
    /// The service answered 404: the check is gone (deleted, or a wrong `check_id`). Not
    /// retried until the next re-assertion or a reload.
    Missing,
}

impl SyncState {
    /// The name status and metrics use: `in_sync`, `pending`, `failed`, `missing`.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncState::Pending => "pending",
            SyncState::InSync => "in_sync",
            SyncState::Failed => "failed",
            SyncState::Missing => "missing",
        }
    }
}

/// How long after start the first re-assertions of a fleet are spread over.
pub const REASSERT_START_SPREAD: Duration = Duration::from_secs(10 * 60);

/// One job's sync status, as the status endpoint shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobSyncStatus {
    /// The check id.
    pub check_id: String,
    /// In sync, pending or failed.
    pub state: SyncState,
    /// The last failure's message (kept until a pass succeeds).
    pub last_error: Option<String>,
    /// When the job was last reconciled (successfully or not).
    pub last_attempt: Option<DateTime<Utc>>,
    /// When the service last had the desired definition.
    pub last_success: Option<DateTime<Utc>>,
    /// The fields edited on the service (drift) that are not repaired yet.
    pub drift: Vec<String>,
    /// How many passes found drift since the daemon started.
    pub drift_found: u64,
}

/// Per-job sync status shared between the sync task and readers (the status endpoint).
#[derive(Debug, Clone, Default)]
pub struct SyncStatus {
    jobs: Arc<Mutex<BTreeMap<String, JobSyncStatus>>>,
    /// Wakes the sync task for a pass now (shared by every clone).
    wake: Arc<Notify>,
}

impl SyncStatus {
    /// Asks the sync task for a pass now (coalesced with one already pending): `pause` and
    /// `resume` through the status endpoint, which then wait for the jobs' `last_attempt`.
    pub fn request_pass(&self) {
        self.wake.notify_one();
    }

    /// A copy of every job's status, by job name.
    pub fn snapshot(&self) -> BTreeMap<String, JobSyncStatus> {
        self.lock().clone()
    }

    /// One job's status.
    pub fn get(&self, job: &str) -> Option<JobSyncStatus> {
        self.lock().get(job).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, JobSyncStatus>> {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks every bound job of `config` pending (jobs no longer bound are forgotten).
    fn reset(&self, config: &Config) {
        let mut jobs = self.lock();
        let old = std::mem::take(&mut *jobs);
        for job in &config.jobs {
            // `@reboot` with an auto period is left alone by sync (config check warns).
            let managed = !(job.schedule.is_reboot() && job.check.period == CheckDuration::Auto);
            // A job with `create = true` shows its check's id once sync found or created it.
            let id = match &job.target {
                PingTarget::Check(id) => Some(id.clone()),
                PingTarget::None if job.check.create => Some(
                    old.get(&job.name)
                        .map(|s| s.check_id.clone())
                        .unwrap_or_default(),
                ),
                _ => None,
            };
            if let (Some(id), true) = (&id, managed) {
                let mut status = old.get(&job.name).cloned().unwrap_or(JobSyncStatus {
                    check_id: id.clone(),
                    state: SyncState::Pending,
                    last_error: None,
                    last_attempt: None,
                    last_success: None,
                    drift: Vec::new(),
                    drift_found: 0,
                });
                status.check_id.clone_from(id);
                // A reload retries a missing check once (its check_id may have been fixed).
                if matches!(status.state, SyncState::InSync | SyncState::Missing) {
                    status.state = SyncState::Pending;
                }
                jobs.insert(job.name.clone(), status);
            }
        }
    }

    /// Records a pass.
    fn record(&self, report: &SyncReport, now: DateTime<Utc>) {
        let mut jobs = self.lock();
        for entry in &report.jobs {
            let status = jobs.entry(entry.job.clone()).or_insert(JobSyncStatus {
                check_id: entry.check_id.clone(),
                state: SyncState::Pending,
                last_error: None,
                last_attempt: None,
                last_success: None,
                drift: Vec::new(),
                drift_found: 0,
            });
            status.last_attempt = Some(now);
            if !entry.check_id.is_empty() {
                status.check_id.clone_from(&entry.check_id);
            }
            if !entry.drift.is_empty() {
                tracing::warn!(
                    job = %entry.job,
                    check = %entry.check_id,
                    fields = %entry.drift.join(", "),
                    "the check was edited on the service (drift); the config's values are sent \
                     back (a period or activation right after the job's next accepted ping)"
                );
                status.drift_found += 1;
                status.drift.clone_from(&entry.drift);
            }
            // Drift is repaired once nothing of it is held any more.
            let unrepaired = |field: &String| entry.held.iter().any(|c| &c.field == field);
            match &entry.outcome {
                SyncOutcome::InSync
                | SyncOutcome::Updated
                | SyncOutcome::Created
                | SyncOutcome::Held => {
                    status.drift.retain(unrepaired);
                }
                _ => {}
            }
            match &entry.outcome {
                SyncOutcome::Failed(message) => {
                    status.state = SyncState::Failed;
                    status.last_error = Some(message.clone());
                }
                SyncOutcome::Missing(message) => {
                    status.state = SyncState::Missing;
                    status.last_error = Some(message.clone());
                }
                SyncOutcome::WouldUpdate | SyncOutcome::WouldCreate | SyncOutcome::Held => {
                    status.state = SyncState::Pending;
                }
                SyncOutcome::Deferred(message) => {
                    status.state = SyncState::Pending;
                    status.last_error = Some(message.clone());
                }
                SyncOutcome::InSync | SyncOutcome::Updated | SyncOutcome::Created => {
                    status.state = SyncState::InSync;
                    status.last_error = None;
                    status.last_success = Some(now);
                }
            }
        }
    }
}

/// Timing of the background task (defaults from the config; tests shorten them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskTiming {
    /// Upper bound of the random delay before the first pass (`sync_jitter`).
    pub start_jitter: Duration,
    /// Time between passes when nothing happens (`resync_interval`, plus up to `start_jitter`).
    pub resync_interval: Duration,
    /// The first retry delay after a failed pass; doubles per failure, full jitter.
    pub retry_base: Duration,
    /// The longest retry delay.
    pub retry_cap: Duration,
    /// How often each check's definition is sent whatever the local record says
    /// (`reassert_interval`, plus a random tenth per check).
    pub reassert_interval: Duration,
    /// The first re-assertions after start fall at random points of this span (capped at
    /// `reassert_interval`).
    pub reassert_start_spread: Duration,
}

impl TaskTiming {
    /// The config's `sync_jitter` and `resync_interval`; retries from 30 s up to 15 min.
    pub fn from_config(config: &Config) -> Self {
        TaskTiming {
            start_jitter: config.agent.sync_jitter,
            resync_interval: config.agent.resync_interval,
            retry_base: Duration::from_secs(30),
            retry_cap: Duration::from_secs(15 * 60),
            reassert_interval: config.agent.reassert_interval,
            reassert_start_spread: REASSERT_START_SPREAD,
        }
    }
}

/// The daemon's handle on sync. Cheap to clone; every clone drives the same task.
#[derive(Clone)]
pub struct Reconciler {
    inner: Arc<Inner>,
}

struct Inner {
    config: Mutex<Arc<Config>>,
    client: ApiClient,
    state_dir: PathBuf,
    status: SyncStatus,
    timing: Mutex<Option<TaskTiming>>,
    pacer: Pacer,
    /// Where every ping URL a pass learns is recorded (shared with the daemon's runs).
    learned: LearnedUrls,
    /// When each job's check is next re-asserted (filled at the first pass).
    reassert_at: Mutex<BTreeMap<String, tokio::time::Instant>>,
    /// When the task started (before its start jitter): the first re-assertions fall within
    /// the start spread from here.
    started: Mutex<Option<tokio::time::Instant>>,
}

impl Reconciler {
    /// A reconciler for `config`, sending through `client` (shared rate limiter), keeping state
    /// in `state_dir`. Nothing happens until [`Reconciler::run`] is spawned.
    ///
    /// Every request is made once (`client`'s retry policy with `max_attempts = 1`): the task
    /// paces and retries PUTs itself, and quick repeats of a 429 only keep a fleet sharing one
    /// key locked out longer (429 answers count against the limit, so repeats add to the
    /// offered rate).
    pub fn new(config: Arc<Config>, client: ApiClient, state_dir: PathBuf) -> Self {
        let learned = LearnedUrls::new(&state_dir);
        Self::sharing(config, client, state_dir, learned)
    }

    /// [`Reconciler::new`], recording learned ping URLs in `learned` (the daemon's, so its runs
    /// find them in memory) instead of a map of its own.
    pub fn sharing(
        config: Arc<Config>,
        client: ApiClient,
        state_dir: PathBuf,
        learned: LearnedUrls,
    ) -> Self {
        let status = SyncStatus::default();
        status.reset(&config);
        let client = client.with_retry(RetryPolicy {
            max_attempts: 1,
            ..client.retry_policy().clone()
        });
        Reconciler {
            inner: Arc::new(Inner {
                config: Mutex::new(config),
                client,
                state_dir: state_dir.clone(),
                status,
                timing: Mutex::new(None),
                pacer: Pacer::default(),
                learned,
                reassert_at: Mutex::new(BTreeMap::new()),
                started: Mutex::new(None),
            }),
        }
    }

    /// Overrides the pacing rule (tests, the fleet simulation; by default [`PaceRule::default`]).
    pub fn with_pace(self, rule: PaceRule) -> Self {
        self.inner.pacer.set_rule(rule);
        self
    }

    /// The pace of this agent's PUTs (requests per second), `None` while unpaced.
    pub fn pace(&self) -> Option<f64> {
        self.inner.pacer.rate(tokio::time::Instant::now())
    }

    /// Overrides the task's timing (tests; by default it follows the config).
    pub fn with_timing(self, timing: TaskTiming) -> Self {
        *self.inner.timing.lock().unwrap_or_else(|e| e.into_inner()) = Some(timing);
        self
    }

    /// A new configuration (reload): used from the next pass, which starts at once.
    pub fn set_config(&self, config: Arc<Config>) {
        self.inner.status.reset(&config);
        *self.inner.config.lock().unwrap_or_else(|e| e.into_inner()) = config;
        self.trigger();
    }

    /// Asks for a pass now (coalesced with one already pending).
    pub fn trigger(&self) {
        self.inner.status.request_pass();
    }

    /// Tells sync that `job`'s run for the fire at `fire` ended, and whether the service
    /// accepted its ping. An accepted ping is recorded and a pass triggered at once: a period
    /// change or re-activation held until this ping goes out now ([`super::timer`]). Never
    /// fails: a state file that cannot be written is logged.
    pub fn after_run(&self, job: &str, fire: DateTime<Utc>, ping_accepted: bool) {
        let config = self.config();
        let Some(bound) = config.job(job) else {
            return;
        };
        let Some(check_id) = super::created::bound_check(&self.inner.state_dir, bound) else {
            return;
        };
        if ping_accepted {
            let failures = self.inner.client.metrics().persist_failures();
            let recorded = timer::record_ping(
                &self.inner.state_dir,
                failures,
                job,
                &check_id,
                fire,
                Utc::now(),
            );
            if let Err(err) = recorded {
                tracing::warn!(job, error = %err, "cannot record the accepted ping for sync");
            }
        }
        if ping_accepted {
            self.trigger();
        }
    }

    /// The per-job status, shared (read it from the status endpoint).
    pub fn status(&self) -> SyncStatus {
        self.inner.status.clone()
    }

    /// The ping URL learned for `job` (a job bound by `check_id`), `None` before the first
    /// accepted sync.
    pub fn ping_url(&self, job: &str, check_id: &str) -> Option<String> {
        self.inner.learned.get(job, check_id)
    }

    /// The state directory.
    pub fn state_dir(&self) -> &Path {
        &self.inner.state_dir
    }

    /// The configuration in force.
    pub fn config(&self) -> Arc<Config> {
        self.inner
            .config
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn timing(&self, config: &Config) -> TaskTiming {
        self.inner
            .timing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .unwrap_or_else(|| TaskTiming::from_config(config))
    }

    /// One pass now, recorded in the status: checks due for re-assertion are sent whatever the
    /// local record says, missing checks not due are held.
    pub async fn sync_once(&self, cache: &mut CadenceCache) -> SyncReport {
        let config = self.config();
        let timing = self.timing(&config);
        let now = Utc::now();
        let (reassert, hold) = self.reassert_plan(&config, &timing);
        let opts = SyncOptions {
            reassert: reassert.clone(),
            hold,
            ..SyncOptions::at(now)
        };
        let report = sync_paced(
            &config,
            &self.inner.client,
            &self.inner.state_dir,
            &opts,
            cache,
            Some(&self.inner.pacer),
            Some(&self.inner.learned),
        )
        .await;
        self.inner.status.record(&report, now);
        self.reassert_done(&report, &reassert, &timing);
        report
    }

    /// The jobs due for re-assertion now, and the missing ones held until theirs. A job seen for
    /// the first time gets its first re-assertion at a random point of the start spread.
    fn reassert_plan(
        &self,
        config: &Config,
        timing: &TaskTiming,
    ) -> (BTreeSet<String>, BTreeSet<String>) {
        let now = tokio::time::Instant::now();
        let started = *self.inner.started.lock().unwrap_or_else(|e| e.into_inner());
        let start = started.unwrap_or(now);
        let status = self.inner.status.snapshot();
        let mut due_at = self.lock_reassert();
        let mut due = BTreeSet::new();
        let mut hold = BTreeSet::new();
        for job in config.jobs.iter().filter(|j| j.has_synced_check()) {
            let spread = timing.reassert_start_spread.min(timing.reassert_interval);
            // A point of the spread from the task's start (a job added by a reload: from now).
            let at = *due_at
                .entry(job.name.clone())
                .or_insert_with(|| (start + random_up_to(spread)).max(now));
            let missing = status
                .get(&job.name)
                .is_some_and(|s| s.state == SyncState::Missing);
            if at <= now {
                due.insert(job.name.clone());
            } else if missing {
                hold.insert(job.name.clone());
            }
        }
        (due, hold)
    }

    /// Schedules the next re-assertion of every due job the pass did not defer (a failed one is
    /// tried again after [`TaskTiming::retry_cap`] at the latest), and of every job whose
    /// definition went out in `report`: the service's answer to that `PUT` is what a
    /// re-assertion would have read. So the first re-assertion within the start spread is for
    /// the checks the first pass sent nothing to: reading every check of a fleet within ten
    /// minutes besides its first `PUT`s would take more than the shared key allows (10,000
    /// checks: 1,000 requests a minute against 600).
    fn reassert_done(&self, report: &SyncReport, due: &BTreeSet<String>, timing: &TaskTiming) {
        let now = tokio::time::Instant::now();
        let mut due_at = self.lock_reassert();
        let mut jobs: BTreeMap<&str, Option<&SyncOutcome>> =
            due.iter().map(|job| (job.as_str(), None)).collect();
        for entry in &report.jobs {
            let sent = matches!(entry.outcome, SyncOutcome::Updated | SyncOutcome::Created);
            if due.contains(&entry.job) || sent {
                jobs.insert(entry.job.as_str(), Some(&entry.outcome));
            }
        }
        for (job, outcome) in jobs {
            let next = match outcome {
                Some(SyncOutcome::Deferred(_)) => continue,
                Some(SyncOutcome::Failed(_)) => timing.retry_cap,
                _ => timing.reassert_interval + random_up_to(timing.reassert_interval / 10),
            };
            due_at.insert(job.to_owned(), now + next);
        }
    }

    /// Notes when the task started, once: the first re-assertions are spread from here.
    fn mark_start(&self) {
        let mut started = self.inner.started.lock().unwrap_or_else(|e| e.into_inner());
        started.get_or_insert_with(tokio::time::Instant::now);
    }

    /// Time until the earliest re-assertion is due.
    fn next_reassert(&self) -> Option<Duration> {
        let now = tokio::time::Instant::now();
        self.lock_reassert()
            .values()
            .min()
            .map(|at| at.saturating_duration_since(now))
    }

    fn lock_reassert(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, tokio::time::Instant>> {
        self.inner
            .reassert_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The background task: first pass after a random `0..sync_jitter`, then as described in
    /// the module header, until `cancel`. A failing API only delays the next pass.
    pub async fn run(self, cancel: CancellationToken) {
        self.mark_start();
        let start = self.timing(&self.config()).start_jitter;
        if !sleep_or_cancel(random_up_to(start), &cancel).await {
            return;
        }
        self.passes(cancel).await;
    }

    /// The passes of [`Reconciler::run`] without its start jitter: the first pass at once (a
    /// cluster's one syncing agent starts here when it becomes leader).
    pub async fn passes(self, cancel: CancellationToken) {
        self.mark_start();
        let mut cache = CadenceCache::default();
        let mut failures = 0u32;
        loop {
            let report = self.sync_once(&mut cache).await;
            failures = if report.failed_otherwise() {
                failures + 1
            } else {
                0
            };
            let config = self.config();
            let timing = self.timing(&config);
            let mut wait = timing.resync_interval + random_up_to(timing.start_jitter);
            // A deferred or rate-limited PUT goes when the pace allows it.
            let paced = self.inner.pacer.delay(tokio::time::Instant::now());
            if failures > 0 {
                let backoff = backoff::full_jitter(failures, timing.retry_base, timing.retry_cap);
                wait = wait.min(timing.retry_base.max(backoff).max(paced));
            } else if report.failed() {
                wait = wait.min(paced.max(PACED_MIN_WAIT));
            }
            if let Some(reassert) = self.next_reassert() {
                wait = wait.min(reassert.max(paced).max(PACED_MIN_WAIT));
            }
            // A pause's deadline: the pass at it re-activates the check.
            let now = Utc::now();
            if let Some(deadline) = crate::pause::load(&self.inner.state_dir).next_deadline(now) {
                let until = (deadline - now).to_std().unwrap_or_default();
                wait = wait.min(until.max(PACED_MIN_WAIT));
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = self.inner.status.wake.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// The shortest wait before a pass that retries deferred PUTs (their pace may allow the next
/// one at once; this keeps a pass from spinning).
const PACED_MIN_WAIT: Duration = Duration::from_millis(1);

/// A random duration in `[0, max]`.
fn random_up_to(max: Duration) -> Duration {
    backoff::up_to(max, &mut rand::thread_rng())
}

/// Sleeps `wait`; false when cancelled first.
async fn sleep_or_cancel(wait: Duration, cancel: &CancellationToken) -> bool {
    tokio::select! {
        () = cancel.cancelled() => false,
        () = tokio::time::sleep(wait) => true,
    }
}
