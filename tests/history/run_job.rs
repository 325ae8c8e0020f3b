//! `run --job`'s runs in the history: each with its final ping; bounded by the documented
//! formula at ten times the limit; a torn record skipped with one warning and cut off by the
//! next run.

use std::io::Write;

use serde_json::Value;

use super::{agent, history_json, runs};
use crate::util::http::{refused_url, FakeServer, Mode};
use crate::util::Home;

fn config(home: &Home, ping: &str, fail: &str, extra: &str) {
    home.write_config(&format!(
        "[agent]\nstate_dir = \"{}\"\n\n[[jobs]]\nname = \"backup\"\nschedule = \"@daily\"\n\
         command = [\"true\"]\nping_url = \"{ping}\"\nfail_url = \"{fail}\"\n{extra}\n",
        home.path("state").display()
    ));
}

fn run(home: &Home, script: &str) -> std::process::Output {
    agent(
        home,
        &[
            "run",
            "--job",
            "backup",
            "--ping-timeout",
            "2s",
            "--",
            "sh",
            "-c",
            script,
        ],
    )
}

#[test]
fn each_run_of_run_job_is_kept_with_its_final_ping() {
    let home = Home::new();
    let host = FakeServer::start(Mode::Status(200));
    let start = format!("start_url = \"{}\"", host.url("/start/st-token-1234567890"));
    config(
        &home,
        &host.url("/ping/ok-token-1234567890"),
        &refused_url("/fail"),
        &start,
    );
    assert!(run(&home, "echo first").status.success());
    let out = run(&home, "exit 4");
    assert_eq!(out.status.code(), Some(4), "the exit code passes through");
    let doc = history_json(&home, &["backup"]);
    let list = runs(&doc);
    assert_eq!(list.len(), 2, "{doc}");
    let (failed, ok) = (&list[0], &list[1]);
    assert_eq!(
        (ok["seq"].as_u64(), failed["seq"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(ok["outcome"], "success");
    // Each ping as (kind, result, detail, outbox).
    let seen = |ping: &Value| {
        let text = |key: &str| ping[key].as_str().unwrap_or_default().to_owned();
        (
            text("kind"),
            text("result"),
            text("detail"),
            ping["outbox"].as_bool(),
        )
    };
    let accepted = |kind: &str| {
        (
            kind.to_owned(),
            "accepted".to_owned(),
            "HTTP 200".to_owned(),
            Some(false),
        )
    };
    assert_eq!(seen(&ok["ping"]), accepted("success"), "{ok}");
    for run in [ok, failed] {
        assert_eq!(
            seen(&run["start_ping"]),
            accepted("start"),
            "each run's start ping: {run}"
        );
    }
    assert_eq!(
        (failed["outcome"].as_str(), failed["exit_code"].as_i64()),
        (Some("failed"), Some(4))
    );
    let ping = &failed["ping"];
    assert_eq!(ping["kind"], "fail", "{failed}");
    assert_eq!(ping["result"], "failed");
    assert_eq!(
        ping["outbox"], true,
        "a refused fail ping waits in the outbox: {failed}"
    );
    for token in ["ok-token-1234567890", "st-token-1234567890"] {
        assert!(
            !doc.to_string().contains(token),
            "a ping token leaked: {doc}"
        );
    }
}

#[test]
fn disk_use_stays_within_the_documented_formula_at_ten_times_the_limit() {
    let home = Home::new();
    let host = FakeServer::start(Mode::Status(200));
    let (limit, tail) = (5usize, 1024usize);
    config(
        &home,
        &host.url("/ping/x"),
        &host.url("/fail"),
        &format!("history = {limit}\noutput_tail = \"{tail}B\"\nfail_body = \"output_tail\""),
    );
    // Each run prints 3 KiB with control characters (the worst case of JSON escaping).
    let script = "i=0; while [ $i -lt 1536 ]; do printf '\\001x'; i=$((i+1)); done; exit 1";
    for _ in 0..limit * 10 {
        run(&home, script);
    }
    let dir = home.path("state").join("history").join("backup");
    let mut bytes = 0u64;
    let mut records = 0usize;
    for entry in std::fs::read_dir(&dir).expect("the job's history") {
        let entry = entry.expect("entry");
        bytes += entry.metadata().expect("metadata").len();
        // A run's line; its pings follow in a line of their own (`update`).
        records += std::fs::read_to_string(entry.path())
            .expect("read")
            .lines()
            .filter(|l| !l.starts_with("{\"update\":"))
            .count();
    }
    let formula = 2 * limit as u64 * (1024 + 6 * tail as u64);
    assert!(
        bytes <= formula,
        "{bytes} bytes on disk, the documented bound is {formula}"
    );
    assert!(
        records <= 2 * limit,
        "{records} records for history = {limit}"
    );
    let doc = history_json(&home, &["backup", "--limit", "100"]);
    let seqs: Vec<u64> = runs(&doc)
        .iter()
        .map(|r| r["seq"].as_u64().expect("seq"))
        .collect();
    assert_eq!(
        seqs,
        [50, 49, 48, 47, 46],
        "the newest `history` runs are read back"
    );
}

#[test]
fn a_torn_record_is_skipped_with_one_warning_and_cut_off_by_the_next_run() {
    let home = Home::new();
    let host = FakeServer::start(Mode::Status(200));
    config(&home, &host.url("/ping/x"), &host.url("/fail"), "");
    assert!(run(&home, "echo one").status.success());
    assert!(run(&home, "echo two").status.success());
    let file = home.path("state").join("history/backup/runs.jsonl");
    // What a kill -9 in the middle of the write of a third record leaves.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .expect("open")
        .write_all(br#"{"seq":3,"scheduled":"2026-11-26T03:00:00Z","sta"#)
        .expect("write");
    let out = agent(&home, &["history", "--json", "backup"]);
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let tails: Vec<&str> = runs(&doc)
        .iter()
        .map(|r| r["output_tail"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        tails,
        ["", ""],
        "run does not capture output without fail_body: {doc}"
    );
    assert_eq!(runs(&doc).len(), 2, "both earlier records are read: {doc}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("skipped unreadable records").count(),
        1,
        "one warning: {stderr}"
    );
    let out = run(&home, "echo three");
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("cut off a torn last record").count(),
        1,
        "{stderr}"
    );
    let text = std::fs::read_to_string(&file).expect("read");
    let (updates, records): (Vec<&str>, Vec<&str>) =
        text.lines().partition(|l| l.starts_with("{\"update\":"));
    assert_eq!(
        (records.len(), updates.len()),
        (3, 3),
        "a line per run and per run's pings: {text}"
    );
    assert!(
        text.lines()
            .all(|l| serde_json::from_str::<Value>(l).is_ok()),
        "{text}"
    );
    let doc = history_json(&home, &["backup"]);
    let seqs: Vec<u64> = runs(&doc)
        .iter()
        .map(|r| r["seq"].as_u64().expect("seq"))
        .collect();
    assert_eq!(seqs, [3, 2, 1]);
}
