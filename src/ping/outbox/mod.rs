//! The durable outbox: every ping on its way (written before its first attempt), and the pings
//! that could not be delivered within their budget, kept on disk under `<state_dir>/outbox/`
//! until they are delivered, replaced by a newer success, or too old to matter (user
//! documentation in `docs/outbox.md`).
//!
//! One file per target (`<key>.ping`, the key a hash of the URL): storing a newer success for
//! the same target replaces the older one, which is what coalescing means here. Every process
//! sharing the outbox (`run`s, `ping`, `outbox flush`, the daemon) takes the directory lock
//! (`flock`) only for file steps, never across a network request. To deliver an entry a
//! process *claims* it: renames it to `<key>.<pid>.<lease>.claim` and holds an exclusive
//! `flock` on the file for as long as it owns the claim; only one rename can win, so two
//! drainers never send the same entry. A fresh ping is written straight into a claim
//! ([`Outbox::begin`]) before its first attempt, without fsync (the page cache outlives the
//! process, which is the death that matters here), made durable once an attempt failed, and
//! removed when delivered.
//!
//! Whoever looks next takes back a claim whose lock is free (its process died, however it
//! died: the kernel drops the lock with the process, so this works at once, across pid
//! namespaces and with a zombie not yet reaped) or whose lease ran out (a hung process). Just
//! before a request leaves, its claim file is marked `unanswered` (in place, page cache only),
//! and the mark goes when an answer comes; an entry taken back, or given back by a stopping
//! process, keeps the mark, and sending a marked entry again is what counts as `recovered`:
//! each is at most one duplicate at the host, and the counter says exactly how many left (see
//! [`claims`]). Durable writes are crash-safe (temp, fsync, rename, fsync the
//! directory); an unreadable entry, or anything but a regular file where an entry should be
//! (a FIFO would block a reader), is moved to `failed/` with a warning. Counters live in
//! `stats.json`; how `queued` stays equal to what left plus what is pending when a process
//! dies between an entry's write and the counters' is told in [`stats`].
//!
//! The ping URL is a secret: files are 0600 in a 0700 directory, and everything logged shows
//! targets through [`crate::redact::url`]. An `outbox` that is a symbolic link to a directory
//! of another user is refused, never followed.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tracing::{info, warn};

use crate::persist::file;
use crate::persist::lock::{self, FileLock};
use crate::persist::{Failures, What};
use crate::ping::{Ping, PingOutcome};

mod claims;
mod deliver;
mod entry;
mod fresh;
mod stats;

pub(crate) use deliver::{catch_up, deliver_or_queue_for};
pub use deliver::{deliver_pending, drain, DrainOptions, PassOptions, PassReport};
pub(crate) use entry::Entry;
use stats::Outflow;
pub(crate) use stats::Stats;

use entry::{classify, millis, now_ms, FileKind, PENDING};

/// Default of `[agent] outbox_max_entries` (the config's default, named for the outbox).
pub use crate::config::defaults::OUTBOX_MAX_ENTRIES as DEFAULT_MAX_ENTRIES;

/// How long a pending success is kept when neither `outbox_max_age` nor the job's period is
/// known (the config's default, named for the outbox).
pub(crate) use crate::config::defaults::OUTBOX_MAX_AGE as DEFAULT_MAX_AGE;

/// The directory lock's file, in the outbox directory.
const LOCK_FILE: &str = ".lock";

/// How long a claim holds an entry before others may take it back even though the claiming
/// process still holds it (a hung process): longer than any single attempt. A fresh ping's
/// claim adds its whole budget.
const CLAIM_LEASE: Duration = Duration::from_secs(300);

/// The largest entry file read: a ping URL is at most a few KiB, and a fail ping's body at
/// most [`crate::config::defaults::FAIL_BODY_MAX`] bytes, each of which JSON writes in at most
/// 6 (`\u0001`); anything larger is not an entry this agent wrote.
const MAX_ENTRY_BYTES: u64 = 64 * 1024 + 6 * crate::config::defaults::FAIL_BODY_MAX as u64;

/// What went wrong with the outbox directory.
#[derive(Debug, thiserror::Error)]
#[error("outbox {}: {source}; check that the state directory is writable (--state-dir)", .dir.display())]
pub struct OutboxError {
    /// The outbox directory.
    pub dir: PathBuf,
    /// What the system said.
    #[source]
    pub source: io::Error,
}

