//! The outbox's counters, persisted in `stats.json` (written atomically under the directory
//! lock) so every process adds to the same totals and `outbox list` and status can show them.

use std::path::Path;

use serde::{Deserialize, Serialize};
use tracing::warn;

use crate::persist::file;

/// What happened to pings that went through the outbox, since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Stats {
    /// Pings stored because they could not be delivered at once.
    pub queued: u64,
    /// Pending pings replaced by a newer success for the same target (counted, not sent).
    pub coalesced: u64,
    /// Pending pings delivered later.
    pub delivered: u64,
    /// Pending successes dropped because a later run of the same job or target failed.
    pub dropped_failed_run: u64,
    /// Pending successes dropped because they were older than `outbox_max_age`.
    pub dropped_expired: u64,
    /// Pending pings dropped (oldest first) to stay within `outbox_max_entries`.
    pub dropped_overflow: u64,
    /// Pings the server refused for good (4xx other than 408/429), moved to `failed/`.
    pub permanent: u64,
    /// Entry files that could not be read (a crash mid-write), moved to `failed/`.
    pub corrupt: u64,
    /// Entries deleted by `outbox purge`.
    pub purged: u64,
}

/// The file name of the counters.
pub(crate) const FILE: &str = "stats.json";

/// Reads the counters of the outbox in `dir`; missing or unreadable counters start from zero.
pub(crate) fn load(dir: &Path) -> Stats {
    let path = dir.join(FILE);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|err| {
            warn!(path = %path.display(), error = %err, "outbox counters unreadable; starting them from zero");
            Stats::default()
        }),
        Err(_) => Stats::default(),
    }
}

/// Writes the counters (call with the directory lock held).
pub(crate) fn save(dir: &Path, stats: &Stats) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(stats).map_err(std::io::Error::other)?;
    file::write_atomic(&dir.join(FILE), &bytes)
        .inspect_err(|_| crate::persist::failed(crate::persist::What::OutboxStats))
}
