//! Where other subsystems plug into the daemon: per-run events (sync re-derives a check's
//! heartbeat after runs that change the upcoming gap) and background tasks that live as long as
//! the daemon (the sync engine, the outbox drainer, the status listener).
//!
//! The daemon knows none of them: `cli/daemon.rs` builds a [`Plugins`] value and hands it to
//! [`super::run`]. Each background task gets a [`Context`] and a [`CancellationToken`] that is
//! cancelled at shutdown, and is awaited (up to the shutdown timeout) before the daemon exits.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::state::DaemonState;
use crate::config::{Config, Job, PingTarget};
use crate::sync::{Reconciler, SyncStatus};

/// Called after every run of a job (not after skips), once its ping (if any) was sent.
pub trait AfterRun: Send + Sync {
    /// `fire` is the scheduled time the run belongs to; `ping_accepted` tells whether the
    /// success ping was accepted by the server (false for failures and for jobs that ping
    /// nothing). Runs on the run's task: do not block; hand heavy work to your own task.
    fn after_run(&self, job: &Job, fire: DateTime<Utc>, ping_accepted: bool);
}

/// What a background task can see of the daemon.
#[derive(Debug, Clone)]
pub struct Context {
    /// The configuration in force; changes when a reload succeeds.
    pub config: watch::Receiver<Arc<Config>>,
    /// Every job's live state (last run, next fire, last ping).
    pub state: Arc<DaemonState>,
    /// The state directory (outbox, learned ping URLs, the daemon's files).
    pub state_dir: PathBuf,
}

/// A background task: started after the jobs, before `READY=1`; must return soon after its
/// token is cancelled.
pub type Task =
    Box<dyn FnOnce(Context, CancellationToken) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// The plug-ins of one daemon.
#[derive(Default)]
pub struct Plugins {
    /// Told about every finished run.
    pub after_run: Vec<Arc<dyn AfterRun>>,
    /// Background tasks by name (the name is logged when one ends early).
    pub tasks: Vec<(&'static str, Task)>,
}

impl std::fmt::Debug for Plugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> = self.tasks.iter().map(|(name, _)| *name).collect();
        f.debug_struct("Plugins")
            .field("after_run", &self.after_run.len())
            .field("tasks", &names)
            .finish()
    }
}

impl AfterRun for Reconciler {
    fn after_run(&self, job: &Job, fire: DateTime<Utc>, ping_accepted: bool) {
        Reconciler::after_run(self, &job.name, fire, ping_accepted);
    }
}

/// The sync engine as a daemon task: [`crate::sync::Reconciler::run`], told about every
/// successful reload.
pub fn sync_task(reconciler: Reconciler) -> Task {
    Box::new(move |mut context: Context, cancel: CancellationToken| {
        Box::pin(async move {
            let task = reconciler.clone().run(cancel);
            tokio::pin!(task);
            loop {
                tokio::select! {
                    () = &mut task => return,
                    changed = context.config.changed() => {
                        if changed.is_err() {
                            task.await;
                            return;
                        }
                        let config = Arc::clone(&context.config.borrow_and_update());
                        reconciler.set_config(config);
                    }
                }
            }
        })
    })
}

/// Sync for a daemon that started with no job bound to a check: started by the first reload
/// that binds one. Until then it does nothing; afterwards it is the sync engine's
/// [`AfterRun`] hook.
#[derive(Default)]
pub struct DeferredSync {
    started: OnceLock<Reconciler>,
    /// Where the status endpoint looks for the engine's status; filled when it starts.
    status: Arc<OnceLock<SyncStatus>>,
}

impl AfterRun for DeferredSync {
    fn after_run(&self, job: &Job, fire: DateTime<Utc>, ping_accepted: bool) {
        if let Some(reconciler) = self.started.get() {
            Reconciler::after_run(reconciler, &job.name, fire, ping_accepted);
        }
    }
}

impl DeferredSync {
    /// A deferred engine that publishes its status in `status` when it starts.
    pub fn new(status: Arc<OnceLock<SyncStatus>>) -> DeferredSync {
        DeferredSync {
            started: OnceLock::new(),
            status,
        }
    }

    /// The background task: waits for a reloaded config with a job bound by `check_id`, makes
    /// the engine with `build` (which logs why it cannot, e.g. no API key; the next reload
    /// tries again), then runs it as [`sync_task`] does.
    pub fn task(
        self: Arc<Self>,
        build: impl Fn(&Arc<Config>) -> Option<Reconciler> + Send + 'static,
    ) -> Task {
        Box::new(move |mut context: Context, cancel: CancellationToken| {
            Box::pin(async move {
                loop {
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        changed = context.config.changed() => if changed.is_err() { return },
                    }
                    let config = Arc::clone(&context.config.borrow_and_update());
                    let bound = config
                        .jobs
                        .iter()
                        .any(|job| matches!(job.target, PingTarget::Check(_)));
                    let Some(reconciler) = bound.then(|| build(&config)).flatten() else {
                        continue;
                    };
                    tracing::info!("a job is bound to a check now: check sync started");
                    let reconciler = self.started.get_or_init(|| reconciler).clone();
                    let _ = self.status.set(reconciler.status());
                    return sync_task(reconciler)(context, cancel).await;
                }
            })
        })
    }
}
