//! Keeping secrets out of every output.
//!
//! The API key and ping URLs (whose path carries the check's token) are secrets. A ping URL is
//! shown only as scheme, host and a short fingerprint, so users can still tell targets apart;
//! the key is held in [`Secret`], whose `Debug` and `Display` never show the value.

use std::fmt;

use sha2::{Digest, Sha256};

/// A secret string (the API key) whose formatting never reveals it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value itself, for the one place that must send it (an HTTP header).
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// The first 8 hex digits of the SHA-256 of `text`: enough to tell secrets apart, nothing to
/// recover them from.
pub(crate) fn fingerprint(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest[..4].iter().map(|b| format!("{b:02x}")).collect()
}

/// Shows a ping URL without its secret parts: `https://ping.example.com/…#1a2b3c4d`.
///
/// The path, query, user info and fragment are dropped; the fingerprint is of the whole URL.
/// Text that does not parse as a URL is shown only as its fingerprint.
pub fn url(raw: &str) -> String {
    match reqwest::Url::parse(raw) {
        Ok(parsed) if parsed.host_str().is_some() => {
            let host = parsed.host_str().unwrap_or_default();
            let port = parsed.port().map(|p| format!(":{p}")).unwrap_or_default();
            format!("{}://{host}{port}/…#{}", parsed.scheme(), fingerprint(raw))
        }
        _ => format!("<url #{}>", fingerprint(raw)),
    }
}

/// Removes every occurrence of each secret from `text`: the last line of defence for messages
/// built from third-party errors (reqwest's `Display` includes the URL).
pub(crate) fn scrub(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_owned();
    for secret in secrets.iter().filter(|s| s.len() >= 4) {
        out = out.replace(secret, "[redacted]");
    }
    out
}

/// Formats a reqwest error without the URL it carries (which may hold a ping token).
pub(crate) fn reqwest_error(err: &reqwest::Error) -> String {
    let kind = if err.is_timeout() {
        "timed out"
    } else if err.is_connect() {
        "connection failed"
    } else if err.is_body() || err.is_decode() {
        "could not read the response"
    } else if err.is_request() {
        "request failed"
    } else {
        "HTTP error"
    };
    let mut detail = String::new();
    let mut source = std::error::Error::source(err);
    // The innermost cause is the most specific ("connection refused"); none of the sources
    // below reqwest's own error carry the URL.
    while let Some(inner) = source {
        detail = inner.to_string();
        source = inner.source();
    }
    if detail.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}: {detail}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_hides_path_and_query() {
        let shown = url("https://user:pw@ping.example.com:8443/abc-token-123?x=secret");
        assert!(
            shown.starts_with("https://ping.example.com:8443/…#"),
            "{shown}"
        );
        assert!(!shown.contains("abc-token-123"));
        assert!(!shown.contains("secret"));
        assert!(!shown.contains("pw"));
    }

    #[test]
    fn fingerprints_tell_targets_apart() {
        assert_ne!(url("http://h/a"), url("http://h/b"));
        assert_eq!(url("http://h/a"), url("http://h/a"));
        assert_eq!(fingerprint("x").len(), 8);
    }

    #[test]
    fn unparsable_url_shows_only_fingerprint() {
        let shown = url("not a url with token-xyz");
        assert!(!shown.contains("token-xyz"));
    }

    #[test]
    fn secret_formatting_hides_value() {
        let s = Secret::new("sk_live_1234");
        assert!(!format!("{s:?} {s}").contains("1234"));
        assert_eq!(s.expose(), "sk_live_1234");
    }

    #[test]
    fn scrub_replaces_every_occurrence() {
        assert_eq!(
            scrub("a tok1 b tok1", &["tok1"]),
            "a [redacted] b [redacted]"
        );
    }
}
