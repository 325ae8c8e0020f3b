//! Crash-safe files: a write leaves either the old file or the new one (temp file 0600 in the
//! same directory, write, fsync, rename over the target, fsync the directory; [`create_atomic`]
//! links instead of renaming, for a file made once and never replaced), renames and
//! removals that survive a crash, and private directories (0700). [`write_fast`] is the same
//! without the fsyncs, for a file that only has to outlive its process (the page cache does),
//! not the machine.
//!
//! Files are read with [`read_regular`]: opened without blocking and without following a final
//! symbolic link, and refused unless they are regular files of a bounded size, so a FIFO or a
//! device planted in a state directory cannot freeze the reader (another local user may be
//! able to write there). Files the user names (the configuration, key and token files,
//! certificate bundles) are read with [`read_named`], the same but following links. The
//! agent's own files under its state directory (the history, the sync records, the fire times
//! and boot markers) are opened with [`open_state`], [`read_state`] and
//! [`open_state_append`]: a file there that is not a regular file is set aside
//! ([`set_aside`]: renamed, with a warning naming it) and the agent goes on as without it.
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
    replace_whole(path, bytes)?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// [`write_atomic`] but for the directory's fsync: the new content is in place when this
/// returns, and a machine crash before the directory is synced (by a later write) leaves the
/// old file whole. For a step that must be seen at once, before what it announces happens.
pub(crate) fn replace_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let temp = synced_temp(dir, bytes)?;
    let result = std::fs::rename(&temp, path);
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// Creates `path` with `bytes` unless a file is there already, so that a crash leaves either
/// no file or the whole one: a temp file in the same directory (mode 0600), fsync, a hard link
/// to `path` (which, unlike a rename, never replaces a file), fsync the directory. `Ok(false)`
/// when `path` existed (another process created it first): the caller reads that one. The
/// directory must exist; the temp file is removed in every case.
pub(crate) fn create_atomic(path: &Path, bytes: &[u8]) -> io::Result<bool> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let temp = synced_temp(dir, bytes)?;
    let result = match std::fs::hard_link(&temp, path) {
        Ok(()) => sync_dir(dir).map(|()| true),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(err) => Err(err),
    };
    let _ = std::fs::remove_file(&temp);
    result
}

/// The random id kept in `path` (128 random bits as 32 lowercase hex digits): the one there,
/// else a new one written there (created with a hard link, so two processes creating it at once
/// end up with the same id; a file that holds no id is replaced). The directory must exist.
pub(crate) fn kept_id(path: &Path) -> io::Result<String> {
    let replace = match read_id(path) {
        Ok(Some(id)) => return Ok(id),
        Err(err) if err.kind() == io::ErrorKind::NotFound => false,
        // Not an id (damaged, or not a regular file): a new one takes its place.
        Ok(None) => true,
        Err(err) if err.kind() == io::ErrorKind::InvalidData => true,
        Err(err) => return Err(err),
    };
    let id = format!("{:032x}", rand::random::<u128>());
    let line = format!("{id}\n");
    if replace {
        write_atomic(path, line.as_bytes())?;
        return Ok(id);
    }
    if create_atomic(path, line.as_bytes())? {
        return Ok(id);
    }
    // Another process created it first.
    read_id(path)?.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "it holds no id"))
}

/// The id kept in `path` by [`kept_id`]: `Ok(None)` when the file holds something else, an
/// error when it cannot be read (`NotFound` when there is none).
pub(crate) fn read_id(path: &Path) -> io::Result<Option<String>> {
    let bytes = read_regular(path, 256)?;
    let text = std::str::from_utf8(&bytes).unwrap_or_default().trim();
    let hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
    Ok((text.len() == 32 && text.chars().all(hex)).then(|| text.to_owned()))
}

/// A new temp file in `dir` (mode 0600) holding `bytes`, fsynced; removed when a step fails.
fn synced_temp(dir: &Path, bytes: &[u8]) -> io::Result<PathBuf> {
    let (file, temp) = write_fast(dir, bytes)?;
    if let Err(err) = file.sync_all() {
        let _ = std::fs::remove_file(&temp);
        return Err(err);
    }
    Ok(temp)
}

