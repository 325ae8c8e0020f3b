//! Exclusive locks between processes, with `flock(2)` on a lock file: [`FileLock::acquire`]
//! waits for the lock, [`FileLock::try_acquire`] gives up at once when another holds it. The
//! kernel drops the lock when the holder closes the file or exits, however it exits, so a crash
//! never leaves a stale lock behind.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// A lock file held with an exclusive `flock(2)`; released when dropped.
#[derive(Debug)]
pub(crate) struct FileLock {
    /// Kept open: closing the file releases the lock.
    file: File,
}

impl FileLock {
    /// Takes the lock on `path` (created with mode 0600 when missing), waiting while another
    /// process holds it.
    pub(crate) fn acquire(path: &Path) -> io::Result<FileLock> {
        let file = open(path)?;
        loop {
            match flock(&file, libc::LOCK_EX) {
                Ok(()) => return Ok(FileLock { file }),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            }
        }
    }

    /// Takes the lock on `path` (created with mode 0600 when missing) without waiting: `None`
    /// when another process holds it.
    pub(crate) fn try_acquire(path: &Path) -> io::Result<Option<FileLock>> {
        let file = open(path)?;
        match flock(&file, libc::LOCK_EX | libc::LOCK_NB) {
            Ok(()) => Ok(Some(FileLock { file })),
            Err(err) if err.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// The lock file, e.g. to note in it who holds the lock.
    pub(crate) fn file(&self) -> &File {
        &self.file
    }
}

/// Takes an exclusive lock on the open `file` without waiting: false when another open file
/// holds it (in this process or another). For a lock that marks a file as owned (an outbox
/// claim): the kernel lets it go when its holder dies, however it dies.
pub(crate) fn try_lock(file: &File) -> io::Result<bool> {
    match flock(file, libc::LOCK_EX | libc::LOCK_NB) {
        Ok(()) => Ok(true),
        Err(err) if err.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(false),
        Err(err) => Err(err),
    }
}

/// Opens (creating) a lock file; its content is left alone. std opens with `O_CLOEXEC`, so a
/// child process does not inherit the lock.
/// `O_NONBLOCK` and `O_NOFOLLOW`: a FIFO or a link planted in its place fails instead of
/// blocking or pointing the lock elsewhere.
/// A lock file found to be something else is set aside ([`super::file::set_aside`]) and a new
/// one made in its place: its content never mattered, and a planted FIFO must not stop every
/// writer that takes this lock for good.
fn open(path: &Path) -> io::Result<File> {
    match open_once(path) {
        Err(err) if err.kind() == io::ErrorKind::InvalidData => {
            super::file::set_aside(path, &err);
            open_once(path)
        }
        result => result,
    }
}

fn open_once(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)
        .map_err(|err| match err.raw_os_error() {
            // A FIFO without a reader (ENXIO) or a symbolic link (ELOOP) in its place.
            Some(libc::ENXIO | libc::ELOOP) => io::Error::new(
                io::ErrorKind::InvalidData,
                format!("lock file {} is not a regular file ({err})", path.display()),
            ),
            _ => err,
        })?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("lock file {} is not a regular file", path.display()),
        ));
    }
    Ok(file)
}

fn flock(file: &File, operation: libc::c_int) -> io::Result<()> {
    // SAFETY: flock on a descriptor owned by `file`, which outlives the call.
    let rc = unsafe { libc::flock(file.as_raw_fd(), operation) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_busy_for_others_until_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(".lock");
        let held = FileLock::acquire(&path).expect("first");
        // flock locks belong to the open file: a second open is another holder.
        assert!(FileLock::try_acquire(&path).expect("usable").is_none());
        drop(held);
        let again = FileLock::try_acquire(&path).expect("usable");
        assert!(again.is_some());
        drop(again);
        assert!(FileLock::acquire(&path).is_ok());
    }

    #[test]
    fn a_waiting_lock_is_taken_once_the_holder_lets_go() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(".lock");
        let held = FileLock::acquire(&path).expect("first");
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || FileLock::acquire(&path).map(|_| ()))
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished());
        drop(held);
        waiter.join().expect("thread").expect("lock taken");
    }
}
