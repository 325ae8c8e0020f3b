//! The one retry loop of every HTTP client that repeats a request within one call (pings and
//! the monitoring API): [`RetryPolicy`] says how hard to try, [`retry`] runs the attempts, and
//! [`RetryPolicy::wait`] is the rule between them, a pure function of the failed attempt, the
//! server's `Retry-After`, what is left of the budget and an injected RNG.
//!
//! The loop: at most `max_attempts` attempts, none started once `budget` (counted from the
//! first attempt) is spent. Each attempt is told its deadline, an even share of what is left
//! (`left / attempts left`), so a server that hangs still leaves room for the retries; a caller
//! with a timeout of its own (the API client's request timeout) may ignore it. An attempt ends
//! as [`TryResult::Done`], [`TryResult::Retry`] (with the server's `Retry-After`, if any) or
//! [`TryResult::Stop`] (permanent, or pointless to repeat now). The caller's `after_failure` hears
//! of every failed attempt and of what follows, so each caller keeps its own log lines.
//!
//! The rule, after failed attempt `n` (the first is `n = 1`) that may be repeated, with `left`
//! the time until the budget ends:
//!
//! - the backoff `b` is full jitter, uniform in `[0, min(cap, base * 2^(n-1))]`
//!   ([`crate::backoff`]), shortened to `left / 2` so the retry still has time to run: the
//!   backoff is the client's own pacing, and shortening it breaks no one's rule;
//! - without `Retry-After` the wait is `b`;
//! - with `Retry-After` `r`, the wait is `max(r, b)`: never earlier than the service asked
//!   (its rule), and never earlier than the backoff, so senders all told `Retry-After: 0` do
//!   not come back all at once;
//! - `r` is never shortened: when it does not end before the budget does (`r >= left`), the
//!   loop stops at once with the last error and `r`, for the caller to honour later. For a ping
//!   that is the outbox, which keeps it with its next try `r` ahead (a ping delivered late is
//!   still worth having, a ping sent early against a 429 is refused again); for the API it is
//!   the error returned (a 429's `RateLimited` carries `r`).
//!
//! The same rule holds for both callers: no parameter sets them apart. What still differs is
//! outside the loop: which failures may be repeated (each caller classifies its own), the API's
//! rate limiter (taken inside its attempt), and the log lines.

use std::future::Future;
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use crate::backoff;

/// How hard one call tries: the one retry policy of pings and the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = never retry).
    pub max_attempts: u32,
    /// The first backoff's upper bound.
    pub base: Duration,
    /// No backoff's upper bound exceeds this.
    pub cap: Duration,
    /// Total time a call may spend, waits included: no attempt starts after it, and a
    /// `Retry-After` that would end past it ends the call with the last error instead.
    pub budget: Duration,
}

impl Default for RetryPolicy {
    /// The API client's: 4 attempts, backoff from 500 ms up to 30 s, 120 s in all (a ping's
    /// comes from its [`crate::ping::Budget`]).
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

    /// The wait after failed attempt `failed` (1-based) before the next one, with `left` the
    /// time until the budget ends; `None`: stop now. The rule of the module header.
    pub(crate) fn wait(
        &self,
        failed: u32,
        retry_after: Option<Duration>,
        left: Duration,
        rng: &mut impl Rng,
    ) -> Option<Duration> {
        let backoff = backoff::full_jitter_with(failed.saturating_sub(1), self.base, self.cap, rng)
            .min(left / 2);
        match retry_after {
            Some(after) if after >= left => None,
            Some(after) => Some(after.max(backoff)),
            None => Some(backoff),
        }
    }
}

/// What one attempt is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Try {
    /// Which attempt this is, from 1.
    pub number: u32,
    /// When it should be over: an even share of what is left of the budget.
    pub deadline: Instant,
}

/// How one attempt ended, as far as retrying is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TryResult<T, E> {
    /// It succeeded.
    Done(T),
    /// It failed, and repeating it may help; the server's `Retry-After`, if it sent one.
    Retry {
        /// What failed.
        error: E,
        /// The server's `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// It failed, and repeating it now cannot help.
    Stop(E),
}

/// What the loop does after a failed attempt, told to the caller's `after_failure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AfterFailure {
    /// The attempt that failed, from 1.
    pub attempt: u32,
    /// Whether its failure was [`TryResult::Retry`].
    pub retryable: bool,
    /// The wait before the next attempt; `None`: this was the last one.
    pub wait: Option<Duration>,
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RetryOutcome<T, E> {
    /// An attempt succeeded.
    Done {
        /// What it gave.
        value: T,
        /// Attempts used.
        attempts: u32,
    },
    /// No attempt succeeded: the last one's error.
    Failed {
        /// The last error.
        error: E,
        /// Attempts used.
        attempts: u32,
        /// The last attempt's `Retry-After`, for the caller to honour later.
        retry_after: Option<Duration>,
    },
    /// The budget was spent before the first attempt (a zero budget).
    NoTime,
}

