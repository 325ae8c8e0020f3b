//! Whose endpoint this is: every answer of the endpoint carries the header
//! `Heartbeat-Agent-Config` with the canonical path of the config file the daemon runs (also
//! `config.canonical_path` in `/status`). `status`, `health`, `trigger`, `pause` and `resume`
//! find the endpoint through a config's `[status] listen`; an answer from a daemon that runs
//! another config (another daemon took the port, or this one could not bind it) or that does
//! not say (not this agent) is refused with a message naming what answered, instead of being
//! shown as this config's daemon. With `--url` the caller chose the endpoint itself and no
//! config is compared.

use std::path::{Path, PathBuf};

/// The header naming the daemon's config file.
pub(crate) use crate::response_head::AGENT_CONFIG as CONFIG_HEADER;

/// The form in which a config path is compared: canonical (links and `..` resolved), else
/// absolute when the file cannot be resolved (it was removed after the daemon read it).
pub(crate) fn identity(path: &Path) -> PathBuf {
    std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_owned())
}

/// The config whose daemon a command expects at the endpoint it found through that config's
/// `[status] listen`; `None` when the endpoint was given with `--url`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Expected(pub Option<PathBuf>);

impl Expected {
    /// Expects the daemon of the config at `path`.
    pub(crate) fn config(path: &Path) -> Expected {
        Expected(Some(identity(path)))
    }

    /// Refuses an answer from `endpoint` (as shown to the user) whose daemon runs another
    /// config than the expected one, or does not say which: the error says which answered
    /// and what to do.
    pub(crate) fn check(&self, endpoint: &str, answered: Option<&str>) -> Result<(), String> {
        let Some(expected) = &self.0 else {
            return Ok(());
        };
        let expected_shown = expected.display();
        match answered {
            Some(path) if Path::new(path) == expected => Ok(()),
            Some(path) => Err(format!(
                "the status endpoint at {endpoint} belongs to a daemon running another config: \
                 {}, not {expected_shown}; this config's daemon is not reachable there (is it \
                 running? did it fail to bind [status] listen, see its log?); give this config a \
                 free [status] listen, or pass --url to ask that daemon",
                crate::logging::printable(path)
            )),
            None => Err(format!(
                "the status endpoint at {endpoint} did not say which config it runs (not a \
                 heartbeat-agent daemon, or one older than this command): it is not known to be \
                 the daemon of {expected_shown}; restart that daemon, or pass --url to ask what \
                 answers there anyway"
            )),
        }
    }
}

impl Expected {
    /// Before a request that changes something (`trigger`, `pause`, `resume`): asks
    /// `GET /healthz` of `endpoint` and refuses it as [`Expected::check`] does. An endpoint
    /// that cannot be reached passes: the request itself then fails the usual way.
    pub(crate) fn probe(&self, endpoint: &super::client::Endpoint) -> Result<(), String> {
        if self.0.is_none() {
            return Ok(());
        }
        let timeout = std::time::Duration::from_secs(5);
        match endpoint.request("GET", "/healthz", None, timeout) {
            Ok(answer) => self.check(&endpoint.shown(), answer.config.as_deref()),
            Err(_) => Ok(()),
        }
    }
}

/// What `config check` says when the address or socket of `listen` is taken now: by the
/// daemon of this config (`expected`: nothing to say), by a daemon of another config, or by
/// another program. `configured`: whether `listen` was written (the daemon then refuses to
/// start; with the default it runs without its endpoint).
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
    let by = match answered.as_ref().map(|a| a.config.as_deref()) {
        Some(config) if expected.check("", config).is_ok() => return None,
        Some(Some(other)) => format!(
            "by a heartbeat-agent daemon running {}",
            crate::logging::printable(other)
        ),
        _ => "by another program".to_owned(),
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

    #[test]
    fn only_the_expected_config_passes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("c.toml");
        std::fs::write(&config, "").expect("write");
        let linked = dir.path().join("link.toml");
        std::os::unix::fs::symlink(&config, &linked).expect("symlink");
        let expected = Expected::config(&linked);
        let real = identity(&config);
        let real = real.to_str().expect("utf-8");
        assert_eq!(expected.check("E", Some(real)), Ok(()));
        let other = expected
            .check("E", Some("/etc/other.toml"))
            .expect_err("refused");
        assert!(
            other.contains("/etc/other.toml") && other.contains(real),
            "{other}"
        );
        let silent = expected.check("E", None).expect_err("refused");
        assert!(silent.contains("did not say"), "{silent}");
        assert_eq!(Expected::default().check("E", None), Ok(()));
    }
}
