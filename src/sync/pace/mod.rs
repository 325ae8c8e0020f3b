//! Fleet-friendly pacing of the sync task's PUTs ([`Pacer`], rule in docs/sync.md).
//!
//! Many agents may share one API key, and the service counts its 429 answers against the same
//! limit (600 requests per 60 s): a fleet whose combined rate is above the limit gets nothing
//! but 429s until it slows down. No agent knows the fleet's size, so each one paces itself
//! from what it sees:
//!
//! - Unpaced until the first 429: a lone agent syncs all its checks at once (the client's own
//!   limiter still keeps it under the quota).
//! - On a 429: the rate is multiplied by `decrease` (by `repeat_decrease` from the
//!   `repeat_after`-th 429 in a row) and capped at one request per `restart_interval`. The next
//!   PUT waits one `window` of the service's limit, then a random part of one interval of the
//!   new pace, and at least the `Retry-After` the service sent, if any: the window's requests,
//!   429s included, count until they are a window old, so a PUT sooner only meets another 429;
//!   and a fleet refused together comes back spread evenly over the interval.
//! - Without 429s the rate grows with the time `t` since the last one, in two phases:
//!   `rate = base * 2^(min(t, hold) / slow_doubling + max(0, t - hold) / fast_doubling)`.
//!   For `hold` it grows slowly: the fleet is near the limit, and every agent that speeds up
//!   there brings a minute of 429s for all. Once no 429 has come for `hold`, the fleet has
//!   thinned out (agents are done), and the rate doubles every `fast_doubling`, so the last
//!   agents finish fast instead of crawling at the pace of the last crowded minute. Growth
//!   follows time, not accepted requests: an agent with few checks left sends few requests.
//!   Pacing ends (unpaced) when the rate reaches one request per `min_interval`. Each 429
//!   draws the agent's own `hold` (the rule's, jittered by `±jitter`): agents slowed down by
//!   the same crowded minute would otherwise all speed up in the same minute and push the
//!   fleet over the limit together.
//! - Each gap between accepted PUTs is the time in which the growing rate adds up to one
//!   request (not the interval of the rate at its start: an agent slowed by several 429s would
//!   otherwise wait minutes while its pace grows many times over), jittered by `±gap_jitter`.
//!
//! The constants (docs/sync.md) were chosen with a discrete-event model of the fleet
//! simulation (tests/sync/scale.rs: 1,000 agents x 10 checks on one key), then measured in the
//! release simulation against the rule they replace (BENCHMARKS.md, "Sync: a fleet sharing one
//! API key"; every run in docs/dev/profiles/profile-fleet.md). What the model showed: the
//! time beyond the ideal went to agents refused a second time at the start (they came back
//! while the start's 429s still filled the window), to over-shoots when many agents' slow
//! phases ended while the fleet was still near the limit, and to the spread of the agents'
//! summed gaps; the fleet's last check decides the figure, so one unlucky agent is the tail.

use std::sync::Mutex;
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use crate::backoff::MAX_RETRY_AFTER;

/// The constants of the pacing rule (the defaults suit the service's 600 requests per 60 s;
/// the fleet simulation divides the durations by its clock scale).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PaceRule {
    /// After a 429 the pace restarts at most at one request per this (120 s: a fleet of up to
    /// 1,200 agents is then under 600 requests per 60 s right after its first 429s).
    pub restart_interval: Duration,
    /// Factor applied to the rate on every 429 (multiplicative decrease).
    pub decrease: f64,
    /// How long after a 429 the rate grows slowly: long enough that a fleet still crowding the
    /// limit meets its next 429 before speeding up (the slow phase).
    pub hold: Duration,
    /// During the slow phase the rate doubles every this long.
    pub slow_doubling: Duration,
    /// After the slow phase the rate doubles every this long (a thinned-out fleet speeds up).
    pub fast_doubling: Duration,
    /// The shortest gap; once the pace reaches it, pacing ends (the client's limiter rules).
    pub min_interval: Duration,
    /// Each 429's slow phase (`hold`) is multiplied by a random factor in
    /// `1 - jitter ..= 1 + jitter`.
    pub jitter: f64,
    /// Each gap (one request's worth of the pace) is multiplied by a random factor in
    /// `1 - gap_jitter ..= 1 + gap_jitter`.
    pub gap_jitter: f64,
    /// The service's rate-limit window. When not zero, the next PUT after a 429 goes one
    /// window plus a random part of one interval of the new pace later: the requests that
    /// filled the window, 429 answers included, count until they are a window old, so a PUT
    /// sooner only meets another 429 and keeps the key locked longer for every agent; and a
    /// fleet refused together comes back spread evenly over a whole interval. Zero: the next
    /// PUT waits one gap of the new pace.
    pub window: Duration,
    /// Factor applied to the rate, instead of `decrease`, on the `repeat_after`-th 429 in a
    /// row and every later one without an accepted PUT between them: a fleet far above the
    /// limit (thousands of agents on one key) gets under it in a few rounds of 429s, not tens.
    pub repeat_decrease: f64,
    /// See `repeat_decrease` (0: never).
    pub repeat_after: u32,
}

