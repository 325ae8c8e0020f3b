//! Claiming pending entries for delivery and settling each claim (see the module
//! documentation of [`super`]): who holds an entry (an `flock` on the claim file), taking back
//! the claims of processes that died or hung, recording each attempt's result, and counting
//! the possible duplicates.
//!
//! A possible duplicate is a request sent for an entry whose earlier request left and got no
//! answer: the host may have taken the earlier one. The claim's [`Flight`] follows it:
//! [`Outbox::leaving`], just before a request is written (after the connection is made, so a
//! refused connection marks nothing), writes `"unanswered": true` into the claim file in
//! place, without fsync: the page cache outlives a `kill -9`, the death that matters (a
//! machine crash loses at most the mark: one duplicate uncounted). An answer of any status, or
//! a connection closed without one, takes the mark off again ([`Outbox::attempt_ended`]); a
//! timeout leaves it. A claim taken back from a dead process keeps the mark its file holds, a
//! claim given back by a stopping process or put back after a timeout keeps the one in
//! memory, and when a marked entry's request leaves again, `recovered` is counted (under the
//! directory lock, before the request is written: a death in between counts one that did not
//! leave). So an entry is delivered at most once more than needed per death that caught it in
//! flight, and `recovered` is exactly the deliveries beyond the first, but for a `kill -9` in
//! the few system calls between a count or a mark and the write it announces (nothing on disk
//! can be written together with a socket write): then one more is counted than left (up to 2
//! in some 550 re-sends under 45 kills on a loaded machine, RELIABILITY.md). A stop (SIGTERM)
//! drops a delivery at an await, never in between: exact. An entry taken back unsent (its
//! process died before its request left) is not counted.

use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::atomic::AtomicBool;

use super::*;
use crate::ping::PingError;

/// What a claim's holder knows about its request, shared by the claim's clones.
#[derive(Debug)]
pub(crate) struct Flight {
    /// As the claim file says: a request left and no answer came.
    unanswered: AtomicBool,
    /// The current attempt's request left.
    left: AtomicBool,
    /// The claim file's length: a mark is padded to it (JSON allows trailing spaces), so a
    /// shorter write never leaves the end of a longer one behind.
    len: AtomicU64,
}

impl Flight {
    pub(crate) fn new(unanswered: bool, len: usize) -> Flight {
        Flight {
            unanswered: AtomicBool::new(unanswered),
            left: AtomicBool::new(false),
            len: AtomicU64::new(len as u64),
        }
    }

    /// Whether a request left and no answer came: what the entry carries when put back.
    pub(crate) fn unanswered(&self) -> bool {
        self.unanswered.load(Ordering::SeqCst)
    }
}

impl Outbox {
    /// Claims up to `limit` pending entries whose key `wanted` accepts (asked before the file
    /// is read, so an idle drainer does not re-read entries it is waiting for) and for which
    /// `due` says yes, after taking back claims of dead processes and dropping expired and
    /// unreadable entries.
    pub(crate) fn claim(
        &self,
        limit: usize,
        wanted: impl Fn(&str) -> bool,
        due: impl Fn(&str, &Entry) -> bool,
    ) -> Result<Vec<Claimed>, OutboxError> {
        let pid = std::process::id();
        self.locked("claim", |counters| {
            self.recover(counters)?;
            let now = now_ms();
            let mut claimed = Vec::new();
            for (path, kind) in self.scan()? {
                let FileKind::Pending { key } = kind else {
                    continue;
                };
                if claimed.len() >= limit || !wanted(&key) {
                    continue;
                }
                let Some((held, entry)) = self.readable(&path, counters)? else {
                    continue;
                };
                if entry.expires_ms <= now {
                    file::remove_if_present(&path)?;
                    counters.left(Outflow::DroppedExpired);
                    warn!(job = entry.job.as_deref().unwrap_or(""), target_url = %crate::redact::url(&entry.url), "pending success dropped: older than outbox_max_age");
                    continue;
                }
                if !due(&key, &entry) || !lock::try_lock(&held)? {
                    continue;
                }
                let lease = unique_lease(now.saturating_add(millis(CLAIM_LEASE)));
                let claim = self.dir.join(entry::claim_name(&key, pid, lease));
                std::fs::rename(&path, &claim)?;
                let len = usize::try_from(held.metadata()?.len()).unwrap_or(usize::MAX);
                claimed.push(Claimed {
                    key,
                    path: claim,
                    flight: Arc::new(Flight::new(entry.unanswered, len)),
                    entry,
                    held: Arc::new(held),
                });
            }
            Ok(claimed)
        })
    }

