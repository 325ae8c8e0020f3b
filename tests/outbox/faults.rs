//! The outbox against the emulator's ping host and its faults: latency, 5xx bursts, 429 with
//! `Retry-After`, dropped connections.

use std::time::Duration;

use heartbeat_agent::emulator::{Fault, FaultKind, Listener};
use heartbeat_agent::ping::outbox::{self, DrainOptions};
use tokio_util::sync::CancellationToken;

use crate::util;

use super::{runtime, store, text, Env};

#[test]
fn emulator_faults_then_every_pending_ping_is_delivered_once() {
    let emulator = crate::util::emulator::Background::start();
    let env = Env::new();
    let outbox = env.outbox();
    let mut tokens = Vec::new();
    for i in 0..3 {
        let check = emulator
            .add_heartbeat_check(&serde_json::json!({
                "name": format!("outbox-{i}"),
                "heartbeat": {"period": 1, "periodUnit": "days", "grace": 1, "graceUnit": "hours",
                              "pingToken": crate::util::emulator::token_for(&format!("emu{i}"))}
            }))
            .expect("add check");
        let url = check["heartbeat"]["pingUrl"].as_str().expect("ping url");
        tokens.push(format!(
            "/{}",
            crate::util::emulator::token_for(&format!("emu{i}"))
        ));
        store(&outbox, url);
    }
    let on_ping = |kind| Fault::new(kind).listener(Listener::Ping);
    let mut latency = on_ping(FaultKind::Latency).times(2);
    latency.latency_ms = 300;
    emulator.add_fault(latency);
    emulator.add_fault(on_ping(FaultKind::Status).times(5));
    let mut limited = on_ping(FaultKind::RateLimit).times(2);
    limited.retry_after = Some(serde_json::json!(1));
    emulator.add_fault(limited);
    emulator.add_fault(on_ping(FaultKind::Drop).times(3));

    let rt = runtime();
    let cancel = CancellationToken::new();
    let options = DrainOptions {
        poll: Duration::from_millis(100),
        attempt_timeout: Duration::from_secs(2),
        backoff_base: Duration::from_millis(100),
        backoff_cap: Duration::from_millis(800),
        max_in_flight: 4,
        stop_grace: Duration::from_secs(2),
    };
    let drainer = rt.spawn(outbox::drain(
        util::outbox::sender(),
        outbox.clone(),
        cancel.clone(),
        options,
    ));
    let delivered = |t: &String| {
        emulator
            .pings()
            .iter()
            .filter(|r| &r.path == t && r.status == Some(200))
            .count()
    };
    util::wait_until(Duration::from_secs(20), Duration::from_millis(50), || {
        outbox.stats().delivered >= 3
    });
    cancel.cancel();
    rt.block_on(drainer).expect("drainer ends");
    for t in &tokens {
        assert_eq!(delivered(t), 1, "{t}: {:?}", emulator.pings());
    }
    let failed = emulator
        .pings()
        .iter()
        .filter(|r| r.status != Some(200))
        .count();
    assert!(failed >= 7, "the faults were hit: {failed}");
    assert!(outbox.list().expect("list").is_empty());
    assert_eq!(outbox.stats().delivered, 3);
}

#[test]
fn retry_after_is_honoured_by_later_runs_but_not_by_flush() {
    let emulator = crate::util::emulator::Background::start();
    let env = Env::new();
    let mut urls = Vec::new();
    for name in ["ra", "other"] {
        let check = emulator
            .add_heartbeat_check(&serde_json::json!({
                "name": name,
                "heartbeat": {"period": 1, "periodUnit": "days", "grace": 1, "graceUnit": "hours",
                              "pingToken": crate::util::emulator::token_for(name)}
            }))
            .expect("add check");
        urls.push(
            check["heartbeat"]["pingUrl"]
                .as_str()
                .expect("url")
                .to_owned(),
        );
    }
    let mut limited = Fault::new(FaultKind::RateLimit).listener(Listener::Ping);
    limited.retry_after = Some(serde_json::json!(60));
    let fault = emulator.add_fault(limited);
    let out = env.output(&["ping", "--ping-url", &urls[0], "--ping-timeout", "300ms"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let listed = env.list();
    let next = listed["entries"][0]["next_attempt_secs"]
        .as_u64()
        .expect("next");
    assert!((55..=60).contains(&next), "Retry-After kept: {listed:#}");

    emulator.remove_fault(fault);
    let tried = emulator.pings().len();
    let out = env.output(&["run", "--ping-url", &urls[1], "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let path = format!("/{}", crate::util::emulator::token_for("ra"));
    let after: Vec<_> = emulator.pings().into_iter().skip(tried).collect();
    assert!(
        after.iter().all(|r| r.path != path),
        "a run ignored Retry-After: {after:?}"
    );
    assert_eq!(env.list()["entries"].as_array().map(Vec::len), Some(1));

    let out = env.output(&["outbox", "flush"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "flush delivers now: {}",
        text(&out)
    );
}

#[test]
fn a_hanging_ping_host_adds_at_most_the_catch_up_budget_to_a_later_run() {
    // An older entry whose host accepts and never answers: a run's catch-up gives it one
    // attempt of at most 2 s, so the run returns right after its own ping settled instead of
    // after the whole 30 s ping budget; the entry stays pending, and an entry for a host
    // that answers is still caught up.
    let env = Env::new();
    let outbox = env.outbox();
    let hanging = crate::util::outbox::PingHost::start(crate::util::outbox::Behaviour::Hang);
    let fine = crate::util::outbox::PingHost::start(crate::util::outbox::Behaviour::Status(200));
    store(&outbox, &hanging.url(&super::token("hangs")));
    store(&outbox, &fine.url(&super::token("older")));
    let began = std::time::Instant::now();
    let out = env.output(&[
        "run",
        "--ping-url",
        &fine.url(&super::token("own")),
        "--",
        "true",
    ]);
    let took = began.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        took < Duration::from_secs(6),
        "the run took {took:?}: the catch-up is on its critical path"
    );
    assert_eq!(fine.count(&super::token("own")), 1);
    assert_eq!(fine.count(&super::token("older")), 1, "caught up");
    assert_eq!(
        hanging.count(&super::token("hangs")),
        1,
        "given one attempt"
    );
    let listed = env.list();
    assert_eq!(
        listed["entries"].as_array().map(Vec::len),
        Some(1),
        "the hanging host's entry stays pending: {listed:#}"
    );
}
