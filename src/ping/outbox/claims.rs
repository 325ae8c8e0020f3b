//! Claiming pending entries for delivery and settling each claim (see the module
//! documentation of [`super`]): who holds an entry (an `flock` on the claim file), taking back
//! the claims of processes that died or hung, and recording each attempt's result.

use super::*;

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
                claimed.push(Claimed {
                    key,
                    path: claim,
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
                                write_entry(&pending, &entry.taken_back())?;
                                file::remove_if_present(&path)?;
                            }
                            _ => file::rename_durable(&path, &pending)?,
                        }
                    }
                    counters.recovered += 1;
                    info!(
                        pid,
                        "took back an outbox entry claimed by a process that is gone (it may have \
                         reached the host already: counted as recovered)"
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
                    write_entry(&aside, &entry)?;
                    file::remove_if_present(&claimed.path)?;
                    counters.left(Outflow::Permanent);
                }
                warn!(job = %job, target_url = %target, error = %error, kept_in = %aside.display(), "ping refused by the server for good; not retried (check the ping URL)");
                Ok(())
            }
        })
    }

    /// Gives a claim back untouched (a drainer stopping mid-attempt).
    pub(crate) fn release(&self, claimed: Claimed) -> Result<(), OutboxError> {
        let entry = claimed.entry.clone();
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
            write_entry(&pending, &entry.clone().taken_back())?;
        }
        file::remove_if_present(&claimed.path)?;
        Ok(())
    }
}
