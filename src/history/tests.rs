//! The history's files: numbering, the two generations and their bound, torn lines, removal;
//! the daemon's writer waiting out a burst of starts.

use std::collections::HashSet;
use std::io::Write;
use std::time::{Duration, Instant};

use chrono::Utc;

use super::recorder::MOST_DEFERRED;
use super::*;
use crate::run::record::RunRecord;
use crate::run_end::{ProcessEnd, RunEnd, RunOutcome};

fn record(code: i32, tail: &str) -> RunRecord {
    let now = Utc::now();
    let end = RunEnd::Ended(ProcessEnd::Exited(code));
    RunRecord {
        scheduled: now,
        started: now,
        ended: now,
        duration: Duration::from_millis(5),
        outcome: end.outcome(&[0]),
        end,
        output_tail: tail.to_owned(),
        attempts: 1,
        run_id: crate::run::RunId::fixed(1),
    }
}

fn tails(history: &History, job: &str, limit: usize) -> Vec<String> {
    history
        .runs(job, limit)
        .expect("read")
        .into_iter()
        .map(|r| r.run.output_tail)
        .collect()
}

#[test]
fn a_failed_append_is_counted_in_the_failures_it_was_given() {
    let dir = tempfile::tempdir().expect("tempdir");
    let runs = dir.path().join("history/backup").join(super::log::CURRENT);
    std::fs::create_dir_all(runs.join("x")).expect("a directory in the way");
    let failures = crate::persist::Failures::default();
    let history = History::new(dir.path(), &failures);
    let run = Run::of(&record(0, "lost"), None, None);
    assert_eq!(history.record("backup", 10, run.clone()), None);
    assert_eq!(failures.count(crate::persist::What::History), 1);
    assert_eq!(history.record("other", 10, run), Some(1));
    assert_eq!(failures.count(crate::persist::What::History), 1);
}

#[test]
fn runs_come_back_newest_first_numbered_and_bounded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let history = History::new(dir.path(), &crate::persist::Failures::default());
    for i in 1..=25 {
        history.record(
            "backup",
            10,
            Run::of(&record(0, &format!("run {i}")), None, None),
        );
    }
    let runs = history.runs("backup", 10).expect("read");
    assert_eq!(runs.len(), 10);
    assert_eq!(runs[0].seq, 25);
    assert_eq!(runs[0].run.output_tail, "run 25");
    assert_eq!(runs[9].seq, 16);
    // Two generations at most: 20 (old) + 5 (current) would be 25; the old one holds 11-20.
    let lines = |name: &str| {
        std::fs::read_to_string(dir.path().join("history/backup").join(name))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    assert_eq!((lines("runs.old.jsonl"), lines("runs.jsonl")), (10, 5));
}

#[test]
fn a_torn_last_line_is_skipped_by_readers_and_cut_off_by_the_next_append() {
    let dir = tempfile::tempdir().expect("tempdir");
    let history = History::new(dir.path(), &crate::persist::Failures::default());
    history.record("backup", 100, Run::of(&record(0, "one"), None, None));
    history.record("backup", 100, Run::of(&record(1, "two"), None, None));
    let file = dir.path().join("history/backup/runs.jsonl");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .expect("open");
    f.write_all(br#"{"seq":3,"scheduled":"2026-"#)
        .expect("torn");
    drop(f);
    assert_eq!(tails(&history, "backup", 100), ["two", "one"]);
    history.record("backup", 100, Run::of(&record(0, "three"), None, None));
    let runs = history.runs("backup", 100).expect("read");
    assert_eq!(
        runs.iter()
            .map(|r| (r.seq, r.run.output_tail.as_str()))
            .collect::<Vec<_>>(),
        [(3, "three"), (2, "two"), (1, "one")]
    );
    let text = std::fs::read_to_string(&file).expect("read");
    assert_eq!(text.lines().count(), 3, "{text}");
}

#[test]
fn numbering_goes_on_after_a_rotation_and_a_limit_of_zero_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let history = History::new(dir.path(), &crate::persist::Failures::default());
    for _ in 0..3 {
        history.record("a", 3, Run::of(&record(0, ""), None, None));
    }
    // The third run started a new generation: the current file is gone, numbering follows
    // the old one.
    history.record("a", 3, Run::of(&record(0, ""), None, None));
    assert_eq!(history.runs("a", 3).expect("read")[0].seq, 4);
    history.record("off", 0, Run::of(&record(0, ""), None, None));
    assert!(!dir.path().join("history/off").exists());
}

#[test]
fn a_removed_jobs_history_goes_only_after_the_keep_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let history = History::new(dir.path(), &crate::persist::Failures::default());
    for job in ["kept", "gone"] {
        history.record(job, 5, Run::of(&record(0, ""), None, None));
    }
    let configured: HashSet<&str> = ["kept"].into();
    assert!(history
        .prune_removed(&configured, Duration::from_secs(3600))
        .is_empty());
    assert_eq!(history.jobs(), ["gone", "kept"]);
    assert_eq!(history.prune_removed(&configured, Duration::ZERO), ["gone"]);
    assert_eq!(history.jobs(), ["kept"]);
}