/// Writes `bytes` to a new temp file in `dir` (mode 0600) without fsync, and returns it open
/// with its path: the caller renames it into place (after taking a lock on it, say). The temp
/// file is removed when the write fails.
pub(crate) fn write_fast(dir: &Path, bytes: &[u8]) -> io::Result<(File, PathBuf)> {
    let temp = temp_path(dir);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)?;
    if let Err(err) = file.write_all(bytes) {
        let _ = std::fs::remove_file(&temp);
        return Err(err);
    }
    Ok((file, temp))
}

/// Opens `path` for reading without blocking (a FIFO with no writer would block a plain open)
/// and without following a symbolic link; anything but a regular file is refused with
/// `InvalidData` ("not a regular file").
pub(crate) fn open_regular(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)
        .map_err(|err| {
            if err.raw_os_error() == Some(libc::ELOOP) {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    "a symbolic link, not a regular file",
                )
            } else {
                err
            }
        })?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not a regular file ({})", describe(kind)),
        ));
    }
    Ok(file)
}

/// Opens the agent's own file at `path` under its state directory as [`open_regular`] does;
/// `None` when there is none. A file there that is not a regular file (a FIFO, a device, a
/// symbolic link someone planted) is never waited on: it is set aside ([`set_aside`]) and
/// reported as absent, so the caller carries on as without it.
pub(crate) fn open_state(path: &Path) -> io::Result<Option<File>> {
    match open_regular(path) {
        Ok(file) => Ok(Some(file)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) if err.kind() == io::ErrorKind::InvalidData => {
            set_aside(path, &err);
            Ok(None)
        }
        Err(err) => Err(err),
    }
}

/// Reads the agent's own file at `path` as [`open_state`] opens it, at most `limit` bytes
/// (`InvalidData` beyond); `None` when there is none or it was set aside.
pub(crate) fn read_state(path: &Path, limit: u64) -> io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let Some(file) = open_state(path)? else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {limit} bytes"),
        ));
    }
    Ok(Some(bytes))
}

/// Opens (creating, mode 0600) the agent's own file at `path` for reading and appending, as
/// [`open_state`] opens one to read: never blocking, never through a link; a file there that
/// is not a regular file is set aside and a new one created in its place.
pub(crate) fn open_state_append(path: &Path) -> io::Result<File> {
    let open = || {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(path);
        match file {
            Err(err) if err.raw_os_error() == Some(libc::ELOOP) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a symbolic link, not a regular file",
            )),
            Err(err) => Err(err),
            Ok(file) => match file.metadata()?.file_type() {
                kind if kind.is_file() => Ok(file),
                kind => Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("not a regular file ({})", describe(kind)),
                )),
            },
        }
    };
    match open() {
        Err(err) if err.kind() == io::ErrorKind::InvalidData => {
            set_aside(path, &err);
            open()
        }
        result => result,
    }
}

/// Moves the file at `path` that `problem` refused out of the agent's way, to
/// `<name>.set-aside.<unix time>` in the same directory, and says so in a warning naming both
/// paths and what to do. When it cannot be moved (another user's directory), the warning says
/// that instead: the file is left where it is and still not used.
pub(crate) fn set_aside(path: &Path, problem: &io::Error) {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".set-aside.{}", since_epoch.as_secs()));
    let aside = path.with_file_name(name);
    match std::fs::rename(path, &aside) {
        Ok(()) => tracing::warn!(
            file = %path.display(),
            moved_to = %aside.display(),
            problem = %problem,
            "a file of the agent's state was not a regular file: it was set aside, unread, and \
             the agent goes on without it; if you did not put it there, find out who did, then \
             remove it"
        ),
        Err(err) => tracing::warn!(
            file = %path.display(),
            problem = %problem,
            error = %err,
            "a file of the agent's state is not a regular file and cannot be set aside: it is \
             not read; remove it (as the user the daemon runs as)"
        ),
    }
}

/// Reads the regular file at `path` (see [`open_regular`]), refusing one longer than `limit`
/// bytes with `InvalidData`.
pub(crate) fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {limit} bytes"),
        ));
    }
    Ok(bytes)
}