/// Who a stored ping belongs to and how long it stays worth sending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PingContext {
    /// The job, so a later failed run of it drops the pending success.
    pub job: Option<String>,
    /// A success older than this is dropped instead of sent (see
    /// [`crate::config::defaults::outbox_max_age`]).
    pub max_age: Duration,
}

impl Default for PingContext {
    fn default() -> PingContext {
        PingContext {
            job: None,
            max_age: DEFAULT_MAX_AGE,
        }
    }
}

/// An entry claimed by this process for one delivery attempt.
#[derive(Debug, Clone)]
pub(crate) struct Claimed {
    /// The target's key.
    pub key: String,
    /// The claim file.
    path: PathBuf,
    /// The entry as claimed.
    pub entry: Entry,
    /// The claim file, open with an exclusive `flock` held while this process owns the claim
    /// (dropping the last clone lets others take it back).
    held: Arc<File>,
    /// Whether its request is out unanswered, shared by the clones (see [`claims`]).
    flight: Arc<claims::Flight>,
}

/// One entry as `outbox list` shows it (no secret in it).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Listed {
    /// The redacted target.
    pub target: String,
    /// The job, when known.
    pub job: Option<String>,
    /// Seconds since the success happened.
    pub age_secs: u64,
    /// Attempts so far.
    pub attempts: u32,
    /// Seconds until the server's `Retry-After` ends (0: may be tried now).
    pub next_attempt_secs: u64,
    /// Seconds until it is dropped as too old.
    pub expires_in_secs: u64,
    /// The process delivering it right now, if any (a process that still holds its claim).
    pub in_flight_pid: Option<u32>,
    /// The process that claimed it and died before settling it: the entry is pending again
    /// for the next drain, which takes it back (see [`Outbox::claim`]).
    pub died_sender_pid: Option<u32>,
    /// The last attempt's error.
    pub last_error: Option<String>,
}

/// A handle on one outbox directory; cheap to clone, shared by the daemon's tasks.
#[derive(Debug, Clone)]
pub struct Outbox {
    dir: PathBuf,
    max_entries: usize,
    /// Wakes the drainer when this process stores an entry (entries of other processes are
    /// found by polling).
    notify: Arc<Notify>,
    /// The fsyncs that make a fresh entry durable, run on the blocking pool
    /// ([`Outbox::attempt_failed`]); shared by the clones, awaited by [`Outbox::durable`].
    syncs: tokio_util::task::TaskTracker,
    /// What this handle and its clones counted but could not write yet ([`stats`]): it lives
    /// as long as the handle, which the daemon makes once and clones for its tasks.
    carried: stats::Carried,
    /// Where its failed writes are counted.
    failures: Failures,
}

impl Outbox {
    /// The outbox under `state_dir`, holding at most `max_entries`, counting its failed writes
    /// in `failures`. Nothing is created until the first ping is stored (then the directory,
    /// mode 0700); a missing outbox is empty.
    pub fn new(state_dir: &Path, max_entries: usize, failures: &Failures) -> Outbox {
        Outbox {
            dir: state_dir.join("outbox"),
            max_entries: max_entries.max(1),
            notify: Arc::new(Notify::new()),
            syncs: tokio_util::task::TaskTracker::new(),
            carried: stats::Carried::default(),
            failures: failures.clone(),
        }
    }

    /// Waits until every fsync started by this outbox (or a clone) has ended: the daemon's
    /// shutdown awaits it, within its bound, so no entry's fsync is cut off at the exit.
    pub(crate) async fn durable(&self) {
        self.syncs.close();
        self.syncs.wait().await;
    }

