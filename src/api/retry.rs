//! When and how long to wait before repeating a failed request: capped exponential backoff
//! with full jitter (`sleep = random(0, min(cap, base * 2^n))`), `Retry-After` honoured, and
//! the rule that decides which failures may be repeated at all.

use std::time::{Duration, SystemTime};

use rand::Rng;

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
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(31);
        self.base
            .checked_mul(1u32 << exponent)
            .unwrap_or(self.cap)
            .min(self.cap)
    }

    /// A random wait in `[0, ceiling(attempt)]` (full jitter).
    pub fn backoff(&self, attempt: u32, rng: &mut impl Rng) -> Duration {
        let ceiling = self.ceiling(attempt);
        if ceiling.is_zero() {
            return ceiling;
        }
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rng.gen_range(0..=nanos))
    }
}

/// What became of one attempt, as far as retrying is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The connection could not be made: the service surely did not see the request.
    NotSent,
    /// Sent, but no complete answer (timeout, reset): the service may have acted on it.
    NoAnswer,
    /// The service answered with this status.
    Status(u16),
}

/// Whether a failure may be repeated. 429 and a failed connection are always safe (the service
/// did not act); a lost answer and 5xx only for idempotent operations; other statuses never.
pub fn is_retryable(failure: Failure, idempotent: bool) -> bool {
    match failure {
        Failure::NotSent | Failure::Status(429) => true,
        Failure::NoAnswer => idempotent,
        Failure::Status(status) if (500..=599).contains(&status) => idempotent,
        Failure::Status(_) => false,
    }
}

/// Reads a `Retry-After` value: delay seconds or an HTTP date (relative to `now`; a date in
/// the past means no wait). `None` when absent or unreadable.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
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

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after(" 7 ", now), Some(Duration::from_secs(7)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(
            parse_retry_after(&later, now),
            Some(Duration::from_secs(30))
        );
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(parse_retry_after(&earlier, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
    }
}
