//! The daemon reloads when its configuration file changes, as on SIGHUP and with the same rules
//! (an invalid new file is logged and counted, and the running config is kept): this is a
//! second control source beside the signals, sending [`Request::Reload`], run as one of the
//! daemon's background tasks (so its shutdown stops and awaits it).
//!
//! What is watched is the file's *directory*, not the file: Kubernetes mounts a ConfigMap as a
//! directory in which `config.toml` is a symlink to `..data/config.toml`, and an update swaps
//! the `..data` symlink (a new timestamped directory, a new link renamed over the old one), so
//! the file itself never changes and a watch on it (or on the old target) would see nothing.
//! Editors replace files by rename too. Any event in the directory (close after write, create,
//! rename into it, delete, attributes) starts a short quiet period ([`SETTLE`]) that gathers the
//! burst of events one update makes; then the file's bytes are read and their SHA-256 compared
//! with that of the last ones seen (a digest, not a copy: a config of 1,000 jobs is about 80 KB
//! the daemon would otherwise hold for its whole life), and only a real change of content sends
//! a reload. The file is read as loading reads it ([`crate::config::read_bytes`]: never
//! blocking, at most [`crate::config::CONFIG_FILE_MAX`] bytes), so a FIFO or a huge file put in
//! its place cannot stall the daemon. A file that cannot be read (in the middle of a swap,
//! removed, a FIFO, too large) sends nothing and is remembered as no content: the next readable
//! file sends a reload even when it holds the very bytes seen before (restored after a SIGHUP
//! failed to load the unreadable one, that reload clears the reload error); SIGHUP reports why
//! it cannot be loaded. A symlink whose target lies outside the file's directory is not
//! followed: SIGHUP still reloads it.
//!
//! The watch itself is [`crate::dir_watch`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::daemon::control::{Controller, Request};
use crate::daemon::{Context, Task};
use crate::dir_watch::DirWatch;

/// How long the directory must be quiet after an event before the file is compared: a ConfigMap
/// swap or an editor's save is a burst of events within a few milliseconds.
pub(crate) const SETTLE: Duration = Duration::from_millis(200);

/// The watch of `config`'s directory as a daemon background task: on a change of the file's
/// content it sends [`Request::Reload`] through `controller`, until the daemon's shutdown
/// cancels it (the daemon then awaits it, as every background task) or the daemon no longer
/// listens. The watch is set up when the daemon starts its background tasks, before it says
/// `READY=1`; when it cannot be (no inotify, an unreadable directory) that is logged and the
/// task ends at once: SIGHUP still reloads.
pub(crate) fn task(config: &Path, controller: Controller) -> Task {
    let path = config.to_path_buf();
    Box::new(move |_: Context, cancel: CancellationToken| {
        let watch = watch(&path);
        Box::pin(async move {
            let Some((watch, seen)) = watch else { return };
            run(watch, &path, seen, controller, cancel).await;
            info!(config = %path.display(), "stopped watching the configuration");
        })
    })
}

/// What is kept of the file's content to tell a change: its SHA-256.
type Seen = Option<[u8; 32]>;

/// The digest of `path`'s bytes now, `None` when it cannot be read.
fn content_digest(path: &Path) -> Seen {
    let bytes = crate::config::read_bytes(path).ok()?;
    Some(Sha256::digest(&bytes).into())
}

/// The watch of `config`'s directory and the digest of the file's bytes now; `None` (logged)
/// when the directory cannot be watched.
fn watch(config: &Path) -> Option<(DirWatch, Seen)> {
    let dir = match config.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    match DirWatch::new(&dir) {
        Ok(watch) => {
            let seen = content_digest(config);
            info!(config = %config.display(), dir = %dir.display(), "watching the configuration for changes");
            Some((watch, seen))
        }
        Err(err) => {
            warn!(
                error = %err,
                "cannot watch the configuration file for changes; reload it with SIGHUP"
            );
            None
        }
    }
}

async fn run(
    watch: DirWatch,
    path: &Path,
    mut seen: Seen,
    controller: Controller,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            ready = watch.changed() => if let Err(err) = ready {
                warn!(error = %err, "the configuration watch failed; SIGHUP still reloads");
                return;
            },
        }
        // Gather the rest of the burst: wait until SETTLE passes without an event.
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(SETTLE) => break,
                more = watch.changed() => if more.is_err() { break },
            }
        }
        let Some(now) = content_digest(path) else {
            // Whatever comes next is a change, even the same bytes as before: a SIGHUP may
            // have tried this unreadable file meanwhile and kept its error, which only a
            // reload that reads the file again clears.
            seen = None;
            continue;
        };
        if seen == Some(now) {
            continue;
        }
        seen = Some(now);
        info!(config = %path.display(), "the configuration file changed");
        if controller.send(Request::Reload).is_err() {
            return;
        }
    }
}