    /// Creates the directory (and `failed/`) with mode 0700, tightening an existing one of
    /// this user's. An `outbox` that is a symbolic link to another user's directory is refused
    /// (following it, a root process would change the mode of whatever it points at).
    fn create(&self) -> io::Result<()> {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        self.check_state_dir()?;
        let me = nix::unistd::geteuid().as_raw();
        if let Ok(link) = std::fs::symlink_metadata(&self.dir) {
            if link.file_type().is_symlink() {
                let owner = std::fs::metadata(&self.dir).map_or(link.uid(), |m| m.uid());
                if owner != me || link.uid() != me {
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        format!(
                            "is a symbolic link to a directory of another user (uid {owner}); \
                             refusing to follow it: remove the link or point --state-dir at a \
                             directory of this user"
                        ),
                    ));
                }
            }
        }
        file::private_dir(&self.failed_dir())?;
        let meta = std::fs::metadata(&self.dir)?;
        if meta.uid() == me && meta.mode() & 0o777 != 0o700 {
            std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))?;
        }
        Ok(())
    }

    /// Refuses a state directory that is a symbolic link of another user's, or to another
    /// user's directory ([`crate::paths::check_state_dir`]): it is not followed.
    fn check_state_dir(&self) -> io::Result<()> {
        match self.dir.parent() {
            Some(state) => crate::paths::check_state_dir(state)
                .map_err(|message| io::Error::new(io::ErrorKind::PermissionDenied, message)),
            None => Ok(()),
        }
    }

    /// The outbox directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where refused and unreadable entries are kept for inspection.
    pub fn failed_dir(&self) -> PathBuf {
        self.dir.join("failed")
    }

    /// The counters, as written by every process, with `queued` counting the entries present
    /// (see [`stats`]); read under the directory lock, so a step is seen whole (without the
    /// lock, when it cannot be taken: an outbox of another user, read only).
    pub fn stats(&self) -> Stats {
        if !self.dir.is_dir() {
            return Stats::default();
        }
        let _lock = FileLock::acquire(&self.dir.join(LOCK_FILE)).ok();
        let present = self.present().unwrap_or(0);
        let mut counters = stats::load(&self.dir, || present);
        counters.queued = counters.queued.saturating_add(present);
        counters
    }

    /// The entries that count as queued while they are here: every pending entry, and every
    /// claim but a fresh ping's first attempt (see [`Entry::fresh`]); only claims are read.
    fn present(&self) -> io::Result<u64> {
        let mut present = 0;
        for (path, kind) in self.scan()? {
            let counts = match kind {
                FileKind::Pending { .. } => true,
                FileKind::Claimed { .. } => read_entry(&path).is_ok_and(|e| !e.fresh()),
                _ => false,
            };
            present += u64::from(counts);
        }
        Ok(present)
    }

    /// Resolves when this handle (or a clone) stored an entry since the last call.
    pub(crate) async fn stored(&self) {
        self.notify.notified().await;
    }

    fn error(&self, source: io::Error) -> OutboxError {
        OutboxError {
            dir: self.dir.clone(),
            source,
        }
    }

    /// Writes `entry` at `path` crash-safely; a failure is counted.
    fn write_entry(&self, path: &Path, entry: &Entry) -> io::Result<()> {
        let bytes = serde_json::to_vec(entry).map_err(io::Error::other)?;
        file::write_atomic(path, &bytes).inspect_err(|_| self.failures.failed(What::OutboxEntry))
    }

    fn pending_path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}{PENDING}"))
    }

    /// Runs `step` with the directory lock held and the counters loaded (as stored: `queued`
    /// counts what left), saving them after. Without the directory, `step` runs on an empty
    /// outbox (nothing to lock, nothing to count). `name` is the step's [`crash_point`]
    /// (`outbox:<name>`), between its file operations and the counters' write.
    ///
    /// [`crash_point`]: crate::persist::crash_point
    fn locked<T>(
        &self,
        name: &str,
        step: impl FnOnce(&mut Stats) -> io::Result<T>,
    ) -> Result<T, OutboxError> {
        self.locked_with(name, true, step)
    }

    /// [`Outbox::locked`]; with `sync_dir` false the counters are in place when it returns but
    /// the directory is not synced after ([`file::replace_whole`]): for a count that must be
    /// seen before what it announces happens, with nothing slow in between.
    fn locked_with<T>(
        &self,
        name: &str,
        sync_dir: bool,
        step: impl FnOnce(&mut Stats) -> io::Result<T>,
    ) -> Result<T, OutboxError> {
        let run = || {
            if !self.dir.is_dir() {
                return step(&mut Stats::default());
            }
            let _lock = FileLock::acquire(&self.dir.join(LOCK_FILE))?;
            let before = stats::load(&self.dir, || self.present().unwrap_or(0));
            let mut counters = before;
            let value = step(&mut counters)?;
            crate::persist::crash_point(&format!("outbox:{name}"));
            let written = stats::Written {
                carried: &self.carried,
                failures: &self.failures,
                sync_dir,
            };
            written.save_or_carry(&self.dir, &before, &counters);
            Ok(value)
        };
        run().map_err(|source| self.error(source))
    }

    /// Keeps `ping` for a later delivery, replacing (coalescing) an older pending one for the
    /// same target; `attempts` and `error` describe the failed delivery.
    pub fn store(
        &self,
        ping: &Ping,
        context: &PingContext,
        attempts: u32,
        retry_after: Option<Duration>,
        error: &str,
    ) -> Result<(), OutboxError> {
        let now = now_ms();
        let mut entry = Entry::new(ping, context.job.as_deref(), context.max_age, now);
        entry.attempts = attempts;
        entry.last_error = Some(error.to_owned());
        entry.not_before_ms = retry_after.map_or(0, |after| now.saturating_add(millis(after)));
        let path = self.pending_path(&entry.key());
        self.create().map_err(|err| self.error(err))?;
        self.locked("store", |counters| {
            if path.exists() {
                counters.left(Outflow::Coalesced);
            }
            self.write_entry(&path, &entry)?;
            self.enforce_bound(counters)
        })?;
        self.notify.notify_one();
        Ok(())
    }

    /// Drops pending entries beyond `max_entries`, oldest first (counted and logged).
    fn enforce_bound(&self, counters: &mut Stats) -> io::Result<()> {
        let files = self.scan()?;
        let entries = files
            .iter()
            .filter(|(_, kind)| matches!(kind, FileKind::Pending { .. } | FileKind::Claimed { .. }))
            .count();
        if entries <= self.max_entries {
            // The usual case: no entry needs reading.
            return Ok(());
        }
        let claimed = files
            .iter()
            .filter(|(_, kind)| matches!(kind, FileKind::Claimed { .. }))
            .count();
        let mut pending: Vec<(u64, PathBuf, Option<Entry>)> = files
            .into_iter()
            .filter(|(_, kind)| matches!(kind, FileKind::Pending { .. }))
            .map(|(path, _)| {
                let entry = read_entry(&path).ok();
                (entry.as_ref().map_or(0, |e| e.created_ms), path, entry)
            })
            .collect();
        let excess = (pending.len() + claimed).saturating_sub(self.max_entries);
        pending.sort_by_key(|(created, ..)| *created);
        for (_, path, entry) in pending.into_iter().take(excess) {
            if file::remove_if_present(&path)? {
                counters.left(Outflow::DroppedOverflow);
                let target = entry.map(|e| crate::redact::url(&e.url));
                warn!(
                    target_url = target.as_deref().unwrap_or("?"),
                    max_entries = self.max_entries,
                    "outbox full: oldest pending ping dropped (raise outbox_max_entries)"
                );
            }
        }
        Ok(())
    }

    /// A success for `ping` was just delivered: an older pending one for the same target is
    /// pointless now (counted as coalesced).
    pub(crate) fn delivered_directly(&self, ping: &Ping) -> Result<(), OutboxError> {
        let path = self.pending_path(&entry::key(ping.target()));
        if !path.exists() {
            return Ok(());
        }
        self.locked("delivered_directly", |counters| {
            if file::remove_if_present(&path)? {
                counters.left(Outflow::Coalesced);
            }
            Ok(())
        })
    }

    /// A run of `job` (or for `ping`'s target) failed: its pending successes would claim the
    /// job is fine, so they are dropped (counted, logged); its pending fail pings stay, they
    /// are still true. Returns how many.
    pub(crate) fn drop_after_failure(
        &self,
        job: Option<&str>,
        ping: Option<&Ping>,
    ) -> Result<usize, OutboxError> {
        let target = ping.map(|p| entry::key(p.target()));
        self.locked("drop_after_failure", |counters| {
            let mut dropped = 0;
            for (path, kind) in self.scan()? {
                let key = match &kind {
                    FileKind::Pending { key } | FileKind::Claimed { key, .. } => key,
                    _ => continue,
                };
                let entry = read_entry(&path).ok();
                if entry.as_ref().is_some_and(|e| !e.kind.is_success()) {
                    continue;
                }
                let same_job =
                    job.is_some() && entry.as_ref().is_some_and(|e| e.job.as_deref() == job);
                if (target.as_ref() == Some(key) || same_job) && file::remove_if_present(&path)? {
                    dropped += 1;
                    counters.left(Outflow::DroppedFailedRun);
                    warn!(job = job.unwrap_or(""), target_url = %ping.map(Ping::redacted).unwrap_or_default(), "pending success dropped: a later run failed");
                }
            }
            Ok(dropped)
        })
    }

    /// Every pending or in-flight entry, oldest first (unreadable ones are left for the next
    /// claim to move aside). A claim counts as in flight only while its holder lives, told by
    /// the claim's `flock` as [`Outbox::recover`] tells it (a pid alone could be reused); a dead
    /// holder's entry is listed with `died_sender_pid` and left for the next drain to take back.
    pub fn list(&self) -> Result<Vec<Listed>, OutboxError> {
        let now = now_ms();
        let secs = |ms: u64| ms / 1000;
        let mut listed: Vec<(u64, Listed)> = Vec::new();
        for (path, kind) in self.scan().map_err(|err| self.error(err))? {
            let (in_flight_pid, died_sender_pid) = match kind {
                FileKind::Pending { .. } => (None, None),
                FileKind::Claimed { pid, .. } if holder_died(&path) => (None, Some(pid)),
                FileKind::Claimed { pid, .. } => (Some(pid), None),
                _ => continue,
            };
            let Ok(entry) = read_entry(&path) else {
                continue;
            };
            listed.push((
                entry.created_ms,
                Listed {
                    target: crate::redact::url(&entry.url),
                    job: entry.job.clone(),
                    age_secs: secs(now.saturating_sub(entry.created_ms)),
                    attempts: entry.attempts,
                    next_attempt_secs: secs(entry.not_before_ms.saturating_sub(now)),
                    expires_in_secs: secs(entry.expires_ms.saturating_sub(now)),
                    in_flight_pid,
                    died_sender_pid,
                    last_error: entry.last_error,
                },
            ));
        }
        listed.sort_by_key(|(created, _)| *created);
        Ok(listed.into_iter().map(|(_, l)| l).collect())
    }

    /// How many entries are pending or in flight, from the directory listing alone (no entry
    /// is read: cheap for a metrics scrape however many are waiting).
    pub fn depth(&self) -> Result<usize, OutboxError> {
        let files = self.scan().map_err(|err| self.error(err))?;
        Ok(files
            .iter()
            .filter(|(_, kind)| matches!(kind, FileKind::Pending { .. } | FileKind::Claimed { .. }))
            .count())
    }

    /// Deletes every pending entry (in-flight ones finish); returns how many.
    pub(crate) fn purge(&self) -> Result<usize, OutboxError> {
        self.locked("purge", |counters| {
            self.recover(counters)?;
            let mut purged = 0;
            for (path, kind) in self.scan()? {
                if !matches!(kind, FileKind::Pending { .. }) {
                    continue;
                }
                if file::remove_if_present(&path)? {
                    purged += 1;
                    counters.left(Outflow::Purged);
                }
            }
            Ok(purged)
        })
    }

    /// The entry files in the directory with what each is.
    fn scan(&self) -> io::Result<Vec<(PathBuf, FileKind)>> {
        let mut files = Vec::new();
        let items = match std::fs::read_dir(&self.dir) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(files),
            items => items?,
        };
        for item in items {
            let item = item?;
            let kind = classify(&item.file_name().to_string_lossy());
            if kind != FileKind::Other {
                files.push((item.path(), kind));
            }
        }
        Ok(files)
    }
}

