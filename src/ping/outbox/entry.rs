//! One pending ping as stored on disk (JSON, one file per target) and the file names that give
//! an entry its state: `<key>.ping` pending, `<key>.<pid>.<lease>.claim` being delivered by
//! process `pid` until the lease (Unix milliseconds) runs out.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ping::{InvalidPing, Ping, PingKind, PingMethod};

/// Suffix of a pending entry.
pub(crate) const PENDING: &str = ".ping";
/// Suffix of a claimed entry.
pub(crate) const CLAIM: &str = ".claim";

/// The error of a fresh ping taken back from the process delivering it (shown by `outbox
/// list`).
pub(crate) const TAKEN_BACK: &str = "taken back: the process delivering it died or stopped";

/// A pending ping: everything needed to send it again and to decide when to stop trying.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Entry {
    /// The ping URL (a secret: the file is 0600 in a 0700 directory).
    pub url: String,
    /// `GET` or `POST`.
    pub method: String,
    /// The `Origin` header.
    pub source: String,
    /// The job that produced it, so a later failed run of the job can drop it.
    pub job: Option<String>,
    /// When the success happened (Unix ms).
    pub created_ms: u64,
    /// After this (Unix ms) the success is too old to report: dropped.
    pub expires_ms: u64,
    /// Attempts made so far, by every process.
    pub attempts: u32,
    /// The server's `Retry-After`: no attempt before this (Unix ms).
    pub not_before_ms: u64,
    /// The last attempt's error (never contains the URL).
    pub last_error: Option<String>,
    /// What the ping tells (absent: a success, so an entry written without the field reads as
    /// one).
    #[serde(default, skip_serializing_if = "PingKind::is_success")]
    pub kind: PingKind,
    /// The `POST` body of a fail ping that carries the output tail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// A request for it left and no answer came back (its process died or stopped, or the
    /// attempt timed out): the host may have it already, so sending it again may deliver it
    /// twice, and is counted as `recovered` when it leaves (see [`super::claims`]). Absent:
    /// false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unanswered: bool,
    /// The URL as configured, when `url` is it with the run's `{run_id}` filled in: what the
    /// entry is keyed by, so a newer run's success replaces it (a secret, like `url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Whether `body` is JSON (`fail_body = "json"`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub json: bool,
    /// The fail ping's `fail_headers`, values included: secrets, kept as the URL is (the file
    /// is 0600 in a 0700 directory), never printed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
}

impl Entry {
    /// A fresh entry for `ping`, created now and valid for `max_age`.
    pub(crate) fn new(ping: &Ping, job: Option<&str>, max_age: Duration, now_ms: u64) -> Entry {
        Entry {
            url: ping.url().to_owned(),
            method: ping.method.as_str().to_owned(),
            source: ping.source.clone(),
            job: job.map(str::to_owned),
            created_ms: now_ms,
            expires_ms: now_ms.saturating_add(millis(max_age)),
            attempts: 0,
            not_before_ms: 0,
            last_error: None,
            kind: ping.kind,
            body: ping.body().map(str::to_owned),
            unanswered: false,
            target: (ping.target() != ping.url()).then(|| ping.target().to_owned()),
            json: ping.json(),
            headers: (ping.headers().iter())
                .map(|(name, value)| (name.clone(), value.expose().to_owned()))
                .collect(),
        }
    }

    /// The ping to send.
    pub(crate) fn ping(&self) -> Result<Ping, InvalidPing> {
        let method = match self.method.to_ascii_uppercase().as_str() {
            "POST" => PingMethod::Post,
            "PUT" => PingMethod::Put,
            _ => PingMethod::Get,
        };
        let ping = Ping::new(&self.url, method, &self.source)?
            .of_kind(self.kind)
            .with_target(self.target.clone());
        let ping = match &self.body {
            Some(body) if self.json => ping.with_json_body(body.clone()),
            Some(body) => ping.with_body(body.clone()),
            None => ping,
        };
        // Only header-safe names and values: the file is the agent's own, but a line break in
        // it must never become a header of its own.
        let headers = (self.headers.iter())
            .filter(|(name, value)| {
                reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_ok()
                    && reqwest::header::HeaderValue::from_str(value).is_ok()
            })
            .map(|(name, value)| (name.clone(), crate::redact::Secret::new(value.clone())))
            .collect();
        Ok(ping.with_method(method).with_headers(headers))
    }

    /// Whether it is a ping written before its first attempt ([`super::Outbox::begin`]), not
    /// queued (see [`super::stats`]): while it is a claim, it does not count as queued. Every
    /// entry written as pending has an error: the failed attempt's, or
    /// [`Entry::taken_back`]'s.
    pub(crate) fn fresh(&self) -> bool {
        self.last_error.is_none()
    }

    /// The entry as put back pending after its process died or let it go: a fresh one says
    /// so in its error, so it is no longer [`Entry::fresh`] and counts as queued.
    pub(crate) fn taken_back(mut self) -> Entry {
        if self.last_error.is_none() {
            self.last_error = Some(TAKEN_BACK.to_owned());
        }
        self
    }

