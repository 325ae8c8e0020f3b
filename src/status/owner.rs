//! Whose endpoint this is. Every answer of the endpoint carries two headers:
//! `Heartbeat-Agent-Config`, the canonical path of the config file the daemon runs (also
//! `config.canonical_path` in `/status`), and `Heartbeat-Agent-Daemon`, the daemon's id (also
//! `daemon_id` in `/status`): 128 random bits in hex, made by the first daemon that starts on a
//! state directory and kept there in `daemon-id` ([`DaemonId`]), so a restart keeps it and a
//! daemon on another state directory (another host or container sharing the port, a config
//! whose `state_dir` was edited since its daemon started) has another. The id tells daemons
//! apart; it is not a secret and proves nothing against a local user who wants to deceive.
//!
//! `status`, `health`, `trigger`, `pause`, `resume` and `history` find the endpoint through a
//! config's `[status] listen` ([`Expected`]); an answer from a daemon that runs another config
//! (another daemon took the port, or this one could not bind it), that does not say (not this
//! agent), or that runs this config file with another id than the one in this config's state
//! directory, is refused with a message naming what answered and what to do, instead of being
//! shown as this config's daemon. The id is compared only when the command can tell which id
//! to expect: it reads the state directory (another user's is unreadable: the path alone is
//! compared then), and the directory holds an id or is named by the config or `--state-dir` (a
//! user's own default directory, with no id in it, says nothing of a daemon run by another
//! user). A daemon older than the id sends none: the path alone is compared. With `--url` the
//! caller chose the endpoint itself and nothing is compared. `config check` says the same of
//! what holds its `listen` ([`listen_in_use`]).

use std::io;
use std::path::{Path, PathBuf};

use super::client::StatusAnswer;
use crate::config::Config;
use crate::logging::printable;

/// The header naming the daemon's config file.
pub(crate) use crate::response_head::AGENT_CONFIG as CONFIG_HEADER;
/// The header carrying the daemon's id.
pub(crate) use crate::response_head::AGENT_DAEMON as DAEMON_HEADER;

/// The file under the state directory that holds the daemon's id.
pub(crate) const DAEMON_ID_FILE: &str = "daemon-id";

/// The form in which a config path is compared (see [`crate::identity::canonical_path`]).
pub(crate) use crate::identity::canonical_path as identity;

/// A daemon's id: 128 random bits as 32 lowercase hex digits, in `<state_dir>/daemon-id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DaemonId(String);

impl DaemonId {
    /// The id of the daemon on `state_dir`: the one kept there, else a new one written there
    /// (created with a hard link, so two daemons starting at once on one directory end up
    /// with the same id; a file that holds no id is replaced). The directory is created (0700)
    /// when missing.
    pub(crate) fn load_or_create(state_dir: &Path) -> io::Result<DaemonId> {
        crate::persist::file::private_dir(state_dir)?;
        crate::persist::file::kept_id(&state_dir.join(DAEMON_ID_FILE)).map(DaemonId)
    }

    /// The id kept in `state_dir`: `Ok(None)` when the file holds something else, an error
    /// when it cannot be read (`NotFound` when no daemon made one).
    pub(crate) fn read(state_dir: &Path) -> io::Result<Option<DaemonId>> {
        crate::persist::file::read_id(&state_dir.join(DAEMON_ID_FILE)).map(|id| id.map(DaemonId))
    }

    /// The 32 hex digits.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// An id as messages show it: its first 8 characters (enough to tell daemons apart), escaped.
fn short(id: &str) -> String {
    let head: String = id.chars().take(8).collect();
    format!("{}…", printable(&head))
}

/// The config (and daemon) a command expects at the endpoint it found through that config's
/// `[status] listen`; none when the endpoint was given with `--url`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Expected(Option<Own>);

/// This config's daemon, as the command can know it.
#[derive(Debug, Clone)]
struct Own {
    /// The config file, in the form [`identity`] gives.
    config: PathBuf,
    /// The config's state directory (as `--state-dir`, the config and the defaults give it).
    state_dir: PathBuf,
    /// The id of the daemon on that directory.
    id: OwnId,
}

/// What a command knows of the id its daemon must answer with.
#[derive(Debug, Clone, PartialEq, Eq)]
enum OwnId {
    /// The id kept in the state directory.
    Known(DaemonId),
    /// The state directory is named (`state_dir`, `--state-dir`) and holds no id: no daemon
    /// has started on it, so whatever answers is not its daemon.
    Absent,
    /// Cannot tell: the directory cannot be read (another user's), or it is this user's
    /// default and holds no id (the daemon may run as another user, with its own default).
    Unknown,
}

/// Whose an answer is, compared with what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Whose {
    /// This config's daemon (or nothing was expected).
    Ours,
    /// A daemon of the config at this path; its id, if said.
    OtherConfig(String, Option<String>),
    /// A daemon of this very config file, with this id, but not the one of this config's
    /// state directory.
    OtherDaemon(String),
    /// It did not say which config it runs.
    Silent,
}

