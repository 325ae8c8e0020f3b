//! `[cluster]`: several agents share one config through etcd (see `crate::cluster`). The raw
//! schema and its validation live here, so the section is one file. Without the section the
//! agent runs alone, as before.
//!
//! The password is read when the config is loaded (so a missing file fails `config check` and
//! the start, with file:line:col), from `password_file`, `password_env` or, when neither is set,
//! the systemd credential `etcd-password`; it is held only in a [`Secret`].

use std::path::PathBuf;
use std::time::Duration;

use toml::Spanned;

use super::parse::Section;
use super::raw::{example, RawDuration};
use super::values::{At, Checker};
use crate::redact::Secret;

/// The systemd credential read for the etcd password when neither `password_file` nor
/// `password_env` is set (`LoadCredential=etcd-password:...`).
pub(crate) const PASSWORD_CREDENTIAL: &str = "etcd-password";

/// `lease` when unset.
pub(crate) const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// The shortest and longest `lease`.
const LEASE_RANGE: (Duration, Duration) = (Duration::from_secs(2), Duration::from_secs(60));

/// `name` when unset.
pub(crate) const DEFAULT_NAME: &str = "heartbeat-agent";

/// `[cluster]` as written.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCluster {
    /// etcd client URLs.
    pub endpoints: Option<Spanned<Vec<Spanned<String>>>>,
    /// The key prefix.
    pub name: Option<Spanned<String>>,
    /// This agent's name in the cluster.
    pub node: Option<Spanned<String>>,
    /// The lease TTL.
    pub lease: Option<Spanned<RawDuration>>,
    /// The CA that signs the members' certificates.
    pub ca_file: Option<Spanned<String>>,
    /// The client certificate (PEM).
    pub cert_file: Option<Spanned<String>>,
    /// The client certificate's key (PEM).
    pub key_file: Option<Spanned<String>>,
    /// The etcd user.
    pub user: Option<Spanned<String>>,
    /// A file holding the password.
    pub password_file: Option<Spanned<String>>,
    /// An environment variable holding the password.
    pub password_env: Option<Spanned<String>>,
    /// `skip` or `run`.
    pub on_unavailable: Option<Spanned<String>>,
}

/// What a fire does when etcd cannot be asked for its claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnUnavailable {
    /// The fire is skipped (logged, counted); the check alarms, so monitoring stays truthful.
    #[default]
    Skip,
    /// The fire runs anyway: a duplicate is preferred to a gap.
    Run,
}

impl OnUnavailable {
    /// The config value.
    pub fn as_str(self) -> &'static str {
        match self {
            OnUnavailable::Skip => "skip",
            OnUnavailable::Run => "run",
        }
    }
}

/// `[cluster]`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterSettings {
    /// `endpoints`: the etcd members' client URLs, tried in this order.
    pub endpoints: Vec<reqwest::Url>,
    /// `name`: every key of this cluster starts with `<name>/` (default `heartbeat-agent`).
    pub name: String,
    /// `node`: this agent's name in the cluster (default the host name).
    pub node: String,
    /// `lease`: the TTL of this agent's lease (2s to 60s, whole seconds; default 10s).
    pub lease: Duration,
    /// `ca_file`: the CA (PEM) that signs the members' certificates, trusted besides the
    /// agent's other trust sources.
    pub ca_file: Option<PathBuf>,
    /// `cert_file`: a client certificate (PEM) for members that require one.
    pub cert_file: Option<PathBuf>,
    /// `key_file`: the client certificate's private key (PEM).
    pub key_file: Option<PathBuf>,
    /// `user`: the etcd user, when etcd has authentication enabled.
    pub user: Option<String>,
    /// The user's password, read at load time.
    pub password: Option<Secret>,
    /// Where the password came from, in words (`password_file /etc/...`), for `config check`.
    pub password_from: Option<String>,
    /// `password_env`: the variable holding the password; the children of jobs must not see it.
    pub password_env: Option<String>,
    /// `on_unavailable`: what a fire does when etcd cannot be reached.
    pub on_unavailable: OnUnavailable,
}

