//! Secrets kept in files and the environment.
//!
//! - The API key: from `api_key_file`, `api_key_env`, the systemd credential `api-key` under
//!   `$CREDENTIALS_DIRECTORY`, or `$HEARTBEAT_AGENT_API_KEY`. It is only ever held in a
//!   [`Secret`]; no message here contains it.
//! - Key, token and ping-URL files (`api_key_file`, `token_file`, `run --ping-url-file`) are read
//!   by [`read_secret_file`], and the configuration file by the same [`read_named`] with
//!   its own limit: opened without blocking (a FIFO with no writer would block a plain open
//!   forever, and the daemon with it), checked with `fstat` on the open file (so nothing can be
//!   swapped in between the check and the read), refused unless a regular file, and read up to
//!   a limit ([`SECRET_FILE_MAX`] bytes; a configuration file [`super::CONFIG_FILE_MAX`]), so a
//!   huge file is refused before it is read. A symbolic link is followed: systemd credentials
//!   and Kubernetes secrets are links to the real file. (Files under the state directory are
//!   read by [`crate::persist::file::read_regular`] instead, which refuses links: there a link
//!   is someone else's doing.) [`read_secret_line`] is the same for a one-line secret, trimmed.
//! - Who else can read a file holding secrets (the key file, `token_file`, the config file):
//!   [`exposed_warning`] warns when others can, or a group the agent does not run as.

use std::fs::Metadata;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::persist::file::read_named;
use crate::redact::Secret;

use super::ApiKeySource;

/// The environment variable read for the key when the config names no other source.
pub(crate) const API_KEY_ENV: &str = "HEARTBEAT_AGENT_API_KEY";

/// The name of the systemd credential holding the key (`LoadCredential=api-key:...`).
pub(crate) const CREDENTIAL_NAME: &str = "api-key";

/// Why the configured API key could not be read. Never carries the key.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiKeyError {
    /// The key file (or credential) could not be read.
    #[error("cannot read the api key file {}: {source}; check `api_key_file` in [api]", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The key file (or credential) is empty.
    #[error("the api key file {} is empty; write the key into it", path.display())]
    EmptyFile {
        /// The file.
        path: PathBuf,
    },
    /// `api_key_env` names a variable that is unset or empty.
    #[error(
        "`api_key_env` names ${var}, which is not set (or empty); export it or use `api_key_file`"
    )]
    EnvUnset {
        /// The variable's name.
        var: String,
    },
}

/// Reads the API key from `source`. `Ok(None)` means no key is configured anywhere (only
/// possible with [`ApiKeySource::Default`]); a configured source that fails is an error. A key
/// file readable by group or others is read but logged as a warning.
pub(crate) fn read_api_key(source: &ApiKeySource) -> Result<Option<Secret>, ApiKeyError> {
    match source {
        ApiKeySource::File(path) => read_key_file(path).map(Some),
        ApiKeySource::Env(var) => env_key(var)
            .map(Some)
            .ok_or_else(|| ApiKeyError::EnvUnset { var: var.clone() }),
        ApiKeySource::Default => {
            let credentials = std::env::var_os("CREDENTIALS_DIRECTORY").map(PathBuf::from);
            default_key(credentials.as_deref(), || env_key(API_KEY_ENV))
        }
    }
}

/// The systemd credential under `credentials` when it exists, else `fallback()`.
fn default_key(
    credentials: Option<&Path>,
    fallback: impl FnOnce() -> Option<Secret>,
) -> Result<Option<Secret>, ApiKeyError> {
    if let Some(dir) = credentials.filter(|d| !d.as_os_str().is_empty()) {
        let path = dir.join(CREDENTIAL_NAME);
        if path.exists() {
            return read_key_file(&path).map(Some);
        }
    }
    Ok(fallback())
}

fn env_key(var: &str) -> Option<Secret> {
    std::env::var(var)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .map(Secret::new)
}

fn read_key_file(path: &Path) -> Result<Secret, ApiKeyError> {
    if let Some(warning) = key_file_warning(path) {
        tracing::warn!(path = %path.display(), "{warning}");
    }
    let text = read_secret_file(path).map_err(|source| ApiKeyError::Unreadable {
        path: path.to_owned(),
        source,
    })?;
    let key = text.trim();
    if key.is_empty() {
        return Err(ApiKeyError::EmptyFile {
            path: path.to_owned(),
        });
    }
    Ok(Secret::new(key))
}

/// The largest key or token file read, in bytes. A key or a token is one short line; a larger
/// file is not one, and is not read into memory.
pub(crate) const SECRET_FILE_MAX: u64 = 16 * 1024;

