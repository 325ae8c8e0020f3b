//! How [`ApiClient`] sends one operation: the URL under the base, the body encoded, a turn in
//! the rate limiter, attempts through the one retry loop of [`crate::net::retry`] (which
//! failures are retried is the rule of `api/retry.rs`), and every answer that is not a 2xx
//! turned into an [`ApiError`] that names the request, the proxy where one refused, and no
//! secret.
//!
//! Its own file because it is the transport every operation of `client.rs` shares, and the
//! only place that sees a response: the operations there only name their method, path, query
//! and body.

use std::time::{Duration, SystemTime};

use reqwest::header::{CONTENT_TYPE, RETRY_AFTER};
use reqwest::Url;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::ApiClient;
use crate::api::error::excerpt;
use crate::api::model::ErrorBody;
use crate::api::retry::{is_retryable, Failure};
use crate::api::{limits, ApiError, Operation, RequestLabel};
use crate::net::retry::{retry, RetryOutcome, TryResult};
use crate::net::BodyError;

impl ApiClient {
    /// The URL of `segments` under the base URL; each segment is percent-encoded, so an id
    /// cannot change the path.
    pub(super) fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Url {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .expect("the constructor accepts only base URLs that can hold a path")
            .pop_if_empty()
            .extend(segments);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    pub(super) async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        operation: Operation,
        url: Url,
        body: Option<&B>,
    ) -> Result<T, ApiError> {
        let body = body
            .map(serde_json::to_vec)
            .transpose()
            .map_err(|e| ApiError::Setup(format!("cannot encode the {operation} body: {e}")))?;
        let (status, bytes) = self.execute(operation, url, body).await?;
        serde_json::from_slice(&bytes).map_err(|e| ApiError::Decode {
            operation,
            status,
            detail: excerpt(&e.to_string()),
        })
    }

    /// Sends with rate limiting and retries (the one loop of [`crate::net::retry`], each
    /// attempt taking its turn in the limiter first); returns the status and body of a 2xx
    /// answer. Each attempt is bounded by the request timeout, not by the loop's deadline.
    pub(super) async fn execute(
        &self,
        operation: Operation,
        url: Url,
        body: Option<Vec<u8>>,
    ) -> Result<(u16, Vec<u8>), ApiError> {
        let label = RequestLabel {
            operation,
            target: format!("{} {}", operation.method(), url.path()),
        };
        let idempotent = operation.is_idempotent();
        let (label_ref, url, body) = (&label, &url, body.as_ref());
        let one = move |_| async move {
            self.limiter.acquire(operation, self.priority).await;
            match self.attempt(label_ref, url, body).await {
                Ok(answer) => TryResult::Done(answer),
                Err(Failed {
                    failure,
                    error,
                    retry_after,
                }) if is_retryable(failure, idempotent) => TryResult::Retry { error, retry_after },
                Err(failed) => TryResult::Stop(failed.error),
            }
        };
        let outcome = retry(&self.retry, one, |error, after| {
            if let Some(wait) = after.wait {
                tracing::warn!(
                    operation = %operation,
                    attempt = after.attempt,
                    wait_ms = wait.as_millis() as u64,
                    error = %error,
                    "api request failed, retrying"
                );
            }
        })
        .await;
        match outcome {
            RetryOutcome::Done { value, .. } => Ok(value),
            RetryOutcome::Failed { error, .. } => Err(error),
            RetryOutcome::NoTime => Err(ApiError::Transport {
                request: label,
                detail: "the retry budget is zero; no attempt was made".into(),
                not_sent: true,
                timed_out: true,
            }),
        }
    }

