//! Which failed requests may be repeated at all. How often and after what wait is the one
//! retry loop's ([`crate::net::retry`]), shared with pings.

/// What became of one attempt, as far as retrying is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The connection could not be made: the service surely did not see the request.
    NotSent,
    /// Sent, but no complete answer (timeout, reset): the service may have acted on it.
    NoAnswer,
    /// The service answered with this status.
    Status(u16),
    /// The server's certificate is not trusted: no retry helps until the trust store changes.
    Untrusted,
}

/// Whether a failure may be repeated. 429 and a failed connection are always safe (the service
/// did not act); a lost answer and 5xx only for idempotent operations; other statuses never.
pub(crate) fn is_retryable(failure: Failure, idempotent: bool) -> bool {
    match failure {
        Failure::NotSent | Failure::Status(429) => true,
        Failure::NoAnswer => idempotent,
        Failure::Status(status) if (500..=599).contains(&status) => idempotent,
        Failure::Status(_) | Failure::Untrusted => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_safe_failures_are_retried() {
        for idempotent in [true, false] {
            assert!(is_retryable(Failure::NotSent, idempotent));
            assert!(is_retryable(Failure::Status(429), idempotent));
            for status in [400, 401, 403, 404, 409, 422] {
                assert!(!is_retryable(Failure::Status(status), idempotent));
            }
        }
        assert!(is_retryable(Failure::NoAnswer, true));
        assert!(!is_retryable(Failure::NoAnswer, false));
        assert!(is_retryable(Failure::Status(503), true));
        assert!(!is_retryable(Failure::Status(500), false));
    }
}
