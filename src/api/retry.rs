//! When to repeat a failed request: the client's retry settings (attempts, backoff bounds,
//! total budget; the waits themselves come from [`crate::backoff`]) and the rule that decides
//! which failures may be repeated at all.

use std::time::Duration;

use rand::Rng;

use crate::backoff;

/// Retry settings of a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = never retry).
    pub max_attempts: u32,
    /// The first backoff's upper bound.
    pub base: Duration,
    /// No backoff's upper bound exceeds this.
    pub cap: Duration,
    /// Total time a call may spend, waits included; a wait that would end past it is not
    /// taken and the last error is returned instead.
    pub budget: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base: Duration::from_millis(500),
            cap: Duration::from_secs(30),
            budget: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// The upper bound of the wait after failed attempt `attempt` (1-based):
    /// `min(cap, base * 2^(attempt-1))`.
    #[cfg(test)]
    pub(crate) fn ceiling(&self, attempt: u32) -> Duration {
        backoff::ceiling(attempt.saturating_sub(1), self.base, self.cap)
    }

    /// A random wait in `[0, ceiling(attempt)]` (full jitter).
    pub(crate) fn backoff(&self, attempt: u32, rng: &mut impl Rng) -> Duration {
        backoff::full_jitter_with(attempt.saturating_sub(1), self.base, self.cap, rng)
    }
}

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
    use rand::SeedableRng;

    #[test]
    fn ceiling_doubles_then_caps() {
        let policy = RetryPolicy {
            base: Duration::from_millis(100),
            cap: Duration::from_secs(1),
            ..RetryPolicy::default()
        };
        let ceilings: Vec<u128> = (1..=6).map(|n| policy.ceiling(n).as_millis()).collect();
        assert_eq!(ceilings, vec![100, 200, 400, 800, 1000, 1000]);
        assert_eq!(policy.ceiling(200), Duration::from_secs(1));
    }

    #[test]
    fn backoff_is_full_jitter_within_the_ceiling() {
        let policy = RetryPolicy::default();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let waits: Vec<Duration> = (0..200).map(|_| policy.backoff(3, &mut rng)).collect();
        assert!(waits.iter().all(|w| *w <= policy.ceiling(3)));
        // Full jitter spreads over the whole range, down to near zero.
        assert!(waits.iter().any(|w| *w < policy.ceiling(3) / 4));
        assert!(waits.iter().any(|w| *w > policy.ceiling(3) * 3 / 4));
    }

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
