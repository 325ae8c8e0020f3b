//! Unit tests of the outbox's file protocol: claims, recovery, coalescing, drops.

use super::*;
use crate::ping::{PingError, PingMethod};

fn ping(path: &str) -> Ping {
    Ping::new(&format!("http://127.0.0.1:9/{path}"), PingMethod::Get, "t").unwrap()
}

fn open(dir: &Path, max: usize) -> Outbox {
    Outbox::new(dir, max, &crate::persist::Failures::default())
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
    let claimed = outbox.claim(10, |_| true, |_, _| true).unwrap();
    assert_eq!(claimed.len(), 1);
    assert!(outbox.claim(10, |_| true, |_, _| true).unwrap().is_empty());
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
fn claims_whose_lock_is_free_or_whose_lease_ran_out_are_taken_back_at_once() {
    let home = tempfile::tempdir().unwrap();
    let outbox = open(home.path(), 10);
    outbox.create().unwrap();
    // A claim file nobody holds a lock on: its process died (whatever its pid says, even this
    // process's own pid, as after a pid reuse or in another pid namespace).
    let own = std::process::id();
    let far = now_ms() + 600_000;
    let dead = Entry::new(&ping("dead"), None, Duration::from_secs(60), now_ms());
    outbox
        .write_entry(
            &outbox.dir.join(entry::claim_name(&dead.key(), own, far)),
            &dead,
        )
        .unwrap();
    // A claim whose lease ran out, although its holder still holds it (a hung process).
    let context = PingContext::default();
    let mut hung = outbox
        .begin(&ping("hung"), &context, Duration::ZERO)
        .unwrap();
    let expired = outbox.dir.join(entry::claim_name(&hung.key, own, 1));
    std::fs::rename(&hung.path, &expired).unwrap();
    hung.path = expired;
    // A live claim: held, leased.
    let live = outbox
        .begin(&ping("live"), &context, Duration::from_secs(30))
        .unwrap();
    let claimed = outbox.claim(10, |_| true, |_, _| true).unwrap();
    let mut urls: Vec<_> = claimed.iter().map(|c| c.entry.url.clone()).collect();
    urls.sort();
    assert_eq!(
        urls,
        [dead.url, hung.entry.url.clone()],
        "a live, leased claim stays"
    );
    // Taken back before any request of theirs left: nothing to count.
    assert_eq!(outbox.stats().recovered, 0);
    // Its holder dies (the lock goes with it): the next look takes it back.
    drop(live);
    let claimed = outbox.claim(10, |_| true, |_, _| true).unwrap();
    assert_eq!(claimed.len(), 1);
    assert!(claimed[0].entry.url.ends_with("/live"));
    assert_eq!(outbox.stats().recovered, 0);
}

/// A request that left marks its claim file; the mark survives the holder's
/// death, a stopping holder's give-back and a timeout, and only sending a marked entry again
/// counts `recovered`; an answer or a refused connection takes the mark off or leaves none.
#[test]
fn only_a_request_sent_again_after_one_left_unanswered_counts_as_recovered() {
    let home = tempfile::tempdir().unwrap();
    let outbox = open(home.path(), 10);
    let context = PingContext::default();
    let claim_one = |outbox: &Outbox| {
        let mut claimed = outbox.claim(10, |_| true, |_, _| true).unwrap();
        assert_eq!(claimed.len(), 1);
        claimed.remove(0)
    };
    // A fresh ping whose request left: its holder dies (the claim and its lock dropped).
    let fresh = outbox
        .begin(&ping("a"), &context, Duration::from_secs(5))
        .unwrap();
    outbox.leaving(&fresh);
    assert!(
        read_entry(&fresh.path).unwrap().unanswered,
        "marked on disk"
    );
    assert!(
        read_entry(&fresh.path).unwrap().fresh(),
        "still a first attempt"
    );
    drop(fresh);
    let again = claim_one(&outbox);
    assert!(again.entry.unanswered, "the mark is taken back with it");
    assert_eq!(outbox.stats().recovered, 0, "nothing sent again yet");
    outbox.leaving(&again);
    assert_eq!(
        outbox.stats().recovered,
        1,
        "sent again: one possible duplicate"
    );
    // Its answer came (a 503): the mark goes, and the put-back entry is not marked.
    outbox.attempt_ended(&again, &PingError::Status(503));
    assert!(!read_entry(&again.path).unwrap().unanswered);
    outbox.finish(again, &retryable()).unwrap();
    let plain = claim_one(&outbox);
    assert!(!plain.entry.unanswered);
    outbox.leaving(&plain);
    assert_eq!(
        outbox.stats().recovered,
        1,
        "a first request after an answer"
    );
    // A timeout after the request left keeps the mark through the put-back ...
    outbox.attempt_ended(&plain, &PingError::Timeout);
    outbox.finish(plain, &retryable()).unwrap();
    let timed_out = claim_one(&outbox);
    assert!(timed_out.entry.unanswered);
    // ... and a refused connection (nothing left) before the next request keeps it too.
    outbox.attempt_ended(&timed_out, &PingError::Connect("refused".into()));
    outbox.leaving(&timed_out);
    assert_eq!(outbox.stats().recovered, 2);
    // A stopping drainer gives it back marked; a holder that dies before its request leaves
    // does not add a mark.
    outbox.release(timed_out).unwrap();
    assert!(claim_one(&outbox).entry.unanswered);
    let unsent = outbox
        .begin(&ping("b"), &context, Duration::from_secs(5))
        .unwrap();
    drop(unsent);
    let mut claimed = outbox.claim(10, |_| true, |_, _| true).unwrap();
    assert_eq!(claimed.len(), 2);
    claimed.sort_by(|a, b| a.entry.url.cmp(&b.entry.url));
    assert!(claimed[0].entry.unanswered && !claimed[1].entry.unanswered);
    assert_eq!(outbox.stats().recovered, 2);
}

#[test]
fn a_fresh_ping_is_in_flight_until_delivered_kept_or_discarded() {
    let home = tempfile::tempdir().unwrap();
    let outbox = open(home.path(), 10);
    let context = PingContext {
        job: Some("backup".to_owned()),
        max_age: Duration::from_secs(60),
    };
    // Delivered: nothing stays, an older pending success of the target is coalesced.
    store(&outbox, "a", None);
    let fresh = outbox
        .begin(&ping("a"), &context, Duration::from_secs(5))
        .unwrap();
    let listed = outbox.list().unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed
        .iter()
        .any(|l| l.in_flight_pid == Some(std::process::id())));
    outbox.attempt_failed(&fresh);
    outbox.delivered_fresh(fresh, &ping("a")).unwrap();
    assert!(outbox.list().unwrap().is_empty());
    assert_eq!(outbox.stats().coalesced, 1);
    // Kept: it becomes the pending entry, with its attempts and the server's Retry-After.
    let fresh = outbox
        .begin(&ping("b"), &context, Duration::from_secs(5))
        .unwrap();
    assert!(outbox
        .keep(fresh, 3, Some(Duration::from_secs(30)), "HTTP 503")
        .unwrap());
    let listed = outbox.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].attempts, listed[0].in_flight_pid), (3, None));
    assert!((28..=30).contains(&listed[0].next_attempt_secs));
    assert_eq!(outbox.stats().queued, 2, "the stored a, then the kept b");
    // A newer pending success of the target wins over an older fresh one kept later.
    let older = outbox
        .begin(&ping("b"), &context, Duration::from_secs(5))
        .unwrap();
    std::thread::sleep(Duration::from_millis(3));
    store(&outbox, "b", Some("newer"));
    assert!(outbox.keep(older, 1, None, "down").unwrap());
    let listed = outbox.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].job.as_deref(), Some("newer"));
    // Dropped by a failed run while in flight: not kept.
    let fresh = outbox
        .begin(&ping("c"), &context, Duration::from_secs(5))
        .unwrap();
    assert_eq!(outbox.drop_after_failure(Some("backup"), None).unwrap(), 1);
    assert!(!outbox.keep(fresh, 1, None, "down").unwrap());
    // Refused for good: nothing stays.
    let fresh = outbox
        .begin(&ping("d"), &context, Duration::from_secs(5))
        .unwrap();
    outbox.discard(fresh).unwrap();
    assert_eq!(outbox.list().unwrap().len(), 1);
}

