//! `pause` and `resume` end to end against the emulator: without a daemon (straight through the
//! API) and through a running daemon's endpoint. A paused check is deactivated and never turns
//! `FAILING` while a job that is not paused does; `resume` re-activates it with its timer
//! restarted at the resume; `sync` (also `--force`) and the daemon's passes never re-activate
//! a paused check; a daemon restart keeps the pause; the deadline ends it (the daemon at the
//! deadline, else the next `run --job` or `sync`); `--stop-jobs` skips fires; bad input exits 2
//! and changes nothing.

use std::time::Duration;

use serde_json::{json, Value};

use super::prom::{parse_metrics, sample};
use super::{
    created_job, get, job, listen_with_token, made_id, status_doc, Daemon, StatusHome, SECOND,
    TOKEN,
};
use crate::util::emulator::Background;
use crate::util::{self, Home};
use heartbeat_agent::emulator::{EmulatorOptions, Fixtures};

const DAY: Duration = Duration::from_secs(86_400);
const HOUR: Duration = Duration::from_secs(3_600);

/// An emulator with checks `c1` and `c2` (period 1 day, grace 1 hour).
fn emulator() -> Background {
    let emulator = Background::start_with(EmulatorOptions {
        fixtures: Fixtures::default(),
        ..EmulatorOptions::default()
    });
    for id in ["c1", "c2"] {
        emulator
            .add_heartbeat_check(&json!({"id": id, "name": id,
                "heartbeat": {"period": 1, "periodUnit": "days", "grace": 1, "graceUnit": "hours"}}))
            .expect("add check");
    }
    emulator
}

/// A check definition of period 1 day and grace 1 hour.
const DAILY: &str = "[jobs.check]\nperiod = \"1d\"\ngrace = \"1h\"\n";

/// Jobs `backup` (check c1), `other` (check c2) and `plain` (a ping URL only), plus `extra`.
fn jobs(extra: &str) -> String {
    format!(
        "[[jobs]]\nname = \"backup\"\nschedule = \"0 0 1 1 *\"\ncheck_id = \"c1\"\n\
         command = [\"true\"]\n{DAILY}\n[[jobs]]\nname = \"other\"\nschedule = \"0 0 1 1 *\"\n\
         check_id = \"c2\"\ncommand = [\"true\"]\n{DAILY}\n[[jobs]]\nname = \"plain\"\n\
         schedule = \"0 0 1 1 *\"\nping_url = \"http://127.0.0.1:9/p/plain\"\n\
         command = [\"true\"]\n\n{extra}"
    )
}

fn activated(emulator: &Background, id: &str) -> bool {
    let check = emulator.heartbeat_check(id).expect("the check exists");
    check["activated"] != Value::Bool(false)
}

fn failing(emulator: &Background, id: &str) -> usize {
    emulator
        .heartbeat_events(id)
        .expect("the check exists")
        .iter()
        .filter(|e| e["state"] == "FAILING")
        .count()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs the agent and asserts its exit code; its stderr.
fn expect(home: &Home, emulator: &Background, args: &[&str], code: i32) -> String {
    let output = home.output(args, emulator.api_key());
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(code), "{args:?}: {err}");
    err
}

/// A home whose config binds `backup` and `other` (no daemon: the socket does not exist),
/// after a first `sync`.
fn synced_home(emulator: &Background) -> Home {
    let home = Home::new();
    home.write(
        Some(emulator),
        &format!("listen = \"{}\"", home.socket().display()),
        &jobs(""),
    );
    expect(&home, emulator, &["sync"], 0);
    home
}

fn pause_file(home: &Home) -> Option<Value> {
    let text = std::fs::read_to_string(home.path("state/pause.json")).ok()?;
    Some(serde_json::from_str(&text).expect("the pause file is JSON"))
}

