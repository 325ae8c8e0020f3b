//! `run --retries`: a command failing twice (a counter file) then succeeding is pinged once
//! after its third attempt, with its output and status passed through untouched and the retry
//! notices on stderr only; every attempt failing exits with the last attempt's status and no
//! ping; `--timeout` bounds each attempt; a SIGTERM between attempts (or during one) ends the
//! run at once; bad values are refused before anything runs.

use std::time::Instant;

use nix::sys::signal::Signal;

use super::*;
use crate::util::emulator::{token_for, Background};
use crate::util::{flaky_script, runs_counted, wait_exit};

/// `run FLAGS -- sh -c SCRIPT`, waiting for it.
fn run_script(env: &Env, flags: &[&str], script: &str) -> Output {
    output(env.run(&[flags, &["--", "sh", "-c", script][..]].concat()))
}

/// An emulator holding check `r1`, and its ping URL.
fn emulator() -> (Background, String) {
    let emulator = Background::with_checks(&[("r1", &token_for("r1"))]);
    let url = format!("{}/{}", emulator.ping_url(), token_for("r1"));
    (emulator, url)
}

#[test]
fn fails_twice_then_succeeds_pings_once_after_the_third_attempt() {
    let env = Env::new();
    let (emulator, url) = emulator();
    let counter = env.path("counter");
    let script = flaky_script(&counter, 3);
    let out = run_script(
        &env,
        &[
            "--ping-url",
            &url,
            "--retries",
            "3",
            "--retry-delay",
            "100ms",
        ],
        &script,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        runs_counted(&counter),
        3,
        "no fourth attempt after a success"
    );
    // stdout is the command's alone, every attempt's.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "attempt 1\nattempt 2\nattempt 3\n"
    );
    let err = stderr(&out);
    assert!(
        err.contains("attempt 1 of 4 failed (exit 1); retrying in"),
        "{err}"
    );
    assert!(
        err.contains("attempt 2 of 4 failed (exit 1); retrying in"),
        "{err}"
    );
    assert!(!err.contains(&token_for("r1")), "{err}");
    let pings = emulator.pings();
    assert_eq!(pings.len(), 1, "{pings:?}");
    assert_eq!(pings[0].path, format!("/{}", token_for("r1")));
}

