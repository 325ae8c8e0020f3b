//! Unit tests of the outbox's file protocol: claims, recovery, coalescing, drops.

use super::*;
use crate::ping::{PingError, PingMethod};

fn ping(path: &str) -> Ping {
    Ping::new(&format!("http://127.0.0.1:9/{path}"), PingMethod::Get, "t").unwrap()
}

fn open(dir: &Path, max: usize) -> Outbox {
    Outbox::new(dir, max)
}

fn store(outbox: &Outbox, path: &str, job: Option<&str>) {
    let context = PingContext {
        job: job.map(str::to_owned),
        max_age: Duration::from_secs(60),
    };
    outbox
        .store(&ping(path), &context, 1, None, "down")
        .unwrap();
}

fn retryable() -> PingOutcome {
    PingOutcome::Retryable {
        error: PingError::Status(503),
        attempts: 1,
        retry_after: Some(Duration::from_secs(30)),
    }
}

#[test]
fn a_claim_is_exclusive_and_a_failed_attempt_puts_it_back_with_retry_after() {
    let home = tempfile::tempdir().unwrap();
    let outbox = open(home.path(), 10);
    store(&outbox, "a", None);
    let claimed = outbox.claim(10, |_, _| true).unwrap();
    assert_eq!(claimed.len(), 1);
    assert!(outbox.claim(10, |_, _| true).unwrap().is_empty());
    assert_eq!(
        outbox.list().unwrap()[0].in_flight_pid,
        Some(std::process::id())
    );
    outbox
        .finish(claimed.into_iter().next().unwrap(), &retryable())
        .unwrap();
    let listed = outbox.list().unwrap();
    assert_eq!(listed[0].attempts, 2);
    assert!((28..=30).contains(&listed[0].next_attempt_secs));
    assert_eq!(listed[0].in_flight_pid, None);
}

#[test]
fn claims_of_dead_processes_and_expired_leases_are_taken_back() {
    let home = tempfile::tempdir().unwrap();
    let outbox = open(home.path(), 10);
    outbox.create().unwrap();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let entry = Entry::new(&ping("dead"), None, Duration::from_secs(60), now_ms());
    let far = now_ms() + 600_000;
    write_entry(
        &outbox.dir.join(entry::claim_name(&entry.key(), dead, far)),
        &entry,
    )
    .unwrap();
    let stale = Entry::new(&ping("stale"), None, Duration::from_secs(60), now_ms());
    let own = std::process::id();
    write_entry(
        &outbox.dir.join(entry::claim_name(&stale.key(), own, 1)),
        &stale,
    )
    .unwrap();
    let live = Entry::new(&ping("live"), None, Duration::from_secs(60), now_ms());
    write_entry(
        &outbox.dir.join(entry::claim_name(&live.key(), own, far)),
        &live,
    )
    .unwrap();
    let claimed = outbox.claim(10, |_, _| true).unwrap();
    let mut urls: Vec<_> = claimed.iter().map(|c| c.entry.url.clone()).collect();
    urls.sort();
    assert_eq!(urls, [entry.url, stale.url], "a live, leased claim stays");
}

#[test]
fn a_newer_success_during_an_attempt_wins_over_the_put_back() {
    let home = tempfile::tempdir().unwrap();
    let outbox = open(home.path(), 10);
    store(&outbox, "a", None);
    let claimed = outbox.claim(10, |_, _| true).unwrap().pop().unwrap();
    store(&outbox, "a", None);
    outbox.release(claimed).unwrap();
    assert_eq!(outbox.list().unwrap().len(), 1);
    let stats = outbox.stats();
    assert_eq!((stats.queued, stats.coalesced), (2, 1));
}

#[test]
fn a_failed_run_drops_pending_and_in_flight_successes_of_its_job() {
    let home = tempfile::tempdir().unwrap();
    let outbox = open(home.path(), 10);
    store(&outbox, "a", Some("backup"));
    store(&outbox, "b", Some("other"));
    let claimed = outbox
        .claim(10, |_, e| e.job.as_deref() == Some("backup"))
        .unwrap();
    assert_eq!(outbox.drop_after_failure(Some("backup"), None).unwrap(), 1);
    // The in-flight attempt then fails: nothing comes back.
    outbox
        .finish(claimed.into_iter().next().unwrap(), &retryable())
        .unwrap();
    let listed = outbox.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].job.as_deref(), Some("other"));
    assert_eq!(outbox.stats().dropped_failed_run, 1);
}

#[test]
fn the_bound_drops_the_oldest() {
    let home = tempfile::tempdir().unwrap();
    let outbox = open(home.path(), 2);
    for path in ["a", "b", "c"] {
        store(&outbox, path, Some(path));
        std::thread::sleep(Duration::from_millis(2));
    }
    let jobs: Vec<_> = outbox.list().unwrap().into_iter().map(|l| l.job).collect();
    assert_eq!(jobs, [Some("b".to_owned()), Some("c".to_owned())]);
    assert_eq!(outbox.stats().dropped_overflow, 1);
}
