//! Outgoing connections: which certificates are trusted ([`trust`]) and which proxy a request
//! goes through ([`proxy`]), one rule for every request the agent makes (pings, the API, `http`
//! watches, etcd, `http://` and `https://` alike).
//!
//! [`Net`] is that rule as a value: built once by each command from what the config and the
//! command line say ([`NetSettings`]) and the process's environment (`SSL_CERT_FILE`,
//! `SSL_CERT_DIR`, `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY` and their lower-case
//! forms), then handed to every client it builds. [`Net::client_builder`] gives a reqwest builder
//! set up with both; the built-in HTTP/1.1 client of pings asks [`Net::proxy_for`], is used only
//! for direct connections, and makes its `https://` ones with [`Net::tls_connector`] (the same
//! rustls configuration and verifier as reqwest's). The environment is read, and the trust store loaded,
//! only when first needed (loading the store costs more than a whole `http://` ping), and once
//! per value: clones share them. A changed `ca_file` or `proxy` takes effect at the next start
//! (the daemon keeps the value it started with).
//!
//! Also what every client does alike with an answer or a failure: [`read_body`] reads a body up
//! to a cap, [`causes`] walks an error's sources, [`is_tls_failure`] tells a failed TLS
//! handshake, and [`Net::refused_certificate`] words a refused server certificate (for reqwest's
//! errors, [`Net::certificate_problem`]). [`retry`]
//! is the one retry loop, with its one policy ([`RetryPolicy`]) and `Retry-After` rule, of the
//! clients that repeat a request within one call (pings and the API).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use crate::metrics_registry::MetricsRegistry;

mod body;
pub mod proxy;
pub(crate) mod retry;
pub mod trust;

pub(crate) use body::{read_body, BodyError};
pub use proxy::{Proxy, ProxySetting};
pub use retry::RetryPolicy;
pub use trust::{ClientAuth, Trust};

/// What the config and the command line say about outgoing connections.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetSettings {
    /// `[api] ca_file` / `run --ca-file`: extra CA certificates (PEM), trusted besides the
    /// system's.
    pub ca_file: Option<PathBuf>,
    /// `[api] proxy`: a proxy URL for every request, or `none`; unset: the environment decides.
    pub proxy: Option<ProxySetting>,
}

/// The outgoing connections of a command: its [`NetSettings`] with the environment, the proxy
/// rule and the trust store made from them when first asked for. Cheap to clone; clones share
/// the rule and the store. [`Net::default`] is the environment alone (no config).
#[derive(Clone, Default)]
pub struct Net {
    inner: Arc<Resolved>,
}

/// What a [`Net`] and its clones share.
#[derive(Default)]
struct Resolved {
    settings: NetSettings,
    /// Made at the first request (its problems are logged then).
    proxy: OnceLock<Proxy>,
    /// Loaded at the first client that may make a TLS connection.
    trust: OnceLock<Trust>,
    /// The built-in client's TLS configuration, made at its first `https://` connection.
    tls: OnceLock<tokio_rustls::TlsConnector>,
    /// What the clients of these connections count for `/metrics`.
    metrics: MetricsRegistry,
}

impl std::fmt::Debug for Net {
    /// The settings, a proxy's password hidden (the rule and the store are not shown).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let settings = &self.inner.settings;
        let proxy = settings.proxy.as_ref().map(|setting| match setting {
            ProxySetting::None => "none".to_owned(),
            ProxySetting::Url(url) => Proxy::redacted(url),
        });
        f.debug_struct("Net")
            .field("ca_file", &settings.ca_file)
            .field("proxy", &proxy)
            .finish_non_exhaustive()
    }
}

impl Net {
    /// The connections `settings` describe; reads nothing yet.
    pub fn new(settings: NetSettings) -> Net {
        Net {
            inner: Arc::new(Resolved {
                settings,
                ..Resolved::default()
            }),
        }
    }

    /// What the clients of these connections count for `/metrics` (API requests, refused
    /// certificates); every clone of this `Net` counts into the same registry.
    pub fn metrics(&self) -> &MetricsRegistry {
        &self.inner.metrics
    }

    /// The proxy rule (environment and `[api] proxy`).
    pub fn proxy(&self) -> &Proxy {
        self.inner.proxy.get_or_init(|| {
            let setting = self.inner.settings.proxy.clone();
            let rule = Proxy::from_env(setting, |name| std::env::var(name).ok());
            for problem in &rule.problems {
                tracing::warn!("{problem}");
            }
            rule
        })
    }

    /// The proxy `url` goes through, or `None` for a direct connection.
    pub fn proxy_for(&self, url: &reqwest::Url) -> Option<&reqwest::Url> {
        self.proxy().for_url(url)
    }

    /// The trust store, loaded at the first call (see [`trust`]).
    pub fn trust(&self) -> &Trust {
        self.inner.trust.get_or_init(|| {
            let ca_file = self.inner.settings.ca_file.as_deref();
            let trust = Trust::load(ca_file, |name| std::env::var_os(name));
            for problem in &trust.problems {
                tracing::warn!("trusted CA certificates: {problem}; it is not used");
            }
            tracing::debug!(trust = %trust.describe(), "trusted CA certificates loaded");
            trust
        })
    }

