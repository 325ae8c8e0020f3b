//! The fleet simulation (ignored by default; run with
//! `cargo test --release --test tests sync::scale -- --ignored --nocapture`): N agents with J
//! bound jobs each start at the same moment against one emulator enforcing L requests per 60 s
//! (429 answers count). Time is scaled by S: the emulator's clock runs S times faster, and every
//! duration of the agents' sync code (start jitter, retry waits, the pacing rule, the client's
//! own limiter window) is divided by S. Figures go to BENCHMARKS.md.
//!
//! Environment: `SIM_AGENTS` (1000), `SIM_JOBS` (10), `SIM_LIMIT` (600), `SIM_SCALE` (10: at
//! the limit this machine must then serve 100 requests per real second; see BENCHMARKS.md), and
//! to try other pacing constants (emulated seconds; defaults from `PaceRule::default`):
//! `SIM_RESTART`, `SIM_DECREASE`, `SIM_HOLD`, `SIM_SLOW_DOUBLING`, `SIM_FAST_DOUBLING`,
//! `SIM_JITTER`, `SIM_GAP_JITTER`, `SIM_WINDOW`, `SIM_REPEAT_DECREASE`, `SIM_REPEAT_AFTER`. `SIM_GIVE_UP` (4) is when the run stops, in multiples of the ideal time (raise
//! it to see how long a case that misses the 2x target takes).
//!
//! Besides the totals it prints where the time beyond the ideal goes: per emulated minute the
//! checks that came in sync, the 429 answers, the agents still working and the seconds the key
//! was locked, then when 50, 90, 99 and 100 % of the checks were in sync.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use heartbeat_agent::api::{ApiClient, ApiClientConfig, Quota, RateLimiter};
use heartbeat_agent::config::Config;
use heartbeat_agent::emulator::{EmulatorOptions, RateLimit};
use heartbeat_agent::redact::Secret;
use heartbeat_agent::sync::{task::TaskTiming, PaceRule, Reconciler, SyncState};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn env(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The pacing rule in emulated time, with the `SIM_*` overrides.
fn pace_rule() -> PaceRule {
    let rule = PaceRule::default();
    let secs =
        |name: &str, default: Duration| Duration::from_secs_f64(env(name, default.as_secs_f64()));
    PaceRule {
        restart_interval: secs("SIM_RESTART", rule.restart_interval),
        decrease: env("SIM_DECREASE", rule.decrease),
        hold: secs("SIM_HOLD", rule.hold),
        slow_doubling: secs("SIM_SLOW_DOUBLING", rule.slow_doubling),
        fast_doubling: secs("SIM_FAST_DOUBLING", rule.fast_doubling),
        jitter: env("SIM_JITTER", rule.jitter),
        gap_jitter: env("SIM_GAP_JITTER", rule.gap_jitter),
        window: secs("SIM_WINDOW", rule.window),
        repeat_decrease: env("SIM_REPEAT_DECREASE", rule.repeat_decrease),
        repeat_after: env("SIM_REPEAT_AFTER", f64::from(rule.repeat_after)) as u32,
        ..rule
    }
}

/// `(requests, 429 answers)` the clients of `net` have counted so far.
fn requests(net: &heartbeat_agent::net::Net) -> (u64, u64) {
    net.metrics()
        .api_requests()
        .into_iter()
        .fold((0, 0), |(all, limited), (_, status, n)| {
            (all + n, limited + if status == "429" { n } else { 0 })
        })
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// One look at the fleet (every 100 ms of real time).
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Emulated minutes since the agents started.
    minutes: f64,
    /// Checks in sync.
    in_sync: usize,
    /// Requests sent so far, and of those answered 429.
    sent: u64,
    limited: u64,
    /// Agents with a check not in sync yet.
    active: usize,
}

/// Where the time beyond the ideal goes: per emulated minute the checks that came in sync, the
/// 429 answers, the agents still working and the seconds the key was locked (429s answered,
/// nothing came in sync); then when 50, 90, 99 and 100 % of the checks were in sync.
fn print_profile(report: &[Sample], checks: usize, ideal: f64) {
    let last = report.last().map_or(0.0, |s| s.minutes);
    println!("  minute: in sync (of the ideal's 600/min), 429s, agents working, locked s");
    let mut prev = Sample {
        minutes: 0.0,
        in_sync: 0,
        sent: 0,
        limited: 0,
        active: 0,
    };
    for minute in 0..=(last.floor() as usize) {
        let samples: Vec<&Sample> = report
            .iter()
            .filter(|s| s.minutes.floor() as usize == minute)
            .collect();
        let Some(end) = samples.last() else { continue };
        // The time from one look to the next is "locked" when 429s were answered in it and no
        // check came in sync.
        let mut locked = 0.0;
        let mut before = prev;
        for s in &samples {
            if s.limited > before.limited && s.in_sync == before.in_sync {
                locked += (s.minutes - before.minutes) * 60.0;
            }
            before = **s;
        }
        println!(
            "  {minute:4}: {:6} {:6} {:6} {locked:5.0}",
            end.in_sync - prev.in_sync,
            end.limited - prev.limited,
            end.active,
        );
        prev = **end;
    }
    let mut milestones = Vec::new();
    for share in [50, 90, 99, 100] {
        let wanted = (checks * share).div_ceil(100);
        if let Some(s) = report.iter().find(|s| s.in_sync >= wanted) {
            milestones.push(format!(
                "{share} % at {:.1} min ({:.2})",
                s.minutes,
                s.minutes / ideal
            ));
        }
    }
    println!("  {}", milestones.join(", "));
}

#[test]
#[ignore = "a long simulation: run on demand"]
fn a_fleet_converges_under_the_shared_rate_limit() {
    let agents = env("SIM_AGENTS", 1000.0) as usize;
    let jobs = env("SIM_JOBS", 10.0) as usize;
    let limit = env("SIM_LIMIT", 600.0) as u32;
    let scale = env("SIM_SCALE", 10.0);
    let scaled = |d: Duration| d.div_f64(scale);
    let rule = pace_rule();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let load_before = load();
    runtime.block_on(async {
        let emulator = crate::util::emulator::start_with(EmulatorOptions {
            rate_limit: RateLimit {
                requests: limit,
                window: Duration::from_secs(60),
            },
            clock_scale: scale,
            ..EmulatorOptions::default()
        })
        .await;
        let mut reconcilers = Vec::new();
        // One `Net` for the fleet, as in one process: its registry counts every client's requests.
        let net = heartbeat_agent::net::Net::default();
        for a in 0..agents {
            let mut text = String::new();
            for j in 0..jobs {
                let id = format!("a{a}-j{j}");
                emulator
                    .add_heartbeat_check(&json!({"id": id, "name": id}))
                    .unwrap();
                text.push_str(&format!(
                    "[[jobs]]\nname = \"j{j}\"\nschedule = \"@daily\"\ncheck_id = \"{id}\"\n"
                ));
            }
            let config = Config::from_text(Path::new("/sim.toml"), &text)
                .unwrap()
                .config;
            let mut client = ApiClientConfig::new(
                emulator.base_url(),
                Secret::new(emulator.api_key().to_owned()),
            );
            client.net = net.clone();
            client.rate_limiter = Arc::new(RateLimiter::new(Quota {
                requests: limit,
                window: scaled(Duration::from_secs(60)),
            }));
            let client = ApiClient::new(client).unwrap();
            let state_dir = home.path().join(format!("agent-{a}"));
            let reconciler = Reconciler::new(Arc::new(config), client, state_dir)
                .with_timing(TaskTiming {
                    start_jitter: scaled(Duration::from_secs(30)),
                    resync_interval: scaled(Duration::from_secs(6 * 3600)),
                    retry_base: scaled(Duration::from_secs(30)),
                    retry_cap: scaled(Duration::from_secs(15 * 60)),
                    reassert_interval: scaled(Duration::from_secs(86_400)),
                    reassert_start_spread: scaled(Duration::from_secs(10 * 60)),
                })
                .with_pace(rule.scaled(scale));
            reconcilers.push(reconciler);
        }
        let (sent_before, limited_before) = requests(&net);
        let cancel = CancellationToken::new();
        let started = Instant::now();
        let tasks: Vec<_> = reconcilers
            .iter()
            .map(|r| tokio::spawn(r.clone().run(cancel.clone())))
            .collect();
        let ideal = (agents * jobs) as f64 / f64::from(limit);
        let give_up = Duration::from_secs_f64(ideal * 60.0 * env("SIM_GIVE_UP", 4.0) / scale);
        let mut report = Vec::new();
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let per_agent = reconcilers.iter().map(|r| {
                r.status()
                    .snapshot()
                    .values()
                    .filter(|s| s.state == SyncState::InSync)
                    .count()
            });
            let (in_sync, active) = per_agent.fold((0, 0), |(n, active), k| {
                (n + k, active + usize::from(k < jobs))
            });
            let minutes = started.elapsed().as_secs_f64() * scale / 60.0;
            let (sent, limited) = requests(&net);
            report.push(Sample {
                minutes,
                in_sync,
                sent: sent - sent_before,
                limited: limited - limited_before,
                active,
            });
            if in_sync == agents * jobs || started.elapsed() > give_up {
                break;
            }
        }
        let load_after = load();
        // The sync task never ends by itself: one that did gave up.
        let gave_up = tasks.iter().filter(|t| t.is_finished()).count();
        let mut errors: Vec<String> = reconcilers
            .iter()
            .flat_map(|r| {
                r.status()
                    .snapshot()
                    .into_values()
                    .filter_map(|s| s.last_error)
            })
            .map(|e| e.split(": ").skip(2).collect::<Vec<_>>().join(": "))
            .collect();
        errors.sort();
        errors.dedup();
        for error in errors.iter().take(3) {
            println!("  last error: {error}");
        }
        cancel.cancel();
        for task in tasks {
            task.await.unwrap();
        }
        let Sample {
            minutes,
            in_sync,
            sent,
            limited,
            ..
        } = *report.last().unwrap();
        println!(
            "agents={agents} jobs={jobs} limit={limit}/60s scale={scale} rule={rule:?}\n\
             load before {load_before}, after {load_after}\n\
             {in_sync}/{} in sync after {minutes:.2} emulated minutes (ideal {ideal:.2}, ratio \
             {:.2}); {sent} requests, {limited} answered 429; {gave_up} agents gave up",
            agents * jobs,
            minutes / ideal
        );
        print_profile(&report, agents * jobs, ideal);
        emulator.shutdown().await;
        assert_eq!(gave_up, 0, "no agent gives up");
        assert_eq!(in_sync, agents * jobs, "every check converges");
        assert!(minutes <= 2.0 * ideal, "within 2x of the ideal");
    });
}