/// The entry at `path` (a regular file of bounded size: a FIFO is refused, not waited on).
fn read_entry(path: &Path) -> Result<Entry, String> {
    let file = file::open_regular(path).map_err(|err| err.to_string())?;
    parse_entry(&file)
}

fn parse_entry(file: &File) -> Result<Entry, String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    file.take(MAX_ENTRY_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| err.to_string())?;
    if bytes.len() as u64 > MAX_ENTRY_BYTES {
        return Err(format!("larger than {MAX_ENTRY_BYTES} bytes"));
    }
    let entry: Entry = serde_json::from_slice(&bytes).map_err(|err| err.to_string())?;
    entry.ping().map_err(|err| err.to_string())?;
    Ok(entry)
}

/// A lease end (Unix ms) no earlier than `at` and unique in this process, so two claims of one
/// target by one process never share a file name.
fn unique_lease(at: u64) -> u64 {
    // One per process: uniqueness is within the process, whose claims share the outbox files.
    static LAST: AtomicU64 = AtomicU64::new(0);
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = at.max(last.saturating_add(1));
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

/// Whether the process that claimed the entry at `path` is gone: the claim's `flock` is free (the
/// kernel drops a dead process's locks). The probe's own lock ends when the file is closed
/// here; an error (the claim settled meanwhile) counts as alive.
fn holder_died(path: &Path) -> bool {
    file::open_regular(path)
        .and_then(|claim| lock::try_lock(&claim))
        .unwrap_or(false)
}

/// Whether process `pid` exists (a process of another user counts as alive).
fn alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if raw <= 0 {
        return false;
    }
    !matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

/// The pid of the process that wrote a temp file.
fn temp_writer(path: &Path) -> Option<u32> {
    file::temp_writer(path.file_name()?.to_str()?)
}

#[cfg(test)]
mod tests;
