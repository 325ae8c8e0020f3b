//! The long-running supervisor: one task per job, reload and stop on request (the caller adapts
//! signals into [`control`] requests), orderly shutdown, systemd notification.
//!
//! - `supervisor`: start-up, the main loop (control requests, watchdog), reload and shutdown;
//! - `job`: one task per job that waits for its fire times and admits each fire under the
//!   local rules and the [`Options::admission`] it was given (in a cluster, the claim);
//! - `job_run`: one run of a job (a command or a watch probe) through
//!   [`crate::run::run_with_pings`];
//! - `state`: live per-job state, the liveness beat, the reload counts, and the files kept in
//!   `state_dir`; private to the daemon;
//! - [`view`]: what it publishes of that state to readers (status, the demo's table): copies
//!   of each job, the beat and the reloads, and the request to run a job now;
//! - `memory`: what the daemon asks of the allocator to hold only what it uses (malloc
//!   arenas and trimming);
//! - [`hooks`]: where sync, the status listener and the cluster's tasks plug in;
//! - [`control`]: the stop and reload requests it obeys (the caller adapts signals);
//!   [`notify`]: `sd_notify(3)`.
//!
//! `docs/daemon.md` is the user's description.

use std::path::PathBuf;
use std::sync::Arc;

pub(crate) mod control;
pub(crate) mod hooks;
mod job;
mod job_run;
mod memory;
pub(crate) mod notify;
mod state;
mod supervisor;
#[cfg(test)]
mod tests;
pub(crate) mod view;

pub(crate) use control::{Controller, Request};
pub(crate) use hooks::{Context, Plugins, Task};
use memory::release_free_memory;
pub(crate) use memory::tune_malloc;
pub(crate) use supervisor::run;
pub(crate) use view::{DaemonView, JobView};

/// What the daemon is started with besides the validated config.
#[derive(Clone)]
pub(crate) struct Options {
    /// The config file, re-read on SIGHUP.
    pub config_path: PathBuf,
    /// The state directory (`--state-dir`, else the config's, else the default). A reload does
    /// not move it.
    pub state_dir: PathBuf,
    /// The ping URLs sync learns for jobs bound by `check_id`: the daemon's sync records them,
    /// its runs read them from memory.
    pub ping_urls: crate::sync::LearnedUrls,
    /// What decides fires beyond the local rules (in a `[cluster]`, the claim of each fire of
    /// a `run_on = "one"` job; built at start, a reload does not change it).
    pub admission: Option<Arc<dyn crate::run::admission::Admission>>,
    /// Outgoing connections (the config's `ca_file` and `proxy`; a reload does not change them),
    /// with the metrics registry the status endpoint reads: the daemon's writers of
    /// `state_dir` count their failed writes in its [`crate::persist::Failures`].
    pub net: crate::net::Net,
}

/// How the daemon ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DaemonEnd {
    /// An orderly shutdown (exit 0).
    Stopped,
    /// A [`Request::Kill`] during shutdown: every job was killed, nothing was waited for
    /// (exit 130, as for a second Ctrl-C).
    Killed,
}

/// Raises the soft limit of open files to the hard limit, so many jobs at once (three pipes
/// each, plus sockets for pings) do not run out of descriptors; returns the new soft limit.
pub(crate) fn raise_open_files_limit() -> Option<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft >= hard {
        return Some(soft);
    }
    match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
        Ok(()) => Some(hard),
        Err(err) => {
            tracing::warn!(soft, hard, error = %err, "cannot raise the open-files limit");
            Some(soft)
        }
    }
}