#[test]
fn without_a_daemon_a_pause_deactivates_and_resume_restarts_the_timer() {
    let emulator = emulator();
    let home = synced_home(&emulator);
    for name in ["backup", "other"] {
        expect(&home, &emulator, &["run", "--job", name], 0);
    }
    let err = expect(
        &home,
        &emulator,
        &["pause", "backup", "--reason", "deploy"],
        0,
    );
    assert!(err.contains("check c1 deactivated"), "{err}");
    assert!(!activated(&emulator, "c1") && activated(&emulator, "c2"));
    // A run during the pause pings (its accepted ping would let sync re-activate a check it
    // deactivated itself); sync after it, forced or not, keeps the paused check deactivated.
    expect(&home, &emulator, &["run", "--job", "backup"], 0);
    expect(&home, &emulator, &["sync", "--force"], 0);
    expect(&home, &emulator, &["sync"], 0);
    assert!(
        !activated(&emulator, "c1"),
        "sync re-activated a paused check"
    );
    // Three days of maintenance: the check that is not paused alarms, the paused one does not.
    emulator.advance_clock(3 * DAY);
    assert!(failing(&emulator, "c2") > 0, "the control check alarms");
    assert_eq!(failing(&emulator, "c1"), 0, "a paused check alarmed");
    let err = expect(&home, &emulator, &["resume", "backup"], 0);
    assert!(err.contains("check c1 re-activated"), "{err}");
    assert!(activated(&emulator, "c1"));
    assert_eq!(
        pause_file(&home).map(|p| p["jobs"].clone()),
        Some(json!({}))
    );
    // The timer restarted at the resume: no alarm within period + grace, one after.
    emulator.advance_clock(DAY);
    assert_eq!(failing(&emulator, "c1"), 0, "alarmed before period + grace");
    emulator.advance_clock(2 * HOUR);
    assert_eq!(failing(&emulator, "c1"), 1, "no alarm after period + grace");
}

#[test]
fn without_a_daemon_the_next_run_or_sync_ends_an_expired_pause() {
    let emulator = emulator();
    let home = synced_home(&emulator);
    let until = (chrono::Utc::now() + chrono::TimeDelta::seconds(2)).to_rfc3339();
    let err = expect(&home, &emulator, &["pause", "backup", "--until", &until], 0);
    assert!(err.contains("no daemon answered"), "{err}");
    assert!(
        err.contains("the next `run --job`, `sync` or daemon start"),
        "{err}"
    );
    let err = expect(&home, &emulator, &["pause", "other", "--for", "2s"], 0);
    assert!(err.contains("check c2 deactivated"), "{err}");
    std::thread::sleep(Duration::from_millis(2_500));
    assert!(!activated(&emulator, "c1"), "nothing runs at the deadline");
    expect(&home, &emulator, &["run", "--job", "backup"], 0);
    assert!(activated(&emulator, "c1"), "run --job ended the pause");
    expect(&home, &emulator, &["sync", "--job", "other"], 0);
    assert!(activated(&emulator, "c2"), "sync ended the pause");
    assert_eq!(
        pause_file(&home).map(|p| p["jobs"].clone()),
        Some(json!({}))
    );
    // A daemon started after the deadline ends the pause at its first pass.
    expect(&home, &emulator, &["pause", "backup", "--for", "1s"], 0);
    assert!(!activated(&emulator, "c1"));
    std::thread::sleep(Duration::from_millis(1_200));
    let daemon = home.daemon(emulator.api_key());
    daemon.until(
        "the daemon's start ended the pause",
        Duration::from_secs(10),
        || activated(&emulator, "c1").then_some(()),
    );
}

/// A home whose daemon listens on its socket with the token and has no API (no check sync).
fn home_without_check_sync() -> Home {
    let home = Home::new();
    let status = format!(
        "listen = \"{}\"\ntoken = \"{TOKEN}\"",
        home.socket().display()
    );
    home.write(None, &status, &jobs(""));
    home
}

#[test]
fn a_daemon_without_check_sync_refuses_to_pause_checks_and_changes_nothing() {
    let home = home_without_check_sync();
    let _daemon = home.daemon("");
    let output = home.output(&["pause", "backup"], "");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("HTTP 409"), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("runs no check sync"),
        "{}",
        stderr(&output)
    );
    assert!(pause_file(&home).is_none(), "a pause was recorded");
    // The daemon's own part still works for a job without a check.
    let output = home.output(&["pause", "plain", "--stop-jobs"], "");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("(by the daemon)"),
        "{}",
        stderr(&output)
    );
    let paused = pause_file(&home).expect("recorded");
    assert_eq!(paused["jobs"]["plain"]["stop_jobs"], true);
}

