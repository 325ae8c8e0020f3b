//! Building and sending pings to a heartbeat check's ping URL.
//!
//! A [`Ping`] is a validated URL, a method, a source (sent as `Origin`), what it tells
//! ([`PingKind`]: a success, a start or a failure) and, for a fail ping, an optional body.
//! [`send`] delivers it with up to [`Budget::attempts`] attempts, all inside [`Budget::total`],
//! through the one retry loop of [`crate::net::retry`] (its waits and its `Retry-After` rule),
//! and returns a [`PingOutcome`] that tells a delivered ping from a failure worth retrying later
//! and a permanent one (the delivery is in `delivery.rs`). [`outbox::deliver_or_queue_for`] is
//! the one call sites use: it sends, and keeps in the durable outbox what could not be sent.
//!
//! Direct `http://` and `https://` pings go through a minimal HTTP/1.1 client (`http1.rs`,
//! over TCP or a rustls stream with the trust store of [`crate::net`]): `run` must start and
//! ping faster than curl, building reqwest's client costs more than the whole request, and its
//! code (reqwest, hyper, hyper-rustls) raised an https `run`'s peak RSS by half a megabyte of
//! code pages (6.28 MiB through reqwest, 5.80 MiB over rustls directly; medians of 11). A ping through a proxy, with a user name in its URL, or after a redirect goes
//! through reqwest with rustls, built lazily by the [`Sender`] a command hands to every
//! delivery: its connections ([`crate::net::Net`]) and that one client, shared by all the pings
//! of the process.
//!
//! A ping URL is a secret (its path carries the token): everything printed about it goes
//! through [`crate::redact::url`], no error below carries the URL, and no request sends it
//! on as `Referer` after a redirect.

use std::time::Duration;

use crate::config::{PingUrl, UrlProblem};

mod delivery;
mod http1;
pub mod outbox;

pub use delivery::Sender;
pub(crate) use delivery::{send, send_with};

/// How long the daemon, once asked to stop, still waits for the answers of pings already on
/// their way (its runs' final pings and the outbox's deliveries) before it abandons them to the
/// outbox: a request that reached a slow host and is abandoned is sent again at the next start,
/// a duplicate. A second SIGTERM ends the daemon at once.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(2);

/// The HTTP method of a ping; the service records `GET` and `POST` alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PingMethod {
    /// `GET` (default).
    #[default]
    Get,
    /// `POST` with an empty body.
    Post,
    /// `PUT` (a fail ping's `fail_method`).
    Put,
}

impl PingMethod {
    fn as_str(self) -> &'static str {
        match self {
            PingMethod::Get => "GET",
            PingMethod::Post => "POST",
            PingMethod::Put => "PUT",
        }
    }
}

/// What a ping tells the service it goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PingKind {
    /// The run succeeded: the check's own ping, the only kind its ping URL ever receives.
    #[default]
    Success,
    /// The run started (`start_url`, `--start-url`): sent once and never kept in the outbox,
    /// since a start delivered late would tell of a run that is long over.
    Start,
    /// The run failed (`fail_url`, `--fail-url`): kept in the outbox like a success.
    Fail,
}

impl PingKind {
    /// Whether it is a success (which a later failed run makes stale).
    pub(crate) fn is_success(&self) -> bool {
        *self == PingKind::Success
    }
}

/// One ping to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ping {
    url: reqwest::Url,
    /// The method.
    pub method: PingMethod,
    /// Sent as `Origin`: the service shows it as the event's source (a host or job name).
    pub source: String,
    /// What it tells the service.
    pub kind: PingKind,
    /// A `POST` body (a fail ping's output tail, scrubbed), sent as `text/plain`, or its JSON
    /// summary (`json`).
    body: Option<String>,
    /// Whether `body` is JSON (`application/json`).
    json: bool,
    /// Extra headers (a fail ping's `fail_headers`; their values are secrets).
    headers: Vec<(String, crate::redact::Secret)>,
    /// The URL as configured, when it differs from `url` by a filled-in `{run_id}`: the
    /// target the outbox keys the ping by, so one pending success per ping URL still
    /// coalesces across runs.
    target: Option<String>,
}

/// Why a ping URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidPing {
    /// It does not parse as an absolute URL (the text is shown only redacted).
    #[error(
        "{shown} is not a valid URL ({reason}); expected http://HOST/TOKEN or https://HOST/TOKEN"
    )]
    Malformed {
        /// The redacted text.
        shown: String,
        /// What the parser said (never contains the text).
        reason: String,
    },
    /// A scheme other than http or https.
    #[error(
        "{shown}: unsupported scheme \"{scheme}\"; a ping URL starts with http:// or https://"
    )]
    Scheme {
        /// The redacted URL.
        shown: String,
        /// The scheme found.
        scheme: String,
    },
    /// The source contains characters that cannot go into an HTTP header.
    #[error("source \"{0}\" contains control characters; use a plain host or job name")]
    Source(String),
}

