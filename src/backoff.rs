//! How long to wait before trying again, for every client that retries (pings, the outbox's
//! drain, the monitoring API, the sync task):
//!
//! - capped exponential backoff with full jitter: retry `n` (the first retry is `n = 0`) waits
//!   a uniform random time in `[0, min(cap, base * 2^n)]`, so many senders retrying after one
//!   outage spread out instead of arriving together;
//! - equal jitter, for the retries of a job's run: retry `n` waits a uniform random time in
//!   `[c/2, c]` with `c = min(cap, base * 2^n)`, so a retry never comes at once;
//! - the server's `Retry-After`: delay-seconds or an HTTP date, relative to an injected `now`
//!   (a date in the past means no wait).

use std::time::{Duration, SystemTime};

use rand::Rng;

/// `min(cap, base * 2^retry)`, the upper bound of the wait before retry `retry + 1`.
pub(crate) fn ceiling(retry: u32, base: Duration, cap: Duration) -> Duration {
    base.saturating_mul(2u32.saturating_pow(retry.min(31)))
        .min(cap)
}

/// The wait before retry `retry + 1`: uniform in `[0, ceiling(retry, base, cap)]`.
pub(crate) fn full_jitter(retry: u32, base: Duration, cap: Duration) -> Duration {
    full_jitter_with(retry, base, cap, &mut rand::thread_rng())
}

/// [`full_jitter`] drawn from `rng`.
pub(crate) fn full_jitter_with(
    retry: u32,
    base: Duration,
    cap: Duration,
    rng: &mut impl Rng,
) -> Duration {
    up_to(ceiling(retry, base, cap), rng)
}

/// The wait before retry `retry + 1` with equal jitter: uniform in `[c/2, c]` where
/// `c = ceiling(retry, base, cap)`.
pub(crate) fn equal_jitter(retry: u32, base: Duration, cap: Duration) -> Duration {
    let top = ceiling(retry, base, cap);
    top / 2 + up_to(top - top / 2, &mut rand::thread_rng())
}

/// A uniform random duration in `[0, max]` (nanosecond steps).
pub(crate) fn up_to(max: Duration, rng: &mut impl Rng) -> Duration {
    if max.is_zero() {
        return max;
    }
    let nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(rng.gen_range(0..=nanos))
}

/// The longest wait a `Retry-After` can ask for: longer values (up to 2^64-1 seconds, or a date
/// centuries ahead) are read as this. A server may ask a ping or an API client to wait, not to
/// stop for ever, and every later time computation (`now + wait`, milliseconds since the epoch
/// in the outbox) stays far inside its range.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// Reads a `Retry-After` value: delay-seconds, or an HTTP date relative to `now` (a date in the
/// past is zero), at most [`MAX_RETRY_AFTER`]. `None` when unreadable.
pub(crate) fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    let wait = match value.parse::<u64>() {
        Ok(seconds) => Duration::from_secs(seconds),
        // Delay-seconds beyond 2^64-1.
        Err(_) if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => MAX_RETRY_AFTER,
        Err(_) => {
            let at = httpdate::parse_http_date(value).ok()?;
            at.duration_since(now).unwrap_or(Duration::ZERO)
        }
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn ceiling_doubles_then_caps() {
        let base = Duration::from_millis(100);
        let cap = Duration::from_secs(1);
        let ceilings: Vec<u128> = (0..6).map(|n| ceiling(n, base, cap).as_millis()).collect();
        assert_eq!(ceilings, vec![100, 200, 400, 800, 1000, 1000]);
        assert_eq!(ceiling(10, base, cap), cap);
        assert_eq!(ceiling(200, base, cap), cap);
        assert_eq!(ceiling(u32::MAX, base, cap), cap);
        assert_eq!(
            ceiling(u32::MAX, Duration::MAX, Duration::MAX),
            Duration::MAX
        );
        for retry in 0..8 {
            assert!(full_jitter(retry, base, cap) <= ceiling(retry, base, cap));
        }
        assert_eq!(full_jitter(3, Duration::ZERO, cap), Duration::ZERO);
    }

    #[test]
    fn jitter_is_full_within_the_ceiling() {
        let (base, cap) = (Duration::from_millis(500), Duration::from_secs(30));
        let top = ceiling(2, base, cap);
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let waits: Vec<Duration> = (0..200)
            .map(|_| full_jitter_with(2, base, cap, &mut rng))
            .collect();
        assert!(waits.iter().all(|w| *w <= top));
        // Full jitter spreads over the whole range, down to near zero.
        assert!(waits.iter().any(|w| *w < top / 4));
        assert!(waits.iter().any(|w| *w > top * 3 / 4));
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(retry_after(" 7 ", now), Some(Duration::from_secs(7)));
        assert_eq!(retry_after(" 120 ", now), Some(Duration::from_secs(120)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(retry_after(&later, now), Some(Duration::from_secs(30)));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(retry_after(&earlier, now), Some(Duration::ZERO));
        assert_eq!(
            retry_after("Wed, 21 Oct 2015 07:28:00 GMT", SystemTime::now()),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after("soon", now), None);
    }

    #[test]
    fn retry_after_is_clamped_over_the_whole_input_range() {
        let now = SystemTime::now();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut values: Vec<u64> = vec![
            0,
            1,
            3599,
            3600,
            3601,
            u64::from(u32::MAX),
            i64::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ];
        values.extend((0..10_000).map(|_| rng.gen::<u64>()));
        values.extend((0..64).map(|bit| 1u64 << bit));
        for seconds in values {
            let wait = retry_after(&seconds.to_string(), now).expect("a number is readable");
            assert_eq!(
                wait,
                Duration::from_secs(seconds).min(MAX_RETRY_AFTER),
                "{seconds}"
            );
            // What every caller does with it must not overflow.
            let _ = std::time::Instant::now() + wait;
            let _ = now + wait;
            let _ = tokio::time::Instant::now() + wait;
            let _ = chrono::Utc::now() + chrono::TimeDelta::from_std(wait).expect("an hour fits");
        }
        let far = "Fri, 31 Dec 9999 23:59:59 GMT";
        assert_eq!(retry_after(far, now), Some(MAX_RETRY_AFTER));
        let beyond_u64 = "18446744073709551616999";
        assert_eq!(retry_after(beyond_u64, now), Some(MAX_RETRY_AFTER));
    }
}