    /// One attempt: the status and body of a 2xx answer, or what failed.
    async fn attempt(
        &self,
        label: &RequestLabel,
        url: &Url,
        body: Option<&Vec<u8>>,
    ) -> Result<(u16, Vec<u8>), Failed> {
        let mut request = self.http.request(label.operation.method(), url.clone());
        if let Some(body) = body {
            request = request
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone());
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => {
                self.net.metrics().api_request(label.operation.name(), None);
                if let Some(problem) = self.net.certificate_problem(&e) {
                    let error = ApiError::Transport {
                        request: label.clone(),
                        detail: problem,
                        not_sent: true,
                        timed_out: false,
                    };
                    return Err(Failed::new(Failure::Untrusted, error, None));
                }
                if crate::net::proxy::refused_credentials(&e) {
                    if let Some(refused) = self.proxy_refused(label, url) {
                        return Err(refused);
                    }
                }
                let failure = if e.is_connect() {
                    Failure::NotSent
                } else {
                    Failure::NoAnswer
                };
                return Err(Failed::new(
                    failure,
                    self.transport_error(label, url, &e),
                    None,
                ));
            }
        };
        let status = response.status();
        let answered = Some(status.as_u16());
        self.net
            .metrics()
            .api_request(label.operation.name(), answered);
        // 407 is a proxy's answer by definition: the request never reached the service.
        if status.as_u16() == 407 {
            if let Some(refused) = self.proxy_refused(label, url) {
                return Err(refused);
            }
        }
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| crate::backoff::retry_after(v, SystemTime::now()));
        let bytes = match crate::net::read_body(response, limits::MAX_BODY).await {
            Ok(bytes) => bytes,
            Err(BodyError::Transport(e)) => {
                let error = self.transport_error(label, url, &e);
                return Err(Failed::new(Failure::NoAnswer, error, None));
            }
            Err(BodyError::TooLarge(limit)) => {
                let error = ApiError::Transport {
                    request: label.clone(),
                    detail: format!(
                        "the answer is larger than {} MiB and was not read; check that the API base URL points at the monitoring API",
                        limit >> 20
                    ),
                    not_sent: false,
                    timed_out: false,
                };
                return Err(Failed::new(Failure::Status(status.as_u16()), error, None));
            }
        };
        if status.is_success() {
            return Ok((status.as_u16(), bytes));
        }
        let error = self.status_error(label, status, &bytes, retry_after);
        Err(Failed::new(
            Failure::Status(status.as_u16()),
            error,
            retry_after,
        ))
    }

    /// The failure when the proxy `url` goes through answered 407 (`None` without a proxy):
    /// the request never reached the service.
    fn proxy_refused(&self, label: &RequestLabel, url: &Url) -> Option<Failed> {
        let proxy = self.net.proxy_for(url)?;
        let error = ApiError::Transport {
            request: label.clone(),
            detail: format!(
                "through the proxy {}: {}",
                crate::net::Proxy::redacted(proxy),
                crate::net::proxy::wants_credentials(407)
            ),
            not_sent: true,
            timed_out: false,
        };
        Some(Failed::new(Failure::NotSent, error, None))
    }

    /// A request without an answer; a failed connection through a proxy names the proxy (the
    /// failure may be the proxy's: a refused `CONNECT`, a proxy that is down).
    fn transport_error(&self, label: &RequestLabel, url: &Url, err: &reqwest::Error) -> ApiError {
        let detail = crate::redact::scrub(&crate::redact::reqwest_error(err));
        let through = self.net.proxy_for(url).filter(|_| err.is_connect());
        ApiError::Transport {
            request: label.clone(),
            detail: match through {
                Some(proxy) => format!(
                    "through the proxy {}: {detail}",
                    crate::net::Proxy::redacted(proxy)
                ),
                None => detail,
            },
            not_sent: err.is_connect(),
            timed_out: err.is_timeout(),
        }
    }

    fn status_error(
        &self,
        label: &RequestLabel,
        status: reqwest::StatusCode,
        bytes: &[u8],
        retry_after: Option<Duration>,
    ) -> ApiError {
        let reason = status.canonical_reason().unwrap_or("error").to_owned();
        let (error, message, attributes) = match serde_json::from_slice::<ErrorBody>(bytes) {
            Ok(body) => {
                let error = excerpt(&body.error);
                let message = body
                    .message
                    .map(|m| excerpt(&m))
                    .unwrap_or_else(|| error.clone());
                (
                    error,
                    message,
                    body.attributes.map(|a| Box::new(scrub_value(a))),
                )
            }
            Err(_) => (reason, excerpt(&String::from_utf8_lossy(bytes)), None),
        };
        if status.as_u16() == 429 {
            ApiError::RateLimited {
                request: label.clone(),
                error,
                message,
                attributes,
                retry_after,
            }
        } else {
            ApiError::Api {
                request: label.clone(),
                status: status.as_u16(),
                error,
                message,
                attributes,
            }
        }
    }
}

/// A failed attempt: what kind of failure (for the retry rule), the error to report if no
/// retry follows, and the service's `Retry-After`.
struct Failed {
    failure: Failure,
    error: ApiError,
    retry_after: Option<Duration>,
}

impl Failed {
    fn new(failure: Failure, error: ApiError, retry_after: Option<Duration>) -> Self {
        Failed {
            failure,
            error,
            retry_after,
        }
    }
}

/// Removes secrets from a JSON value (error `attributes` are echoed into messages and logs).
fn scrub_value(value: serde_json::Value) -> serde_json::Value {
    let text = value.to_string();
    let scrubbed = crate::redact::scrub(&text);
    if scrubbed == text {
        value
    } else {
        serde_json::from_str(&scrubbed).unwrap_or(serde_json::Value::Null)
    }
}