impl Expected {
    /// Expects the daemon of the config at `path` (loaded as `config`), with the id kept in
    /// its state directory (`state_dir_flag` is `--state-dir`).
    pub(crate) fn daemon_of(
        path: &Path,
        config: &Config,
        state_dir_flag: Option<&Path>,
    ) -> Expected {
        let named = state_dir_flag.is_some() || config.agent.state_dir.is_some();
        Expected::at(path, config.state_dir(state_dir_flag), named)
    }

    /// Expects the daemon of the config at `path` whose state directory is `state_dir`
    /// (`named`: by the config or `--state-dir`, rather than a user's default).
    fn at(path: &Path, state_dir: PathBuf, named: bool) -> Expected {
        let id = match DaemonId::read(&state_dir) {
            Ok(Some(id)) => OwnId::Known(id),
            Err(err) if err.kind() == io::ErrorKind::NotFound && named => OwnId::Absent,
            // Unreadable, damaged (the daemon replaces it at its start), or a default directory.
            _ => OwnId::Unknown,
        };
        Expected(Some(Own {
            config: identity(path),
            state_dir,
            id,
        }))
    }

    fn whose(&self, answer: &StatusAnswer) -> Whose {
        let Some(own) = &self.0 else {
            return Whose::Ours;
        };
        let daemon = answer.daemon.clone();
        match answer.config.as_deref() {
            None => Whose::Silent,
            Some(path) if Path::new(path) != own.config => {
                Whose::OtherConfig(path.to_owned(), daemon)
            }
            Some(_) => match (daemon, &own.id) {
                // A daemon older than the id, or a command that cannot tell: the path decides.
                (None, _) | (Some(_), OwnId::Unknown) => Whose::Ours,
                (Some(id), OwnId::Known(own)) if id == own.as_str() => Whose::Ours,
                (Some(id), _) => Whose::OtherDaemon(id),
            },
        }
    }

    /// Refuses an answer from `endpoint` (as shown to the user) whose daemon is not the
    /// expected one: the error says which answered and what to do.
    pub(crate) fn check(&self, endpoint: &str, answer: &StatusAnswer) -> Result<(), String> {
        let Some(own) = &self.0 else {
            return Ok(());
        };
        let expected_shown = own.config.display();
        match self.whose(answer) {
            Whose::Ours => Ok(()),
            Whose::OtherConfig(path, id) => Err(format!(
                "the status endpoint at {endpoint} belongs to a daemon running another config: \
                 {}{}, not {expected_shown}; this config's daemon is not reachable there (is it \
                 running? did it fail to bind [status] listen, see its log?); give this config a \
                 free [status] listen, or pass --url {endpoint} to ask that daemon",
                printable(&path),
                id.map(|id| format!(" (daemon id {})", short(&id)))
                    .unwrap_or_default()
            )),
            Whose::OtherDaemon(id) => {
                let here = match &own.id {
                    OwnId::Known(mine) => format!("holds daemon id {}", short(mine.as_str())),
                    _ => "holds no daemon id (no daemon has started with it)".to_owned(),
                };
                Err(format!(
                    "the status endpoint at {endpoint} belongs to another daemon of this config \
                     file {expected_shown}: daemon id {}, while this config's state directory \
                     {} {here}; that daemon was started with another state directory (state_dir \
                     edited since, or --state-dir) or runs on another host or container sharing \
                     this address, and this config's daemon is not reachable there; restart this \
                     config's daemon (give it a free [status] listen if it failed to bind, see \
                     its log), or pass --url {endpoint} to ask that daemon",
                    short(&id),
                    own.state_dir.display()
                ))
            }
            Whose::Silent => Err(format!(
                "the status endpoint at {endpoint} did not say which config it runs (not a \
                 heartbeat-agent daemon, or one older than this command): it is not known to be \
                 the daemon of {expected_shown}; restart that daemon, or pass --url {endpoint} \
                 to ask what answers there anyway"
            )),
        }
    }

    /// Before a request that changes something (`trigger`, `pause`, `resume`): asks
    /// `GET /healthz` of `endpoint` and refuses it as [`Expected::check`] does. An endpoint
    /// that cannot be reached passes: the request itself then fails the usual way.
    pub(crate) fn probe(&self, endpoint: &super::client::Endpoint) -> Result<(), String> {
        if self.0.is_none() {
            return Ok(());
        }
        let timeout = std::time::Duration::from_secs(5);
        match endpoint.request("GET", "/healthz", None, timeout) {
            Ok(answer) => self.check(&endpoint.shown(), &answer),
            Err(_) => Ok(()),
        }
    }
}