impl Default for PaceRule {
    /// After a 429 at most one request per 120 s, 0.9 times the rate (0.5 times from the third
    /// 429 in a row), the next PUT a window (60 s) plus a random part of one interval later;
    /// for 25 minutes (±30 %) after the last 429 the rate doubles every hour (+33 % at 25 min),
    /// then every 5 minutes, up to 10 per second (the quota's 600 per 60 s); gaps ±20 %.
    fn default() -> Self {
        PaceRule {
            restart_interval: Duration::from_secs(120),
            decrease: 0.9,
            hold: Duration::from_secs(1500),
            slow_doubling: Duration::from_secs(3600),
            fast_doubling: Duration::from_secs(300),
            min_interval: Duration::from_millis(100),
            jitter: 0.3,
            gap_jitter: 0.2,
            window: Duration::from_secs(60),
            repeat_decrease: 0.5,
            repeat_after: 3,
        }
    }
}

impl PaceRule {
    /// The same rule on a clock running `scale` times faster (every duration divided by it).
    pub fn scaled(&self, scale: f64) -> Self {
        let scale = if scale.is_finite() && scale > 0.0 {
            scale
        } else {
            1.0
        };
        PaceRule {
            restart_interval: self.restart_interval.div_f64(scale),
            hold: self.hold.div_f64(scale),
            slow_doubling: self.slow_doubling.div_f64(scale),
            fast_doubling: self.fast_doubling.div_f64(scale),
            min_interval: self.min_interval.div_f64(scale),
            window: self.window.div_f64(scale),
            ..*self
        }
    }

    /// The fastest rate, in requests per second.
    fn max_rate(&self) -> f64 {
        1.0 / self.min_interval.as_secs_f64().max(1e-9)
    }
}

/// How many times a rate doubling every `doubling` doubles in `elapsed` (a zero doubling time
/// means immediately unbounded).
fn doublings(elapsed: Duration, doubling: Duration) -> f64 {
    if elapsed.is_zero() {
        0.0
    } else if doubling.is_zero() {
        f64::INFINITY
    } else {
        elapsed.as_secs_f64() / doubling.as_secs_f64()
    }
}

/// The pace of one agent's PUTs. Shared by the passes of the sync task; never blocks.
#[derive(Debug)]
pub struct Pacer {
    inner: Mutex<Inner>,
}

#[derive(Debug, Clone, Copy)]
struct Inner {
    rule: PaceRule,
    /// The rate (requests per second) set by the last 429; `None` while unpaced.
    base: Option<f64>,
    /// When `base` was set: the rate grows from there.
    since: Instant,
    /// The earliest time the next PUT may go.
    next: Option<Instant>,
    /// This pace's slow phase: the rule's `hold` times a jitter factor drawn at the 429, so
    /// that agents limited by the same crowded minute do not all speed up at once.
    hold: Duration,
    /// The 429s met since the last PUT that got another answer.
    in_row: u32,
}

impl Default for Pacer {
    fn default() -> Self {
        Pacer::new(PaceRule::default())
    }
}

