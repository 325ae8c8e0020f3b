//! The outbox's counters, persisted in `stats.json` (written atomically under the directory
//! lock) so every process adds to the same totals and `outbox list` and status can show them.
//! When they cannot be written (a full disk), the step they counted still stands: what the
//! outbox handle added is carried ([`Carried`], shared by the handle's clones) and added to the
//! next write that succeeds, so the totals still add up once there is room again.
//!
//! `queued` must equal what left (`coalesced`, `delivered`, the drops, `permanent`, `purged`)
//! plus what is pending, whatever moment a process dies. A step changes an entry file first
//! and writes the counters after (a second file: no single write covers both), so a counter
//! moved on its own would be off by one after a death between the two writes: an entry stored
//! but never counted as queued, or one removed but never counted as gone. Hence `queued` is
//! never moved on its own. `stats.json` (format 2) counts in `queued` only the entries that
//! have *left*, in the same write as the counter of where each went ([`Stats::left`]), and the
//! reported `queued` ([`super::Outbox::stats`]) adds the entries present when it is read: every
//! `.ping` file and every claim that is not a fresh ping's first attempt
//! ([`super::Entry::fresh`]; a ping delivered at its first attempt never counts). A death
//! between a file step and the counters' write then leaves both sides as they were: an entry
//! written is counted by being there; one removed is neither pending nor counted as gone.
//! Moving counters before or after the file step with an intent record would also be exact,
//! but costs one more fsync per step and a recovery step; this costs nothing on the fast path
//! (a ping delivered at its first attempt takes no lock and no fsync) and no extra write
//! anywhere. The reported value
//! is read under the directory lock, so it never goes back in normal operation (a step's
//! file change and counters are seen together); only a death may take back the one entry it
//! removed uncounted.
//!
//! A `stats.json` of format 1 (in which `queued` counted entries when they were stored) is
//! read as format 2 by subtracting the entries present, under the lock.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tracing::warn;

use crate::persist::file;

/// What happened to pings that went through the outbox, since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Stats {
    /// Pings stored because they could not be delivered at once. As reported
    /// ([`super::Outbox::stats`]): those that left plus those pending; in `stats.json` and
    /// inside a step: those that left (see the module documentation).
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
    /// Requests sent again for an entry whose earlier request left and got no answer (its
    /// process died, stopped or hung mid-delivery, or the attempt timed out): each may be one
    /// duplicate at the host (counted as it leaves, see [`super::claims`]).
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

/// Where an entry went when it left the outbox: each is the counter of that name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outflow {
    Coalesced,
    Delivered,
    DroppedFailedRun,
    DroppedExpired,
    DroppedOverflow,
    Permanent,
    Purged,
}

impl Stats {
    /// Counts an entry that left the outbox (call in the step that removed it): where it went
    /// and, in the same write, that it was queued (see the module documentation).
    pub(crate) fn left(&mut self, how: Outflow) {
        let counter = match how {
            Outflow::Coalesced => &mut self.coalesced,
            Outflow::Delivered => &mut self.delivered,
            Outflow::DroppedFailedRun => &mut self.dropped_failed_run,
            Outflow::DroppedExpired => &mut self.dropped_expired,
            Outflow::DroppedOverflow => &mut self.dropped_overflow,
            Outflow::Permanent => &mut self.permanent,
            Outflow::Purged => &mut self.purged,
        };
        *counter += 1;
        self.queued += 1;
    }
}

/// `stats.json`: the counters and what its `queued` means.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    #[serde(flatten)]
    counters: Stats,
    /// 2: `queued` counts the entries that left; absent (1): it counted them when stored.
    #[serde(default = "format_1")]
    format: u32,
}

fn format_1() -> u32 {
    1
}

/// The format written.
const FORMAT: u32 = 2;

/// What an outbox handle counted but could not write yet (see the module documentation).
/// Cheap to clone: clones carry the same counts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Carried(Arc<Mutex<Option<Stats>>>);

/// How the counters are written: what is carried from failed writes, where a failure is
/// counted, and whether the directory is synced after the rename ([`file::replace_whole`]).
pub(crate) struct Written<'a> {
    pub carried: &'a Carried,
    pub failures: &'a crate::persist::Failures,
    pub sync_dir: bool,
}

/// The largest counters file read (it is a few hundred bytes).
const MAX_BYTES: u64 = 64 * 1024;

/// The file name of the counters.
pub(crate) const FILE: &str = "stats.json";

/// Reads the counters of the outbox in `dir` as stored (`queued`: the entries that left);
/// missing or unreadable counters start from zero. `present` (the entries counted as pending)
/// is asked only of a format 1 file. Call with the directory lock held.
pub(crate) fn load(dir: &Path, present: impl FnOnce() -> u64) -> Stats {
    let path = dir.join(FILE);
    match file::read_regular(&path, MAX_BYTES) {
        Ok(bytes) => match serde_json::from_slice::<Stored>(&bytes) {
            Ok(Stored { counters, format }) if format < FORMAT => Stats {
                queued: counters.queued.saturating_sub(present()),
                ..counters
            },
            Ok(stored) => stored.counters,
            Err(err) => {
                warn!(path = %path.display(), error = %err, "outbox counters unreadable; starting them from zero");
                Stats::default()
            }
        },
        Err(_) => Stats::default(),
    }
}

impl Written<'_> {
    /// Writes the counters as stored (call with the directory lock held); a failure is
    /// counted.
    fn save(&self, dir: &Path, stats: &Stats) -> std::io::Result<()> {
        let stored = Stored {
            counters: *stats,
            format: FORMAT,
        };
        let bytes = serde_json::to_vec_pretty(&stored).map_err(std::io::Error::other)?;
        let path = dir.join(FILE);
        let written = if self.sync_dir {
            file::write_atomic(&path, &bytes)
        } else {
            file::replace_whole(&path, &bytes)
        };
        written.inspect_err(|_| self.failures.failed(crate::persist::What::OutboxStats))
    }

    /// Writes `after` (counted from `before`, as loaded) plus whatever an earlier failed write
    /// left to carry (call with the directory lock held); nothing when neither changed
    /// anything. When the write fails, the counters' step still stands: the difference is
    /// carried to the next write and the failure logged.
    pub(crate) fn save_or_carry(&self, dir: &Path, before: &Stats, after: &Stats) {
        let mut carried = self
            .carried
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if after == before && carried.is_none() {
            return;
        }
        let added = after.combine(*before, u64::saturating_sub);
        let added = carried.map_or(added, |c| added.combine(c, u64::saturating_add));
        match self.save(dir, &before.combine(added, u64::saturating_add)) {
            Ok(()) => *carried = None,
            Err(err) => {
                warn!(dir = %dir.display(), error = %err, "outbox counters not written (they are kept in memory and written with the next change)");
                *carried = Some(added);
            }
        }
    }
}
