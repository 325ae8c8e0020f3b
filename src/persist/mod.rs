//! Files under `state_dir`, written safely: the one home of the crash-safe write, the private
//! (0700) directory and the `flock(2)` lock that every writer of state uses, and the count of
//! the writes that failed.
//!
//! - [`file`](mod@file): temp file (0600), write, fsync, rename, fsync the directory (or a
//!   hard link, for a file created once and never replaced); private directories; durable
//!   renames.
//! - [`lock`]: an exclusive `flock(2)` on a lock file, waiting or not.
//!
//! The counters ([`Failures`]: outbox entries and counters, the daemon's fire times and
//! `@reboot` markers, sync's per-job state, the pauses, the run history) make a full or
//! read-only disk show in `/status` and `/metrics`, not only in the log. One [`Failures`] is
//! made with each command's or daemon's metrics registry
//! ([`crate::metrics_registry::MetricsRegistry::persist_failures`]) and handed to every writer
//! of its state directory, which counts each write that did not happen
//! ([`Failures::failed`]); the site itself still logs what failed and where. The counts start
//! at zero: the daemon serves its own.
//!
//! [`crash_point`] lets the tests kill a process at a named point between two writes (debug
//! builds only), to prove what a death there leaves behind.

pub(crate) mod file;
pub(crate) mod lock;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What could not be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum What {
    /// A pending ping of the outbox (`outbox/*.ping`, or one set aside in `failed/`).
    OutboxEntry,
    /// The outbox's counters (`outbox/stats.json`).
    OutboxStats,
    /// A job's last fire time (`daemon/fires/<job>`), which `catch_up` needs after a restart.
    FireTime,
    /// An `@reboot` job's boot marker (`daemon/reboot/<job>`).
    RebootMarker,
    /// A bound job's sync state (`sync/<job>.json`: the learned ping URL, the last result).
    SyncState,
    /// The pauses for maintenance (`pause.json`).
    Pause,
    /// A run appended to a job's history (`history/<job>/runs.jsonl`).
    History,
}

impl What {
    /// Every kind, in the order they are shown.
    pub(crate) const ALL: [What; 7] = [
        What::OutboxEntry,
        What::OutboxStats,
        What::FireTime,
        What::RebootMarker,
        What::SyncState,
        What::Pause,
        What::History,
    ];

    /// The name shown in the status document and the metric's `what` label.
    pub(crate) fn name(self) -> &'static str {
        match self {
            What::OutboxEntry => "outbox_entry",
            What::OutboxStats => "outbox_stats",
            What::FireTime => "fire_time",
            What::RebootMarker => "reboot_marker",
            What::SyncState => "sync_state",
            What::Pause => "pause",
            What::History => "history",
        }
    }
}

/// The writes under a state directory that failed, by kind. Cheap to clone: clones count into
/// the same figures.
#[derive(Debug, Clone, Default)]
pub struct Failures {
    counts: Arc<[AtomicU64; What::ALL.len()]>,
}

impl Failures {
    /// Counts one failed write of `what`.
    pub(crate) fn failed(&self, what: What) {
        self.counts[what as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The failed writes of `what` so far.
    pub(crate) fn count(&self, what: What) -> u64 {
        self.counts[what as usize].load(Ordering::Relaxed)
    }

    /// The failures so far, by kind (every kind, zeros included), in [`What::ALL`] order.
    pub(crate) fn snapshot(&self) -> Vec<(&'static str, u64)> {
        What::ALL
            .iter()
            .map(|what| (what.name(), self.count(*what)))
            .collect()
    }
}

/// The environment variable naming the [`crash_point`] at which a debug build kills itself.
pub const CRASH_AT: &str = "HEARTBEAT_AGENT_CRASH_AT";

/// In a debug build whose `HEARTBEAT_AGENT_CRASH_AT` is `name`, the process sends itself
/// SIGKILL here (exactly the death of `kill -9`: no destructor runs, locks die with it). The
/// tests use it to kill a real process inside a window between two writes. Release builds
/// never read the variable.
pub(crate) fn crash_point(name: &str) {
    if cfg!(debug_assertions) && std::env::var_os(CRASH_AT).is_some_and(|at| at == name) {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counted by kind; clones count into the same figures, a new value starts at zero.
    #[test]
    fn failures_are_counted_by_kind() {
        let failures = Failures::default();
        let writer = failures.clone();
        let count = |failures: &Failures, name: &str| {
            failures
                .snapshot()
                .into_iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v)
                .expect("every kind is listed")
        };
        writer.failed(What::RebootMarker);
        failures.failed(What::RebootMarker);
        assert_eq!(count(&failures, "reboot_marker"), 2);
        assert_eq!(count(&writer, "reboot_marker"), 2);
        assert_eq!(count(&failures, "history"), 0);
        assert_eq!(count(&Failures::default(), "reboot_marker"), 0);
        assert_eq!(failures.snapshot().len(), What::ALL.len());
        let names: Vec<&str> = What::ALL.iter().map(|w| w.name()).collect();
        assert_eq!(
            names,
            [
                "outbox_entry",
                "outbox_stats",
                "fire_time",
                "reboot_marker",
                "sync_state",
                "pause",
                "history"
            ]
        );
    }
}
