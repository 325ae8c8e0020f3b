//! Capped exponential backoff with full jitter: `random(0, min(cap, base * 2^n))`, so many
//! senders retrying after one outage spread out instead of arriving together.

use std::time::Duration;

use rand::Rng;

/// The pause before retry number `retry + 1` (the first retry is `retry = 0`).
pub fn full_jitter(retry: u32, base: Duration, cap: Duration) -> Duration {
    let ceiling = ceiling(retry, base, cap);
    if ceiling.is_zero() {
        return Duration::ZERO;
    }
    rand::thread_rng().gen_range(Duration::ZERO..=ceiling)
}

/// `min(cap, base * 2^retry)`, the upper bound of [`full_jitter`].
pub fn ceiling(retry: u32, base: Duration, cap: Duration) -> Duration {
    base.saturating_mul(2u32.saturating_pow(retry.min(31)))
        .min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceiling_doubles_then_caps() {
        let base = Duration::from_millis(100);
        let cap = Duration::from_secs(1);
        assert_eq!(ceiling(0, base, cap), base);
        assert_eq!(ceiling(2, base, cap), Duration::from_millis(400));
        assert_eq!(ceiling(10, base, cap), cap);
        assert_eq!(ceiling(u32::MAX, base, cap), cap);
        for retry in 0..8 {
            assert!(full_jitter(retry, base, cap) <= ceiling(retry, base, cap));
        }
    }
}
