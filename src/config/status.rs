//! `[status]`: where the daemon's local status endpoint listens, the bearer token that guards
//! it (required for triggers, and for any bind that is not loopback), and the optional
//! background refresh of the remote view. Raw schema and validation both live here, so the
//! section is one file.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use toml::Spanned;

use super::parse::Section;
use super::raw::RawDuration;
use super::values::{At, Checker};
use crate::redact::Secret;

/// The shortest token accepted on a bind that is not loopback: a guess of 16 random
/// characters is out of reach even at the endpoint's full speed (the failed attempts are
/// slowed down per client as well).
pub(crate) const MIN_NETWORK_TOKEN: usize = 16;

/// The default listen address: loopback only, port 9465.
pub(crate) const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9465);

/// `[status]` as written.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStatus {
    /// An address with a port, or a unix socket path.
    pub listen: Option<Spanned<String>>,
    /// The bearer token itself.
    pub token: Option<Spanned<String>>,
    /// A file holding the bearer token.
    pub token_file: Option<Spanned<String>>,
    /// Background refresh interval of the remote view.
    pub remote_refresh: Option<Spanned<RawDuration>>,
}

/// Where the status endpoint listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A TCP address (loopback by default).
    Tcp(SocketAddr),
    /// A unix socket path (access is governed by the file's permissions).
    Unix(PathBuf),
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Tcp(addr) => write!(f, "{addr}"),
            Listen::Unix(path) => write!(f, "{}", path.display()),
        }
    }
}

/// `[status]`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusSettings {
    /// `listen`: the endpoint's address or socket path (default 127.0.0.1:9465).
    pub listen: Listen,
    /// Whether `listen` was written in the config: a failed bind of the implicit default is
    /// only a warning (the daemon runs without the endpoint), of an explicit address fatal.
    pub listen_configured: bool,
    /// `token` or `token_file`: the bearer token `POST /jobs/{name}/run` always needs, and
    /// every request needs when the bind is not loopback. Read at load time.
    pub token: Option<Secret>,
    /// `remote_refresh`: when set, the remote view is refreshed in the background at this
    /// interval; off by default (a fleet polling `check-statuses` would exhaust the API quota).
    pub remote_refresh: Option<Duration>,
}

impl Default for StatusSettings {
    fn default() -> Self {
        StatusSettings {
            listen: Listen::Tcp(DEFAULT_LISTEN),
            listen_configured: false,
            token: None,
            remote_refresh: None,
        }
    }
}

impl StatusSettings {
    /// Whether every request must carry the token: a TCP bind that is not loopback.
    pub(crate) fn token_required_for_all(&self) -> bool {
        matches!(&self.listen, Listen::Tcp(addr) if !addr.ip().is_loopback())
    }
}

/// Validates `[status]`.
pub(crate) fn validate(check: &mut Checker, section: &Section<RawStatus>) -> StatusSettings {
    let raw = &section.raw;
    let at = |key| At {
        context: "[status]",
        key,
    };
    let listen = match check.non_empty(at("listen"), &raw.listen) {
        None => Listen::Tcp(DEFAULT_LISTEN),
        Some(text) => match parse_listen(&text) {
            Some(Listen::Unix(path)) => Listen::Unix(check.resolve(&path)),
            Some(listen) => listen,
            None => {
                let span = raw.listen.as_ref().map(Spanned::span);
                check.error(
                    span,
                    at("listen"),
                    format!("\"{text}\" is neither an address with a port nor a socket path"),
                    Some("for example: listen = \"127.0.0.1:9465\" (or \"/run/heartbeat-agent/status.sock\")".to_owned()),
                );
                Listen::Tcp(DEFAULT_LISTEN)
            }
        },
    };
    let token = token(check, raw);
    let remote_refresh = match (
        check.duration(at("remote_refresh"), &raw.remote_refresh),
        &raw.remote_refresh,
    ) {
        (Some(d), Some(value)) if d < Duration::from_secs(60) => {
            check.error(
                Some(value.span()),
                at("remote_refresh"),
                "must be at least 60s: the remote view is cached for 60s",
                Some("leave it out (off), or for example: remote_refresh = \"5m\"".to_owned()),
            );
            None
        }
        (d, _) => d,
    };
    let settings = StatusSettings {
        listen,
        listen_configured: raw.listen.is_some(),
        token,
        remote_refresh,
    };
    if settings.token_required_for_all() && settings.token.is_none() {
        let span = raw.listen.as_ref().map(Spanned::span);
        check.error(
            span,
            at("listen"),
            format!(
                "{} is not a loopback address, and no token is set: anyone who can reach it \
                 could read job output and trigger runs",
                settings.listen
            ),
            Some("set token_file = \"/etc/heartbeat-agent/status-token\" (or token), or listen on 127.0.0.1".to_owned()),
        );
    }
    if let (true, Some(token)) = (settings.token_required_for_all(), &settings.token) {
        let length = token.expose().chars().count();
        if length < MIN_NETWORK_TOKEN {
            let noun = if length == 1 {
                "character"
            } else {
                "characters"
            };
            let (key, span) = match (&raw.token, &raw.token_file) {
                (Some(token), _) => ("token", Some(token.span())),
                (None, file) => ("token_file", file.as_ref().map(Spanned::span)),
            };
            check.error(
                span,
                at(key),
                format!(
                    "the token is {length} {noun}, too short for {}, which is not a \
                     loopback address: anyone who can reach it could guess it",
                    settings.listen
                ),
                Some(format!(
                    "use at least {MIN_NETWORK_TOKEN} characters; generate one with: head -c 32 \
                     /dev/urandom | base64 (or listen on 127.0.0.1)"
                )),
            );
        }
    }
    settings
}

