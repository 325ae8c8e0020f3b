//! Where other subsystems plug into the daemon: per-run events ([`AfterRun`]) (sync re-derives
//! a check's heartbeat after runs that change the upcoming gap; status counts runs) and
//! background tasks that live as long as the daemon (the sync engine, the status listener).
//!
//! The daemon knows none of them: `cli/assemble.rs` builds a [`Plugins`] value and hands it to
//! [`super::run()`]. Each background task gets a [`Context`] (the config in force, the
//! daemon's [`DaemonView`], the state directory, the pauses) and a [`CancellationToken`] that is
//! cancelled at shutdown, and is awaited (up to the shutdown timeout) before the daemon exits.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::view::DaemonView;
use crate::config::Config;
use crate::run::AfterRun;

/// What a background task can see of the daemon.
#[derive(Debug, Clone)]
pub struct Context {
    /// The configuration in force; changes when a reload succeeds.
    pub config: watch::Receiver<Arc<Config>>,
    /// Copies of every job's live state (last run, next fire, last ping), the main loop's
    /// beat and the reload counts; and the request to run a job now.
    pub view: DaemonView,
    /// The state directory (outbox, learned ping URLs, the daemon's files).
    pub state_dir: PathBuf,
    /// The pauses the daemon holds: read them here rather than from the file, and refresh
    /// them after writing the file.
    pub pauses: Arc<crate::pause::LivePauses>,
}

/// A background task: started after the jobs, before `READY=1`; must return soon after its
/// token is cancelled.
pub(crate) type Task =
    Box<dyn FnOnce(Context, CancellationToken) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// The plug-ins of one daemon.
#[derive(Default)]
pub(crate) struct Plugins {
    /// Told about every finished run.
    pub after_run: Vec<Arc<dyn AfterRun>>,
    /// Background tasks by name (the name is logged when one ends early).
    pub tasks: Vec<(&'static str, Task)>,
    /// In a cluster, the cluster's copy of the runs: the run history hands each run to it and
    /// merges in the other nodes' runs.
    pub history: Option<Arc<dyn crate::history::Shared>>,
}

impl std::fmt::Debug for Plugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> = self.tasks.iter().map(|(name, _)| *name).collect();
        f.debug_struct("Plugins")
            .field("after_run", &self.after_run.len())
            .field("tasks", &names)
            .field("history", &self.history.is_some())
            .finish()
    }
}