    /// The entry at `path`, open, or `None` after moving an unreadable one (or anything but a
    /// regular file) to `failed/`, or when it is gone.
    fn readable(&self, path: &Path, counters: &mut Stats) -> io::Result<Option<(File, Entry)>> {
        let opened = match file::open_regular(path) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
            opened => opened,
        };
        let read = opened.map_err(|err| err.to_string()).and_then(|held| {
            let entry = parse_entry(&held)?;
            Ok((held, entry))
        });
        match read {
            Ok(found) => Ok(Some(found)),
            Err(reason) => {
                let name = path.file_name().unwrap_or_default().to_string_lossy();
                file::private_dir(&self.failed_dir())?;
                let aside = self.failed_dir().join(format!("{name}.corrupt"));
                warn!(file = %path.display(), reason = %reason, moved_to = %aside.display(), "unreadable outbox entry skipped");
                file::rename_durable(path, &aside)?;
                counters.corrupt += 1;
                Ok(None)
            }
        }
    }

    /// Takes back claims whose lock is free (their process is gone) or whose lease ran out,
    /// and removes temp files of dead writers. Call with the lock held.
    pub(super) fn recover(&self, counters: &mut Stats) -> io::Result<()> {
        let now = now_ms();
        for (path, kind) in self.scan()? {
            match kind {
                FileKind::Claimed { key, pid, lease_ms } => {
                    let owner_gone = match file::open_regular(&path) {
                        Ok(claim) => lock::try_lock(&claim)?,
                        Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                        // Not a regular file: put back, and set aside by the next claim.
                        Err(_) => true,
                    };
                    if !owner_gone && lease_ms > now {
                        continue;
                    }
                    let pending = self.pending_path(&key);
                    if pending.exists() {
                        file::remove_if_present(&path)?;
                        counters.left(Outflow::Coalesced);
                    } else {
                        // A fresh ping becomes a pending entry that says so (and counts as
                        // queued wherever it is from now on, see `stats`); another one moves
                        // as is, unless its hung holder still locks the file.
                        match read_entry(&path) {
                            Ok(entry) if entry.fresh() || !owner_gone => {
                                self.write_entry(&pending, &entry.taken_back())?;
                                file::remove_if_present(&path)?;
                            }
                            _ => file::rename_durable(&path, &pending)?,
                        }
                    }
                    info!(
                        pid,
                        "took back an outbox entry claimed by a process that is gone (if its \
                         request had left, sending it again counts as recovered)"
                    );
                }
                FileKind::Temp if temp_writer(&path).is_some_and(|pid| !alive(pid)) => {
                    file::remove_if_present(&path)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Records the result of a delivery attempt of `claimed`: delivered (removed), retryable
    /// (put back with the attempt counted, unless a newer success arrived meanwhile), or
    /// permanent (moved to `failed/`).
    pub(crate) fn finish(
        &self,
        claimed: Claimed,
        outcome: &PingOutcome,
    ) -> Result<(), OutboxError> {
        let target = crate::redact::url(&claimed.entry.url);
        let job = claimed.entry.job.clone().unwrap_or_default();
        self.locked("finish", |counters| match outcome {
            PingOutcome::Delivered { status, .. } => {
                // Gone meanwhile: dropped by a later failed run, and counted there.
                if file::remove_if_present(&claimed.path)? {
                    counters.left(Outflow::Delivered);
                }
                info!(job = %job, target_url = %target, status, "pending ping delivered");
                Ok(())
            }
            PingOutcome::Retryable {
                error,
                attempts,
                retry_after,
            } => {
                let mut entry = claimed.entry.clone();
                entry.attempts = entry.attempts.saturating_add(*attempts);
                entry.last_error = Some(error.to_string());
                entry.not_before_ms =
                    retry_after.map_or(0, |after| now_ms().saturating_add(millis(after)));
                entry.unanswered = claimed.flight.unanswered();
                self.put_back(&claimed, &entry, counters)
            }
            PingOutcome::Permanent { error, attempts } => {
                let mut entry = claimed.entry.clone();
                entry.attempts = entry.attempts.saturating_add(*attempts);
                entry.last_error = Some(error.to_string());
                let aside = self
                    .failed_dir()
                    .join(format!("{}.{}{PENDING}", claimed.key, entry.created_ms));
                if claimed.path.exists() {
                    file::private_dir(&self.failed_dir())?;
                    self.write_entry(&aside, &entry)?;
                    file::remove_if_present(&claimed.path)?;
                    counters.left(Outflow::Permanent);
                }
                warn!(job = %job, target_url = %target, error = %error, kept_in = %aside.display(), "ping refused by the server for good; not retried (check the ping URL)");
                Ok(())
            }
        })
    }

    /// Gives a claim back untouched but for the mark of a request that left unanswered (a
    /// drainer stopping mid-attempt).
    pub(crate) fn release(&self, claimed: Claimed) -> Result<(), OutboxError> {
        let mut entry = claimed.entry.clone();
        entry.unanswered = claimed.flight.unanswered();
        self.locked("release", |counters| {
            self.put_back(&claimed, &entry, counters)
        })
    }

    /// Puts `entry` back as the pending entry of `claimed`'s target (unless a newer success
    /// is pending, or the claim was dropped meanwhile) and ends the claim.
    fn put_back(&self, claimed: &Claimed, entry: &Entry, counters: &mut Stats) -> io::Result<()> {
        if !claimed.path.exists() {
            // Dropped meanwhile (a later run failed, or a purge).
            return Ok(());
        }
        let pending = self.pending_path(&claimed.key);
        if pending.exists() {
            counters.left(Outflow::Coalesced);
        } else {
            self.write_entry(&pending, &entry.clone().taken_back())?;
        }
        file::remove_if_present(&claimed.path)?;
        Ok(())
    }
}

impl Outbox {
    /// The request of `claimed` is about to be written (see the module documentation): a
    /// marked entry's counts as `recovered`, an unmarked one's claim file is marked.
    pub(crate) fn leaving(&self, claimed: &Claimed) {
        let flight = &claimed.flight;
        flight.left.store(true, Ordering::SeqCst);
        if flight.unanswered.swap(true, Ordering::SeqCst) {
            let job = claimed.entry.job.as_deref().unwrap_or("");
            let target = crate::redact::url(&claimed.entry.url);
            info!(job, target_url = %target, "sending a ping again whose earlier request got no answer (the host may have it already: counted as recovered)");
            // Counted just before the request is written, with nothing after the counters'
            // rename but the lock's release: a death in between counts one that never left
            // (a directory fsync or a log line there made that window wide enough to hit).
            let counted = self.locked_with("resend", false, |counters| {
                counters.recovered += 1;
                Ok(())
            });
            if let Err(err) = counted {
                warn!(job, target_url = %target, error = %err, "the ping sent again could not be counted as recovered");
            }
        } else {
            self.mark(claimed, true);
        }
    }

    /// An attempt of `claimed` failed with `error`: an answer (any status) or a connection
    /// closed without one takes the mark off; a timeout after the request left, or a failure
    /// before it left, leaves the mark as it was.
    pub(crate) fn attempt_ended(&self, claimed: &Claimed, error: &PingError) {
        let flight = &claimed.flight;
        let left = flight.left.swap(false, Ordering::SeqCst);
        if !left || matches!(error, PingError::Timeout) {
            return;
        }
        if flight.unanswered.swap(false, Ordering::SeqCst) {
            self.mark(claimed, false);
        }
    }

    /// Writes the entry of `claimed` with `unanswered` into its claim file, in place (padded to
    /// the file's length; one write, which a `kill -9` does not tear), without fsync. A claim
    /// gone meanwhile (a later failed run dropped it) is left alone.
    fn mark(&self, claimed: &Claimed, unanswered: bool) {
        let entry = Entry {
            unanswered,
            ..claimed.entry.clone()
        };
        let written = serde_json::to_vec(&entry)
            .map_err(io::Error::other)
            .and_then(|mut bytes| {
                let len = claimed.flight.len.load(Ordering::SeqCst);
                let len = usize::try_from(len).unwrap_or(usize::MAX);
                if bytes.len() < len {
                    bytes.resize(len, b' ');
                }
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
                    .open(&claimed.path)?;
                file.write_all_at(&bytes, 0)?;
                claimed
                    .flight
                    .len
                    .fetch_max(bytes.len() as u64, Ordering::SeqCst);
                Ok(())
            });
        match written {
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => {
                warn!(file = %claimed.path.display(), error = %err, "cannot mark the ping's outbox entry as sent (should the agent die now, its next delivery is not counted as recovered)");
            }
            Ok(()) => {}
        }
    }
}