#[test]
fn a_runs_secrets_and_its_ping_are_kept_as_documented() {
    let record = record(3, "done");
    let ping = crate::run::PingRecord {
        at: Utc::now(),
        kind: crate::ping::PingKind::Fail,
        accepted: false,
        detail: "connection refused".to_owned(),
        status: None,
        queued: true,
    };
    let run = Run::of(&record, Some(&ping), Some("alpha"));
    let json = serde_json::to_value(&run).expect("json");
    assert_eq!(json["outcome"], "failed");
    assert_eq!(json["exit_code"], 3);
    assert_eq!(json["ping"]["kind"], "fail");
    assert_eq!(json["ping"]["result"], "failed");
    assert_eq!(json["ping"]["outbox"], true);
    assert_eq!(json["node"], "alpha");
    assert!(!run.success() && record.outcome == RunOutcome::Failed);
}

#[test]
fn the_last_runs_are_read_from_the_end_across_generations_and_past_a_torn_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let history = History::new(dir.path(), &crate::persist::Failures::default());
    for i in 1..=27 {
        let tail = format!("run {i}\nwith two lines of output");
        history.record("backup", 10, Run::of(&record(i % 2, &tail), None, None));
    }
    let seqs = |runs: Vec<Run>| runs.iter().map(|r| r.seq).collect::<Vec<_>>();
    // On disk: the old generation holds 11-20, the current one 21-27.
    for n in [0, 1, 7, 10, 15, 17, 20, 50] {
        let expected: Vec<u64> = (11..=27).rev().take(n).collect();
        assert_eq!(
            seqs(history.runs("backup", n).expect("read")),
            expected,
            "n = {n}"
        );
    }
    let file = dir.path().join("history/backup/runs.jsonl");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .expect("open");
    f.write_all(br#"{"seq":28,"scheduled":"2026-"#)
        .expect("torn");
    drop(f);
    assert_eq!(seqs(history.runs("backup", 3).expect("read")), [27, 26, 25]);
    assert!(history.runs("nothing", 5).expect("read").is_empty());
}

