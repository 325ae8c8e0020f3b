//! The background sync task ([`heartbeat_agent::sync::Reconciler`]) in process against the
//! emulator: it retries through a long 429 storm, syncs after a run and a reload, sends a held
//! period after the next accepted ping, survives a 429 asking for an endless wait, and while
//! paced after a 429 sends a check with no record without reading it first.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use heartbeat_agent::emulator::{Fault, FaultKind};
use heartbeat_agent::net::RetryPolicy;
use heartbeat_agent::sync;
use serde_json::json;

use crate::util;

use super::{at, client, job, load, Setup};

#[test]
fn the_background_task_retries_until_a_long_429_storm_passes() {
    let setup = Setup::new(&["c1"]);
    setup.write_config(&job("j", "@hourly", "c1", ""));
    // On the PUTs: the read that comes first (nothing is recorded yet) is answered.
    let mut storm = Fault::new(FaultKind::RateLimit).method("PUT").times(6);
    storm.retry_after = Some(json!(0));
    setup.emulator.add_fault(storm);
    let client = client(&setup, RetryPolicy::none());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let reconciler = sync::Reconciler::new(Arc::new(load(&setup)), client, setup.state_dir())
        .with_timing(fast_timing())
        .with_pace(fast_pace());
    let status = reconciler.status();
    assert_eq!(status.get("j").unwrap().state, sync::SyncState::Pending);
    let cancel = tokio_util::sync::CancellationToken::new();
    let task = runtime.spawn(reconciler.clone().run(cancel.clone()));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let in_sync = || match status.get("j") {
        Some(job) if job.state == sync::SyncState::InSync => Ok(()),
        other => Err(format!("{other:?}")),
    };
    let left = || deadline.saturating_duration_since(std::time::Instant::now());
    runtime.block_on(util::eventually_async(left(), "job j in sync", in_sync));
    let puts = setup.puts().len();
    assert_eq!(puts, 7, "six 429s, then accepted");
    assert!(reconciler
        .ping_url("j", "c1")
        .unwrap()
        .ends_with(&format!("/{}", crate::util::emulator::token_for("c1"))));
    // An accepted ping triggers a pass; nothing changed, so no PUT.
    let before = status.get("j").unwrap().last_attempt;
    reconciler.after_run("j", at("2026-11-22T01:00:00Z"), true);
    runtime.block_on(util::eventually_async(
        left(),
        "a pass after the run",
        || {
            let attempt = status.get("j").unwrap().last_attempt;
            if attempt == before {
                Err(format!("last attempt still {attempt:?}"))
            } else {
                Ok(())
            }
        },
    ));
    assert_eq!(setup.puts().len(), 7);
    let state = sync::state::load(&setup.state_dir(), "j").unwrap();
    assert_eq!(state.acked_fire, Some(at("2026-11-22T01:00:00Z")));
    // A reload with a changed check definition is sent at once, with the same token.
    setup.write_config(&job(
        "j",
        "@hourly",
        "c1",
        "[jobs.check]\ntags = [\"reloaded\"]",
    ));
    reconciler.set_config(Arc::new(load(&setup)));
    assert_eq!(status.get("j").unwrap().state, sync::SyncState::Pending);
    runtime.block_on(util::eventually_async(
        left(),
        "a pass after the reload",
        in_sync,
    ));
    let puts = setup.puts();
    assert_eq!(puts.len(), 8);
    assert_eq!(puts[7].2["tags"], json!(["reloaded"]));
    assert_eq!(
        puts[7].2["heartbeat"]["pingToken"],
        crate::util::emulator::token_for("c1").as_str()
    );
    // A reload with a new period: held (it would restart the service's timer) until the job's
    // next accepted ping, then sent by the pass that ping triggers.
    setup.write_config(&job(
        "j",
        "*/30 * * * *",
        "c1",
        "[jobs.check]\ntags = [\"reloaded\"]",
    ));
    let before = status.get("j").unwrap().last_attempt;
    reconciler.set_config(Arc::new(load(&setup)));
    let attempted = |before: Option<DateTime<Utc>>| {
        let status = status.clone();
        move || match status.get("j") {
            Some(job) if job.last_attempt != before => Ok(()),
            other => Err(format!("{other:?}")),
        }
    };
    runtime.block_on(util::eventually_async(
        left(),
        "a pass after the reload",
        attempted(before),
    ));
    assert_eq!(status.get("j").unwrap().state, sync::SyncState::Pending);
    assert_eq!(setup.puts().len(), 8, "the new period is held");
    let now = Utc::now();
    let fire = now - chrono::Duration::seconds(now.timestamp() % 1800);
    let fire = fire - chrono::Duration::nanoseconds(i64::from(fire.timestamp_subsec_nanos()));
    reconciler.after_run("j", fire, true);
    runtime.block_on(util::eventually_async(
        left(),
        "the held period sent after the ping",
        in_sync,
    ));
    let puts = setup.puts();
    assert_eq!(puts.len(), 9);
    assert_eq!(puts[8].2["heartbeat"]["period"], 30);
    assert_eq!(puts[8].2["heartbeat"]["periodUnit"], "minutes");
    cancel.cancel();
    runtime.block_on(task).unwrap();
}

