//! The pauses as the daemon holds them: one value in memory that a fire (`pause --stop-jobs`),
//! a `/metrics` scrape and `/status` read, so none of them touches the file. It follows
//! `<state_dir>/pause.json`: the status endpoint refreshes it right after it wrote the file,
//! and [`LivePauses::watch`] (a daemon task) refreshes it when the file changes, so a `pause`
//! run without the daemon (which writes the file itself) counts within a moment.
//!
//! The watch is on the state directory ([`crate::dir_watch`]), for the file's name: the file
//! is replaced by a rename, which a watch on the file itself would not follow. A burst of
//! events is gathered for [`SETTLE`] before the file is read. Without inotify (or when the
//! watch fails) the file is read every [`POLL`] instead.
//!
//! A refresh reads the file and compares what it found (the bytes, or the read error) with
//! what the last refresh found; only a change is applied and logged, so a bad file warns once
//! per change of the file, however often it is looked at. The rule for each outcome is stated
//! in [`crate::pause`]'s header: no file ends every pause; a valid file replaces the pauses in
//! memory; an invalid or unreadable one leaves the pauses last read in force.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::Pauses;
use crate::dir_watch::DirWatch;

/// How long the state directory must be quiet after an event for the pause file before it is
/// read: a hand edit may come as several events (create, write, close) in a few milliseconds.
const SETTLE: Duration = Duration::from_millis(100);

/// How often the file is read when the state directory cannot be watched.
const POLL: Duration = Duration::from_secs(10);

/// What a look at the file found.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// There is no file.
    Missing,
    /// Its bytes (valid or not).
    Bytes(Vec<u8>),
    /// It could not be read: the error.
    Unreadable(String),
}

/// The daemon's pauses in memory, following the pause file.
#[derive(Debug)]
pub struct LivePauses {
    /// The state directory, which holds the file and is watched.
    state_dir: PathBuf,
    /// `<state_dir>/pause.json`.
    file: PathBuf,
    /// The pauses in force for the daemon: replaced whole, read without touching the file.
    current: RwLock<Arc<Pauses>>,
    /// What the last refresh found (`None` before the first), held while a refresh reads and
    /// applies, so two refreshes (the endpoint's and the watch's) apply in the order they read.
    seen: Mutex<Option<Seen>>,
}

impl LivePauses {
    /// The pauses under `state_dir`, read once now (a bad file is logged, as by every refresh).
    pub fn load(state_dir: &Path) -> LivePauses {
        let live = LivePauses {
            state_dir: state_dir.to_owned(),
            file: super::path(state_dir),
            current: RwLock::new(Arc::new(Pauses::default())),
            seen: Mutex::new(None),
        };
        live.refresh();
        live
    }

    /// The pauses in force for the daemon.
    pub fn current(&self) -> Arc<Pauses> {
        Arc::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Reads the file and applies what changed since the last refresh (see the module header).
    pub fn refresh(&self) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let found = match super::read(&self.file) {
            Ok(None) => Seen::Missing,
            Ok(Some(bytes)) => Seen::Bytes(bytes),
            Err(err) => Seen::Unreadable(err.to_string()),
        };
        if seen.as_ref() == Some(&found) {
            return;
        }
        let was_bad = seen.as_ref().is_some_and(|s| !self.usable(s));
        match &found {
            Seen::Missing => self.replace(Pauses::default(), was_bad),
            Seen::Bytes(bytes) => match super::parse(bytes) {
                Ok(pauses) => self.replace(pauses, was_bad),
                Err(err) => {
                    warn!(file = %self.file.display(), error = %err, kept = ?self.kept(), "the pause file is not valid: the daemon keeps the pauses it last read from it (kept) until the file is valid again; fix the file, or remove it to end every pause");
                }
            },
            Seen::Unreadable(err) => {
                warn!(file = %self.file.display(), error = %err, kept = ?self.kept(), "cannot read the pause file: the daemon keeps the pauses it last read from it (kept) until it can; make it a readable regular file again, or remove it to end every pause");
            }
        }
        *seen = Some(found);
    }