impl InvalidPing {
    /// Why `url` (shown only redacted) was refused.
    pub(crate) fn of(url: &str, problem: UrlProblem) -> InvalidPing {
        let shown = crate::redact::url(url);
        match problem {
            UrlProblem::Malformed(reason) => InvalidPing::Malformed { shown, reason },
            UrlProblem::Scheme(scheme) => InvalidPing::Scheme { shown, scheme },
            UrlProblem::NoHost => InvalidPing::Malformed {
                shown,
                reason: "no host".to_owned(),
            },
            UrlProblem::Placeholder(found) => InvalidPing::Malformed {
                shown,
                reason: format!(
                    "unknown placeholder \"{found}\"; the only ones are {} (in a fail URL) \
                     and {}",
                    crate::config::FailUrl::PLACEHOLDER,
                    PingUrl::RUN_ID
                ),
            },
            UrlProblem::PlaceholderPart(placeholder, part) => InvalidPing::Malformed {
                shown,
                reason: format!(
                    "{placeholder} is in its {part}; it may only be in the path or query"
                ),
            },
        }
    }
}

impl Ping {
    /// Validates `url` (absolute, http or https, with a host) and `source` (no control
    /// characters).
    pub fn new(url: &str, method: PingMethod, source: &str) -> Result<Ping, InvalidPing> {
        let parsed = PingUrl::parse(url).map_err(|problem| InvalidPing::of(url, problem))?;
        Ping::to(&parsed, method, source)
    }

    /// [`Ping::new`] for a URL a user wrote (`run`'s flags and files), which may hold
    /// `{run_id}` ([`PingUrl::template`]).
    pub(crate) fn template(
        url: &str,
        method: PingMethod,
        source: &str,
    ) -> Result<Ping, InvalidPing> {
        let parsed = PingUrl::template(url).map_err(|problem| InvalidPing::of(url, problem))?;
        Ping::to(&parsed, method, source)
    }

    /// A ping to an already validated URL (a job's `ping_url`); only `source` is checked.
    pub(crate) fn to(url: &PingUrl, method: PingMethod, source: &str) -> Result<Ping, InvalidPing> {
        if source.chars().any(char::is_control) {
            return Err(InvalidPing::Source(source.escape_debug().to_string()));
        }
        Ok(Ping {
            url: url.url().clone(),
            method,
            source: source.to_owned(),
            kind: PingKind::Success,
            body: None,
            json: false,
            headers: Vec::new(),
            target: None,
        })
    }

    /// The ping of run `run`: its URL's `{run_id}` (as written in the query, or percent-encoded
    /// in the path) filled in with the run's id; the same ping when it has none. The URL made is
    /// not learned as a secret of its own (one per run would grow the scrubber without end):
    /// the text around the placeholder was learned with the configured URL.
    pub(crate) fn for_run(self, run: impl std::fmt::Display) -> Ping {
        const ENCODED: &str = "%7Brun_id%7D";
        let text = self.url.as_str();
        if !text.contains(PingUrl::RUN_ID) && !text.contains(ENCODED) {
            return self;
        }
        let id = run.to_string();
        let filled = text.replace(ENCODED, &id).replace(PingUrl::RUN_ID, &id);
        match reqwest::Url::parse(&filled) {
            Ok(url) => Ping {
                target: Some(self.url.as_str().to_owned()),
                url,
                ..self
            },
            Err(_) => self,
        }
    }

    /// What the outbox keys the ping by: the URL as configured (its `{run_id}` unfilled).
    pub(crate) fn target(&self) -> &str {
        self.target.as_deref().unwrap_or(self.url.as_str())
    }

    /// The same ping keyed by `target` in the outbox (an entry read back from it).
    pub(crate) fn with_target(self, target: Option<String>) -> Ping {
        Ping { target, ..self }
    }

    /// The same ping as a `kind` ping.
    pub(crate) fn of_kind(self, kind: PingKind) -> Ping {
        Ping { kind, ..self }
    }

    /// The same ping as a `POST` carrying `body`.
    pub(crate) fn with_body(self, body: String) -> Ping {
        Ping {
            method: PingMethod::Post,
            body: Some(body),
            ..self
        }
    }

    /// The same ping as a `POST` carrying the JSON document `body`.
    pub(crate) fn with_json_body(self, body: String) -> Ping {
        Ping {
            json: true,
            ..self.with_body(body)
        }
    }

