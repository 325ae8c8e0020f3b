//! Reading the API key: from `api_key_file`, `api_key_env`, the systemd credential `api-key`
//! under `$CREDENTIALS_DIRECTORY`, or `$HEARTBEAT_AGENT_API_KEY`. The key is only ever held in
//! a [`Secret`]; no message here contains it.
//!
//! Key and token files are read by [`read_secret_file`]: opened without blocking (a FIFO with
//! no writer would block a plain open forever, and the daemon with it), checked with `fstat`
//! on the open file (so nothing can be swapped in between the check and the read), refused
//! unless a regular file, and read up to [`SECRET_FILE_MAX`] bytes. A symbolic link is
//! followed: systemd credentials and Kubernetes secrets are links to the real file.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

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

/// Reads a key or token file (see the module header): its text, or an error saying why it is
/// not one (`InvalidData`: not a regular file, or larger than [`SECRET_FILE_MAX`]).
pub(crate) fn read_secret_file(path: &Path) -> io::Result<String> {
    let file: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if let Some(problem) = not_a_secret_file(&file.metadata()?) {
        return Err(io::Error::new(io::ErrorKind::InvalidData, problem));
    }
    let mut bytes = Vec::new();
    file.take(SECRET_FILE_MAX + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > SECRET_FILE_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "it is larger than {SECRET_FILE_MAX} bytes, the most a key or token file may hold"
            ),
        ));
    }
    String::from_utf8(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "it is not UTF-8 text"))
}

/// Why a file with `meta` cannot hold a key or token: not a regular file, or too large.
fn not_a_secret_file(meta: &Metadata) -> Option<String> {
    let kind = meta.file_type();
    let what = if kind.is_file() {
        return (meta.len() > SECRET_FILE_MAX).then(|| {
            format!(
                "it is {} bytes, more than the {SECRET_FILE_MAX} a key or token file may hold",
                meta.len()
            )
        });
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a file"
    };
    Some(format!("it is {what}, not a regular file"))
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

/// A warning when the key file at `path` is readable by group or others, or cannot be
/// inspected; `None` when it is private. Only metadata is read, never the key.
pub(crate) fn key_file_warning(path: &Path) -> Option<String> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.permissions().mode() & 0o044 != 0 => Some(format!(
            "api key file {} is readable by group/others; chmod 600 it",
            path.display()
        )),
        Ok(_) => None,
        Err(err) => Some(format!(
            "api key file {} cannot be read: {err}",
            path.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

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
