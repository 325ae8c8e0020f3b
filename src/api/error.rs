//! The errors of the API client. No message ever contains the API key or a ping token: bodies
//! and transport errors go through [`crate::redact::scrub`] before they are stored.

use std::time::Duration;

use super::Operation;

/// Which request failed, for messages: `GET /v1/check-groups/7`. The path holds resource ids,
/// never a ping token (ping URLs are not requested through this client).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLabel {
    /// The operation.
    pub operation: Operation,
    /// HTTP method and path, e.g. `GET /v1/check-statuses`.
    pub target: String,
}

impl std::fmt::Display for RequestLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.target)
    }
}

/// Why an API call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// The service answered with an error status (the spec's `{statusCode, error, message,
    /// attributes}` body; a body that is not of that shape is kept as a short excerpt).
    #[error("api error {status} {error}: {message} ({request})")]
    Api {
        /// The request.
        request: RequestLabel,
        /// HTTP status.
        status: u16,
        /// The body's `error` (else the status's reason phrase).
        error: String,
        /// The body's `message` (else an excerpt of the body).
        message: String,
        /// The body's `attributes` (present on 401 and 429); boxed to keep the error small.
        attributes: Option<Box<serde_json::Value>>,
    },
    /// 429 Too Many Requests, after the retries allowed were spent.
    #[error("api error 429 {error}: {message} ({request}){}", retry_hint(.retry_after))]
    RateLimited {
        /// The request.
        request: RequestLabel,
        /// The body's `error`.
        error: String,
        /// The body's `message`.
        message: String,
        /// The body's `attributes`; boxed to keep the error small.
        attributes: Option<Box<serde_json::Value>>,
        /// The last `Retry-After` the service sent.
        retry_after: Option<Duration>,
    },
    /// The request did not get an answer (connect failure, timeout, broken connection).
    #[error("{detail} ({request})")]
    Transport {
        /// The request.
        request: RequestLabel,
        /// What happened, without the URL.
        detail: String,
        /// True when the request surely never reached the service (connect failure).
        not_sent: bool,
        /// True when it timed out.
        timed_out: bool,
    },
    /// The answer did not have the shape the spec gives.
    #[error("unexpected answer to {operation} ({status}): {detail}")]
    Decode {
        /// The operation.
        operation: Operation,
        /// HTTP status of the answer.
        status: u16,
        /// A short serde message.
        detail: String,
    },
    /// The client could not be built or a request could not be formed (bad base URL, a key
    /// that is not a valid header value).
    #[error("api client: {0}")]
    Setup(String),
}

fn retry_hint(retry_after: &Option<Duration>) -> String {
    match retry_after {
        Some(wait) => format!("; retry after {}s", wait.as_secs_f64().ceil()),
        None => String::new(),
    }
}

impl ApiError {
    /// The HTTP status of an answered request, `None` when there was no usable answer status.
    pub fn status(&self) -> Option<u16> {
        match self {
            ApiError::Api { status, .. } | ApiError::Decode { status, .. } => Some(*status),
            ApiError::RateLimited { .. } => Some(429),
            ApiError::Transport { .. } | ApiError::Setup(_) => None,
        }
    }

    /// True for 404 (callers such as sync treat a missing check differently).
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// True for 401 and 403: retrying will not help, the credentials must change.
    pub fn is_auth(&self) -> bool {
        matches!(self.status(), Some(401 | 403))
    }
}

/// How much of a non-JSON error body is kept.
pub(crate) const EXCERPT_CHARS: usize = 200;

/// A short, single-line excerpt of `text` with every secret removed.
pub(crate) fn excerpt(text: &str) -> String {
    let scrubbed = crate::redact::scrub(text);
    let flat: String = scrubbed
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let trimmed = flat.trim();
    if trimmed.chars().count() > EXCERPT_CHARS {
        let cut: String = trimmed.chars().take(EXCERPT_CHARS).collect();
        format!("{cut}…")
    } else {
        trimmed.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_status_error_message_and_request() {
        let err = ApiError::Api {
            request: RequestLabel {
                operation: Operation::GetCheckGroup,
                target: "GET /v1/check-groups/7".into(),
            },
            status: 404,
            error: "Not Found".into(),
            message: "Not Found".into(),
            attributes: None,
        };
        assert_eq!(
            err.to_string(),
            "api error 404 Not Found: Not Found (GET /v1/check-groups/7)"
        );
        assert!(err.is_not_found());
    }

    #[test]
    fn excerpt_is_short_single_line_and_scrubbed() {
        let body = format!("<html>\nkey sk_123456 {}</html>", "x".repeat(500));
        let _key = crate::redact::Secret::new("sk_123456");
        let short = excerpt(&body);
        assert!(!short.contains("sk_123456"));
        assert!(!short.contains('\n'));
        assert!(short.chars().count() <= EXCERPT_CHARS + 1);
    }
}