    /// Refreshes on every change of the file until `cancel` (see the module header).
    pub async fn watch(self: Arc<Self>, cancel: CancellationToken) {
        let mut watch = self.start_watch();
        loop {
            let woke = match &watch {
                Some(dir) => tokio::select! {
                    () = cancel.cancelled() => return,
                    changed = dir.changed() => changed,
                },
                None => tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(POLL) => Ok(Vec::new()),
                },
            };
            match (&watch, woke) {
                (Some(_), Ok(names)) if !names.iter().any(|n| self.about_file(n.as_deref())) => {
                    continue
                }
                (Some(dir), Ok(_)) => {
                    if settle(dir, &cancel).await.is_none() {
                        return;
                    }
                }
                (_, Ok(_)) => {}
                (_, Err(err)) => {
                    warn!(dir = %self.state_dir.display(), error = %err, poll = ?POLL, "the watch of the state directory failed: the pause file is read at every poll instead");
                    watch = None;
                }
            }
            let live = Arc::clone(&self);
            if let Err(err) = tokio::task::spawn_blocking(move || live.refresh()).await {
                warn!(error = %err, "reading the pause file failed");
            }
        }
    }

    /// The watch of the state directory (created 0700 when missing), or `None` (logged) when
    /// there can be none.
    fn start_watch(&self) -> Option<DirWatch> {
        let started = crate::persist::file::private_dir(&self.state_dir)
            .and_then(|()| DirWatch::new(&self.state_dir));
        match started {
            Ok(watch) => {
                debug!(file = %self.file.display(), "watching the pause file for changes");
                Some(watch)
            }
            Err(err) => {
                warn!(dir = %self.state_dir.display(), error = %err, poll = ?POLL, "cannot watch the state directory: the pause file is read at every poll instead");
                None
            }
        }
    }

    /// Whether an event about the entry `name` (`None`: the directory itself, or a queue
    /// overflow) may concern the file.
    fn about_file(&self, name: Option<&std::ffi::OsStr>) -> bool {
        name.map_or(true, |name| Some(name) == self.file.file_name())
    }

    /// Whether the pauses were taken from what `seen` found.
    fn usable(&self, seen: &Seen) -> bool {
        match seen {
            Seen::Missing => true,
            Seen::Bytes(bytes) => super::parse(bytes).is_ok(),
            Seen::Unreadable(_) => false,
        }
    }

    /// Puts `pauses` in force; `was_bad`: the file was invalid or unreadable until now.
    fn replace(&self, pauses: Pauses, was_bad: bool) {
        if was_bad {
            info!(file = %self.file.display(), jobs = ?pauses.jobs.keys().collect::<Vec<_>>(), "the pause file can be used again: its pauses are in force");
        }
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(pauses);
    }

    /// The jobs of the pauses in memory (those a bad file leaves in force).
    fn kept(&self) -> Vec<String> {
        self.current().jobs.keys().cloned().collect()
    }
}

/// Waits until `dir` was quiet for [`SETTLE`]; `None` when cancelled.
async fn settle(dir: &DirWatch, cancel: &CancellationToken) -> Option<()> {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return None,
            () = tokio::time::sleep(SETTLE) => return Some(()),
            more = dir.changed() => if more.is_err() { return Some(()) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pause::Pause;

    fn paused(stop_jobs: bool) -> Pauses {
        let pause = Pause {
            since: "2026-11-25T12:00:00Z".parse().expect("RFC 3339"),
            until: None,
            reason: None,
            stop_jobs,
            ended: false,
        };
        Pauses {
            jobs: [("backup".to_owned(), pause)].into(),
        }
    }

    fn write(dir: &Path, pauses: &Pauses) {
        let text = serde_json::to_vec(pauses).expect("serializable");
        std::fs::write(crate::pause::path(dir), text).expect("written");
    }

    #[test]
    fn a_bad_file_keeps_the_last_pauses_and_no_file_ends_them() {
        let dir = tempfile::tempdir().expect("temp dir");
        let live = LivePauses::load(dir.path());
        assert_eq!(*live.current(), Pauses::default());
        write(dir.path(), &paused(true));
        live.refresh();
        assert_eq!(*live.current(), paused(true));
        std::fs::write(crate::pause::path(dir.path()), b"{not json").expect("written");
        live.refresh();
        assert_eq!(*live.current(), paused(true), "a bad file ended a pause");
        std::fs::remove_file(crate::pause::path(dir.path())).expect("removed");
        std::fs::create_dir(crate::pause::path(dir.path())).expect("a directory");
        live.refresh();
        assert_eq!(*live.current(), paused(true), "an unreadable file ended it");
        std::fs::remove_dir(crate::pause::path(dir.path())).expect("removed");
        live.refresh();
        assert_eq!(*live.current(), Pauses::default(), "no file: no pause");
        write(dir.path(), &paused(false));
        live.refresh();
        assert_eq!(*live.current(), paused(false));
    }

    #[tokio::test]
    async fn the_watch_follows_a_rename_over_the_file_and_stops_when_cancelled() {
        let dir = tempfile::tempdir().expect("temp dir");
        let live = Arc::new(LivePauses::load(dir.path()));
        let cancel = CancellationToken::new();
        let task = tokio::spawn(Arc::clone(&live).watch(cancel.clone()));
        tokio::time::sleep(Duration::from_millis(50)).await;
        let text = serde_json::to_vec(&paused(true)).expect("serializable");
        crate::persist::file::write_atomic(&crate::pause::path(dir.path()), &text)
            .expect("written");
        let mut waited = Duration::ZERO;
        while *live.current() != paused(true) && waited < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(20)).await;
            waited += Duration::from_millis(20);
        }
        assert_eq!(*live.current(), paused(true), "the watch missed the write");
        cancel.cancel();
        tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .expect("the watch ends when cancelled")
            .expect("it did not panic");
    }
}
