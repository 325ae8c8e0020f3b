//! The counters add up whatever moment a process dies: a real process is killed (SIGKILL,
//! through the debug builds' `HEARTBEAT_AGENT_CRASH_AT=outbox:<step>`) between a step's file
//! operations and its write of `stats.json`, then a real `outbox flush` runs, and `queued` is
//! exactly what left (`coalesced` + `delivered` + the drops + `permanent` + `purged`) plus what
//! is pending. Before `queued` was derived from the entries present, each of these deaths left
//! it one off (issue: the flaky `after_repeated_kill_9` test).

use std::os::unix::process::ExitStatusExt;

use heartbeat_agent::ping::outbox::Outbox;

use crate::util::outbox::{Behaviour, PingHost};

use super::{assert_no_secret, text, token, Env};

/// Runs the agent with `args`, killed at `outbox:<step>`; asserts it died there (SIGKILL).
fn crash_at(env: &Env, step: &str, args: &[&str]) {
    let out = env
        .cmd(args)
        .env("HEARTBEAT_AGENT_CRASH_AT", format!("outbox:{step}"))
        .output()
        .expect("run the agent");
    assert_no_secret(&out);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGKILL),
        "{args:?} did not die at outbox:{step}: {:?}\n{}",
        out.status,
        text(&out)
    );
}

/// `run --ping-url URL --ping-timeout 1s -- COMMAND` (the host drops connections: kept).
fn run_args<'a>(url: &'a str, command: &'a str) -> [&'a str; 7] {
    [
        "run",
        "--ping-url",
        url,
        "--ping-timeout",
        "1s",
        "--",
        command,
    ]
}

/// A success of `url` kept in the outbox by a real `run` while the host is down.
fn keep_one(env: &Env, url: &str) {
    let before = env.outbox().list().expect("list").len();
    let out = env.output(&run_args(url, "true"));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(env.outbox().list().expect("list").len(), before + 1);
}

/// `queued` = what left + what is pending (every listed entry but a fresh ping's claim, its
/// holder alive or dead: its first attempt, not queued); returns `queued` and `delivered`.
fn assert_adds_up(outbox: &Outbox, when: &str) -> (u64, u64) {
    let s = outbox.stats();
    let pending = outbox
        .list()
        .expect("list")
        .iter()
        .filter(|l| {
            let claimed = l.in_flight_pid.is_some() || l.died_sender_pid.is_some();
            !claimed || l.last_error.is_some()
        })
        .count() as u64;
    let left = s.coalesced
        + s.delivered
        + s.dropped_failed_run
        + s.dropped_expired
        + s.dropped_overflow
        + s.permanent
        + s.purged;
    assert_eq!(s.queued, left + pending, "{when}: {s:?}, {pending} pending");
    (s.queued, s.delivered)
}

/// `outbox flush` with the host answering 200: nothing is left pending.
fn flush(env: &Env) {
    let out = env.output(&["outbox", "flush"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(env.outbox().list().expect("list").is_empty());
}

#[test]
fn a_death_between_keeping_a_ping_and_counting_it_leaves_the_counters_adding_up() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Drop);
    let path = token("keep");
    let url = host.url(&path);
    crash_at(&env, "keep", &run_args(&url, "true"));
    let outbox = env.outbox();
    assert_eq!(outbox.list().expect("list").len(), 1, "the ping is kept");
    assert_eq!(assert_adds_up(&outbox, "after the death").0, 1);
    host.set(Behaviour::Status(200));
    flush(&env);
    assert_eq!(host.count(&path), 1, "delivered once");
    assert_eq!(assert_adds_up(&outbox, "after the flush"), (1, 1));
}

#[test]
fn a_death_between_delivering_a_pending_ping_and_counting_it_leaves_the_counters_adding_up() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Drop);
    let path = token("finish");
    keep_one(&env, &host.url(&path));
    host.set(Behaviour::Status(200));
    crash_at(&env, "finish", &["outbox", "flush"]);
    assert_eq!(host.count(&path), 1, "delivered before the death");
    let outbox = env.outbox();
    assert_adds_up(&outbox, "after the death");
    flush(&env);
    assert_eq!(host.count(&path), 1, "not sent again: it had left");
    let (queued, delivered) = assert_adds_up(&outbox, "after the flush");
    assert_eq!(queued, delivered);
}

#[test]
fn a_death_between_dropping_a_pending_success_after_a_failed_run_and_counting_it_adds_up() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Drop);
    let path = token("dropped");
    let url = host.url(&path);
    keep_one(&env, &url);
    crash_at(&env, "drop_after_failure", &run_args(&url, "false"));
    let outbox = env.outbox();
    assert!(
        outbox.list().expect("list").is_empty(),
        "the success is gone"
    );
    assert_adds_up(&outbox, "after the death");
    host.set(Behaviour::Status(200));
    flush(&env);
    assert_eq!(host.count(&path), 0, "a dropped success is never sent");
    assert_adds_up(&outbox, "after the flush");
}

#[test]
fn a_death_between_purging_and_counting_it_leaves_the_counters_adding_up() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Drop);
    for name in ["purge-a", "purge-b"] {
        keep_one(&env, &host.url(&token(name)));
    }
    crash_at(&env, "purge", &["outbox", "purge"]);
    let outbox = env.outbox();
    assert!(outbox.list().expect("list").is_empty());
    assert_adds_up(&outbox, "after the death");
    flush(&env);
    assert_adds_up(&outbox, "after the flush");
}

#[test]
fn a_death_after_taking_back_a_dead_runs_ping_leaves_the_counters_adding_up() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Hang);
    let path = token("taken-back");
    let mut child = env
        .cmd(&run_args(&host.url(&path), "true"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn run");
    assert!(
        host.wait_until(std::time::Duration::from_secs(10), |paths| paths
            .contains(&path))
    );
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    let outbox = env.outbox();
    // A fresh ping's claim of a dead process: not queued until it is taken back.
    let listed = outbox.list().expect("list");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(listed[0].last_error.is_none(), "{listed:?}");
    assert_eq!(assert_adds_up(&outbox, "after the run's death").0, 0);
    host.set(Behaviour::Status(200));
    crash_at(&env, "claim", &["outbox", "flush"]);
    let listed = outbox.list().expect("list");
    assert_eq!(listed.len(), 1, "taken back, pending");
    assert!(
        listed[0]
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("taken back")),
        "{listed:?}"
    );
    assert_eq!(assert_adds_up(&outbox, "after the flush's death").0, 1);
    flush(&env);
    assert_eq!(assert_adds_up(&outbox, "after the flush"), (1, 1));
}