/// What a key or token file is called in the messages of [`read_named`].
const SECRET_FILE: &str = "a key or token file";

/// Reads a key or token file (see the module header): its text, or an error saying why it is
/// not one (`InvalidData`: not a regular file, or larger than [`SECRET_FILE_MAX`]).
pub(crate) fn read_secret_file(path: &Path) -> io::Result<String> {
    let bytes = read_named(path, SECRET_FILE_MAX, SECRET_FILE)?;
    String::from_utf8(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "it is not UTF-8 text"))
}

/// Why a file with `meta` cannot hold a key or token: not a regular file, or too large.
fn not_a_secret_file(meta: &Metadata) -> Option<String> {
    crate::persist::file::not_a_named_file(meta, SECRET_FILE_MAX, SECRET_FILE)
}

/// Why the key file at `path` cannot serve as one: it does not exist, cannot be inspected, is
/// not a regular file (a directory, a FIFO, a device) or is too large. `None` when it is a
/// file. Only metadata is read: nothing is opened, so a FIFO cannot block.
pub(crate) fn key_file_error(path: &Path) -> Option<String> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Some(format!(
            "api key file {} is a directory, not a file",
            path.display()
        )),
        Ok(meta) => not_a_secret_file(&meta)
            .map(|problem| format!("api key file {}: {problem}", path.display())),
        Err(err) => Some(format!(
            "api key file {} cannot be read: {err}",
            path.display()
        )),
    }
}

/// A warning when the key file at `path` is readable by group or others (see
/// [`exposed_warning`]), or cannot be inspected; `None` when it is private. Only metadata is
/// read, never the key.
pub(crate) fn key_file_warning(path: &Path) -> Option<String> {
    match std::fs::metadata(path) {
        Ok(_) => exposed_warning("api key file", path, "chmod 600 it"),
        Err(err) => Some(format!(
            "api key file {} cannot be read: {err}",
            path.display()
        )),
    }
}

/// The group of the system user the packages create (`heartbeat-agent`): a file of that group
/// is readable by the agent, not by other users.
pub(crate) const AGENT_GROUP: &str = "heartbeat-agent";

/// A warning when the `what` at `path` ("api key file", "config file", ...) can be read by
/// others, or by a group that is neither this process's own nor [`AGENT_GROUP`]; `fix` says
/// what to do. `None` when it is private, or cannot be inspected (reading it reports that).
pub(crate) fn exposed_warning(what: &str, path: &Path, fix: &str) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    let mut trusted = vec![nix::unistd::getegid().as_raw()];
    if let Ok(Some(group)) = nix::unistd::Group::from_name(AGENT_GROUP) {
        trusted.push(group.gid.as_raw());
    }
    exposed(meta.mode(), meta.gid(), &trusted).then(|| {
        format!(
            "{what} {} is readable by group/others; {fix}",
            path.display()
        )
    })
}

/// Whether a file of `mode` and group `gid` is readable by others, or by its group when that
/// is not one of `trusted`.
fn exposed(mode: u32, gid: u32, trusted: &[u32]) -> bool {
    mode & 0o004 != 0 || (mode & 0o040 != 0 && !trusted.contains(&gid))
}

