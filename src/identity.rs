//! Who this agent is, unique by construction: what decides which agent of a cluster runs a
//! fire, and which agent owns a check it created. [`crate::host::name`] stays the readable
//! name (`[cluster] node` by default, `Origin`, the logs); this module is what two hosts or two
//! configs never share, even when their host names are equal (cloned images, containers on the
//! host network, two configs on one server).
//!
//! Both values are the first 16 hex digits of a SHA-256 over a machine's secret and the
//! config file's canonical path (two configs on one machine differ by their path):
//!
//! - The **identity** ([`Identity::of`]) uses the platform's machine id: `/etc/machine-id`,
//!   systemd's convention (128 random bits made at install, and made anew when an image is
//!   cloned as systemd documents). Where there is none (most containers), a generated id kept
//!   in the state directory (`<state_dir>/machine-seed`, written atomically by
//!   [`crate::persist::file::kept_id`]) takes its place, so the identity survives restarts.
//! - The **scope id** ([`scope_id`]) names the checks a config creates
//!   ([`crate::config::tags::scope_tag`]); it must survive a lost state directory, so it uses
//!   the machine id and, where there is none, the host name instead of the generated id. With a
//!   machine id the two are equal; without one, two containers with the same host name and
//!   config path share a scope, and the owner tag of the check (the identity) tells them apart.
//!
//! [`MACHINE_ID_ENV`] names another machine-id file: for containers that mount the host's one
//! elsewhere, and for tests that run two "machines" on one box. An empty, unreadable or
//! all-zero file counts as no machine id.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The environment variable naming the machine-id file to read instead of
/// [`MACHINE_ID_FILE`] (containers that mount the host's file elsewhere; tests that simulate
/// two machines on one box). Set to a missing file, it makes the agent use its generated id.
pub const MACHINE_ID_ENV: &str = "HEARTBEAT_AGENT_MACHINE_ID_FILE";

/// The platform's machine id (systemd's `machine-id(5)`).
pub const MACHINE_ID_FILE: &str = "/etc/machine-id";

/// The file under the state directory holding the generated id used where the machine has no
/// machine id.
pub const MACHINE_SEED_FILE: &str = "machine-seed";

/// How many hex digits an identity or scope id has (64 bits).
const DIGITS: usize = 16;

/// This agent's identity: 16 lowercase hex digits (see the module header).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity(String);

impl Identity {
    /// The identity of the agent running the config at `config_path` with `state_dir`: from
    /// the machine id, else from the generated id kept in `state_dir` (made when missing: the
    /// directory is created, 0700). An error only when there is no machine id and the state
    /// directory cannot keep one.
    pub fn of(state_dir: &Path, config_path: &Path) -> io::Result<Identity> {
        let secret = match machine_id() {
            Some(id) => id,
            None => {
                crate::persist::file::private_dir(state_dir)?;
                crate::persist::file::kept_id(&state_dir.join(MACHINE_SEED_FILE))?
            }
        };
        Ok(Identity(digest(&secret, config_path)))
    }

    /// An identity as written in an etcd value or a tag; `None` unless it is 16 lowercase hex
    /// digits.
    pub fn parse(text: &str) -> Option<Identity> {
        let hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
        (text.len() == DIGITS && text.chars().all(hex)).then(|| Identity(text.to_owned()))
    }

    /// The 16 hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The scope id of the config at `config_path` on this machine (see the module header): from
/// the machine id, else from the host name.
pub fn scope_id(config_path: &Path) -> String {
    let secret = machine_id().unwrap_or_else(|| format!("host:{}", crate::host::name()));
    digest(&secret, config_path)
}

/// The machine id: the first line of [`MACHINE_ID_FILE`] (or of the file [`MACHINE_ID_ENV`]
/// names), when it holds one.
pub fn machine_id() -> Option<String> {
    let path = std::env::var_os(MACHINE_ID_ENV)
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from(MACHINE_ID_FILE), PathBuf::from);
    let bytes = crate::persist::file::read_named(&path, 4096, "machine-id file").ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let line = text.lines().next().unwrap_or_default().trim();
    // systemd writes "uninitialized" during first boot, and an all-zero id is no id.
    let meaningful = !line.is_empty()
        && line != "uninitialized"
        && line.chars().any(|c| c.is_ascii_alphanumeric() && c != '0');
    meaningful.then(|| line.to_owned())
}

/// A config file's path in the form that names it: canonical (links and `..` resolved), else
/// absolute when the file cannot be resolved (it was removed after the daemon read it). Also the
/// form in which `status` compares a daemon's config with its own (`status::owner`).
pub fn canonical_path(path: &Path) -> PathBuf {
    std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_owned())
}

/// The first [`DIGITS`] hex digits of SHA-256 over `secret` and the canonical `config_path`.
fn digest(secret: &str, config_path: &Path) -> String {
    let path = canonical_path(config_path);
    let mut hash = Sha256::new();
    hash.update(b"heartbeat-agent identity\0");
    hash.update(secret.as_bytes());
    hash.update(b"\0");
    hash.update(path.as_os_str().as_encoded_bytes());
    let hex: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    hex[..DIGITS].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_tells_machines_and_config_paths_apart_and_is_stable() {
        let a = digest("machine-a", Path::new("/etc/a.toml"));
        assert_eq!(a.len(), DIGITS);
        assert!(Identity::parse(&a).is_some(), "{a}");
        assert_eq!(a, digest("machine-a", Path::new("/etc/a.toml")));
        assert_ne!(a, digest("machine-b", Path::new("/etc/a.toml")));
        assert_ne!(a, digest("machine-a", Path::new("/etc/b.toml")));
    }

    #[test]
    fn only_sixteen_lowercase_hex_digits_are_an_identity() {
        assert!(Identity::parse("0123456789abcdef").is_some());
        for bad in [
            "",
            "0123456789ABCDEF",
            "0123456789abcde",
            "0123456789abcdefa",
            "node-a",
        ] {
            assert!(Identity::parse(bad).is_none(), "{bad:?}");
        }
    }
}