impl Pacer {
    /// An unpaced pacer following `rule`.
    pub fn new(rule: PaceRule) -> Self {
        Pacer {
            inner: Mutex::new(Inner {
                rule,
                base: None,
                since: Instant::now(),
                next: None,
                hold: rule.hold,
                in_row: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the rule (tests, the simulation); the current pace is kept.
    pub fn set_rule(&self, rule: PaceRule) {
        self.lock().rule = rule;
    }

    /// The rule in force.
    pub fn rule(&self) -> PaceRule {
        self.lock().rule
    }

    /// The current rate in requests per second, `None` while unpaced.
    pub fn rate(&self, now: Instant) -> Option<f64> {
        self.lock().rate(now)
    }

    /// How long until the next PUT may go (zero when unpaced or already due).
    pub fn delay(&self, now: Instant) -> Duration {
        self.lock()
            .next
            .map_or(Duration::ZERO, |next| next.saturating_duration_since(now))
    }

    /// A PUT got an answer other than 429 (or none): the next one waits a jittered interval
    /// of the pace, counting its growth during the wait; a pace that has grown to the fastest
    /// rate ends.
    pub fn sent(&self, now: Instant, rng: &mut impl Rng) {
        let mut inner = self.lock();
        inner.in_row = 0;
        match inner.rate(now) {
            Some(rate) if rate < inner.rule.max_rate() => {
                let gap = inner.gap(now, rng);
                inner.next = Some(now + gap);
            }
            _ => {
                inner.base = None;
                inner.next = None;
            }
        }
    }

    /// A PUT got 429: decrease the rate, draw this pace's slow phase, and set when the next PUT
    /// may go (a window plus a random part of one interval, or one gap when the rule has no
    /// window), at least `retry_after` (read as at most [`MAX_RETRY_AFTER`], whoever computed
    /// it) from now.
    pub fn limited(&self, now: Instant, retry_after: Option<Duration>, rng: &mut impl Rng) {
        let mut inner = self.lock();
        let rule = inner.rule;
        inner.in_row = inner.in_row.saturating_add(1);
        let repeated = rule.repeat_after > 0 && inner.in_row >= rule.repeat_after;
        let decrease = if repeated {
            rule.repeat_decrease
        } else {
            rule.decrease
        };
        let current = inner.rate(now).unwrap_or_else(|| rule.max_rate());
        let restart = 1.0 / rule.restart_interval.as_secs_f64().max(1e-9);
        let base = (current * decrease).min(restart).max(f64::MIN_POSITIVE);
        inner.base = Some(base);
        inner.since = now;
        inner.hold = rule.hold.mul_f64(spread(rule.jitter, rng));
        let asked = retry_after.unwrap_or_default().min(MAX_RETRY_AFTER);
        let paced = if rule.window.is_zero() {
            inner.gap(now, rng)
        } else {
            // At most a day, as a gap (a pace that slow is a bug, not a plan).
            let interval = (1.0 / base).min(86_400.0);
            rule.window + Duration::from_secs_f64(interval * rng.gen_range(0.0..=1.0))
        };
        inner.next = Some(now + paced.max(asked));
    }
}

/// A random factor in `1 - jitter ..= 1 + jitter` (1 without jitter).
fn spread(jitter: f64, rng: &mut impl Rng) -> f64 {
    let jitter = jitter.clamp(0.0, 1.0);
    if jitter > 0.0 {
        rng.gen_range(1.0 - jitter..=1.0 + jitter)
    } else {
        1.0
    }
}

impl Inner {
    fn rate(&self, now: Instant) -> Option<f64> {
        let base = self.base?;
        let rule = &self.rule;
        let elapsed = now.saturating_duration_since(self.since);
        let slow = elapsed.min(self.hold);
        let fast = elapsed.saturating_sub(self.hold);
        let doublings = doublings(slow, rule.slow_doubling) + doublings(fast, rule.fast_doubling);
        Some((base * libm::exp2(doublings.min(64.0))).min(rule.max_rate()))
    }

    /// A jittered gap from `now` for a paced agent: the time in which the growing pace adds up
    /// to one request (times the jitter factor). Taking the pace at `now` alone would keep an
    /// agent slowed by several 429s waiting for minutes while its pace has long grown.
    fn gap(&self, now: Instant, rng: &mut impl Rng) -> Duration {
        let factor = spread(self.rule.gap_jitter, rng);
        let rate_at = |offset: f64| {
            self.rate(now + Duration::from_secs_f64(offset))
                .unwrap_or_else(|| self.rule.max_rate())
        };
        // At most a day: a rule that would pace slower than that is a bug, not a plan.
        let longest = (factor / rate_at(0.0)).min(86_400.0);
        // The pace only grows, so the gap is at most `longest`: add up the requests in steps
        // of 1/256 of it (midpoint rule) until they reach `factor`.
        const STEPS: u32 = 256;
        let step = longest / f64::from(STEPS);
        let mut requests = 0.0;
        for i in 0..STEPS {
            let start = f64::from(i) * step;
            let more = rate_at(start + step / 2.0) * step;
            if requests + more >= factor {
                let part = (factor - requests) / more;
                return Duration::from_secs_f64(start + part * step);
            }
            requests += more;
        }
        Duration::from_secs_f64(longest)
    }
}

#[cfg(test)]
mod tests;