/// Reads a file the user named (key and token files, the configuration file, certificate
/// bundles): opened without blocking, `fstat` on the open file, refused unless a regular file,
/// at most `max` bytes read. The one way the agent reads a file someone may have put a FIFO, a
/// device or gigabytes in. Unlike [`read_regular`], a symbolic link is followed: systemd
/// credentials, Kubernetes secrets and distributions' CA bundles are links to the real file. `what` names the kind of file
/// in the error ("a key or token file"). `InvalidData`: not a regular file, or over `max`
/// (also when it grew past `max` between the `fstat` and the read).
pub(crate) fn read_named(path: &Path, max: u64, what: &str) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if let Some(problem) = not_a_named_file(&file.metadata()?, max, what) {
        return Err(io::Error::new(io::ErrorKind::InvalidData, problem));
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("it is larger than {max} bytes, the most {what} may hold"),
        ));
    }
    Ok(bytes)
}

/// Why a file with `meta` cannot be read as `what` ([`read_named`]): not a regular file,
/// or larger than `max`.
pub(crate) fn not_a_named_file(meta: &std::fs::Metadata, max: u64, what: &str) -> Option<String> {
    let kind = meta.file_type();
    if kind.is_file() {
        return (meta.len() > max).then(|| {
            format!(
                "it is {} bytes, more than the {max} {what} may hold",
                meta.len()
            )
        });
    }
    let what = describe(kind);
    Some(format!("it is {what}, not a regular file"))
}

/// What kind of file `kind` is, in words ("a FIFO", "a directory", ...).
pub(crate) fn describe(kind: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else {
        "not a file"
    }
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
    fn a_creation_never_replaces_a_file_and_leaves_no_temp_file() {
        let root = tempfile::tempdir().expect("tempdir");
        let path = root.path().join("id");
        assert!(create_atomic(&path, b"first").expect("created"));
        assert_eq!(mode(&path), 0o600);
        assert!(!create_atomic(&path, b"second").expect("already there"));
        assert_eq!(std::fs::read(&path).expect("read"), b"first");
        assert_eq!(std::fs::read_dir(root.path()).expect("list").count(), 1);
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
    fn a_fifo_a_link_and_a_large_file_are_refused_without_blocking() {
        let root = tempfile::tempdir().expect("tempdir");
        let fifo = root.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
        let err = read_regular(&fifo, 10).expect_err("a FIFO is refused");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(
            err.to_string().contains("not a regular file (a FIFO)"),
            "{err}"
        );
        let big = root.path().join("big");
        std::fs::write(&big, [b'x'; 11]).expect("write");
        let err = read_regular(&big, 10).expect_err("too large");
        assert!(err.to_string().contains("larger than 10 bytes"), "{err}");
        assert_eq!(read_regular(&big, 11).expect("at the limit").len(), 11);
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&big, &link).expect("symlink");
        let err = read_regular(&link, 100).expect_err("a link is not followed");
        assert!(err.to_string().contains("symbolic link"), "{err}");
    }

    /// The names in `dir` starting with `prefix`.
    fn named(dir: &Path, prefix: &str) -> Vec<String> {
        std::fs::read_dir(dir)
            .expect("read_dir")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| name.starts_with(prefix))
            .collect()
    }

    #[test]
    fn a_planted_state_file_is_set_aside_and_the_caller_goes_on_without_it() {
        let root = tempfile::tempdir().expect("tempdir");
        let mode = nix::sys::stat::Mode::S_IRWXU;
        let read = root.path().join("record");
        nix::unistd::mkfifo(&read, mode).expect("mkfifo");
        assert!(read_state(&read, 100).expect("not an error").is_none());
        assert!(!read.exists(), "the FIFO was moved");
        assert_eq!(named(root.path(), "record.set-aside.").len(), 1);
        assert!(open_state(&read).expect("missing is fine").is_none());

        let log = root.path().join("runs.jsonl");
        nix::unistd::mkfifo(&log, mode).expect("mkfifo");
        let mut file = open_state_append(&log).expect("a new regular file");
        file.write_all(b"line\n").expect("write");
        assert_eq!(std::fs::read(&log).expect("read"), b"line\n");
        assert_eq!(named(root.path(), "runs.jsonl.set-aside.").len(), 1);

        let lock = root.path().join("lock");
        nix::unistd::mkfifo(&lock, mode).expect("mkfifo");
        let held = crate::persist::lock::FileLock::acquire(&lock).expect("a new lock file");
        assert!(lock.metadata().expect("stat").is_file());
        drop(held);
        assert_eq!(named(root.path(), "lock.set-aside.").len(), 1);
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