/// `token` or `token_file` (not both); a file is read now, so a missing one fails the load.
fn token(check: &mut Checker, raw: &RawStatus) -> Option<Secret> {
    let at = |key| At {
        context: "[status]",
        key,
    };
    let (value, key, span) = match (&raw.token, &raw.token_file) {
        (Some(_), Some(file)) => {
            check.error(
                Some(file.span()),
                at("token_file"),
                "set either `token` or `token_file`, not both",
                Some("keep token_file: a secret is better kept out of the config".to_owned()),
            );
            return None;
        }
        (Some(token), None) => (token.get_ref().trim().to_owned(), "token", token.span()),
        (None, Some(file)) => {
            let path = check.path(at("token_file"), &raw.token_file)?;
            let fix = format!(
                "chmod 600 it (or 640 with group {})",
                super::secrets::AGENT_GROUP
            );
            if let Some(warning) = super::secrets::exposed_warning("token file", &path, &fix) {
                check.warn(Some(file.span()), at("token_file"), warning, None);
            }
            match super::secrets::read_secret_file(&path) {
                Ok(text) => (text.trim().to_owned(), "token_file", file.span()),
                Err(err) => {
                    check.error(
                        Some(file.span()),
                        at("token_file"),
                        format!("cannot read the token file {}: {err}", path.display()),
                        Some(
                            "write the token into it (one line), a regular file readable by the \
                             agent"
                                .to_owned(),
                        ),
                    );
                    return None;
                }
            }
        }
        (None, None) => return None,
    };
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_graphic()) {
        check.error(
            Some(span),
            at(key),
            "the token must be one word of printable ASCII (no spaces), and not empty",
            Some("generate one with: head -c 32 /dev/urandom | base64".to_owned()),
        );
        return None;
    }
    Some(Secret::new(value))
}

/// `127.0.0.1:9465`, `[::1]:9465`, `localhost:9465`, or a socket path (anything with a `/`,
/// or `unix:PATH`).
pub(crate) fn parse_listen(text: &str) -> Option<Listen> {
    let text = text.trim();
    if let Some(path) = text.strip_prefix("unix:") {
        return (!path.is_empty()).then(|| Listen::Unix(PathBuf::from(path)));
    }
    if text.contains('/') {
        return Some(Listen::Unix(PathBuf::from(text)));
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Some(Listen::Tcp(addr));
    }
    let port = text.strip_prefix("localhost:")?.parse::<u16>().ok()?;
    Some(Listen::Tcp(SocketAddr::new(
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        port,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn load(status: &str) -> Result<StatusSettings, String> {
        let text = format!("[status]\n{status}\n");
        Config::from_text(std::path::Path::new("/etc/hb/config.toml"), &text)
            .map(|l| l.config.status)
            .map_err(|e| e.problems.join("\n"))
    }

    #[test]
    fn defaults_and_valid_sections() {
        let default = load("").expect("valid");
        assert_eq!(default, StatusSettings::default());
        let unix = load("listen = \"run/status.sock\"\nremote_refresh = \"5m\"").expect("valid");
        assert_eq!(
            unix.listen,
            Listen::Unix(PathBuf::from("/etc/hb/run/status.sock"))
        );
        assert!(unix.listen_configured && !unix.token_required_for_all());
        assert_eq!(unix.remote_refresh, Some(Duration::from_secs(300)));
        let open =
            load("listen = \"0.0.0.0:9465\"\ntoken = \"abc123abc123abc123\"").expect("valid");
        assert!(open.token_required_for_all());
        assert_eq!(
            open.token.as_ref().map(Secret::expose),
            Some("abc123abc123abc123")
        );
    }

    #[test]
    fn bad_values_point_at_the_line() {
        let cases = [
            ("listen = \"9465\"", "config.toml:2:10: [status]: key `listen`: \"9465\" is neither an address with a port nor a socket path"),
            ("listen = \"[::]:9465\"", "config.toml:2:10: [status]: key `listen`: [::]:9465 is not a loopback address, and no token is set"),
            ("token = \"a\"\ntoken_file = \"t\"", "config.toml:3:14: [status]: key `token_file`: set either `token` or `token_file`, not both"),
            ("token_file = \"/nonexistent/token\"", "config.toml:2:14: [status]: key `token_file`: cannot read the token file /nonexistent/token"),
            ("token = \"two words\"", "config.toml:2:9: [status]: key `token`: the token must be one word"),
            ("listen = \"0.0.0.0:9465\"\ntoken = \"7\"", "config.toml:3:9: [status]: key `token`: the token is 1 character, too short for 0.0.0.0:9465"),
            ("remote_refresh = \"10s\"", "config.toml:2:18: [status]: key `remote_refresh`: must be at least 60s"),
            ("port = 1", "config.toml:2:1: [status]: key `port`: unknown key"),
        ];
        for (text, expected) in cases {
            let err = load(text).expect_err(text);
            assert!(err.contains(expected), "{text}: {err}");
        }
    }

    #[test]
    fn listen_values() {
        assert_eq!(
            parse_listen("127.0.0.1:9465"),
            Some(Listen::Tcp(DEFAULT_LISTEN))
        );
        assert_eq!(
            parse_listen("localhost:9465"),
            Some(Listen::Tcp(DEFAULT_LISTEN))
        );
        assert_eq!(
            parse_listen("/run/hb.sock"),
            Some(Listen::Unix(PathBuf::from("/run/hb.sock")))
        );
        assert_eq!(
            parse_listen("unix:hb.sock"),
            Some(Listen::Unix(PathBuf::from("hb.sock")))
        );
        assert_eq!(parse_listen("9465"), None);
        assert_eq!(parse_listen("example.com:80"), None);
    }
}