/// Validates `[cluster]`; `None` when the file has no such section.
pub(crate) fn validate(
    check: &mut Checker,
    section: Option<&Section<RawCluster>>,
) -> Option<ClusterSettings> {
    let section = section?;
    let raw = &section.raw;
    let at = |key| At {
        context: "[cluster]",
        key,
    };
    let endpoints = endpoints(check, section);
    let name = segment(check, at("name"), &raw.name, true).unwrap_or(DEFAULT_NAME.to_owned());
    let node = segment(check, at("node"), &raw.node, false).unwrap_or_else(crate::host::name);
    let lease = lease(check, &raw.lease);
    let on_unavailable = match check.non_empty(at("on_unavailable"), &raw.on_unavailable) {
        None => OnUnavailable::default(),
        Some(text) => match text.as_str() {
            "skip" => OnUnavailable::Skip,
            "run" => OnUnavailable::Run,
            other => {
                let span = raw.on_unavailable.as_ref().map(Spanned::span);
                let hint = example("on_unavailable").map(|e| format!("for example: {e}"));
                check.error(
                    span,
                    at("on_unavailable"),
                    format!("\"{other}\" is neither \"skip\" nor \"run\""),
                    hint,
                );
                OnUnavailable::default()
            }
        },
    };
    let ca_file = pem_file(check, at("ca_file"), &raw.ca_file);
    let cert_file = pem_file(check, at("cert_file"), &raw.cert_file);
    let key_file = pem_file(check, at("key_file"), &raw.key_file);
    let lone = (raw.cert_file.as_ref().map(|v| ("cert_file", v)))
        .or_else(|| raw.key_file.as_ref().map(|v| ("key_file", v)));
    if let (true, Some((key, value))) = (cert_file.is_some() != key_file.is_some(), lone) {
        check.error(
            Some(value.span()),
            at(key),
            "a client certificate needs both `cert_file` and `key_file`",
            Some("set both (PEM files), or neither".to_owned()),
        );
    }
    let user = check.non_empty(at("user"), &raw.user);
    let (password, password_from) = password(check, raw, user.is_some());
    let password_env = (raw.password_env.as_ref()).map(|name| name.get_ref().trim().to_owned());
    Some(ClusterSettings {
        endpoints,
        name,
        node,
        lease,
        ca_file,
        cert_file,
        key_file,
        user,
        password,
        password_from,
        password_env,
        on_unavailable,
    })
}

/// `endpoints`: at least one http(s) URL with a host, no credentials and no path.
fn endpoints(check: &mut Checker, section: &Section<RawCluster>) -> Vec<reqwest::Url> {
    let at = At {
        context: "[cluster]",
        key: "endpoints",
    };
    let hint = example("endpoints").map(|e| format!("for example: {e}"));
    let Some(list) = &section.raw.endpoints else {
        if !section.broken.contains("endpoints") {
            let message = "`endpoints` is required: the etcd members' client URLs";
            check.error(section.span.clone(), at, message, hint);
        }
        return Vec::new();
    };
    if list.get_ref().is_empty() {
        check.error(Some(list.span()), at, "must list at least one URL", hint);
        return Vec::new();
    }
    let mut urls = Vec::new();
    for value in list.get_ref() {
        let text = value.get_ref().trim();
        let problem = match reqwest::Url::parse(text) {
            _ if !text.contains("://") => {
                format!("\"{text}\" lacks its scheme: write \"http://{text}\" (or https://)")
            }
            Err(err) => format!("\"{text}\" is not a URL: {err}"),
            Ok(url) if !matches!(url.scheme(), "http" | "https") => {
                format!(
                    "\"{text}\" has scheme \"{}\"; expected http or https",
                    url.scheme()
                )
            }
            Ok(url) if url.host_str().map_or(true, str::is_empty) => {
                format!("\"{text}\" has no host")
            }
            Ok(url) if !url.username().is_empty() || url.password().is_some() => {
                "an endpoint URL must not hold a user or password (it would be shown in \
                 messages): use `user` and `password_file`"
                    .to_owned()
            }
            Ok(url) if url.path() != "/" || url.query().is_some() => {
                format!("\"{text}\" has a path; etcd's gateway is at the root of the client URL")
            }
            Ok(url) => {
                urls.push(url);
                continue;
            }
        };
        check.error(Some(value.span()), at, problem, hint.clone());
    }
    urls
}

/// `name` or `node`: one word of printable ASCII that can be a key segment (no `/` in a node;
/// a name may hold inner `/` to nest clusters).
fn segment(
    check: &mut Checker,
    at: At<'_>,
    value: &Option<Spanned<String>>,
    slashes: bool,
) -> Option<String> {
    let text = check.non_empty(at, value)?;
    let fits = text
        .bytes()
        .all(|b| b.is_ascii_graphic() && (slashes || b != b'/'))
        && !text.starts_with('/')
        && !text.ends_with('/');
    if fits {
        return Some(text);
    }
    let what = if slashes {
        "printable ASCII without spaces, not starting or ending with `/`"
    } else {
        "printable ASCII without spaces or `/`"
    };
    let hint = example(at.key).map(|e| format!("for example: {e}"));
    let span = value.as_ref().map(Spanned::span);
    check.error(
        span,
        at,
        format!("\"{text}\" is not {what}: it names etcd keys"),
        hint,
    );
    None
}

/// `lease`: whole seconds from 2s to 60s, default 10s.
fn lease(check: &mut Checker, value: &Option<Spanned<RawDuration>>) -> Duration {
    let at = At {
        context: "[cluster]",
        key: "lease",
    };
    let Some(lease) = check.duration(at, value) else {
        return DEFAULT_LEASE;
    };
    let (low, high) = LEASE_RANGE;
    let problem = if lease < low || lease > high {
        format!("{lease:?} is out of range: a lease is from 2s to 60s")
    } else if lease.subsec_nanos() != 0 {
        format!("{lease:?} is not whole seconds: etcd leases are counted in seconds")
    } else {
        return lease;
    };
    let hint = example("lease").map(|e| format!("for example: {e}"));
    let span = value.as_ref().map(Spanned::span);
    check.error(span, at, problem, hint);
    DEFAULT_LEASE
}

