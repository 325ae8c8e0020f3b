//! A job's retries: how many times a failed attempt is tried again within one run (one fire),
//! how long the agent waits between attempts, and the longest a run can take because of them.
//!
//! The wait before retry `n` (the first retry is `n = 0`) is drawn by
//! [`crate::backoff::equal_jitter`]: uniform in `[c/2, c]` where `c = min(retry_delay_max,
//! retry_delay * 2^n)`. Half of the wait is kept so that a retry is never made at once (the
//! transient error it waits out needs time to clear), the other half is random so that many
//! hosts failing on one outage do not come back together. The run pipeline's one attempt loop
//! (`src/run/attempts.rs`, for `run` and the daemon alike), `config check` and the auto grace of sync
//! (`src/sync/period/`) all read the same [`Retries`], so the worst case that the grace
//! covers is the one the runs can take.
//!
//! This module sits below the config, which builds a [`Retries`] for each job and says it in
//! words (`config/retries.rs`); it imports nothing of the config.

use std::time::Duration;

/// The default `retry_delay`: the longest wait before a job's first retry.
pub(crate) const RETRY_DELAY: Duration = Duration::from_secs(10);
/// The default `retry_delay_max`: the cap of the doubled waits between a job's attempts.
pub(crate) const RETRY_DELAY_MAX: Duration = Duration::from_secs(300);

/// The most retries a job may have: more is refused by the config (a job failing a hundred
/// times in one run is broken, not flaky).
pub const MAX_RETRIES: u32 = 100;

/// The longest `retry_delay` or `retry_delay_max`: one day (a longer wait belongs to the next
/// fire, not to this run).
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(86_400);

/// `retries`, `retry_delay` and `retry_delay_max` of a job (or of `run`'s flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retries {
    /// How many times a failed attempt is tried again (0: the run is one attempt).
    pub retries: u32,
    /// The ceiling of the wait before the first retry, doubled for each later one.
    pub delay: Duration,
    /// The cap of that doubling.
    pub delay_max: Duration,
}

impl Default for Retries {
    fn default() -> Retries {
        Retries {
            retries: 0,
            delay: RETRY_DELAY,
            delay_max: RETRY_DELAY_MAX,
        }
    }
}

impl Retries {
    /// `retries` with the given delays; an unset cap is the default cap, or the delay itself
    /// when that is longer (a lone `retry_delay = "10m"` is not an error).
    pub fn new(retries: u32, delay: Option<Duration>, delay_max: Option<Duration>) -> Retries {
        let delay = delay.unwrap_or(RETRY_DELAY);
        Retries {
            retries,
            delay,
            delay_max: delay_max.unwrap_or(RETRY_DELAY_MAX.max(delay)),
        }
    }

    /// How many attempts a run makes at most.
    pub fn attempts(&self) -> u32 {
        self.retries.saturating_add(1)
    }

    /// The wait before retry `retry` (0 for the first retry), drawn now.
    pub fn delay_before(&self, retry: u32) -> Duration {
        crate::backoff::equal_jitter(retry, self.delay, self.delay_max)
    }

    /// The sum of the longest waits between all attempts of a run.
    pub fn longest_delays(&self) -> Duration {
        (0..self.retries)
            .map(|n| crate::backoff::ceiling(n, self.delay, self.delay_max))
            .fold(Duration::ZERO, Duration::saturating_add)
    }

    /// What the retries can add to a run at most: `retries × timeout` plus the longest waits
    /// (without a timeout, only the waits: an attempt then has no bound of its own).
    pub fn extra_time(&self, timeout: Option<Duration>) -> Duration {
        timeout
            .unwrap_or_default()
            .saturating_mul(self.retries)
            .saturating_add(self.longest_delays())
    }

    /// The longest a run can take: `attempts × timeout` plus the longest waits.
    pub fn worst_case(&self, timeout: Option<Duration>) -> Duration {
        timeout
            .unwrap_or_default()
            .saturating_add(self.extra_time(timeout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_case_counts_every_attempt_and_the_capped_waits() {
        let secs = Duration::from_secs;
        let retries = Retries::new(3, Some(secs(10)), Some(secs(30)));
        assert_eq!(retries.attempts(), 4);
        // 10 + 20 + 30 (capped).
        assert_eq!(retries.longest_delays(), secs(60));
        assert_eq!(retries.extra_time(Some(secs(600))), secs(1860));
        assert_eq!(retries.worst_case(Some(secs(600))), secs(2460));
        assert_eq!(retries.worst_case(None), secs(60));
        let none = Retries::default();
        assert_eq!(none.attempts(), 1);
        assert_eq!(none.extra_time(Some(secs(600))), Duration::ZERO);
        assert_eq!(none.worst_case(Some(secs(600))), secs(600));
        let most = Retries::new(MAX_RETRIES, Some(MAX_RETRY_DELAY), None);
        assert_eq!(most.longest_delays(), MAX_RETRY_DELAY * MAX_RETRIES);
    }

    #[test]
    fn an_unset_cap_is_never_below_the_delay() {
        let secs = Duration::from_secs;
        assert_eq!(Retries::new(1, None, None).delay_max, RETRY_DELAY_MAX);
        assert_eq!(
            Retries::new(1, Some(secs(3600)), None).delay_max,
            secs(3600)
        );
        assert_eq!(
            Retries::new(1, Some(secs(1)), Some(secs(2))).delay_max,
            secs(2)
        );
    }

    #[test]
    fn waits_stay_between_half_and_the_ceiling() {
        let secs = Duration::from_secs;
        let retries = Retries::new(5, Some(secs(4)), Some(secs(10)));
        for retry in 0..5 {
            let ceiling = crate::backoff::ceiling(retry, secs(4), secs(10));
            for _ in 0..50 {
                let wait = retries.delay_before(retry);
                assert!(wait >= ceiling / 2 && wait <= ceiling, "{retry}: {wait:?}");
            }
        }
    }
}