/// The daemon's writer leaves the disk alone while runs are starting, but never holds a run
/// longer than [`MOST_DEFERRED`]; once starts stop, what it holds is written at once.
#[test]
fn the_writer_waits_out_a_burst_of_starts_but_not_beyond_its_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    let recorder = Recorder::start(History::new(
        dir.path(),
        &crate::persist::Failures::default(),
    ));
    let recorder = std::sync::Arc::new(recorder);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let starter = {
        let (recorder, stop) = (
            std::sync::Arc::clone(&recorder),
            std::sync::Arc::clone(&stop),
        );
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                recorder.run_starting();
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    let handed = Instant::now();
    recorder.record("burst", 10, Run::of(&record(0, "first"), None, None));
    std::thread::sleep(Duration::from_millis(400));
    assert!(
        tails(recorder.history(), "burst", 10).is_empty(),
        "written while runs were still starting"
    );
    // Starts go on past the bound: the run is written anyway, about MOST_DEFERRED after it
    // was handed over.
    while tails(recorder.history(), "burst", 10).is_empty() {
        assert!(
            handed.elapsed() < MOST_DEFERRED + Duration::from_secs(3),
            "held past its bound"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(handed.elapsed() >= MOST_DEFERRED - Duration::from_millis(50));
    // Once starts stop, a run is written as soon as the daemon is quiet.
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    starter.join().expect("starter");
    recorder.record("burst", 10, Run::of(&record(0, "second"), None, None));
    assert!(recorder.finish(Duration::from_secs(5)), "the writer ended");
    assert_eq!(tails(recorder.history(), "burst", 10), ["second", "first"]);
}

/// [`Recorder::finish`] waits no longer than its bound for a writer that is held up (here,
/// by runs that keep starting), and the writer, left behind, still writes what it was handed;
/// a run handed over after it is dropped.
#[test]
fn finishing_waits_for_the_writer_within_its_bound_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let recorder = Recorder::start(History::new(
        dir.path(),
        &crate::persist::Failures::default(),
    ));
    recorder.run_starting();
    recorder.record("held", 10, Run::of(&record(0, "held"), None, None));
    let asked = Instant::now();
    let (joined, waited) = std::thread::scope(|scope| {
        scope.spawn(|| {
            while asked.elapsed() < Duration::from_millis(600) {
                recorder.run_starting();
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        (recorder.finish(Duration::from_millis(200)), asked.elapsed())
    });
    assert!(!joined, "the writer was still held");
    assert!(
        waited >= Duration::from_millis(200) && waited < Duration::from_millis(550),
        "waited {waited:?}"
    );
    recorder.record("held", 10, Run::of(&record(0, "late"), None, None));
    let deadline = Instant::now() + Duration::from_secs(5);
    while tails(recorder.history(), "held", 10).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the writer left behind wrote nothing"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(tails(recorder.history(), "held", 10), ["held"]);
    assert!(!recorder.finish(Duration::from_secs(1)), "joined only once");
}

#[test]
fn a_runs_pings_recorded_after_it_are_joined_across_a_new_generation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let history = History::new(dir.path(), &crate::persist::Failures::default());
    let ping = |detail: &str| RunPing {
        kind: crate::ping::PingKind::Success,
        at: Utc::now(),
        result: "accepted".to_owned(),
        detail: detail.to_owned(),
        outbox: false,
    };
    // With a limit of 2, run 2 starts a new generation: its pings land in the next file.
    let first = history.record("j", 2, Run::ended(&record(0, "one"), None, true));
    let second = history.record("j", 2, Run::ended(&record(0, "two"), None, true));
    assert_eq!((first, second), (Some(1), Some(2)));
    for (seq, detail) in [(2, "HTTP 202"), (1, "HTTP 201")] {
        let update = PingUpdate {
            update: seq,
            ping: Some(ping(detail)),
            start_ping: None,
        };
        history.pinged("j", &update);
    }
    let third = history.record("j", 2, Run::ended(&record(0, "three"), None, true));
    assert_eq!(third, Some(3), "updates do not count as runs");
    let runs = history.runs("j", 3).expect("read");
    let seen: Vec<(u64, Option<&str>, bool)> = runs
        .iter()
        .map(|r| {
            (
                r.seq,
                r.ping.as_ref().map(|p| p.detail.as_str()),
                r.ping_pending,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (3, None, true),
            (2, Some("HTTP 202"), false),
            (1, Some("HTTP 201"), false)
        ]
    );
}

#[test]
fn a_lines_first_bytes_tell_a_run_and_its_number_from_its_pings() {
    use super::update::Head;
    assert_eq!(
        Head::of(br#"{"seq":412,"scheduled":"2026-11-26T0"#),
        Head::Run(412)
    );
    assert_eq!(Head::of(br#"{"update":7,"ping":null}"#), Head::Update);
    assert_eq!(Head::of(br#"{"seq":4"#), Head::Unknown, "cut in its number");
    assert_eq!(Head::of(br#"{"scheduled":"x","seq":1}"#), Head::Unknown);
    assert_eq!(Head::of(b""), Head::Unknown);
}

/// A cluster's view holding fixed runs, for the merge.
#[derive(Debug)]
struct Fixed(Vec<Run>);

impl Shared for Fixed {
    fn publish(&self, _: &str, _: usize, _: &Run) {}
    fn pinged(&self, _: &str, _: &PingUpdate) {}
    fn runs(&self, _: &str) -> Vec<Run> {
        self.0.clone()
    }
    fn generation(&self, _: &str) -> u64 {
        7
    }
    fn unavailable(&self) -> Option<String> {
        None
    }
}

/// A run of `node` that ended `at` seconds after the epoch, with run id `id`.
fn run_of(node: &str, at: i64, id: u128) -> Run {
    let mut record = record(0, node);
    record.ended = chrono::DateTime::from_timestamp(at, 0).expect("a time");
    record.run_id = crate::run::RunId::fixed(id);
    Run::of(&record, None, Some(node))
}

#[test]
fn a_clusters_runs_are_merged_newest_first_and_a_run_held_here_is_shown_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (at, id) in [(10, 1), (30, 3)] {
        History::new(dir.path(), &crate::persist::Failures::default()).record(
            "tick",
            10,
            run_of("a", at, id),
        );
    }
    // The cluster holds b's runs and a copy of a's run 3 (a's own, copied into etcd).
    let others = vec![run_of("b", 40, 4), run_of("a", 30, 3), run_of("b", 20, 2)];
    let history = History::with_cluster(
        dir.path(),
        Some(Arc::new(Fixed(others))),
        &crate::persist::Failures::default(),
    );
    let runs = history.runs("tick", 10).expect("read");
    let shown: Vec<(String, i64)> = runs
        .iter()
        .map(|r| (r.node.clone().unwrap_or_default(), r.run.ended.timestamp()))
        .collect();
    let expected = [("b", 40), ("a", 30), ("b", 20), ("a", 10)];
    let expected: Vec<(String, i64)> = expected
        .iter()
        .map(|(n, t)| ((*n).to_owned(), *t))
        .collect();
    assert_eq!(shown, expected);
    // The newest n of the merge, and a version that the cluster's runs change.
    assert_eq!(history.runs("tick", 2).expect("read").len(), 2);
    let local = std::fs::metadata(dir.path().join("history/tick/runs.jsonl")).expect("file");
    assert_eq!(
        history.version("tick").map(|v| v.0),
        Some(local.len() + (7 << 32))
    );
    assert_eq!(
        history.cluster_outcomes("tick", 2),
        Some(vec!["success".to_owned(), "success".to_owned()])
    );
}
