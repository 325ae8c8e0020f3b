//! Building and sending pings to a heartbeat check's ping URL.
//!
//! A [`Ping`] is a validated URL, a method, a source (sent as `Origin`), what it tells
//! ([`PingKind`]: a success, a start or a failure) and, for a fail ping, an optional body.
//! [`send`] delivers it with up to [`Budget::attempts`] attempts, all inside [`Budget::total`],
//! through the one retry loop of [`crate::net::retry`] (its waits and its `Retry-After` rule),
//! and returns a [`PingOutcome`] that tells a delivered ping from a failure worth retrying later
//! and a permanent one. [`outbox::deliver_or_queue_for`] is
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

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::time::Instant;
use tracing::debug;

use crate::config::{PingUrl, UrlProblem};
use crate::net::retry::{retry, RetryOutcome, Try, TryResult};
use crate::net::RetryPolicy;

mod http1;
pub mod outbox;

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

/// Base and cap of a ping's backoff between attempts (see [`crate::net::retry`]).
const BACKOFF_BASE: Duration = Duration::from_millis(250);
const BACKOFF_CAP: Duration = Duration::from_secs(5);

impl Budget {
    /// The retry policy of one delivery: its attempts and total, with a ping's backoff.
    pub(crate) fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            max_attempts: self.attempts,
            base: BACKOFF_BASE,
            cap: BACKOFF_CAP,
            budget: self.total,
        }
    }
}

/// How pings leave a process: through its connections ([`crate::net::Net`]), and for anything
/// the built-in HTTP/1.1 client does not do, one reqwest client built at the first such ping.
/// Cheap to clone; clones share the client and its connections.
#[derive(Debug, Clone)]
pub struct Sender {
    net: crate::net::Net,
    client: Arc<OnceLock<Result<reqwest::Client, String>>>,
}

impl Sender {
    /// Pings through `net`; builds nothing yet.
    pub fn new(net: crate::net::Net) -> Sender {
        Sender {
            net,
            client: Arc::default(),
        }
    }

    /// The connections pings go through (the watch probes' HTTP client uses the same).
    pub fn net(&self) -> &crate::net::Net {
        &self.net
    }

    fn client(&self) -> Result<&reqwest::Client, PingError> {
        self.client
            .get_or_init(|| {
                // Through the proxy rule and the trust store of the net, without Referer.
                self.net
                    .client_builder(true)
                    .connect_timeout(Budget::default().connect_timeout)
                    .build()
                    .map_err(|err| crate::redact::reqwest_error(&err))
            })
            .as_ref()
            .map_err(|err| PingError::Http(format!("cannot set up the HTTP client: {err}")))
    }
}

/// Sends `ping` within `budget`; see the module documentation.
pub(crate) async fn send(sender: &Sender, ping: &Ping, budget: &Budget) -> PingOutcome {
    send_with(sender, ping, budget, &|| {}, |_| {}).await
}

/// [`send`], calling `leaving` just before each attempt's request is written (after the
/// connection is made; the outbox marks its entry as possibly at the host then) and `failed`
/// after each attempt that failed (the outbox makes its entry durable then).
pub(crate) async fn send_with(
    sender: &Sender,
    ping: &Ping,
    budget: &Budget,
    leaving: &(dyn Fn() + Sync),
    mut failed: impl FnMut(&PingError),
) -> PingOutcome {
    let connect_timeout = budget.connect_timeout;
    let one = move |this: Try| async move {
        let (error, retry_after) =
            match send_once(sender, ping, connect_timeout, this.deadline, leaving).await {
                Ok(answer) if (200..300).contains(&answer.status) => {
                    return TryResult::Done(answer.status);
                }
                Ok(answer) => (PingError::Status(answer.status), answer.retry_after),
                Err(err) => (err, None),
            };
        // A refused certificate is logged in full by crate::net, once per host; trying again
        // cannot help until the trust store changes, but the outbox keeps the ping.
        if matches!(error, PingError::Certificate { .. }) || !error.is_retryable() {
            TryResult::Stop(error)
        } else {
            TryResult::Retry { error, retry_after }
        }
    };
    let outcome = retry(&budget.retry_policy(), one, |error, after| {
        failed(error);
        if after.retryable {
            debug!(target_url = %ping.redacted(), attempt = after.attempt, error = %error, "ping attempt failed");
        }
    })
    .await;
    match outcome {
        RetryOutcome::Done { value, attempts } => PingOutcome::Delivered {
            status: value,
            attempts,
        },
        RetryOutcome::Failed {
            error, attempts, ..
        } if !error.is_retryable() => PingOutcome::Permanent { error, attempts },
        RetryOutcome::Failed {
            error,
            attempts,
            retry_after,
        } => PingOutcome::Retryable {
            error,
            attempts,
            retry_after,
        },
        RetryOutcome::NoTime => PingOutcome::Retryable {
            error: PingError::Timeout,
            attempts: 0,
            retry_after: None,
        },
    }
}

