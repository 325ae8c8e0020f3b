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

    /// A PUT got 429: decrease the rate, and wait at least `retry_after` (read as at most
    /// [`MAX_RETRY_AFTER`], whoever computed it) before the next.
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
        inner.hold = rule.hold.mul_f64(inner.jitter_factor(rng));
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
    /// A random factor in `1 - jitter ..= 1 + jitter` (the hold's).
    fn jitter_factor(&self, rng: &mut impl Rng) -> f64 {
        spread(self.rule.jitter, rng)
    }

    fn rate(&self, now: Instant) -> Option<f64> {
        let base = self.base?;
        let rule = &self.rule;
        let elapsed = now.saturating_duration_since(self.since);
        let slow = elapsed.min(self.hold);
        let fast = elapsed.saturating_sub(self.hold);
        let doublings = doublings(slow, rule.slow_doubling) + doublings(fast, rule.fast_doubling);
        Some((base * doublings.min(64.0).exp2()).min(rule.max_rate()))
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
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    /// One per 60 s after a 429, halved per 429; doubling every 600 s for the first 600 s,
    /// then every 60 s; no jitter.
    fn rule() -> PaceRule {
        PaceRule {
            restart_interval: Duration::from_secs(60),
            decrease: 0.5,
            hold: Duration::from_secs(600),
            slow_doubling: Duration::from_secs(600),
            fast_doubling: Duration::from_secs(60),
            min_interval: Duration::from_millis(100),
            jitter: 0.0,
            gap_jitter: 0.0,
            window: Duration::ZERO,
            repeat_decrease: 0.5,
            repeat_after: 0,
        }
    }

    fn secs(d: Duration) -> f64 {
        d.as_secs_f64()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1e-12)
    }

    /// The gap for one request at a pace starting at `rate` and doubling every `doubling`
    /// seconds: `rate * doubling / ln 2 * (2^(gap / doubling) - 1) = 1`.
    fn grown_gap(rate: f64, doubling: f64) -> f64 {
        doubling * (1.0 + std::f64::consts::LN_2 / (rate * doubling)).log2()
    }

    /// A pacer following `rule` that met its first 429 at the returned instant, and the rng
    /// for the rest of the test (a jitter-free rule never draws from it).
    fn limited_once(rule: PaceRule) -> (Pacer, StdRng, Instant) {
        let pacer = Pacer::new(rule);
        let mut rng = StdRng::seed_from_u64(1);
        let t0 = Instant::now();
        pacer.limited(t0, None, &mut rng);
        (pacer, rng, t0)
    }

    /// Whether a gap matches the expected one (the pacer adds up its pace numerically).
    fn near(gap: Duration, expected: f64) -> bool {
        (secs(gap) - expected).abs() < 1e-3
    }

    #[test]
    fn a_huge_retry_after_is_read_as_at_most_an_hour_and_never_overflows() {
        // Unclamped, `now + Duration::MAX` panics ("overflow when adding duration to
        // instant"), which aborts the daemon (`panic = "abort"`).
        for asked in [
            Duration::MAX,
            Duration::from_secs(u64::MAX),
            Duration::from_secs(7200),
        ] {
            let pacer = Pacer::new(rule());
            let mut rng = StdRng::seed_from_u64(2);
            let now = Instant::now();
            pacer.limited(now, Some(asked), &mut rng);
            assert_eq!(pacer.delay(now), MAX_RETRY_AFTER, "asked {asked:?}");
        }
    }

    #[test]
    fn a_gap_counts_the_growth_of_the_pace_during_it() {
        let (pacer, mut rng, start) = limited_once(rule());
        // At the end of the hold the pace is one per 30 s and then doubles every 60 s: one
        // request takes 25.75 s, not the 30 s the pace at the moment would say.
        let now = start + Duration::from_secs(600);
        assert!(close(pacer.rate(now).expect("paced"), 1.0 / 30.0));
        pacer.sent(now, &mut rng);
        let expected = grown_gap(1.0 / 30.0, 60.0);
        assert!((expected - 25.75).abs() < 0.01, "{expected}");
        assert!(near(pacer.delay(now), expected), "{:?}", pacer.delay(now));
    }

    #[test]
    fn unpaced_until_the_first_429() {
        let pacer = Pacer::default();
        let mut rng = StdRng::seed_from_u64(1);
        let now = Instant::now();
        for _ in 0..100 {
            pacer.sent(now, &mut rng);
            assert_eq!(pacer.delay(now), Duration::ZERO);
        }
        assert_eq!(pacer.rate(now), None);
    }

    #[test]
    fn a_429_restarts_at_one_per_window_then_halves_per_429() {
        let (pacer, mut rng, t0) = limited_once(rule());
        assert_eq!(pacer.rate(t0), Some(1.0 / 60.0));
        // One per 60 s growing slowly: a little under 60 s.
        assert!(near(pacer.delay(t0), grown_gap(1.0 / 60.0, 600.0)));
        // The next 429, right when it was allowed: half of the (slightly grown) rate.
        let t1 = t0 + Duration::from_secs(60);
        let grown = 1.0 / 60.0 * (60.0f64 / 600.0).exp2();
        pacer.limited(t1, None, &mut rng);
        let rate = pacer.rate(t1).unwrap();
        assert!(close(rate, grown / 2.0), "{rate}");
        assert!(near(pacer.delay(t1), grown_gap(grown / 2.0, 600.0)));
        assert_eq!(pacer.delay(t1 + pacer.delay(t1)), Duration::ZERO);
    }

    #[test]
    fn without_429s_the_rate_grows_slowly_during_the_hold_then_fast_until_pacing_ends() {
        let (pacer, mut rng, t0) = limited_once(rule());
        let at = |s: u64| t0 + Duration::from_secs(s);
        let per_minute = |s: u64| pacer.rate(at(s)).unwrap() * 60.0;
        // Slow phase: doubling every 600 s, so the end of the hold is twice the restart rate.
        assert!(close(per_minute(300), 2f64.sqrt()), "{}", per_minute(300));
        assert!(close(per_minute(600), 2.0));
        // Fast phase: doubling every 60 s on top.
        assert!(close(per_minute(630), 2.0 * 2f64.sqrt()));
        assert!(close(per_minute(660), 4.0));
        assert!(close(per_minute(720), 8.0));
        // An accepted PUT waits one request's worth of the still growing pace (under 7.5 s)...
        pacer.sent(at(720), &mut rng);
        assert!(near(pacer.delay(at(720)), grown_gap(8.0 / 60.0, 60.0)));
        // ...and once the pace reaches 10 per second (600 per minute, 2^9.2) it ends.
        assert!(close(per_minute(1080), 512.0));
        let fast = at(1110);
        assert_eq!(pacer.rate(fast), Some(10.0));
        pacer.sent(fast, &mut rng);
        assert_eq!(pacer.rate(fast), None);
        assert_eq!(pacer.delay(fast), Duration::ZERO);
    }

    #[test]
    fn a_429_in_the_fast_phase_restarts_the_hold() {
        let (pacer, mut rng, t0) = limited_once(rule());
        // Five minutes into the fast phase the rate is 2 x 2^5 = 64 per minute...
        let t1 = t0 + Duration::from_secs(900);
        assert!(close(pacer.rate(t1).unwrap() * 60.0, 64.0));
        // ...a 429 halves it and caps it at one per 60 s, and it grows slowly again.
        pacer.limited(t1, None, &mut rng);
        assert_eq!(pacer.rate(t1), Some(1.0 / 60.0));
        let after = |s: u64| pacer.rate(t1 + Duration::from_secs(s)).unwrap() * 60.0;
        assert!(close(after(300), 2f64.sqrt()));
        assert!(close(after(660), 4.0));
        // A 429 that meets a slow pace halves it below the cap.
        let t2 = t1 + Duration::from_secs(60);
        let before = pacer.rate(t2).unwrap();
        pacer.limited(t2, None, &mut rng);
        assert!(close(pacer.rate(t2).unwrap(), before / 2.0));
    }

    #[test]
    fn a_zero_doubling_time_ends_the_pace_when_its_phase_starts() {
        let (pacer, mut rng, t0) = limited_once(PaceRule {
            fast_doubling: Duration::ZERO,
            ..rule()
        });
        let hold_end = t0 + Duration::from_secs(600);
        assert!(close(pacer.rate(hold_end).unwrap() * 60.0, 2.0));
        let after = hold_end + Duration::from_millis(1);
        assert_eq!(pacer.rate(after), Some(10.0));
        pacer.sent(after, &mut rng);
        assert_eq!(pacer.rate(after), None);
    }

    #[test]
    fn retry_after_is_a_floor_on_the_next_gap() {
        let pacer = Pacer::new(rule());
        let mut rng = StdRng::seed_from_u64(1);
        let now = Instant::now();
        pacer.limited(now, Some(Duration::from_secs(300)), &mut rng);
        assert_eq!(secs(pacer.delay(now)), 300.0);
        // A short Retry-After does not shorten the pace.
        let later = now + Duration::from_secs(300);
        pacer.limited(later, Some(Duration::from_secs(1)), &mut rng);
        assert!(secs(pacer.delay(later)) > 60.0);
    }

    #[test]
    fn the_slow_phase_is_jittered_so_a_fleet_does_not_speed_up_in_step() {
        let mut rng = StdRng::seed_from_u64(5);
        let t0 = Instant::now();
        let per_minute_at =
            |pacer: &Pacer, s: u64| pacer.rate(t0 + Duration::from_secs(s)).expect("paced") * 60.0;
        let pacers: Vec<Pacer> = (0..100)
            .map(|_| {
                let pacer = Pacer::default();
                pacer.limited(t0, None, &mut rng);
                pacer
            })
            .collect();
        // Every hold is 25 min +- 30 %: after 15 min all paces are alike (slow growth)...
        let at_15 = pacers
            .iter()
            .map(|p| per_minute_at(p, 900))
            .collect::<Vec<_>>();
        assert!(at_15.iter().all(|r| close(*r, at_15[0])), "{at_15:?}");
        // ...after 33 min all have left the slow phase, some long before others.
        let at_33 = pacers
            .iter()
            .map(|p| per_minute_at(p, 1980))
            .collect::<Vec<_>>();
        let slow_only = 0.5 * (1980.0f64 / 3600.0).exp2();
        let (low, high) = at_33
            .iter()
            .fold((f64::MAX, 0.0f64), |(l, h), r| (l.min(*r), h.max(*r)));
        assert!(low > slow_only * 1.01, "{low} vs {slow_only}");
        assert!(high > low * 4.0, "holds spread: {low}..{high} per minute");
    }

    #[test]
    fn by_default_the_rate_holds_25_minutes_then_doubles_every_5_minutes() {
        let (pacer, _, t0) = limited_once(PaceRule {
            jitter: 0.0,
            gap_jitter: 0.0,
            ..PaceRule::default()
        });
        let at = |s: u64| pacer.rate(t0 + Duration::from_secs(s)).unwrap() * 120.0;
        assert!(close(at(0), 1.0), "one per 120 s after a 429");
        assert!(close(at(600), (600.0f64 / 3600.0).exp2()), "{}", at(600));
        assert!(
            close(at(1500), (1500.0f64 / 3600.0).exp2()),
            "+33 % at 25 min"
        );
        assert!(close(at(1800), (1500.0f64 / 3600.0 + 1.0).exp2()));
        assert!(at(4400) < 1200.0, "{}", at(4400));
        assert!(close(at(4500), 1200.0), "capped at 10 per second");
    }

    #[test]
    fn after_a_429_the_next_put_waits_a_window_plus_a_random_part_of_an_interval() {
        let mut rng = StdRng::seed_from_u64(7);
        let now = Instant::now();
        let waits: Vec<f64> = (0..400)
            .map(|_| {
                let pacer = Pacer::default();
                pacer.limited(now, None, &mut rng);
                secs(pacer.delay(now))
            })
            .collect();
        // A first 429 restarts at one per 120 s: the next PUT goes after the 60 s window, at
        // an even random point of the following 120 s, so a fleet refused together comes back
        // spread over the whole interval once its refusals have left the window.
        assert!(
            waits.iter().all(|w| (60.0..=180.0).contains(w)),
            "{waits:?}"
        );
        let quarters = waits.iter().fold([0usize; 4], |mut q, w| {
            q[(((w - 60.0) / 30.0) as usize).min(3)] += 1;
            q
        });
        assert!(
            quarters.iter().all(|&n| (70..=130).contains(&n)),
            "{quarters:?}"
        );
        // Gaps between accepted PUTs are the pace's interval +- 20 %.
        let pacer = Pacer::default();
        pacer.limited(now, None, &mut rng);
        let later = now + Duration::from_secs(180);
        let gaps: Vec<f64> = (0..200)
            .map(|_| {
                pacer.sent(later, &mut rng);
                secs(pacer.delay(later))
            })
            .collect();
        assert!(gaps.iter().all(|g| (90.0..=145.0).contains(g)), "{gaps:?}");
        assert!(gaps.iter().any(|g| *g < 100.0) && gaps.iter().any(|g| *g > 135.0));
    }

    #[test]
    fn from_the_third_429_in_a_row_the_rate_halves_and_an_accepted_put_resets_the_count() {
        let rule = PaceRule {
            decrease: 0.9,
            repeat_decrease: 0.5,
            repeat_after: 3,
            ..rule()
        };
        let (pacer, mut rng, t0) = limited_once(rule);
        assert_eq!(pacer.rate(t0), Some(1.0 / 60.0));
        let mut now = t0;
        let mut expect = |pacer: &Pacer, factor: f64, now: Instant| {
            let before = pacer.rate(now).unwrap();
            pacer.limited(now, None, &mut rng);
            let after = pacer.rate(now).unwrap();
            assert!(
                close(after, before * factor),
                "{after} vs {before} x {factor}"
            );
        };
        now += Duration::from_secs(60);
        expect(&pacer, 0.9, now);
        now += Duration::from_secs(60);
        expect(&pacer, 0.5, now);
        now += Duration::from_secs(60);
        expect(&pacer, 0.5, now);
        // An accepted PUT: the next 429 is the first in a row again.
        now += Duration::from_secs(600);
        pacer.sent(now, &mut StdRng::seed_from_u64(3));
        now += Duration::from_secs(60);
        expect(&pacer, 0.9, now);
    }

    #[test]
    fn a_scaled_rule_divides_every_duration() {
        let scaled = PaceRule::default().scaled(60.0);
        assert_eq!(scaled.restart_interval, Duration::from_secs(2));
        assert_eq!(scaled.hold, Duration::from_secs(25));
        assert_eq!(scaled.slow_doubling, Duration::from_secs(60));
        assert_eq!(scaled.fast_doubling, Duration::from_secs(5));
        assert_eq!(scaled.window, Duration::from_secs(1));
        assert!((secs(scaled.min_interval) - 0.1 / 60.0).abs() < 1e-9);
        assert_eq!(scaled.decrease, 0.9);
        assert_eq!(scaled.repeat_after, 3);
        assert_eq!(PaceRule::default().scaled(0.0), PaceRule::default());
    }
}