/// A 429 asking to wait 2^64-1 seconds on a check update: the background task keeps running
/// (before the clamp in `backoff::retry_after`, the pacer's next-send time overflowed, which
/// aborts a release daemon at every restart) and waits at most an hour.
#[test]
fn the_background_task_survives_a_429_asking_for_an_endless_wait() {
    let setup = Setup::new(&["c1"]);
    setup.write_config(&job("j", "@hourly", "c1", ""));
    let mut storm = Fault::new(FaultKind::RateLimit).method("PUT").times(1);
    storm.retry_after = Some(json!(u64::MAX));
    setup.emulator.add_fault(storm);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = client(&setup, RetryPolicy::none());
    let reconciler = sync::Reconciler::new(Arc::new(load(&setup)), client, setup.state_dir())
        .with_timing(fast_timing());
    let status = reconciler.status();
    let cancel = tokio_util::sync::CancellationToken::new();
    let task = runtime.spawn(reconciler.run(cancel.clone()));
    runtime.block_on(util::eventually_async(
        Duration::from_secs(10),
        "the 429 answered",
        || match setup.puts().len() {
            0 => Err("no PUT yet".to_owned()),
            _ => Ok(()),
        },
    ));
    runtime.block_on(async { tokio::time::sleep(Duration::from_millis(300)).await });
    assert!(!task.is_finished(), "the sync task is still running");
    assert_ne!(status.get("j").unwrap().state, sync::SyncState::InSync);
    cancel.cancel();
    runtime
        .block_on(task)
        .expect("the sync task ended without a panic");
    assert_eq!(
        setup.puts().len(),
        1,
        "no second PUT within the hour asked for"
    );
}

/// A fleet's first re-assertions fall while most of its checks still wait for their first
/// `PUT`: while the daemon is paced after a 429, a check with no record is sent without the read
/// that would come first, also when its re-assertion is due (the `PUT` re-asserts it), so a
/// crowded key gets one request per check, not two.
#[test]
fn while_paced_a_check_with_no_record_is_sent_unread_its_reassertion_too() {
    let checks = ["c1", "c2", "c3"];
    let setup = Setup::new(&checks);
    setup.write_config(&format!(
        "{}{}{}",
        job("j1", "0 1 * * *", "c1", ""),
        job("j2", "0 2 * * *", "c2", ""),
        job("j3", "0 3 * * *", "c3", "")
    ));
    // The first read (of c1: nothing is recorded yet) is answered 429; the pace starts.
    let mut limited = Fault::new(FaultKind::RateLimit).method("GET").times(1);
    limited.retry_after = Some(json!(0));
    setup.emulator.add_fault(limited);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = client(&setup, RetryPolicy::none());
    // Every check's first re-assertion is due at the first pass.
    let timing = sync::task::TaskTiming {
        reassert_start_spread: Duration::from_millis(1),
        ..fast_timing()
    };
    let reconciler = sync::Reconciler::new(Arc::new(load(&setup)), client, setup.state_dir())
        .with_timing(timing)
        .with_pace(fast_pace());
    let status = reconciler.status();
    let cancel = tokio_util::sync::CancellationToken::new();
    let task = runtime.spawn(reconciler.run(cancel.clone()));
    runtime.block_on(util::eventually_async(
        Duration::from_secs(10),
        "every job in sync",
        || {
            let snapshot = status.snapshot();
            if snapshot
                .values()
                .all(|s| s.state == sync::SyncState::InSync)
            {
                Ok(())
            } else {
                Err(format!("{snapshot:?}"))
            }
        },
    ));
    cancel.cancel();
    runtime.block_on(task).unwrap();
    let reads: Vec<(String, Option<u16>)> = setup
        .emulator
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.starts_with("/v1/checks/"))
        .map(|r| (r.path, r.status))
        .collect();
    assert_eq!(
        reads,
        [("/v1/checks/c1".to_owned(), Some(429))],
        "the 429 on the first read, then no read"
    );
    let puts = setup.puts();
    assert_eq!(puts.len(), 3, "one PUT per check: {puts:?}");
    for id in checks {
        let state = sync::state::load(&setup.state_dir(), &format!("j{}", &id[1..])).unwrap();
        assert_eq!(state.check_id, id);
        assert!(
            state.accepted.is_some(),
            "{id}: the PUT's answer is recorded"
        );
    }
}

/// The daemon's pacing on a clock 6,000 times faster (one request per 10 ms after a 429).
fn fast_pace() -> sync::PaceRule {
    sync::PaceRule::default().scaled(6000.0)
}

/// A reconciler's timing for these tests: a 20 ms start, fast retries, nothing periodic
/// within a test.
fn fast_timing() -> sync::task::TaskTiming {
    sync::task::TaskTiming {
        start_jitter: Duration::from_millis(20),
        resync_interval: Duration::from_secs(3600),
        retry_base: Duration::from_millis(10),
        retry_cap: Duration::from_millis(50),
        reassert_interval: Duration::from_secs(86_400),
        reassert_start_spread: sync::task::REASSERT_START_SPREAD,
    }
}