/// A PEM file of the TLS settings: it must exist (read by the etcd client at start).
fn pem_file(check: &mut Checker, at: At<'_>, value: &Option<Spanned<String>>) -> Option<PathBuf> {
    let path = check.path(at, value)?;
    // Metadata only (links followed): nothing is opened, so a FIFO cannot block the check.
    let problem = match std::fs::metadata(&path) {
        Err(err) => Some(err.to_string()),
        Ok(meta) => crate::persist::file::not_a_named_file(&meta, PEM_FILE_MAX, PEM_FILE),
    };
    if let Some(problem) = problem {
        let span = value.as_ref().map(Spanned::span);
        check.error(
            span,
            at,
            format!("cannot read {}: {problem}", path.display()),
            Some("name a PEM file the agent can read".to_owned()),
        );
    }
    Some(path)
}

/// The largest certificate or key file read from `[cluster]` (a bundle of a few hundred
/// certificates fits).
pub(crate) const PEM_FILE_MAX: u64 = 16 * 1024 * 1024;

/// What `[cluster]`'s certificate and key files are called in messages.
pub(crate) const PEM_FILE: &str = "a certificate or key file";

/// The password and where it came from: `password_file`, `password_env`, or the systemd
/// credential `etcd-password` when `user` is set and neither key is.
fn password(
    check: &mut Checker,
    raw: &RawCluster,
    has_user: bool,
) -> (Option<Secret>, Option<String>) {
    let at = |key| At {
        context: "[cluster]",
        key,
    };
    let read = match (&raw.password_file, &raw.password_env) {
        (Some(_), Some(env)) => {
            check.error(
                Some(env.span()),
                at("password_env"),
                "set either `password_file` or `password_env`, not both",
                Some("keep password_file: a secret is better kept in a file".to_owned()),
            );
            return (None, None);
        }
        (Some(file), None) => {
            let Some(path) = check.path(at("password_file"), &raw.password_file) else {
                return (None, None);
            };
            let fix = format!(
                "chmod 600 it (or 640 with group {})",
                super::secrets::AGENT_GROUP
            );
            if let Some(warning) = super::secrets::exposed_warning("password file", &path, &fix) {
                check.warn(Some(file.span()), at("password_file"), warning, None);
            }
            let from = format!("password_file {}", path.display());
            let read = super::secrets::read_secret_line(&path)
                .map_err(|why| format!("cannot use the password file {}: {why}", path.display()));
            Some((read, from, "password_file", Some(file.span())))
        }
        (None, Some(env)) => {
            let name = env.get_ref().trim();
            let read = match std::env::var(name) {
                Ok(value) if !value.trim().is_empty() => Ok(value.trim().to_owned()),
                _ => Err(format!(
                    "`password_env` names ${name}, which is not set (or empty)"
                )),
            };
            Some((
                read,
                format!("password_env ${name}"),
                "password_env",
                Some(env.span()),
            ))
        }
        (None, None) => std::env::var_os("CREDENTIALS_DIRECTORY")
            .filter(|dir| has_user && !dir.is_empty())
            .map(|dir| PathBuf::from(dir).join(PASSWORD_CREDENTIAL))
            .filter(|path| path.exists())
            .map(|path| {
                let read = super::secrets::read_secret_line(&path)
                    .map_err(|why| format!("cannot use the credential {}: {why}", path.display()));
                (
                    read,
                    format!("credential {PASSWORD_CREDENTIAL}"),
                    "user",
                    None,
                )
            }),
    };
    match (read, has_user) {
        (Some((Ok(secret), from, _, _)), true) => (Some(Secret::new(secret)), Some(from)),
        (Some((Ok(_), _, key, span)), false) => {
            check.error(
                span,
                at(key),
                "a password is set but no `user`",
                Some("set user = \"NAME\" (the etcd user), or remove the password".to_owned()),
            );
            (None, None)
        }
        (Some((Err(why), _, key, span)), _) => {
            let span = span.or_else(|| raw.user.as_ref().map(Spanned::span));
            let hint = if key == "password_env" {
                "set it in the agent's environment (a systemd EnvironmentFile= only root can \
                 read), or use password_file"
            } else {
                "write the etcd user's password into it (one line), a file only the agent can \
                 read"
            };
            check.error(span, at(key), why, Some(hint.to_owned()));
            (None, None)
        }
        (None, true) => {
            let span = raw.user.as_ref().map(Spanned::span);
            check.error(
                span,
                at("user"),
                "`user` is set but no password",
                Some(format!(
                    "set password_file (or password_env), or provide the systemd credential \
                     {PASSWORD_CREDENTIAL}"
                )),
            );
            (None, None)
        }
        (None, false) => (None, None),
    }
}

#[cfg(test)]
mod tests;
