//! Delivering a [`Ping`]: the [`Sender`] a command hands to every delivery (its connections,
//! and the reqwest client built at the first ping that needs it), [`send`] and [`send_with`]
//! (up to [`Budget::attempts`] attempts inside [`Budget::total`], through the one retry loop of
//! [`crate::net::retry`]), and [`send_once`], one attempt: over the built-in HTTP/1.1 client
//! where it can, else through reqwest (a proxy, a user name in the URL, a redirect).
//!
//! Its own file because it is the only part of `ping` that does I/O: `mod.rs` holds what a ping
//! is and what a delivery can end in, which the outbox and the run pipeline share.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::time::Instant;
use tracing::debug;

use super::{http1, Budget, Ping, PingAnswer, PingError, PingMethod, PingOutcome};
use crate::net::retry::{retry, RetryOutcome, Try, TryResult};
use crate::net::RetryPolicy;

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
