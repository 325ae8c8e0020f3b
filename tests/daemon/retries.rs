//! `retries` in the daemon: a stop (SIGTERM) while a run waits for its next attempt ends the
//! run at once with the last attempt's result; `timeout` bounds each attempt.

use super::*;
use crate::util::{flaky_script, runs_counted};

const SECOND: Duration = Duration::from_secs(1);

/// Writes job `name` (`@reboot`: it runs once at start) running a counter script that always
/// fails, then `tail` (shell), with the job's `settings` and a ping to `server`; returns the
/// counter file.
fn failing_job(
    home: &Home,
    server: &FakeServer,
    name: &str,
    tail: &str,
    settings: &str,
) -> PathBuf {
    let counter = home.path("counter");
    home.write_jobs(&format!(
        "[[jobs]]\nname = \"{name}\"\nschedule = \"@reboot\"\nshell = \"{}; {tail}\"\n\
         ping_url = \"{}\"\n{settings}\n",
        flaky_script(&counter, 99),
        server.url(&format!("/{name}")),
    ));
    counter
}

#[test]
fn sigterm_while_waiting_for_a_retry_ends_the_run_at_once() {
    let home = Home::new();
    let server = ping_server();
    let counter = failing_job(
        &home,
        &server,
        "flaky",
        "exit 7",
        "retries = 5\nretry_delay = \"30s\"",
    );
    let mut daemon = home.start();
    let retrying = daemon.wait_for(1, 5 * SECOND, |l| {
        is(l, "attempt failed; retrying", "flaky")
    });
    assert_eq!(retrying[0]["attempt"], 1, "{}", retrying[0]);
    assert_eq!(retrying[0]["attempts"], 6, "{}", retrying[0]);
    assert_eq!(retrying[0]["outcome"], "failed", "{}", retrying[0]);
    let asked = Instant::now();
    daemon.signal(Signal::SIGTERM);
    let status = daemon.wait_exit(5 * SECOND);
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", daemon.text());
    // Far sooner than the 15 s to 30 s wait.
    assert!(asked.elapsed() < 3 * SECOND, "{:?}", asked.elapsed());
    assert_eq!(
        daemon.count(|l| is(l, "no further attempt: the daemon is stopping", "flaky")),
        1,
        "{}",
        daemon.text()
    );
    assert_eq!(runs_counted(&counter), 1);
    assert_eq!(hits(&server, "/flaky"), 0, "a failed run is not pinged");
}

#[test]
fn the_timeout_bounds_each_attempt() {
    let home = Home::new();
    let server = ping_server();
    let counter = failing_job(
        &home,
        &server,
        "slow",
        "sleep 30",
        "timeout = \"300ms\"\nkill_after = \"1s\"\nretries = 1\nretry_delay = \"100ms\"",
    );
    let daemon = home.start();
    let failed = daemon.wait_for(2, 10 * SECOND, |l| is(l, "job failed", "slow"));
    for (n, line) in failed.iter().enumerate() {
        assert_eq!(line["timed_out"], true, "{line}");
        assert_eq!(line["attempt"], n + 1, "{line}");
        assert_eq!(line["attempts"], 2, "{line}");
        let ms = line["duration_ms"].as_u64().expect("duration");
        assert!((300..3_000).contains(&ms), "{line}");
    }
    std::thread::sleep(SECOND);
    assert_eq!(runs_counted(&counter), 2, "no third attempt");
    let logs = daemon.stop();
    assert_eq!(
        logs.iter()
            .filter(|l| is(l, "attempt failed; retrying", "slow"))
            .count(),
        1
    );
    assert_eq!(hits(&server, "/slow"), 0);
}