    /// The same ping sent with `method`.
    pub(crate) fn with_method(self, method: PingMethod) -> Ping {
        Ping { method, ..self }
    }

    /// The same ping carrying `headers` (name, secret value).
    pub(crate) fn with_headers(self, headers: Vec<(String, crate::redact::Secret)>) -> Ping {
        Ping { headers, ..self }
    }

    /// Whether the body is JSON.
    pub(crate) fn json(&self) -> bool {
        self.json
    }

    /// The extra headers.
    pub(crate) fn headers(&self) -> &[(String, crate::redact::Secret)] {
        &self.headers
    }

    /// The `Content-Type` of the body.
    fn body_type(&self) -> &'static str {
        if self.json {
            JSON_TYPE
        } else {
            BODY_TYPE
        }
    }

    /// The body, if it has one.
    pub(crate) fn body(&self) -> Option<&str> {
        self.body.as_deref()
    }

    /// The URL itself: a secret, only for sending and for keying state (outbox, locks).
    pub(crate) fn url(&self) -> &str {
        self.url.as_str()
    }

    /// The URL as it may be shown: scheme, host and a fingerprint.
    pub(crate) fn redacted(&self) -> String {
        crate::redact::url(self.url.as_str())
    }
}

/// How much effort one delivery gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Everything (attempts and the pauses between them) ends within this.
    pub total: Duration,
    /// At most this many attempts.
    pub attempts: u32,
    /// Upper bound of establishing one connection.
    pub connect_timeout: Duration,
}

impl Default for Budget {
    /// 30 s in total, 3 attempts, 10 s to connect.
    fn default() -> Budget {
        Budget {
            total: Duration::from_secs(30),
            attempts: 3,
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// Why one attempt failed (never contains the URL).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PingError {
    /// No connection (refused, unreachable, name not resolved).
    #[error("connection failed: {0}")]
    Connect(String),
    /// The attempt ran out of time.
    #[error("timed out")]
    Timeout,
    /// The server answered with a status that is not 2xx.
    #[error("server answered HTTP {0}")]
    Status(u16),
    /// The answer was not HTTP as expected.
    #[error("invalid response: {0}")]
    Protocol(String),
    /// Any other failure of the HTTP client (already redacted).
    #[error("{0}")]
    Http(String),
    /// The proxy the request went through failed or refused it: the proxy's answer is not the
    /// ping host's, so the ping is kept and tried again. `proxy` is shown as
    /// [`crate::net::Proxy::redacted`] shows it (never its password).
    #[error("through the proxy {proxy}: {detail}")]
    Proxy {
        /// The proxy, `scheme://host:port` (a user name, never a password).
        proxy: String,
        /// What failed, with what to do.
        detail: String,
    },
    /// The server's certificate is not trusted. Shown short; `detail` (which host, which trust
    /// source, what to set) is logged in full once per host by [`crate::net`]. Not tried again within the budget;
    /// kept in the outbox, so a fixed trust store delivers it.
    #[error(
        "the certificate of {host} is not trusted (see the error logged at the first refusal)"
    )]
    Certificate {
        /// The host whose certificate was refused.
        host: String,
        /// The whole explanation.
        detail: String,
    },
}

impl PingError {
    /// Whether trying again later can help: everything but a 4xx other than 408 and 429.
    pub(crate) fn is_retryable(&self) -> bool {
        match self {
            PingError::Status(code) => !(400..500).contains(code) || matches!(code, 408 | 429),
            _ => true,
        }
    }
}

/// What one attempt got back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PingAnswer {
    /// The HTTP status.
    pub status: u16,
    /// `Retry-After` in seconds, when given (429, 503).
    pub retry_after: Option<Duration>,
}

/// The result of a delivery: what the outbox needs to decide whether to keep the ping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PingOutcome {
    /// A 2xx answer.
    Delivered {
        /// The status.
        status: u16,
        /// Attempts used.
        attempts: u32,
    },
    /// Not delivered within the budget, but a later try may succeed (keep it).
    Retryable {
        /// The last attempt's error.
        error: PingError,
        /// Attempts used.
        attempts: u32,
        /// The server's `Retry-After`, when it gave one.
        retry_after: Option<Duration>,
    },
    /// The server refused it for good (4xx other than 408/429): do not retry.
    Permanent {
        /// The error.
        error: PingError,
        /// Attempts used.
        attempts: u32,
    },
}

/// The `Content-Type` of a ping's body (job output, made valid UTF-8 when it was scrubbed).
const BODY_TYPE: &str = "text/plain; charset=utf-8";

/// The `Content-Type` of a JSON body (`fail_body = "json"`).
const JSON_TYPE: &str = "application/json";

#[cfg(test)]
mod tests;
