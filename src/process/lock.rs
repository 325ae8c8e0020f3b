//! Run locks: at most one run of the same job (or ping URL) at a time, with a lock file under
//! `<state_dir>/locks/` taken without waiting ([`crate::persist::lock`]). The kernel drops the
//! lock when the holder exits, however it exits, so a crash never leaves a stale lock behind.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::persist::file::private_dir;
use crate::persist::lock::FileLock;

/// A held run lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub(crate) struct RunLock {
    /// Kept: dropping it releases the lock.
    _lock: FileLock,
}

/// Why a lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LockError {
    /// Another process holds it: the job is running.
    #[error("another run holds the lock {}", .path.display())]
    Busy {
        /// The lock file.
        path: PathBuf,
    },
    /// The state directory or the lock file cannot be used.
    #[error("cannot use the lock file {}: {source}", .path.display())]
    Unusable {
        /// The file or directory that failed.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
}

impl RunLock {
    /// Takes the lock named `key` under `state_dir` without waiting. The state directory is
    /// created (mode 0700) when missing. `key` should be a short, file-name-safe identifier.
    pub(crate) fn try_acquire(state_dir: &Path, key: &str) -> Result<RunLock, LockError> {
        let dir = state_dir.join("locks");
        private_dir(&dir).map_err(|source| LockError::Unusable {
            path: dir.clone(),
            source,
        })?;
        let path = dir.join(format!("{key}.lock"));
        let lock = match FileLock::try_acquire(&path) {
            Ok(Some(lock)) => lock,
            Ok(None) => return Err(LockError::Busy { path }),
            Err(source) => return Err(LockError::Unusable { path, source }),
        };
        // Who holds it, for a person looking at the file; failure does not matter.
        let mut file = lock.file();
        let _ = file.set_len(0);
        let _ = writeln!(file, "{}", std::process::id());
        Ok(RunLock { _lock: lock })
    }
}

/// A file-name-safe lock key: letters, digits, `-`, `_` and `.` kept, anything else `_`,
/// with a fingerprint of the original appended so different names never collide.
pub(crate) fn lock_key(kind: &str, name: &str) -> String {
    let safe: String = name
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{kind}-{safe}-{}", crate::redact::fingerprint(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_is_busy_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("state");
        let first = RunLock::try_acquire(&state, "job-a").expect("first");
        assert!(matches!(
            RunLock::try_acquire(&state, "job-a"),
            Err(LockError::Busy { .. })
        ));
        assert!(RunLock::try_acquire(&state, "job-b").is_ok());
        drop(first);
        assert!(RunLock::try_acquire(&state, "job-a").is_ok());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&state)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn keys_are_safe_and_distinct() {
        let a = lock_key("job", "../etc/passwd");
        assert!(!a.contains('/'), "{a}");
        assert_ne!(lock_key("job", "a/b"), lock_key("job", "a_b"));
    }
}
