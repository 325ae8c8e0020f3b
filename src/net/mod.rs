//! Outgoing connections: which certificates are trusted ([`trust`]) and which proxy a request
//! goes through ([`proxy`]), one rule for every request the agent makes (pings, the API, `http`
//! watches, `http://` and `https://` alike). [`client_builder`] gives a reqwest builder set up
//! with both; the built-in HTTP/1.1 client of `http://` pings asks [`proxy_for`] and is used
//! only for direct connections.
//!
//! The settings come from the process's environment (`SSL_CERT_FILE`, `SSL_CERT_DIR`,
//! `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY` and their lower-case forms) and from the
//! config (`[api] ca_file`, `[api] proxy`) or `run --ca-file`, given once at start-up through
//! [`configure`] before the first request. A changed `ca_file` or `proxy` takes effect at the
//! next start (the clients are built once per process).
//!
//! Also what every client does alike with an answer or a failure: [`read_body`] reads a body up
//! to a cap, [`causes`] walks an error's sources, [`is_tls_failure`] tells a failed TLS
//! handshake, and [`certificate_problem`] words a refused server certificate. [`retry`] is
//! the one retry loop, with its one policy ([`RetryPolicy`]) and `Retry-After` rule, of the
//! clients that repeat a request within one call (pings and the API).

use std::sync::OnceLock;

mod body;
pub mod proxy;
pub(crate) mod retry;
pub mod trust;

pub(crate) use body::{read_body, BodyError};
pub use proxy::{Proxy, ProxySetting};
pub use retry::RetryPolicy;
pub use trust::Trust;

/// What the config and the command line say about outgoing connections.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetSettings {
    /// `[api] ca_file` / `run --ca-file`: extra CA certificates (PEM), trusted besides the
    /// system's.
    pub ca_file: Option<std::path::PathBuf>,
    /// `[api] proxy`: a proxy URL for every request, or `none`; unset: the environment decides.
    pub proxy: Option<ProxySetting>,
}

static SETTINGS: OnceLock<NetSettings> = OnceLock::new();
static PROXY: OnceLock<Proxy> = OnceLock::new();

/// Sets the settings of this process; the first call wins (later ones are ignored: the
/// clients are built once).
pub fn configure(settings: NetSettings) {
    let _ = SETTINGS.set(settings);
}

fn settings() -> &'static NetSettings {
    SETTINGS.get_or_init(NetSettings::default)
}

/// The proxy rule of this process (environment and `[api] proxy`).
pub fn proxy() -> &'static Proxy {
    PROXY.get_or_init(|| {
        let rule = Proxy::from_env(settings().proxy.clone(), |name| std::env::var(name).ok());
        for problem in &rule.problems {
            tracing::warn!("{problem}");
        }
        rule
    })
}

/// The proxy `url` goes through, or `None` for a direct connection.
pub fn proxy_for(url: &reqwest::Url) -> Option<&'static reqwest::Url> {
    proxy().for_url(url)
}

/// The trust store of this process, loaded at the first https request (see [`trust`]).
pub fn trust() -> &'static Trust {
    static TRUST: OnceLock<Trust> = OnceLock::new();
    TRUST.get_or_init(|| {
        let trust = Trust::load(settings().ca_file.as_deref(), |name| std::env::var_os(name));
        for problem in &trust.problems {
            tracing::warn!("trusted CA certificates: {problem}; it is not used");
        }
        tracing::debug!(trust = %trust.describe(), "trusted CA certificates loaded");
        trust
    })
}

/// A reqwest builder that trusts [`trust`] and goes through [`proxy`]: the start of every
/// reqwest client of the agent. The trust store is loaded only when `https` says a TLS
/// connection may be made (a plain-http client does not pay for it).
pub fn client_builder(https: bool) -> reqwest::ClientBuilder {
    let rule = proxy();
    let builder = reqwest::Client::builder()
        .user_agent(crate::user_agent())
        // reqwest's default Referer would carry a URL (a ping token) to a redirect's host.
        .referer(false)
        .no_proxy()
        .proxy(reqwest::Proxy::custom(move |url| {
            rule.for_url(url).cloned()
        }));
    if https {
        trust().apply(builder)
    } else {
        builder
    }
}

/// Whether a reqwest error is a refused server certificate; then the text to show: which host,
/// which trust source, what to set. Counted by host, and logged here as an error the first time
/// for each host (at debug level after that), so every client reports it once.
pub fn certificate_problem(err: &reqwest::Error) -> Option<String> {
    for inner in causes(err) {
        let text = inner.to_string();
        if text.contains("invalid peer certificate") {
            let host = err
                .url()
                .and_then(|u| u.host_str())
                .unwrap_or("?")
                .to_owned();
            let problem = format!(
                "the certificate of {host} is not trusted ({}); trusted: {}. If {host} uses a \
                 private CA or a TLS-inspecting proxy, add its CA certificate (PEM) with `[api] \
                 ca_file` (or `run --ca-file`), or point SSL_CERT_FILE at a bundle that holds it",
                text.trim_start_matches("invalid peer certificate: "),
                trust().describe()
            );
            if trust::count_error(&host) {
                tracing::error!("{problem}");
            } else {
                tracing::debug!("{problem}");
            }
            return Some(problem);
        }
    }
    None
}

/// The sources of `err`, outermost first (reqwest's own error is not among them). Below
/// reqwest's error none carries the URL.
pub(crate) fn causes(
    err: &reqwest::Error,
) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
    std::iter::successors(std::error::Error::source(err), |inner| inner.source())
}

/// Whether `err` is a failed TLS handshake (a refused or missing certificate, a server that
/// does not speak TLS, an alert), judged by the words of its sources.
pub(crate) fn is_tls_failure(err: &reqwest::Error) -> bool {
    const TLS: [&str; 7] = [
        "certificate",
        "tls",
        "TLS",
        "handshake",
        "InvalidContentType",
        "alert",
        "corrupt message",
    ];
    let chain: String = causes(err).map(|inner| format!("{inner} ")).collect();
    TLS.iter().any(|word| chain.contains(word))
}