    /// The file name key of its target.
    pub(crate) fn key(&self) -> String {
        key(self.target.as_deref().unwrap_or(&self.url))
    }
}

/// The key of a target: 16 hex digits of the SHA-256 of the URL as configured (names files
/// without showing the token; one pending file per target is what coalesces, across runs
/// whose `{run_id}` filled it differently too).
pub(crate) fn key(url: &str) -> String {
    Sha256::digest(url.as_bytes())[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The name of a claim of `key` by `pid`, leased until `lease_ms`.
pub(crate) fn claim_name(key: &str, pid: u32, lease_ms: u64) -> String {
    format!("{key}.{pid}.{lease_ms}{CLAIM}")
}

/// What a file name in the outbox directory is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileKind {
    /// `<key>.ping`.
    Pending {
        /// The target's key.
        key: String,
    },
    /// `<key>.<pid>.<lease>.claim`.
    Claimed {
        /// The target's key.
        key: String,
        /// The claiming process.
        pid: u32,
        /// The lease's end (Unix ms).
        lease_ms: u64,
    },
    /// A temp file of a write in progress (or abandoned by a crash).
    Temp,
    /// Anything else (`.lock`, `stats.json`, `failed/`, foreign files): left alone.
    Other,
}

/// Classifies a file name.
pub(crate) fn classify(name: &str) -> FileKind {
    if crate::persist::file::is_temp(name) {
        return FileKind::Temp;
    }
    if let Some(key) = name.strip_suffix(PENDING) {
        if is_key(key) {
            return FileKind::Pending {
                key: key.to_owned(),
            };
        }
    }
    if let Some(rest) = name.strip_suffix(CLAIM) {
        let mut parts = rest.split('.');
        if let (Some(key), Some(pid), Some(lease), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        {
            if let (true, Ok(pid), Ok(lease_ms)) = (is_key(key), pid.parse(), lease.parse()) {
                return FileKind::Claimed {
                    key: key.to_owned(),
                    pid,
                    lease_ms,
                };
            }
        }
    }
    FileKind::Other
}

fn is_key(text: &str) -> bool {
    text.len() == 16 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Milliseconds of a duration, saturating.
pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Now, in Unix milliseconds.
pub(crate) fn now_ms() -> u64 {
    millis(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let key = key("https://ping.example.com/token");
        assert_eq!(key.len(), 16);
        assert_eq!(
            classify(&format!("{key}.ping")),
            FileKind::Pending { key: key.clone() }
        );
        assert_eq!(
            classify(&claim_name(&key, 42, 7)),
            FileKind::Claimed {
                key,
                pid: 42,
                lease_ms: 7
            }
        );
        assert_eq!(classify(".tmp.1.ab"), FileKind::Temp);
        for other in ["stats.json", ".lock", "x.ping", "failed", "ab.1.claim"] {
            assert_eq!(classify(other), FileKind::Other, "{other}");
        }
    }

    #[test]
    fn entry_rebuilds_the_ping() {
        let ping = Ping::new("http://h.example/t", PingMethod::Post, "host").unwrap();
        let entry = Entry::new(&ping, Some("backup"), Duration::from_secs(60), 1_000);
        assert_eq!(entry.expires_ms, 61_000);
        assert_eq!(entry.ping().unwrap(), ping);
        assert_eq!(entry.key(), key(ping.url()));
        let fail = ping
            .of_kind(PingKind::Fail)
            .with_body("last lines\n".to_owned());
        let entry = Entry::new(&fail, None, Duration::from_secs(60), 1_000);
        let text = serde_json::to_string(&entry).unwrap();
        assert!(text.contains(r#""kind":"fail""#), "{text}");
        let back: Entry = serde_json::from_str(&text).unwrap();
        assert_eq!(back.ping().unwrap(), fail);
    }

    #[test]
    fn a_json_fail_ping_comes_back_with_its_method_and_headers_and_no_injected_header() {
        let secret = crate::redact::Secret::new("Bearer entry-header-secret");
        let fail = Ping::new("http://h.example/t", PingMethod::Get, "host")
            .unwrap()
            .of_kind(PingKind::Fail)
            .with_json_body(r#"{"text":"x"}"#.to_owned())
            .with_method(PingMethod::Put)
            .with_headers(vec![("Authorization".to_owned(), secret)]);
        let entry = Entry::new(&fail, None, Duration::from_secs(60), 1_000);
        let text = serde_json::to_string(&entry).unwrap();
        let back: Entry = serde_json::from_str(&text).unwrap();
        let ping = back.ping().unwrap();
        assert_eq!(ping, fail);
        assert!(ping.json() && ping.method == PingMethod::Put, "{text}");
        // A header whose value would end the line is dropped when read back.
        let mut broken = back;
        broken.headers = vec![("X-A".to_owned(), "v\r\nX-Injected: 1".to_owned())];
        assert!(broken.ping().unwrap().headers().is_empty());
    }
}
