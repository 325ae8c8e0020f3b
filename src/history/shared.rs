//! A job's history across a cluster: the runs other nodes recorded, merged into this node's
//! own (docs/history.md, "In a cluster").
//!
//! The history knows no cluster type: a [`Shared`] is given to it
//! ([`super::History::with_cluster`]) by whoever knows the cluster (the daemon's assembly hands
//! its cluster part to the run writer and the status endpoint; `history` reads etcd once). A
//! [`super::History`] given one hands the runs it records to it ([`Shared::publish`], [`Shared::pinged`]; neither may block) and merges what
//! it holds of the other nodes into every read ([`merged`]). The local files stay the source
//! of truth for this node's runs: a run of the cluster's copy whose run id a local run has is
//! shown once, from the file.

use std::collections::HashSet;

use super::{PingUpdate, Run};

/// What a cluster holds of a job's runs, as the history sees it.
pub(crate) trait Shared: Send + Sync + std::fmt::Debug {
    /// Hands `run` of `job` (numbered, which keeps `limit` runs here) to the cluster; returns
    /// at once (a slow or absent cluster never delays the writer).
    fn publish(&self, job: &str, limit: usize, run: &Run);

    /// Hands the pings of a run published before (`update.update` is its number).
    fn pinged(&self, job: &str, update: &PingUpdate);

    /// The runs of `job` the cluster holds (every node's, this one's included), newest
    /// (by end) first, as last read: never waits for the cluster.
    fn runs(&self, job: &str) -> Vec<Run>;

    /// A number that changes whenever [`Shared::runs`] of `job` does.
    fn generation(&self, job: &str) -> u64;

    /// Why the cluster's runs are not (or no longer) read, when they are not.
    fn unavailable(&self) -> Option<String>;
}

/// Hands the newest `n` of `local` (a visit of this node's runs, newest first, that goes on
/// while its callback answers true) and `others` (newest first) to `each`, newest first by end,
/// until `each` answers false. A run of `others` whose run id a local run has is left out:
/// equal runs end at the same instant and local runs go first at a tie, so the local run is
/// met first.
pub(super) fn merged<E>(
    others: Vec<Run>,
    n: usize,
    local: impl FnOnce(&mut dyn FnMut(Run) -> bool) -> Result<(), E>,
    mut each: impl FnMut(Run) -> bool,
) -> Result<(), E> {
    let mut others = others.into_iter().peekable();
    let mut seen: HashSet<String> = HashSet::new();
    let mut left = n;
    let mut going = left > 0;
    let mut give = |run: Run, seen: &mut HashSet<String>, left: &mut usize| -> bool {
        if let Some(id) = &run.run.run_id {
            if !seen.insert(id.clone()) {
                return true;
            }
        }
        *left -= 1;
        each(run) && *left > 0
    };
    local(&mut |run: Run| {
        while let Some(other) = others.next_if(|o| o.run.ended > run.run.ended) {
            if !give(other, &mut seen, &mut left) {
                going = false;
                return false;
            }
        }
        going = give(run, &mut seen, &mut left);
        going
    })?;
    if going {
        for other in others {
            if !give(other, &mut seen, &mut left) {
                break;
            }
        }
    }
    Ok(())
}
