//! The file-system primitives of the outbox: a private directory (0700), crash-safe writes
//! (temp file 0600, fsync, rename, fsync the directory) and the directory lock (`flock(2)` on
//! `.lock`) that serialises the short metadata steps of every process sharing the outbox.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rand::Rng;

/// Creates `dir` (and parents) with mode 0700 when missing.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Writes `bytes` to `path` so that a crash leaves either the old file or the new one: a temp
/// file in the same directory (mode 0600), fsync, rename over `path`, fsync the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let temp = temp_path(dir);
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// Renames `from` to `to` and makes the rename durable.
pub fn rename_durable(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::rename(from, to)?;
    if let Some(dir) = to.parent() {
        sync_dir(dir)?;
    }
    if let Some(dir) = from.parent().filter(|d| Some(*d) != to.parent()) {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Removes `path`; a file already gone is fine (another process finished it).
pub fn remove_if_present(path: &Path) -> io::Result<bool> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(err),
    }
}

/// fsyncs a directory, so renames and unlinks in it survive a crash.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A temp file name in `dir`: `.tmp.<pid>.<random>`, never taken for an entry.
fn temp_path(dir: &Path) -> PathBuf {
    let tag: u64 = rand::thread_rng().gen();
    dir.join(format!(".tmp.{}.{tag:016x}", std::process::id()))
}

/// The exclusive directory lock, released when dropped (and by the kernel when the process
/// dies, so a `kill -9` never leaves the outbox locked).
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Waits for the lock on `dir/.lock`. It is held only for file operations (never across a
    /// network request), so the wait is short.
    pub fn acquire(dir: &Path) -> io::Result<DirLock> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(dir.join(".lock"))?;
        loop {
            // SAFETY: flock on a descriptor we own.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                return Ok(DirLock { _file: file });
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}