/// Runs `attempt` under `policy` (see the module header), calling `after_failure` after each
/// failed attempt.
pub(crate) async fn retry<T, E, A, F>(
    policy: &RetryPolicy,
    mut attempt: A,
    mut after_failure: impl FnMut(&E, AfterFailure),
) -> RetryOutcome<T, E>
where
    A: FnMut(Try) -> F,
    F: Future<Output = TryResult<T, E>>,
{
    let end = Instant::now() + policy.budget;
    let attempts = policy.max_attempts.max(1);
    let mut last = None;
    for number in 1..=attempts {
        let now = Instant::now();
        if now >= end {
            break;
        }
        let deadline = now + (end - now) / (attempts - number + 1);
        let (error, retry_after, retryable) = match attempt(Try { number, deadline }).await {
            TryResult::Done(value) => {
                return RetryOutcome::Done {
                    value,
                    attempts: number,
                }
            }
            TryResult::Retry { error, retry_after } => (error, retry_after, true),
            TryResult::Stop(error) => (error, None, false),
        };
        let left = end.saturating_duration_since(Instant::now());
        let wait = (retryable && number < attempts)
            .then(|| policy.wait(number, retry_after, left, &mut rand::thread_rng()))
            .flatten();
        let after = AfterFailure {
            attempt: number,
            retryable,
            wait,
        };
        after_failure(&error, after);
        last = Some((error, number, retry_after));
        let Some(wait) = wait else { break };
        tokio::time::sleep(wait).await;
    }
    match last {
        Some((error, attempts, retry_after)) => RetryOutcome::Failed {
            error,
            attempts,
            retry_after,
        },
        None => RetryOutcome::NoTime,
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn policy(max_attempts: u32, budget: Duration) -> RetryPolicy {
        RetryPolicy {
            max_attempts,
            base: 100 * MS,
            cap: 400 * MS,
            budget,
        }
    }

    #[test]
    fn without_retry_after_the_wait_is_the_jitter_within_half_of_what_is_left() {
        let policy = policy(5, Duration::from_secs(60));
        let mut rng = StdRng::seed_from_u64(7);
        for failed in 1..=4 {
            let top = backoff::ceiling(failed - 1, policy.base, policy.cap);
            for _ in 0..100 {
                let wait = policy.wait(failed, None, Duration::from_secs(10), &mut rng);
                assert!(wait.is_some_and(|w| w <= top), "{failed}: {wait:?}");
                let short = policy.wait(failed, None, 20 * MS, &mut rng);
                assert!(short.is_some_and(|w| w <= 10 * MS), "{failed}: {short:?}");
            }
        }
        assert_eq!(
            policy.wait(1, None, Duration::ZERO, &mut rng),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn a_retry_after_within_the_budget_is_a_floor_under_the_jitter() {
        let policy = policy(5, Duration::from_secs(60));
        let mut rng = StdRng::seed_from_u64(7);
        let left = Duration::from_secs(10);
        for _ in 0..100 {
            // Longer than any backoff: exactly the service's wait.
            let wait = policy.wait(3, Some(Duration::from_secs(2)), left, &mut rng);
            assert_eq!(wait, Some(Duration::from_secs(2)));
            // Shorter: never earlier than the service asked, nor than the backoff.
            let wait = policy
                .wait(3, Some(50 * MS), left, &mut rng)
                .expect("a wait");
            assert!(wait >= 50 * MS && wait <= 400 * MS, "{wait:?}");
        }
        // `Retry-After: 0` still spreads the senders over the backoff.
        let zeros: Vec<Duration> = (0..100)
            .filter_map(|_| policy.wait(3, Some(Duration::ZERO), left, &mut rng))
            .collect();
        assert_eq!(zeros.len(), 100);
        assert!(zeros.iter().any(|w| *w > 200 * MS), "{zeros:?}");
    }

    #[test]
    fn a_retry_after_that_does_not_end_before_the_budget_stops_the_call() {
        let policy = policy(5, Duration::from_secs(60));
        let mut rng = StdRng::seed_from_u64(7);
        let left = Duration::from_secs(10);
        assert_eq!(policy.wait(1, Some(left), left, &mut rng), None);
        assert_eq!(policy.wait(1, Some(left * 360), left, &mut rng), None);
        // Just inside: honoured whole, though it is more than half of what is left.
        assert_eq!(
            policy.wait(1, Some(left - MS), left, &mut rng),
            Some(left - MS)
        );
    }

    /// Runs the loop over `script` (the last entry repeats) on tokio's paused clock: the
    /// outcome, each failure as `after_failure` heard it, each try's deadline from the start,
    /// and the time it took.
    async fn run(
        policy: &RetryPolicy,
        script: Vec<TryResult<&'static str, u32>>,
    ) -> (
        RetryOutcome<&'static str, u32>,
        Vec<AfterFailure>,
        Vec<Duration>,
        Duration,
    ) {
        let started = Instant::now();
        let mut failures = Vec::new();
        let mut tries = Vec::new();
        let outcome = retry(
            policy,
            |this: Try| {
                tries.push(this.deadline - started);
                let step = (this.number as usize - 1).min(script.len() - 1);
                std::future::ready(script[step].clone())
            },
            |_, after| failures.push(after),
        )
        .await;
        (outcome, failures, tries, started.elapsed())
    }

    fn again(retry_after: Option<u64>) -> TryResult<&'static str, u32> {
        TryResult::Retry {
            error: 503,
            retry_after: retry_after.map(Duration::from_secs),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retries_until_an_attempt_succeeds() {
        let policy = policy(4, Duration::from_secs(30));
        let script = vec![again(None), again(Some(2)), TryResult::Done("ok")];
        let (outcome, failures, tries, took) = run(&policy, script).await;
        assert_eq!(
            outcome,
            RetryOutcome::Done {
                value: "ok",
                attempts: 3
            }
        );
        assert_eq!(failures.len(), 2);
        assert!(failures[0].wait.is_some_and(|w| w <= 100 * MS));
        assert_eq!(failures[1].wait, Some(Duration::from_secs(2)));
        // The paused clock wakes a sleep on the next whole millisecond.
        let waited: Duration = failures.iter().filter_map(|f| f.wait).sum();
        assert!(
            took >= waited && took <= waited + 2 * MS,
            "{took:?} {waited:?}"
        );
        // Each try gets an even share of what is left.
        assert_eq!(tries[0], Duration::from_secs(30) / 4);
        let second = failures[0].wait.expect("a wait");
        let share = second + (Duration::from_secs(30) - second) / 3;
        assert!(tries[1].abs_diff(share) <= MS, "{:?} {share:?}", tries[1]);
    }

    #[tokio::test(start_paused = true)]
    async fn stops_at_the_last_attempt_with_its_error_and_retry_after() {
        let policy = policy(3, Duration::from_secs(30));
        let (outcome, failures, _, _) = run(&policy, vec![again(None), again(Some(1))]).await;
        assert_eq!(
            outcome,
            RetryOutcome::Failed {
                error: 503,
                attempts: 3,
                retry_after: Some(Duration::from_secs(1))
            }
        );
        let waits: Vec<bool> = failures.iter().map(|f| f.wait.is_some()).collect();
        assert_eq!(waits, [true, true, false]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_permanent_failure_is_not_repeated() {
        let policy = policy(3, Duration::from_secs(30));
        let (outcome, failures, _, took) = run(&policy, vec![TryResult::Stop(404)]).await;
        assert_eq!(
            outcome,
            RetryOutcome::Failed {
                error: 404,
                attempts: 1,
                retry_after: None
            }
        );
        let expected = AfterFailure {
            attempt: 1,
            retryable: false,
            wait: None,
        };
        assert_eq!(failures, [expected]);
        assert_eq!(took, Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_after_past_the_budget_ends_the_call_at_once() {
        let policy = policy(5, Duration::from_secs(30));
        let (outcome, _, _, took) = run(&policy, vec![again(Some(3600))]).await;
        assert_eq!(
            outcome,
            RetryOutcome::Failed {
                error: 503,
                attempts: 1,
                retry_after: Some(Duration::from_secs(3600))
            }
        );
        assert_eq!(took, Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn no_attempt_starts_once_the_budget_is_spent() {
        let none = policy(3, Duration::ZERO);
        let (outcome, _, tries, _) = run(&none, vec![TryResult::Done("ok")]).await;
        assert_eq!(outcome, RetryOutcome::NoTime);
        assert!(tries.is_empty());
        // Waits of nearly the whole budget: the backoff shrinks to fit, the attempts go on.
        let tight = RetryPolicy {
            base: Duration::from_secs(60),
            cap: Duration::from_secs(60),
            ..policy(3, Duration::from_secs(1))
        };
        let (outcome, _, _, took) = run(&tight, vec![again(None)]).await;
        assert!(
            matches!(outcome, RetryOutcome::Failed { attempts: 3, .. }),
            "{outcome:?}"
        );
        assert!(took < Duration::from_secs(1), "{took:?}");
    }
}