#[test]
fn bad_pauses_exit_2_name_the_problem_and_change_nothing() {
    let emulator = emulator();
    let home = synced_home(&emulator);
    let puts = || emulator.requests().len();
    let before = (puts(), emulator.heartbeat_check("c1"));
    let past = (chrono::Utc::now() - chrono::TimeDelta::hours(1)).to_rfc3339();
    for (args, message) in [
        (vec!["pause", "nope"], "no job named \"nope\""),
        (vec!["pause", "backup", "--until", &past], "is in the past"),
        (vec!["pause", "backup", "--until", "tomorrow"], "RFC 3339"),
        (vec!["pause", "backup", "--for", "0s"], "is zero"),
        (
            vec![
                "pause",
                "backup",
                "--for",
                "1h",
                "--until",
                "2099-01-01T00:00:00Z",
            ],
            "cannot be used with",
        ),
        (vec!["pause", "backup", "--all"], "cannot be used with"),
        (vec!["pause"], "required"),
        (vec!["pause", "plain"], "job \"plain\" has no check_id"),
        (vec!["resume", "backup"], "job \"backup\" is not paused"),
    ] {
        let err = expect(&home, &emulator, &args, 2);
        assert!(err.contains(message), "{args:?}: {err}");
    }
    assert_eq!(
        (puts(), emulator.heartbeat_check("c1")),
        before,
        "the check was changed"
    );
    assert!(pause_file(&home).is_none(), "a pause file was written");
    // A job with only a ping URL can be paused for the daemon alone.
    let err = expect(&home, &emulator, &["pause", "plain", "--stop-jobs"], 0);
    assert!(err.contains("job \"plain\" paused"), "{err}");
    assert_eq!(
        puts(),
        before.0,
        "nothing to send for a job without a check"
    );
}

fn tick_job(marker: &std::path::Path) -> String {
    format!(
        "[[jobs]]\nname = \"tick\"\nschedule = \"* * * * * *\"\ncheck_id = \"c3\"\n\
         shell = \"echo x >> {}\"\n{DAILY}",
        marker.display()
    )
}

fn metric(home: &Home, name: &str, job: &str) -> Option<f64> {
    let text = get(&home.endpoint(), "/metrics").body;
    sample(&parse_metrics(&text), name, &[("job", job)])
}

