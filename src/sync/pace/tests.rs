//! Tests of the pacing rule ([`super::Pacer`]), on instants chosen by the test: no clock runs.

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