/// What `config check` says when the address or socket of `listen` is taken now: by the
/// daemon of this config (`expected`: nothing to say), by a daemon of another config or
/// another daemon of this config file, or by another program. `configured`: whether `listen`
/// was written (the daemon then refuses to start; with the default it runs without its
/// endpoint).
pub(crate) fn listen_in_use(
    listen: &crate::config::Listen,
    configured: bool,
    expected: &Expected,
) -> Option<String> {
    use crate::config::Listen;
    let taken = match listen {
        Listen::Tcp(addr) => matches!(
            std::net::TcpListener::bind(addr),
            Err(err) if err.kind() == std::io::ErrorKind::AddrInUse
        ),
        Listen::Unix(path) => std::os::unix::net::UnixStream::connect(path).is_ok(),
    };
    if !taken {
        return None;
    }
    let endpoint = super::client::Endpoint::from_listen(listen);
    let timeout = std::time::Duration::from_secs(2);
    let answered = endpoint.request("GET", "/healthz", None, timeout).ok();
    let by = match answered.as_ref().map(|a| expected.whose(a)) {
        Some(Whose::Ours) => return None,
        Some(Whose::OtherConfig(other, _)) => {
            format!("by a heartbeat-agent daemon running {}", printable(&other))
        }
        Some(Whose::OtherDaemon(id)) => format!(
            "by another heartbeat-agent daemon of this config file (daemon id {}, not the one \
             of this config's state directory)",
            short(&id)
        ),
        Some(Whose::Silent) | None => "by another program".to_owned(),
    };
    let then = if configured {
        "the daemon of this config will not start"
    } else {
        "the daemon of this config will run without its status endpoint (`status`, `health` and \
         `trigger` cannot reach it)"
    };
    Some(format!(
        "[status] listen {listen} is already in use {by}: {then}; stop that one, or set \
         [status] listen to a free address"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(config: Option<&str>, daemon: Option<&str>) -> StatusAnswer {
        StatusAnswer {
            status: 200,
            body: String::new(),
            config: config.map(str::to_owned),
            daemon: daemon.map(str::to_owned),
        }
    }

    #[test]
    fn only_the_expected_config_passes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("c.toml");
        std::fs::write(&config, "").expect("write");
        let linked = dir.path().join("link.toml");
        std::os::unix::fs::symlink(&config, &linked).expect("symlink");
        let expected = Expected::at(&linked, dir.path().join("state"), false);
        let real = identity(&config);
        let real = real.to_str().expect("utf-8");
        assert_eq!(expected.check("E", &answer(Some(real), None)), Ok(()));
        let other = expected
            .check(
                "E",
                &answer(Some("/etc/other.toml"), Some("0123456789abcdef")),
            )
            .expect_err("refused");
        assert!(
            other.contains("/etc/other.toml (daemon id 01234567…)") && other.contains(real),
            "{other}"
        );
        let silent = expected
            .check("E", &answer(None, None))
            .expect_err("refused");
        assert!(silent.contains("did not say"), "{silent}");
        assert_eq!(Expected::default().check("E", &answer(None, None)), Ok(()));
    }

    #[test]
    fn the_id_in_the_state_directory_tells_daemons_of_one_config_apart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("c.toml");
        std::fs::write(&config, "").expect("write");
        let path = identity(&config);
        let path = path.to_str().expect("utf-8");
        let state = dir.path().join("state");

        // No daemon started on a named directory: any daemon is another one.
        let named = Expected::at(&config, state.clone(), true);
        let refused = named
            .check("E", &answer(Some(path), Some("fedcba9876543210")))
            .expect_err("refused");
        assert!(
            refused.contains("another daemon of this config file")
                && refused.contains("daemon id fedcba98…")
                && refused.contains("holds no daemon id")
                && refused.contains("--url E"),
            "{refused}"
        );
        // A user's default directory without an id says nothing; neither does an old daemon.
        let default = Expected::at(&config, state.clone(), false);
        assert_eq!(
            default.check("E", &answer(Some(path), Some("fedcba98"))),
            Ok(())
        );
        assert_eq!(named.check("E", &answer(Some(path), None)), Ok(()));

        // The daemon's id is made once and kept.
        let id = DaemonId::load_or_create(&state).expect("created");
        assert_eq!(DaemonId::load_or_create(&state).expect("kept"), id);
        assert_eq!(id.as_str().len(), 32);
        let known = Expected::at(&config, state.clone(), false);
        assert_eq!(
            known.check("E", &answer(Some(path), Some(id.as_str()))),
            Ok(())
        );
        let other = known
            .check("E", &answer(Some(path), Some("fedcba9876543210")))
            .expect_err("refused");
        assert!(
            other.contains(&format!("holds daemon id {}…", &id.as_str()[..8])),
            "{other}"
        );

        // A damaged file is replaced at the daemon's start.
        std::fs::write(state.join(DAEMON_ID_FILE), "junk").expect("write");
        let new = DaemonId::load_or_create(&state).expect("replaced");
        assert_ne!(new, id);
        assert_eq!(DaemonId::read(&state).expect("read"), Some(new));
    }
}
