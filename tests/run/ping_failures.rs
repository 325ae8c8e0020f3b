//! A ping that fails never changes the command's outcome: a 500 is retried, a hanging server is
//! given up within the budget, a refused connection is a warning only, a rejection is not
//! retried; the command's status passes through and the run's wall time stays bounded.

use std::process::Output;
use std::time::{Duration, Instant};

use crate::util::http::{refused_url, FakeServer, Mode};

use super::{output, ping_url, stderr, Env, TOKEN};

/// Runs `exit CODE` with a ping to `url`; returns the output and the wall time.
fn run_with_ping(env: &Env, url: &str, budget: &str) -> (Output, Duration) {
    let started = Instant::now();
    let args = [
        "--ping-url",
        url,
        "--ping-timeout",
        budget,
        "--success-codes",
        "4",
    ];
    let out = output(env.run(&[&args[..], &["--", "sh", "-c", "echo ran; exit 4"]].concat()));
    (out, started.elapsed())
}

fn assert_ran_and_warned(out: &Output, elapsed: Duration, budget: Duration) {
    assert_eq!(out.status.code(), Some(4), "{}", stderr(out));
    assert_eq!(out.stdout, b"ran\n");
    assert!(
        elapsed < budget + Duration::from_millis(700),
        "took {elapsed:?}"
    );
    let err = stderr(out);
    assert!(err.contains("ping not delivered"), "{err}");
    assert!(!err.contains(TOKEN), "token leaked: {err}");
}

#[test]
fn ping_server_answering_500_is_retried_and_does_not_change_the_status() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(500));
    let (out, elapsed) = run_with_ping(&env, &ping_url(&server), "2s");
    assert_ran_and_warned(&out, elapsed, Duration::from_secs(2));
    assert_eq!(server.requests().len(), 3, "three attempts");
}

#[test]
fn hanging_ping_server_is_given_up_within_the_budget() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Hang);
    let (out, elapsed) = run_with_ping(&env, &ping_url(&server), "1500ms");
    assert_ran_and_warned(&out, elapsed, Duration::from_millis(1500));
    assert!(
        server.requests().len() >= 2,
        "retries seen: {:?}",
        server.requests()
    );
}

#[test]
fn refused_ping_is_a_warning_only() {
    let env = Env::new();
    let (out, elapsed) = run_with_ping(&env, &refused_url(&format!("/{TOKEN}")), "1s");
    assert_ran_and_warned(&out, elapsed, Duration::from_secs(1));
}

#[test]
fn rejected_ping_is_not_retried() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(404));
    let out = output(env.run(&["--ping-url", &ping_url(&server), "--", "true"]));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(server.requests().len(), 1);
    let err = stderr(&out);
    assert!(err.contains("HTTP 404") && !err.contains(TOKEN), "{err}");
}