/// One attempt, ending by `deadline`: the building block of [`send`] and of outbox draining.
/// A direct connection (no proxy, no user name in the URL) goes through the built-in client,
/// `http://` and `https://` alike (a ping URL is one or the other); anything else through
/// reqwest. `leaving` is called once, just before the request is written: by the built-in
/// client after the connection (and TLS handshake) is made, before reqwest's request (which
/// connects and writes in one call).
/// A redirect's second request is not announced again: the first one's answer came, and the
/// second goes on from it.
pub(crate) async fn send_once(
    sender: &Sender,
    ping: &Ping,
    connect_timeout: Duration,
    deadline: Instant,
    leaving: &(dyn Fn() + Sync),
) -> Result<PingAnswer, PingError> {
    if ping.url.username().is_empty() && sender.net.proxy_for(&ping.url).is_none() {
        let (answer, location) =
            http1::request(ping, &sender.net, connect_timeout, deadline, leaving).await?;
        let target = location.and_then(|l| ping.url.join(&l).ok());
        let Some(url) = target.filter(|_| (300..400).contains(&answer.status)) else {
            return Ok(answer);
        };
        // A redirect (say, to https): the full client goes on from the new address, not from
        // the first one again (that sent the ping twice to the first host).
        let moved = Ping {
            url,
            ..ping.clone()
        };
        return send_reqwest(sender, &moved, deadline).await;
    }
    leaving();
    send_reqwest(sender, ping, deadline).await
}

async fn send_reqwest(
    sender: &Sender,
    ping: &Ping,
    deadline: Instant,
) -> Result<PingAnswer, PingError> {
    let client = sender.client()?;
    let method = match ping.method {
        PingMethod::Get => reqwest::Method::GET,
        PingMethod::Post => reqwest::Method::POST,
        PingMethod::Put => reqwest::Method::PUT,
    };
    let timeout = deadline.saturating_duration_since(Instant::now());
    let request = client
        .request(method, ping.url.clone())
        .header(reqwest::header::ORIGIN, &ping.source)
        .timeout(timeout);
    let request = ping.headers.iter().fold(request, |request, (name, value)| {
        request.header(name.as_str(), value.expose())
    });
    let request = match (&ping.body, ping.method) {
        (Some(body), _) => request
            .header(reqwest::header::CONTENT_TYPE, ping.body_type())
            .body(body.clone()),
        (None, PingMethod::Post | PingMethod::Put) => request.body(""),
        (None, PingMethod::Get) => request,
    };
    // The proxy this request goes through, named without its password: what it says or
    // how it fails is told as the proxy's, not as the ping host's.
    let proxy = sender
        .net
        .proxy_for(&ping.url)
        .map(crate::net::Proxy::redacted);
    let through = |error: PingError| match (&proxy, error) {
        (
            Some(proxy),
            error @ (PingError::Connect(_) | PingError::Timeout | PingError::Http(_)),
        ) => PingError::Proxy {
            proxy: proxy.clone(),
            detail: error.to_string(),
        },
        (_, error) => error,
    };
    let response = request.send().await.map_err(|err| {
        through(if crate::net::proxy::refused_credentials(&err) {
            PingError::Http(crate::net::proxy::wants_credentials(407))
        } else if let Some(detail) = sender.net.certificate_problem(&err) {
            let host = ping.url.host_str().unwrap_or("?").to_owned();
            PingError::Certificate { host, detail }
        } else if err.is_timeout() {
            PingError::Timeout
        } else if err.is_connect() {
            let text = crate::redact::reqwest_error(&err);
            let detail = text.strip_prefix("connection failed: ").unwrap_or(&text);
            PingError::Connect(detail.to_owned())
        } else {
            PingError::Http(crate::redact::reqwest_error(&err))
        })
    })?;
    let status = response.status().as_u16();
    if let (Some(proxy), 407 | 401) = (&proxy, status) {
        // 407 is the proxy's by definition; a ping host never asks for credentials (the
        // token is in the URL), so a 401 through a proxy is the proxy's too.
        return Err(PingError::Proxy {
            proxy: proxy.clone(),
            detail: crate::net::proxy::wants_credentials(status),
        });
    }
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| crate::backoff::retry_after(v, std::time::SystemTime::now()));
    Ok(PingAnswer {
        status,
        retry_after,
    })
}

#[cfg(test)]
mod tests;
