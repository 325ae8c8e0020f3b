//! Changes in one directory, through inotify: the one home of the watch that the daemon uses
//! to follow its configuration file (`cli/config_watch.rs`) and its pause file
//! ([`crate::pause::LivePauses`]).
//!
//! A directory is watched rather than the file, because the files that matter are replaced by
//! a rename (an atomic write, an editor's save, a Kubernetes ConfigMap swap): a watch on the
//! file itself would follow the old inode and see nothing. The events reported are a close
//! after write, a create, a rename into or out of the directory, a delete and a change of
//! attributes; [`DirWatch::changed`] gives the names of the entries they were about, and the
//! caller decides which names matter and re-reads the file (the events only say *when* to look).
//!
//! inotify through `nix` (already a dependency, with tokio's [`AsyncFd`]) rather than the
//! `notify` crate: one directory on Linux is all that is needed, and `notify` would add its own
//! thread, channel crates and per-platform backends to the binary for it.

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::Path;

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use tokio::io::unix::AsyncFd;

/// The inotify instance, readable through [`AsyncFd`] (which wants `AsRawFd`).
struct Watch(Inotify);

impl AsRawFd for Watch {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// A watch on one directory.
pub(crate) struct DirWatch {
    fd: AsyncFd<Watch>,
}

impl std::fmt::Debug for DirWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirWatch")
            .field("fd", &self.fd.get_ref().as_raw_fd())
            .finish()
    }
}

impl DirWatch {
    /// Starts watching `dir`. Must be called inside the runtime. An error (no inotify, too many
    /// watches, an unreadable or missing directory) names the directory.
    pub(crate) fn new(dir: &Path) -> std::io::Result<DirWatch> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        let events = AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_MOVED_FROM
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_ATTRIB;
        inotify
            .add_watch(dir, events)
            .map_err(|e| std::io::Error::other(format!("{}: {e}", dir.display())))?;
        // SAFETY: `Watch` owns the inotify descriptor (an `OwnedFd` inside `Inotify`) and never
        // closes or replaces it; it stays open for as long as the `AsyncFd` holds the `Watch`,
        // and `as_raw_fd` always returns that one descriptor.
        let fd = unsafe { AsyncFd::register(Watch(inotify)) }.map_err(std::io::Error::from)?;
        Ok(DirWatch { fd })
    }

    /// Waits for events and reads every one that is ready: the names of the entries they were
    /// about (`None`: the directory itself, e.g. its watch was removed with it).
    pub(crate) async fn changed(&self) -> std::io::Result<Vec<Option<OsString>>> {
        loop {
            let mut guard = self.fd.readable().await?;
            match guard.try_io(|inner| {
                inner
                    .get_ref()
                    .0
                    .read_events()
                    .map_err(std::io::Error::from)
            }) {
                Ok(Ok(events)) => return Ok(events.into_iter().map(|e| e.name).collect()),
                Ok(Err(err)) if err.kind() == std::io::ErrorKind::WouldBlock => continue,
                Ok(Err(err)) => return Err(err),
                Err(_would_block) => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_rename_into_the_directory_is_reported_by_name() {
        let dir = tempfile::tempdir().expect("temp dir");
        let watch = DirWatch::new(dir.path()).expect("inotify on a temp dir");
        std::fs::write(dir.path().join("new.tmp"), b"{}").expect("written");
        std::fs::rename(dir.path().join("new.tmp"), dir.path().join("pause.json"))
            .expect("renamed");
        let mut names = Vec::new();
        while !names.contains(&Some(OsString::from("pause.json"))) {
            let more = tokio::time::timeout(std::time::Duration::from_secs(5), watch.changed())
                .await
                .expect("events within 5 s")
                .expect("readable");
            names.extend(more);
        }
    }
}
