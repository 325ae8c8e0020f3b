//! Crash-safe files: a write leaves either the old file or the new one (temp file 0600 in the
//! same directory, write, fsync, rename over the target, fsync the directory), renames and
//! removals that survive a crash, and private directories (0700).
//!
//! Temp files are named `.tmp.<pid>.<random>`: a reader of the directory can tell them from
//! its own files ([`is_temp`]) and whether their writer still runs ([`temp_writer`]).

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rand::Rng;

/// How every temp file's name starts.
const TEMP_PREFIX: &str = ".tmp.";

/// Creates `dir` (and parents) with mode 0700 when missing.
pub(crate) fn private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Writes `bytes` to `path` so that a crash leaves either the old file or the new one: a temp
/// file in the same directory (mode 0600), fsync, rename over `path`, fsync the directory. The
/// directory must exist; the temp file is removed when a step fails.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
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

/// Renames `from` to `to` and makes the rename durable (both directories fsynced).
pub(crate) fn rename_durable(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::rename(from, to)?;
    if let Some(dir) = to.parent() {
        sync_dir(dir)?;
    }
    if let Some(dir) = from.parent().filter(|d| Some(*d) != to.parent()) {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Removes `path`; a file already gone is fine (another process removed it). True when this
/// call removed it.
pub(crate) fn remove_if_present(path: &Path) -> io::Result<bool> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(err),
    }
}

/// fsyncs a directory, so renames and unlinks in it survive a crash.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Whether `name` is the name of a temp file of [`write_atomic`].
pub(crate) fn is_temp(name: &str) -> bool {
    name.starts_with(TEMP_PREFIX)
}

/// The pid of the process that wrote the temp file named `name`.
pub(crate) fn temp_writer(name: &str) -> Option<u32> {
    name.strip_prefix(TEMP_PREFIX)?
        .split('.')
        .next()?
        .parse()
        .ok()
}

/// A temp file name in `dir`: `.tmp.<pid>.<random>`.
fn temp_path(dir: &Path) -> PathBuf {
    let tag: u64 = rand::thread_rng().gen();
    dir.join(format!("{TEMP_PREFIX}{}.{tag:016x}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn a_write_replaces_the_file_privately_and_leaves_no_temp_file() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("a/b");
        private_dir(&dir).expect("dir");
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&root.path().join("a")), 0o700);
        let path = dir.join("state.json");
        write_atomic(&path, b"one").expect("first write");
        write_atomic(&path, b"two").expect("second write");
        assert_eq!(std::fs::read(&path).expect("read"), b"two");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(std::fs::read_dir(&dir).expect("list").count(), 1);
    }

    #[test]
    fn a_failed_write_leaves_the_old_file() {
        let root = tempfile::tempdir().expect("tempdir");
        let path = root.path().join("x");
        write_atomic(&path, b"old").expect("write");
        // A directory in the way of the rename: the write fails, the temp file goes.
        let blocked = root.path().join("blocked");
        std::fs::create_dir_all(blocked.join("inside")).expect("dir");
        assert!(write_atomic(&blocked, b"new").is_err());
        assert_eq!(std::fs::read(&path).expect("read"), b"old");
        let names: Vec<String> = std::fs::read_dir(root.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| is_temp(n)), "{names:?}");
    }

    #[test]
    fn temp_names_carry_their_writer() {
        let path = temp_path(Path::new("/d"));
        let name = path.file_name().and_then(|n| n.to_str()).expect("name");
        assert!(is_temp(name));
        assert_eq!(temp_writer(name), Some(std::process::id()));
        assert!(!is_temp("stats.json"));
        assert_eq!(temp_writer(".tmp.x.1"), None);
    }

    #[test]
    fn removing_a_missing_file_is_fine() {
        let root = tempfile::tempdir().expect("tempdir");
        let path = root.path().join("gone");
        assert!(!remove_if_present(&path).expect("missing is fine"));
        std::fs::write(&path, "x").expect("write");
        assert!(remove_if_present(&path).expect("removed"));
    }
}
