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
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::state::DaemonState;
use crate::config::{Config, Job};

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

impl AfterRun for crate::sync::Reconciler {
    fn after_run(&self, job: &Job, fire: DateTime<Utc>, ping_accepted: bool) {
        crate::sync::Reconciler::after_run(self, &job.name, fire, ping_accepted);
    }
}

/// The sync engine as a daemon task: [`crate::sync::Reconciler::run`], told about every
/// successful reload.
pub fn sync_task(reconciler: crate::sync::Reconciler) -> Task {
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