#[test]
fn through_the_daemon_a_pause_survives_a_restart_stops_jobs_and_ends_at_its_deadline() {
    let emulator = emulator();
    emulator
        .add_heartbeat_check(&json!({"id": "c3", "name": "c3",
            "heartbeat": {"period": 1, "periodUnit": "days", "grace": 1, "graceUnit": "hours"}}))
        .expect("add check");
    let home = Home::new();
    let marker = home.path("ticks");
    let status = format!(
        "listen = \"{}\"\ntoken = \"{TOKEN}\"",
        home.socket().display()
    );
    home.write(Some(&emulator), &status, &jobs(&tick_job(&marker)));
    // Re-assert every second: the daemon sends each definition whatever its record says.
    let config = std::fs::read_to_string(home.config_path()).expect("config");
    home.write_config(&config.replace(
        "sync_jitter = \"0s\"",
        "sync_jitter = \"0s\"\nreassert_interval = \"1s\"",
    ));
    let daemon = home.daemon(emulator.api_key());
    daemon.until("the first sync", Duration::from_secs(10), || {
        let doc = status_doc(&home.endpoint(), false);
        (job(&doc, "tick")["sync"]["state"] == "in_sync").then_some(())
    });
    let err = expect(
        &home,
        &emulator,
        &[
            "pause",
            "tick",
            "backup",
            "--for",
            "12s",
            "--reason",
            "deploy",
            "--stop-jobs",
        ],
        0,
    );
    assert!(err.contains("(by the daemon)"), "{err}");
    assert!(
        err.contains("check c3 deactivated") && err.contains("check c1 deactivated"),
        "{err}"
    );
    assert!(!activated(&emulator, "c3") && !activated(&emulator, "c1"));
    let doc = status_doc(&home.endpoint(), false);
    let paused = &job(&doc, "tick")["paused"];
    assert_eq!(
        (paused["state"].as_str(), paused["reason"].as_str()),
        (Some("paused"), Some("deploy"))
    );
    assert_eq!(paused["stop_jobs"], true);
    assert!(job(&doc, "other")["paused"].is_null());
    assert_eq!(metric(&home, "heartbeat_agent_paused", "tick"), Some(1.0));
    assert_eq!(metric(&home, "heartbeat_agent_paused", "other"), Some(0.0));
    assert!(metric(
        &home,
        "heartbeat_agent_paused_until_timestamp_seconds",
        "tick"
    )
    .is_some());
    let table = home.output(&["status"], "");
    assert!(
        String::from_utf8_lossy(&table.stdout).contains("left (deploy)"),
        "{table:?}"
    );
    // --stop-jobs: fires are skipped, logged and counted.
    daemon.until("a skipped fire", Duration::from_secs(5), || {
        daemon
            .text()
            .contains("run skipped: the job is paused")
            .then_some(())
    });
    let ticks = std::fs::read_to_string(&marker)
        .unwrap_or_default()
        .lines()
        .count();
    // A restart keeps the pause; the daemon's start sync does not re-activate.
    drop(daemon);
    let daemon = home.daemon(emulator.api_key());
    daemon.until(
        "the sync after the restart",
        Duration::from_secs(10),
        || {
            let doc = status_doc(&home.endpoint(), false);
            (job(&doc, "tick")["sync"]["state"] == "in_sync").then_some(())
        },
    );
    // A re-assertion reads the check (and sends nothing when nothing differs).
    let reassertions_c1 = || {
        emulator
            .requests()
            .iter()
            .filter(|r| {
                (r.method == "PUT" && r.path.ends_with("/heartbeat/c1"))
                    || (r.method == "GET" && r.path == "/v1/checks/c1")
            })
            .count()
    };
    let before = reassertions_c1();
    daemon.until("two re-assertions of c1", Duration::from_secs(10), || {
        (reassertions_c1() >= before + 2).then_some(())
    });
    assert!(
        !activated(&emulator, "c3") && !activated(&emulator, "c1"),
        "the restart or a re-assertion re-activated a paused check"
    );
    let doc = status_doc(&home.endpoint(), false);
    assert_eq!(job(&doc, "tick")["paused"]["state"], "paused");
    assert!(job(&doc, "tick")["skipped"].as_u64() > Some(0) || ticks == 0);
    assert_eq!(
        std::fs::read_to_string(&marker)
            .unwrap_or_default()
            .lines()
            .count(),
        ticks,
        "a paused job ran"
    );
    // The deadline: the daemon re-activates the checks and the job runs again.
    daemon.until(
        "the deadline ended the pause",
        Duration::from_secs(20),
        || (activated(&emulator, "c3") && activated(&emulator, "c1")).then_some(()),
    );
    daemon.until("the job runs again", Duration::from_secs(5), || {
        let now = std::fs::read_to_string(&marker)
            .unwrap_or_default()
            .lines()
            .count();
        (now > ticks).then_some(())
    });
    assert_eq!(metric(&home, "heartbeat_agent_paused", "tick"), Some(0.0));
    util::eventually(Duration::from_secs(5), "the pause is forgotten", || {
        let jobs = pause_file(&home).map(|p| p["jobs"].clone());
        if jobs == Some(json!({})) {
            Ok(())
        } else {
            Err(format!("{jobs:?}"))
        }
    });
}

