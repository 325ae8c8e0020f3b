//! The outbox's counters, persisted in `stats.json` (written atomically under the directory
//! lock) so every process adds to the same totals and `outbox list` and status can show them.
//! When they cannot be written (a full disk), the step they counted still stands: what this
//! process added is carried and added to the next write that succeeds, so the totals still
//! add up once there is room again.

use std::sync::Mutex;

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
    /// In-flight entries taken back from a process that died (or hung past its lease) during
    /// a delivery: each may have reached the host already, so each may be one duplicate.
    pub recovered: u64,
}

impl Stats {
    /// `f` applied to each pair of counters. The destructuring is exhaustive: a new counter
    /// does not compile until it is listed here.
    fn combine(self, other: Stats, f: fn(u64, u64) -> u64) -> Stats {
        let Stats {
            queued,
            coalesced,
            delivered,
            dropped_failed_run,
            dropped_expired,
            dropped_overflow,
            permanent,
            corrupt,
            purged,
            recovered,
        } = self;
        Stats {
            queued: f(queued, other.queued),
            coalesced: f(coalesced, other.coalesced),
            delivered: f(delivered, other.delivered),
            dropped_failed_run: f(dropped_failed_run, other.dropped_failed_run),
            dropped_expired: f(dropped_expired, other.dropped_expired),
            dropped_overflow: f(dropped_overflow, other.dropped_overflow),
            permanent: f(permanent, other.permanent),
            corrupt: f(corrupt, other.corrupt),
            purged: f(purged, other.purged),
            recovered: f(recovered, other.recovered),
        }
    }
}

/// What this process counted but could not write yet (see the module documentation).
static CARRIED: Mutex<Option<Stats>> = Mutex::new(None);

/// The largest counters file read (it is a few hundred bytes).
const MAX_BYTES: u64 = 64 * 1024;

/// The file name of the counters.
pub(crate) const FILE: &str = "stats.json";

/// Reads the counters of the outbox in `dir`; missing or unreadable counters start from zero.
pub(crate) fn load(dir: &Path) -> Stats {
    let path = dir.join(FILE);
    match file::read_regular(&path, MAX_BYTES) {
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

/// Writes `after` (counted from `before`, as loaded) plus whatever an earlier failed write
/// left to carry (call with the directory lock held). When the write fails, the counters'
/// step still stands: the difference is carried to the next write and the failure logged.
pub(crate) fn save_or_carry(dir: &Path, before: &Stats, after: &Stats) {
    let mut carried = CARRIED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let added = after.combine(*before, u64::saturating_sub);
    let added = carried.map_or(added, |c| added.combine(c, u64::saturating_add));
    match save(dir, &before.combine(added, u64::saturating_add)) {
        Ok(()) => *carried = None,
        Err(err) => {
            warn!(dir = %dir.display(), error = %err, "outbox counters not written (they are kept in memory and written with the next change)");
            *carried = Some(added);
        }
    }
}
