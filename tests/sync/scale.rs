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
//! `SIM_JITTER`. `SIM_GIVE_UP` (4) is when the run stops, in multiples of the ideal time (raise
//! it to see how long a case that misses the 2x target takes).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use heartbeat_agent::api::{counters, ApiClient, ApiClientConfig, Quota, RateLimiter};
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
        ..rule
    }
}

/// `(requests, 429 answers)` the process's clients have counted so far.
fn requests() -> (u64, u64) {
    counters::snapshot()
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
        let (sent_before, limited_before) = requests();
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
            let in_sync: usize = reconcilers
                .iter()
                .map(|r| {
                    r.status()
                        .snapshot()
                        .values()
                        .filter(|s| s.state == SyncState::InSync)
                        .count()
                })
                .sum();
            let minutes = started.elapsed().as_secs_f64() * scale / 60.0;
            let (sent, limited) = requests();
            report.push((
                minutes,
                in_sync,
                sent - sent_before,
                limited - limited_before,
            ));
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
        let (minutes, in_sync, sent, limited) = *report.last().unwrap();
        println!(
            "agents={agents} jobs={jobs} limit={limit}/60s scale={scale} rule={rule:?}\n\
             load before {load_before}, after {load_after}\n\
             {in_sync}/{} in sync after {minutes:.1} emulated minutes (ideal {ideal:.1}, ratio \
             {:.2}); {sent} requests, {limited} answered 429; {gave_up} agents gave up",
            agents * jobs,
            minutes / ideal
        );
        for (m, n, s, l) in report.iter().step_by((report.len() / 24).max(1)) {
            println!("  {m:6.1} min: {n:6} in sync, {s:6} sent, {l:6} 429");
        }
        emulator.shutdown().await;
        assert_eq!(gave_up, 0, "no agent gives up");
        assert_eq!(in_sync, agents * jobs, "every check converges");
        assert!(minutes <= 2.0 * ideal, "within 2x of the ideal");
    });
}
