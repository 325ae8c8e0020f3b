//! `run --timeout`: the whole process group ends without a ping, stragglers that ignore SIGTERM
//! are killed after `--kill-after`, and a command ignoring SIGTERM exits 137.

use std::time::{Duration, Instant};

use crate::util::http::{FakeServer, Mode};
use crate::util::read_pid;

use super::{output, ping_url, stderr, Env, IGNORES_SIGTERM};

/// Whether a live (non-zombie) process of group `pgid` exists: this machine's PID 1 may be slow
/// to reap the zombies of killed orphans, and a zombie is not a survivor.
fn group_alive(pgid: i32) -> bool {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .any(|stat| {
            let rest = &stat[stat.rfind(')').map_or(0, |i| i + 1)..];
            let fields: Vec<&str> = rest.split_whitespace().collect();
            fields.len() > 2 && fields[2] == pgid.to_string() && fields[0] != "Z"
        })
}

#[test]
fn timeout_ends_the_whole_group_without_a_ping() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(200));
    let url = ping_url(&server);
    let script = "echo $$ > pgid; sleep 300 & sleep 300";
    let started = Instant::now();
    let args = [
        "--ping-url",
        &url,
        "--timeout",
        "1s",
        "--kill-after",
        "2s",
        "--",
        "sh",
        "-c",
        script,
    ];
    let out = output(env.run(&args));
    let elapsed = started.elapsed();
    assert!(
        matches!(out.status.code(), Some(124 | 137)),
        "{:?}",
        out.status
    );
    assert!(elapsed < Duration::from_millis(3800), "took {elapsed:?}");
    assert!(elapsed >= Duration::from_secs(1), "took {elapsed:?}");
    let pgid = read_pid(&env.path("pgid"), Duration::from_secs(1));
    assert!(!group_alive(pgid), "a process of group {pgid} survived");
    assert!(server.requests().is_empty());
    assert!(stderr(&out).contains("timed out"), "{}", stderr(&out));
}

#[test]
fn timeout_kills_stragglers_that_ignore_sigterm() {
    let env = Env::new();
    // The background subshell ignores TERM and outlives sh: it must be killed at kill-after.
    let script = "echo $$ > pgid; (trap '' TERM; sleep 300) & sleep 300";
    let started = Instant::now();
    let args = [
        "--timeout",
        "500ms",
        "--kill-after",
        "1s",
        "--",
        "sh",
        "-c",
        script,
    ];
    let out = output(env.run(&args));
    let elapsed = started.elapsed();
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(elapsed < Duration::from_millis(2500), "took {elapsed:?}");
    let pgid = read_pid(&env.path("pgid"), Duration::from_secs(1));
    assert!(!group_alive(pgid), "a process of group {pgid} survived");
}

#[test]
fn command_ignoring_sigterm_is_killed_with_137() {
    let env = Env::new();
    let started = Instant::now();
    let out = output(env.run(&IGNORES_SIGTERM));
    assert_eq!(out.status.code(), Some(137));
    assert!(started.elapsed() < Duration::from_secs(3));
}