#[test]
fn through_the_daemon_resume_reactivates_and_bad_input_is_refused() {
    let emulator = emulator();
    let home = Home::new();
    let status = format!(
        "listen = \"{}\"\ntoken = \"{TOKEN}\"",
        home.socket().display()
    );
    home.write(Some(&emulator), &status, &jobs(""));
    let daemon = home.daemon(emulator.api_key());
    daemon.until("the first sync", Duration::from_secs(10), || {
        let doc = status_doc(&home.endpoint(), false);
        (job(&doc, "backup")["sync"]["state"] == "in_sync").then_some(())
    });
    let endpoint = home.endpoint();
    let anonymous = endpoint
        .post_json("/pause", None, r#"{"jobs":["backup"]}"#, SECOND)
        .expect("request");
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    let bad = endpoint
        .post_json(
            "/pause",
            Some(TOKEN),
            r#"{"jobs":["backup"],"for":"0s"}"#,
            SECOND,
        )
        .expect("request");
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(bad.body.contains("is zero"), "{}", bad.body);
    assert!(activated(&emulator, "c1") && pause_file(&home).is_none());
    let err = expect(&home, &emulator, &["pause", "--all"], 0);
    assert!(err.contains("job \"plain\" left out"), "{err}");
    assert!(!activated(&emulator, "c1") && !activated(&emulator, "c2"));
    let err = expect(&home, &emulator, &["resume", "--all"], 0);
    assert!(err.contains("check c1 re-activated"), "{err}");
    assert!(activated(&emulator, "c1") && activated(&emulator, "c2"));
    let doc = status_doc(&home.endpoint(), false);
    assert!(job(&doc, "backup")["paused"].is_null(), "{doc}");
    drop::<Daemon>(daemon);
}

/// A pause `--reason` carrying terminal escapes (`ESC]0;` retitles the window, `ESC[2J` clears
/// the screen) and CR LF with a forged row: `status` prints it escaped, one line per job, no
/// control character (the JSON keeps the reason as written).
#[test]
fn a_pause_reason_with_terminal_escapes_cannot_forge_status_lines() {
    let home = home_without_check_sync();
    let _daemon = home.daemon("");
    let reason =
        "deploy\x1b]0;owned\x07\x1b[2J\r\nbackup    in 1m     1s ago success  ok  in sync  ok";
    let output = home.output(&["pause", "plain", "--stop-jobs", "--reason", reason], "");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let socket = home.socket().display().to_string();
    let table = home.output(&["status", "--url", &socket], "");
    assert_eq!(table.status.code(), Some(0), "{}", stderr(&table));
    let shown = String::from_utf8_lossy(&table.stdout);
    assert!(
        !shown.contains(['\x1b', '\x07', '\r']),
        "a control character reached the terminal: {shown:?}"
    );
    // The header and the three jobs, nothing more.
    assert_eq!(shown.lines().count(), 4, "{shown}");
    let plain = shown
        .lines()
        .find(|l| l.starts_with("plain"))
        .expect("a row for plain");
    assert!(
        plain.contains("(deploy\\u{1b}]0;owned\\u{7}\\u{1b}[2J\\r\\nbackup"),
        "{plain}"
    );
    let json = home.output(&["status", "--json", "--url", &socket], "");
    let doc: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(job(&doc, "plain")["paused"]["reason"], reason, "{doc}");
}

#[test]
fn a_check_the_agent_created_is_paused_and_resumed_like_a_bound_one() {
    let emulator = emulator();
    let home = Home::new();
    home.write(
        Some(&emulator),
        &listen_with_token(&home),
        &jobs(&created_job(DAILY)),
    );
    // Before sync created it there is no check: refused (exit 2), nothing sent or recorded.
    let requests = emulator.requests().len();
    let err = expect(&home, &emulator, &["pause", "made"], 2);
    assert!(
        err.contains("job \"made\" has no check yet")
            && err.contains("nothing was deactivated on the service"),
        "{err}"
    );
    assert_eq!(emulator.requests().len(), requests, "a request was sent");
    assert!(pause_file(&home).is_none(), "a pause was recorded");
    let err = expect(&home, &emulator, &["pause", "--all"], 0);
    assert!(
        err.contains("job \"made\" left out: it has no check yet"),
        "{err}"
    );
    expect(&home, &emulator, &["resume", "--all"], 0);

    // Without a daemon, once sync created the check.
    expect(&home, &emulator, &["sync", "--job", "made"], 0);
    let id = made_id(&home);
    assert!(activated(&emulator, &id));
    // `pause made ARGS`, then `resume made`: the check deactivated, then active again; the
    // pause's stderr.
    let pause_and_resume = |args: &[&str]| {
        let err = expect(&home, &emulator, &[&["pause", "made"], args].concat(), 0);
        assert!(err.contains(&format!("check {id} deactivated")), "{err}");
        assert!(
            !activated(&emulator, &id),
            "the created check stayed active"
        );
        let resumed = expect(&home, &emulator, &["resume", "made"], 0);
        assert!(
            resumed.contains(&format!("check {id} re-activated")),
            "{resumed}"
        );
        assert!(activated(&emulator, &id));
        err
    };
    let err = pause_and_resume(&[]);
    assert!(err.contains("no daemon answered"), "{err}");

    // Through the daemon.
    let daemon = home.daemon(emulator.api_key());
    daemon.until("the first sync", Duration::from_secs(10), || {
        let doc = status_doc(&home.endpoint(), false);
        (job(&doc, "made")["sync"]["state"] == "in_sync").then_some(())
    });
    let err = pause_and_resume(&["--for", "1h"]);
    assert!(err.contains("(by the daemon)"), "{err}");
    drop::<Daemon>(daemon);
}