    /// A reqwest builder that trusts [`Net::trust`] and goes through [`Net::proxy`]: the start
    /// of every reqwest client of the agent. The trust store is loaded only when `https` says a
    /// TLS connection may be made (a plain-http client does not pay for it).
    pub fn client_builder(&self, https: bool) -> reqwest::ClientBuilder {
        let rule = self.clone();
        let builder = reqwest::Client::builder()
            .user_agent(crate::user_agent())
            // reqwest's default Referer would carry a URL (a ping token) to a redirect's host.
            .referer(false)
            .no_proxy()
            .proxy(reqwest::Proxy::custom(move |url| {
                rule.proxy_for(url).cloned()
            }));
        if https {
            self.with_tls(builder, &[], None)
                .expect("the store's own configuration has no extra certificate or key to refuse")
        } else {
            builder
        }
    }

    /// [`Net::client_builder`] for `https`, also trusting `extra` (a cluster's own `ca_file`)
    /// and presenting `client_auth` (certificates and key); rustls' refusal of either is
    /// returned.
    pub fn tls_client_builder(
        &self,
        extra: &[rustls::pki_types::CertificateDer<'_>],
        client_auth: Option<ClientAuth>,
    ) -> Result<reqwest::ClientBuilder, rustls::Error> {
        let builder = self.client_builder(false);
        self.with_tls(builder, extra, client_auth)
    }

    fn with_tls(
        &self,
        builder: reqwest::ClientBuilder,
        extra: &[rustls::pki_types::CertificateDer<'_>],
        client_auth: Option<ClientAuth>,
    ) -> Result<reqwest::ClientBuilder, rustls::Error> {
        let config = self.trust().tls_config(extra, client_auth)?;
        Ok(builder.use_preconfigured_tls(config))
    }

    /// The TLS side of the built-in HTTP/1.1 client of pings: the configuration every reqwest
    /// client of [`Net::client_builder`] gets (this store and its verifier, HTTP/1.1 offered by
    /// ALPN), made at the first call and shared by clones, so the connections of a daemon share
    /// one session cache.
    pub(crate) fn tls_connector(&self) -> &tokio_rustls::TlsConnector {
        self.inner.tls.get_or_init(|| {
            let config = self
                .trust()
                .tls_config(&[], None)
                .expect("the store's own configuration has no extra certificate or key to refuse");
            tokio_rustls::TlsConnector::from(Arc::new(config))
        })
    }

    /// Whether a reqwest error is a refused server certificate; then the text to show: which host,
    /// which trust source, what to set (see [`Net::refused_certificate`]).
    pub fn certificate_problem(&self, err: &reqwest::Error) -> Option<String> {
        let host = err.url().and_then(|u| u.host_str()).unwrap_or("?");
        causes(err).find_map(|inner| self.refused_certificate(host, inner))
    }

    /// Whether `err`, why a TLS connection to `host` failed (one error of its chain: a rustls
    /// error or the I/O error that carries one), is a refused server certificate; then the text
    /// to show: which host, which trust source, what to set. Counted by host, and logged here
    /// as an error the first time for each host (at debug level after that), so every client
    /// (reqwest's and the built-in one of pings) reports it once, in the same words.
    pub(crate) fn refused_certificate(
        &self,
        host: &str,
        err: &(dyn std::error::Error + 'static),
    ) -> Option<String> {
        let text = err.to_string();
        if !text.contains("invalid peer certificate") {
            return None;
        }
        let problem = format!(
            "the certificate of {host} is not trusted ({}); trusted: {}. If {host} \
             uses a private CA or a TLS-inspecting proxy, add its CA certificate (PEM) \
             with `[api] ca_file` (or `run --ca-file`), or point SSL_CERT_FILE at a \
             bundle that holds it",
            text.trim_start_matches("invalid peer certificate: "),
            self.trust().describe()
        );
        if self.inner.metrics.tls_error(host) {
            tracing::error!("{problem}");
        } else {
            tracing::debug!("{problem}");
        }
        Some(problem)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_net_keeps_its_own_settings_and_its_clones_share_what_it_loaded() {
        let ca = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tls/ca.pem");
        let with_ca = Net::new(NetSettings {
            ca_file: Some(PathBuf::from(ca)),
            ..NetSettings::default()
        });
        let without = Net::default();
        assert!(
            with_ca.trust().describe().contains("ca_file"),
            "{}",
            with_ca.trust().describe()
        );
        assert!(
            !without.trust().describe().contains("ca_file"),
            "{}",
            without.trust().describe()
        );
        let clone = with_ca.clone();
        assert!(std::ptr::eq(clone.trust(), with_ca.trust()));
        assert!(std::ptr::eq(clone.proxy(), with_ca.proxy()));
    }

    #[test]
    fn a_proxy_password_is_not_in_the_debug_text() {
        let proxy = ProxySetting::parse("http://user:s3cret@proxy:3128").expect("a proxy URL");
        let net = Net::new(NetSettings {
            proxy: Some(proxy),
            ..NetSettings::default()
        });
        let text = format!("{net:?}");
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains("user:…@proxy:3128"), "{text}");
    }
}