#[test]
fn a_fifo_where_an_entry_should_be_is_set_aside_without_blocking() {
    let home = tempfile::tempdir().unwrap();
    let outbox = open(home.path(), 10);
    store(&outbox, "a", None);
    let fifo = outbox.dir.join(format!("{}{PENDING}", "0123456789abcdef"));
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    nix::unistd::mkfifo(&outbox.dir.join(stats::FILE), nix::sys::stat::Mode::S_IRWXU).ok();
    let claimed = outbox.claim(10, |_| true, |_, _| true).unwrap();
    assert_eq!(claimed.len(), 1, "the real entry is claimed");
    assert!(!fifo.exists());
    assert!(outbox
        .failed_dir()
        .join("0123456789abcdef.ping.corrupt")
        .exists());
    assert_eq!(outbox.stats().corrupt, 1);
}

#[test]
fn an_outbox_linked_to_another_users_directory_is_refused() {
    use std::os::unix::fs::MetadataExt;
    let home = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let target = if nix::unistd::geteuid().is_root() {
        let nobody = nix::unistd::Uid::from_raw(65534);
        nix::unistd::chown(elsewhere.path(), Some(nobody), None).unwrap();
        elsewhere.path().to_owned()
    } else {
        // A directory of root's, as seen by another user.
        PathBuf::from("/")
    };
    let mode_before = std::fs::metadata(&target).unwrap().mode();
    std::os::unix::fs::symlink(&target, home.path().join("outbox")).unwrap();
    let outbox = open(home.path(), 10);
    let err = outbox
        .begin(&ping("a"), &PingContext::default(), Duration::ZERO)
        .map(drop)
        .expect_err("refused");
    let text = err.to_string();
    assert!(
        text.contains("symbolic link to a directory of another user"),
        "{text}"
    );
    let err = outbox
        .store(&ping("a"), &PingContext::default(), 1, None, "down")
        .expect_err("refused");
    assert!(err.to_string().contains("refusing to follow it"), "{err}");
    assert_eq!(
        std::fs::metadata(&target).unwrap().mode(),
        mode_before,
        "not chmodded"
    );
}