/// The one-line secret in the file at `path` (see [`read_secret_file`]), whitespace trimmed.
/// The error says why it cannot be used, never what the file holds.
pub(crate) fn read_secret_line(path: &Path) -> Result<String, String> {
    let text = read_secret_file(path).map_err(|err| match err.kind() {
        io::ErrorKind::InvalidData => err.to_string(),
        _ => format!("cannot read it: {err}"),
    })?;
    let secret = text.trim();
    if secret.is_empty() {
        return Err("it is empty; write the secret into it (one line)".to_owned());
    }
    Ok(secret.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    fn key_file(dir: &Path, content: &str, mode: u32) -> PathBuf {
        let path = dir.join("key");
        fs::write(&path, content).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn a_fifo_or_an_oversized_key_file_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("key-fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        // Nothing writes to the FIFO: a blocking open would never return. Bounded by a thread.
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(read_api_key(&ApiKeySource::File(path)).map(|_| ()));
        });
        let err = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("reading a FIFO key file returned")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "cannot read the api key file {}: it is a FIFO, not a regular file; check \
                 `api_key_file` in [api]",
                fifo.display()
            )
        );
        assert_eq!(
            key_file_error(&fifo).as_deref(),
            Some(&*format!(
                "api key file {}: it is a FIFO, not a regular file",
                fifo.display()
            ))
        );
        let big = key_file(dir.path(), &"k".repeat(SECRET_FILE_MAX as usize + 1), 0o600);
        let err = read_api_key(&ApiKeySource::File(big.clone())).unwrap_err();
        assert!(
            err.to_string()
                .contains("it is 16385 bytes, more than the 16384 a key or token file may hold"),
            "{err}"
        );
        assert!(key_file_error(&big)
            .unwrap()
            .contains("16385 bytes, more than the 16384"));
        // At the limit: read.
        let full = key_file(dir.path(), &"k".repeat(SECRET_FILE_MAX as usize), 0o600);
        assert!(read_api_key(&ApiKeySource::File(full)).unwrap().is_some());
    }

    #[test]
    fn file_key_is_trimmed_and_hidden() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_file(dir.path(), "  sk_test_secret_1\n", 0o600);
        let key = read_api_key(&ApiKeySource::File(path.clone()))
            .unwrap()
            .unwrap();
        assert_eq!(key.expose(), "sk_test_secret_1");
        assert!(!format!("{key:?} {key}").contains("sk_test"));
        assert_eq!(key_file_warning(&path), None);
    }

    #[test]
    fn readable_key_file_warns_without_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_file(dir.path(), "sk_test_secret_2", 0o644);
        let warning = key_file_warning(&path).unwrap();
        assert!(
            warning.ends_with("is readable by group/others; chmod 600 it"),
            "{warning}"
        );
        assert!(!warning.contains("sk_test"));
    }

    #[test]
    fn a_group_is_trusted_only_when_it_is_the_agents() {
        assert!(exposed(0o644, 5, &[5]), "others can read");
        assert!(exposed(0o604, 5, &[5]), "others can read");
        assert!(exposed(0o640, 7, &[5, 6]), "a group the agent is not");
        assert!(!exposed(0o640, 6, &[5, 6]), "the agent's group");
        assert!(!exposed(0o600, 7, &[5]));
        assert!(!exposed(0o400, 7, &[5]));
    }

    #[test]
    fn secret_files_are_read_only_when_small_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_file(dir.path(), "  https://ping.example/t0k\n", 0o600);
        assert_eq!(
            read_secret_line(&path).as_deref(),
            Ok("https://ping.example/t0k")
        );
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert_eq!(
            read_secret_line(&link).as_deref(),
            Ok("https://ping.example/t0k")
        );
        fs::write(&path, "x".repeat(SECRET_FILE_MAX as usize + 1)).unwrap();
        let err = read_secret_line(&path).unwrap_err();
        assert!(
            err.contains("more than the 16384 a key or token file may hold"),
            "{err}"
        );
        fs::write(&path, "\n").unwrap();
        assert!(read_secret_line(&path).unwrap_err().contains("is empty"));
        assert!(read_secret_line(dir.path())
            .unwrap_err()
            .starts_with("it is a directory, not a regular file"));
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        // In a thread, so a reader that blocks on the FIFO fails the test instead of hanging it.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(read_secret_line(&fifo)));
        let read = rx.recv_timeout(std::time::Duration::from_secs(5));
        let err = read.expect("the FIFO was not opened blocking").unwrap_err();
        assert!(err.starts_with("it is a FIFO, not a regular file"), "{err}");
    }

    #[test]
    fn empty_and_missing_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_file(dir.path(), " \n", 0o600);
        let err = read_api_key(&ApiKeySource::File(path)).unwrap_err();
        assert!(err.to_string().contains("is empty"), "{err}");
        let missing = dir.path().join("nope");
        let err = read_api_key(&ApiKeySource::File(missing)).unwrap_err();
        assert!(
            err.to_string().starts_with("cannot read the api key file"),
            "{err}"
        );
    }

    #[test]
    fn systemd_credential_comes_before_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let fallback = || Some(Secret::new("from-env"));
        let none = default_key(Some(dir.path()), fallback).unwrap().unwrap();
        assert_eq!(none.expose(), "from-env");
        key_file(dir.path(), "from-credential\n", 0o400);
        fs::rename(dir.path().join("key"), dir.path().join(CREDENTIAL_NAME)).unwrap();
        let key = default_key(Some(dir.path()), fallback).unwrap().unwrap();
        assert_eq!(key.expose(), "from-credential");
        assert_eq!(default_key(None, || None).unwrap(), None);
    }

    #[test]
    fn unset_env_names_the_variable() {
        let var = "HEARTBEAT_AGENT_TEST_UNSET_KEY_VAR";
        let err = read_api_key(&ApiKeySource::Env(var.to_owned())).unwrap_err();
        assert!(err.to_string().contains(&format!("${var}")), "{err}");
    }
}
