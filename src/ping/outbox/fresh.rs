//! A fresh ping's entry (see the module documentation of [`super`]): written into a claim of
//! this process before the first attempt ([`Outbox::begin`]), made durable once an attempt
//! failed, then removed when delivered, discarded when refused for good, or kept as the
//! target's pending entry when the budget ran out or the process is stopping.

use super::*;

impl Outbox {
    /// Writes `ping` into a claim of this process before its first attempt (see the module
    /// documentation): no fsync and no directory lock, so the fast path stays fast. The claim
    /// is leased for `budget` plus [`CLAIM_LEASE`]. Then one of [`Outbox::attempt_failed`],
    /// [`Outbox::delivered_fresh`], [`Outbox::keep`] or [`Outbox::discard`].
    pub(crate) fn begin(
        &self,
        ping: &Ping,
        context: &PingContext,
        budget: Duration,
    ) -> Result<Claimed, OutboxError> {
        let now = now_ms();
        let entry = Entry::new(ping, context.job.as_deref(), context.max_age, now);
        let bytes = serde_json::to_vec(&entry).map_err(|err| self.error(io::Error::other(err)))?;
        let linked =
            |dir: &Path| std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink());
        if linked(&self.dir) || self.dir.parent().is_some_and(linked) {
            self.create().map_err(|err| self.error(err))?;
        }
        let written = match file::write_fast(&self.dir, &bytes) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => self
                .create()
                .and_then(|()| file::write_fast(&self.dir, &bytes)),
            written => written,
        };
        let (held, temp) = written.map_err(|err| self.error(err))?;
        let key = entry.key();
        let lease = unique_lease(now.saturating_add(millis(budget.saturating_add(CLAIM_LEASE))));
        let path = self
            .dir
            .join(entry::claim_name(&key, std::process::id(), lease));
        let placed = lock::try_lock(&held).and_then(|locked| {
            if !locked {
                return Err(io::Error::other("a new file is locked by another process"));
            }
            std::fs::rename(&temp, &path)
        });
        if let Err(err) = placed {
            let _ = std::fs::remove_file(&temp);
            return Err(self.error(err));
        }
        Ok(Claimed {
            key,
            path,
            entry,
            held: Arc::new(held),
            flight: Arc::new(claims::Flight::new(false, bytes.len())),
        })
    }

    /// The first attempt of a fresh claim failed: the entry may now live long, so it is made
    /// durable (file and directory fsynced). Inside a runtime the fsyncs run on its blocking
    /// pool, so a slow disk never holds up the task that fires jobs, tracked by the outbox
    /// ([`Outbox::durable`] awaits them).
    pub(crate) fn attempt_failed(&self, claimed: &Claimed) {
        let (held, dir) = (Arc::clone(&claimed.held), self.dir.clone());
        let sync = move || {
            if let Err(err) = held.sync_all().and_then(|()| file::sync_dir(&dir)) {
                warn!(dir = %dir.display(), error = %err, "cannot make the ping's outbox entry durable");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(self.syncs.spawn_blocking_on(sync, &runtime)),
            Err(_) => sync(),
        }
    }

    /// A fresh claim was delivered: its file goes, and so does an older pending success of the
    /// same target (pointless now; counted as coalesced).
    pub(crate) fn delivered_fresh(&self, claimed: Claimed, ping: &Ping) -> Result<(), OutboxError> {
        file::remove_if_present(&claimed.path).map_err(|err| self.error(err))?;
        drop(claimed);
        self.delivered_directly(ping)
    }

    /// A fresh claim that was refused for good: nothing to keep.
    pub(crate) fn discard(&self, claimed: Claimed) -> Result<(), OutboxError> {
        file::remove_if_present(&claimed.path)
            .map(drop)
            .map_err(|err| self.error(err))
    }

    /// Keeps a fresh claim for a later delivery (its budget ran out, or this process is
    /// stopping): it becomes the target's pending entry, durably, unless a newer success of
    /// the target is pending already or a later failed run dropped it meanwhile. Returns
    /// whether it is kept.
    pub(crate) fn keep(
        &self,
        claimed: Claimed,
        attempts: u32,
        retry_after: Option<Duration>,
        error: &str,
    ) -> Result<bool, OutboxError> {
        let mut entry = claimed.entry.clone();
        entry.attempts = entry.attempts.saturating_add(attempts);
        entry.last_error = Some(error.to_owned());
        entry.not_before_ms = retry_after.map_or(0, |after| now_ms().saturating_add(millis(after)));
        entry.unanswered = claimed.flight.unanswered();
        self.create().map_err(|err| self.error(err))?;
        let kept = self.locked("keep", |counters| {
            if !claimed.path.exists() {
                return Ok(false);
            }
            let pending = self.pending_path(&claimed.key);
            let newer = read_entry(&pending).is_ok_and(|p| p.created_ms > entry.created_ms);
            if pending.exists() {
                // One of the two goes: this one, or the older pending one.
                counters.left(Outflow::Coalesced);
            }
            if newer {
                file::remove_if_present(&claimed.path)?;
            } else if let Err(err) = self.write_entry(&pending, &entry) {
                // A full disk: the claim as first written becomes the entry (a rename needs
                // no space); only this delivery's attempts and Retry-After are not recorded.
                // Pending, it counts as queued (see `stats`).
                warn!(job = entry.job.as_deref().unwrap_or(""), target_url = %crate::redact::url(&entry.url), error = %err, "cannot record the failed attempts of the ping; it is kept as first written");
                claimed.held.sync_all()?;
                file::rename_durable(&claimed.path, &pending)?;
                self.enforce_bound(counters)?;
                return Ok(true);
            } else {
                file::remove_if_present(&claimed.path)?;
            }
            self.enforce_bound(counters)?;
            Ok(true)
        })?;
        self.notify.notify_one();
        Ok(kept)
    }
}