#[test]
fn counters_that_cannot_be_written_are_carried_to_the_next_write() {
    let home = tempfile::tempdir().unwrap();
    let outbox = open(home.path(), 10);
    store(&outbox, "a", None);
    store(&outbox, "a", None);
    // stats.json cannot be replaced while a directory stands in its way.
    let path = outbox.dir.join(stats::FILE);
    let aside = outbox.dir.join("stats.aside");
    std::fs::rename(&path, &aside).unwrap();
    std::fs::create_dir(&path).unwrap();
    // A newer success of "a": the coalescing is counted in memory only.
    store(&outbox, "a", None);
    assert_eq!(
        outbox.list().unwrap().len(),
        1,
        "the entry is kept all the same"
    );
    let failed = |outbox: &Outbox| {
        let failures = outbox.failures.snapshot();
        failures
            .into_iter()
            .find(|(what, _)| *what == "outbox_stats")
            .map(|(_, n)| n)
    };
    assert_eq!(failed(&outbox), Some(1), "the failed write is counted");
    std::fs::remove_dir(&path).unwrap();
    std::fs::rename(&aside, &path).unwrap();
    // A clone of the handle (the daemon's tasks hold clones) writes what the first carried.
    store(&outbox.clone(), "c", None);
    let stats = outbox.stats();
    assert_eq!((stats.queued, stats.coalesced), (4, 2), "{stats:?}");
    assert_eq!(failed(&outbox), Some(1));
}

#[test]
fn counters_of_format_1_count_the_pending_entries_once() {
    let home = tempfile::tempdir().unwrap();
    let outbox = open(home.path(), 10);
    store(&outbox, "a", None);
    store(&outbox, "b", None);
    // Format 1 counters: `queued` counted "a" and "b" when they were stored, and one more
    // that was delivered.
    let path = outbox.dir.join(stats::FILE);
    std::fs::write(&path, r#"{"queued": 3, "delivered": 1}"#).unwrap();
    assert_eq!(outbox.stats().queued, 3, "{:?}", outbox.stats());
    let claimed = outbox.claim(10, |key| key == entry::key(ping("a").url()), |_, _| true);
    let delivered = PingOutcome::Delivered {
        status: 200,
        attempts: 1,
    };
    outbox
        .finish(claimed.unwrap().pop().unwrap(), &delivered)
        .unwrap();
    let stats = outbox.stats();
    assert_eq!((stats.queued, stats.delivered), (3, 2), "{stats:?}");
    let stored = std::fs::read_to_string(&path).unwrap();
    assert!(stored.contains(r#""format": 2"#), "{stored}");
    assert!(
        stored.contains(r#""queued": 2"#),
        "only what left: {stored}"
    );
}

#[test]
fn a_newer_success_during_an_attempt_wins_over_the_put_back() {
    let home = tempfile::tempdir().unwrap();
    let outbox = open(home.path(), 10);
    store(&outbox, "a", None);
    let claimed = outbox
        .claim(10, |_| true, |_, _| true)
        .unwrap()
        .pop()
        .unwrap();
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
        .claim(10, |_| true, |_, e| e.job.as_deref() == Some("backup"))
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

#[test]
fn successes_of_runs_whose_run_id_filled_the_url_coalesce_under_the_configured_url() {
    let home = tempfile::tempdir().unwrap();
    let outbox = open(home.path(), 10);
    let context = PingContext {
        job: None,
        max_age: Duration::from_secs(60),
    };
    let configured = crate::config::PingUrl::template("http://127.0.0.1:9/tok?rid={run_id}")
        .expect("a template");
    let of_run = |n: u128| {
        Ping::to(&configured, PingMethod::Get, "t")
            .unwrap()
            .for_run(crate::run::RunId::fixed(n))
    };
    let (first, second) = (of_run(1), of_run(2));
    assert_ne!(first.url(), second.url());
    outbox.store(&first, &context, 1, None, "down").unwrap();
    outbox.store(&second, &context, 1, None, "down").unwrap();
    assert_eq!(
        outbox.list().unwrap().len(),
        1,
        "one pending success per configured URL"
    );
    assert_eq!(outbox.stats().coalesced, 1);
    let claimed = outbox.claim(10, |_| true, |_, _| true).unwrap();
    let entry = &claimed[0].entry;
    assert_eq!(entry.url, second.url(), "the newest run's");
    assert_eq!(entry.ping().unwrap(), second, "read back with its target");
    for claim in claimed {
        outbox.release(claim).unwrap();
    }
    // A later failed run drops it by the configured URL, whatever its own run id.
    assert_eq!(
        outbox.drop_after_failure(None, Some(&of_run(3))).unwrap(),
        1
    );
    assert!(outbox.list().unwrap().is_empty());
}