#[test]
fn the_jobs_retries_apply_to_run_job_and_flags_override_them() {
    let env = Env::new();
    let (emulator, url) = emulator();
    let counter = env.path("counter");
    let config = env.path("config.toml");
    std::fs::write(
        &config,
        format!(
            "[[jobs]]\nname = \"flaky\"\nschedule = \"@daily\"\nshell = \"{}\"\nping_url = \"{url}\"\n\
             retries = 1\nretry_delay = \"100ms\"\n",
            flaky_script(&counter, 2)
        ),
    )
    .expect("config");
    let config = config.to_str().expect("utf-8");
    let out = output(env.run(&["--config", config, "--job", "flaky"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(runs_counted(&counter), 2);
    assert_eq!(emulator.pings().len(), 1);
    // `--retries 0` overrides the job's: one attempt, its failure passes through.
    std::fs::remove_file(&counter).expect("reset the counter");
    let out = output(env.run(&["--config", config, "--job", "flaky", "--retries", "0"]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(runs_counted(&counter), 1);
    assert!(!stderr(&out).contains("retrying"), "{}", stderr(&out));
    assert_eq!(emulator.pings().len(), 1, "a failed run is not pinged");
}

#[test]
fn every_attempt_failing_exits_with_the_last_status_and_no_ping() {
    let env = Env::new();
    let (emulator, url) = emulator();
    let counter = env.path("counter");
    let script = format!("{}; exit $((n + 10))", flaky_script(&counter, 99));
    let out = run_script(
        &env,
        &[
            "--ping-url",
            &url,
            "--retries",
            "2",
            "--retry-delay",
            "50ms",
        ],
        &script,
    );
    // The third attempt's own status (10 + 3), not the first one's.
    assert_eq!(out.status.code(), Some(13), "{}", stderr(&out));
    assert_eq!(runs_counted(&counter), 3);
    let err = stderr(&out);
    assert!(
        err.contains("all 3 attempts of the command failed (exit 13)"),
        "{err}"
    );
    assert!(emulator.pings().is_empty());
}

#[test]
fn the_timeout_applies_to_each_attempt() {
    let env = Env::new();
    let counter = env.path("counter");
    let script = format!("{}; sleep 30", flaky_script(&counter, 99));
    let started = Instant::now();
    let out = run_script(
        &env,
        &[
            "--timeout",
            "300ms",
            "--retries",
            "2",
            "--retry-delay",
            "50ms",
        ],
        &script,
    );
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert_eq!(runs_counted(&counter), 3, "each attempt got its own 300 ms");
    assert!(took >= Duration::from_millis(900), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    let err = stderr(&out);
    assert_eq!(err.matches("command timed out").count(), 3, "{err}");
}

#[test]
fn sigterm_between_attempts_ends_the_run_at_once() {
    let env = Env::new();
    let (emulator, url) = emulator();
    let counter = env.path("counter");
    let script = format!("{}; exit 7", flaky_script(&counter, 99));
    let mut child = env
        .run(&[
            "--ping-url",
            &url,
            "--retries",
            "5",
            "--retry-delay",
            "20s",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn agent");
    eventually(Duration::from_secs(5), "the first attempt to end", || {
        if runs_counted(&counter) == 1 {
            Ok(())
        } else {
            Err("not yet")
        }
    });
    // Let the wrapper reach its wait (the attempt's exit is reaped within milliseconds).
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    signal(&child, Signal::SIGTERM);
    let status = wait_exit(&mut child, Duration::from_secs(5)).expect("the wrapper exits");
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
    // The last attempt's status, no second attempt, no ping.
    assert_eq!(status.code(), Some(7));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
        .expect("read stderr");
    assert!(
        err.contains("no further attempt: the agent was asked to stop (exit 7)"),
        "{err}"
    );
    assert_eq!(runs_counted(&counter), 1);
    assert!(emulator.pings().is_empty());
}

#[test]
fn sigterm_during_an_attempt_starts_no_further_attempt() {
    let env = Env::new();
    let counter = env.path("counter");
    let script = format!("{}; echo x > ready; sleep 30", flaky_script(&counter, 99));
    let args = [
        "--retries",
        "3",
        "--retry-delay",
        "50ms",
        "--",
        "sh",
        "-c",
        &script,
    ];
    let mut child = env.start(&args, "ready");
    signal(&child, Signal::SIGTERM);
    let status = wait_exit(&mut child, Duration::from_secs(5)).expect("the wrapper exits");
    // The forwarded SIGTERM ended the command (128 + 15); nothing ran again.
    assert_eq!(status.code(), Some(143));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(runs_counted(&counter), 1);
}

#[test]
fn bad_retry_values_are_refused_before_anything_runs() {
    let env = Env::new();
    let marker = env.path("ran");
    let touch = format!("touch {}", marker.display());
    let cases: [(&[&str], &str); 4] = [
        (&["--retries=-1"], "invalid value '-1' for '--retries <N>'"),
        (&["--retries", "101"], "101 is not in 0..=100"),
        (&["--retry-delay", "2d"], "\"2d\" is longer than a day"),
        (
            &["--retry-delay", "10m", "--retry-delay-max", "1m"],
            "--retry-delay 10m is longer than --retry-delay-max 1m",
        ),
    ];
    for (flags, message) in cases {
        let out = run_script(&env, flags, &touch);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(message),
            "{flags:?}: {}",
            stderr(&out)
        );
        assert!(!marker.exists(), "{flags:?}: nothing may run");
    }
}
