//! The daemon's pauses in memory: a fire and a scrape read memory, never `pause.json`; the
//! memory follows the file when `pause` writes it without the daemon; a bad file leaves the
//! pauses last read in force and warns once per change of the file, naming it and the fix; no
//! file ends every pause.

use std::time::Duration;

use serde_json::Value;

use super::prom::{parse_metrics, sample};
use super::{get, job, listen_with_token, status_doc, Daemon, StatusHome, SECOND, TOKEN};
use crate::util::Home;

/// A job `tick` that fires every second and appends a line to `ticks` (nothing to ping).
pub(super) fn tick(home: &Home) -> String {
    format!(
        "[[jobs]]\nname = \"tick\"\nschedule = \"* * * * * *\"\nshell = \"echo x >> {}\"\n",
        home.path("ticks").display()
    )
}

/// A home whose daemon runs [`tick`] with no `[api]`; the daemon, once `tick` ran.
fn ticking() -> (Home, Daemon) {
    let home = Home::new();
    home.write(None, &listen_with_token(&home), &tick(&home));
    let daemon = home.daemon("");
    daemon.until("a first run", Duration::from_secs(10), || {
        (ticks(&home) > 0).then_some(())
    });
    (home, daemon)
}

pub(super) fn ticks(home: &Home) -> usize {
    std::fs::read_to_string(home.path("ticks"))
        .unwrap_or_default()
        .lines()
        .count()
}

/// The daemon's log lines (JSON) whose message starts with `start`.
pub(super) fn logged(daemon: &Daemon, start: &str) -> Vec<Value> {
    daemon
        .log()
        .json()
        .into_iter()
        .filter(|e| e["message"].as_str().is_some_and(|m| m.starts_with(start)))
        .collect()
}

const SKIPPED: &str = "run skipped: the job is paused";

/// Waits for `more` fires to be skipped for the pause after the `before` already logged.
fn skips(daemon: &Daemon, before: usize, more: usize) {
    daemon.until(
        "fires skipped for the pause",
        Duration::from_secs(10),
        || (logged(daemon, SKIPPED).len() >= before + more).then_some(()),
    );
}

fn paused_metric(home: &Home) -> Option<f64> {
    let text = get(&home.endpoint(), "/metrics").body;
    sample(
        &parse_metrics(&text),
        "heartbeat_agent_paused",
        &[("job", "tick")],
    )
}

/// Pauses `tick` with `--stop-jobs` through the endpoint and waits for a first skip.
fn stop_tick(home: &Home, daemon: &Daemon) {
    let answer = home
        .endpoint()
        .post_json(
            "/pause",
            Some(TOKEN),
            r#"{"jobs":["tick"],"stop_jobs":true}"#,
            SECOND * 10,
        )
        .expect("request");
    assert_eq!(answer.status, 200, "{}", answer.body);
    skips(daemon, 0, 1);
}

#[test]
fn a_fire_and_a_scrape_read_the_pause_in_memory_not_the_file() {
    let (home, daemon) = ticking();
    stop_tick(&home, &daemon);
    // The file becomes unreadable (a directory): read at a fire, it would hold no pause.
    let file = home.path("state/pause.json");
    std::fs::remove_file(&file).expect("the endpoint wrote the file");
    std::fs::create_dir(&file).expect("a directory in its place");
    daemon.until(
        "the watch saw the directory",
        Duration::from_secs(5),
        || (!logged(&daemon, "cannot read the pause file").is_empty()).then_some(()),
    );
    let (before, ran) = (logged(&daemon, SKIPPED).len(), ticks(&home));
    skips(&daemon, before, 3);
    assert_eq!(ticks(&home), ran, "a paused job ran");
    assert_eq!(paused_metric(&home), Some(1.0));
    let doc = status_doc(&home.endpoint(), false);
    assert_eq!(job(&doc, "tick")["paused"]["stop_jobs"], true, "{doc}");
    // No file at all: no pause, and the job runs again.
    std::fs::remove_dir(&file).expect("removed");
    daemon.until("the job runs again", Duration::from_secs(10), || {
        (ticks(&home) > ran).then_some(())
    });
    assert_eq!(paused_metric(&home), Some(0.0));
}

#[test]
fn a_pause_written_without_the_daemon_counts_within_a_second_or_two() {
    let (home, daemon) = ticking();
    // The command's own config names a socket nobody listens on, so it writes the file itself.
    let config = std::fs::read_to_string(home.config_path()).expect("config");
    let alone = home.path("alone.toml");
    let nobody = home.path("nobody.sock");
    std::fs::write(
        &alone,
        config.replace(
            &home.socket().display().to_string(),
            &nobody.display().to_string(),
        ),
    )
    .expect("config written");
    let output = home
        .agent()
        .arg("--config")
        .arg(&alone)
        .args(["pause", "tick", "--stop-jobs"])
        .env("NO_COLOR", "1")
        .output()
        .expect("run the agent");
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(err.contains("no daemon answered"), "{err}");
    daemon.until(
        "the daemon honours the pause",
        Duration::from_secs(2),
        || (paused_metric(&home) == Some(1.0)).then_some(()),
    );
    skips(&daemon, 0, 1);
    let ran = ticks(&home);
    skips(&daemon, logged(&daemon, SKIPPED).len(), 2);
    assert_eq!(ticks(&home), ran, "a paused job ran");
}

#[test]
fn a_bad_file_keeps_the_last_pauses_and_warns_once_with_the_fix() {
    let (home, daemon) = ticking();
    stop_tick(&home, &daemon);
    let file = home.path("state/pause.json");
    std::fs::write(&file, "{\"jobs\": {\"tick\": ").expect("a broken hand edit");
    const BAD: &str = "the pause file is not valid";
    daemon.until("the warning", Duration::from_secs(5), || {
        (!logged(&daemon, BAD).is_empty()).then_some(())
    });
    // Fires and scrapes go on; the file is not read again, nor warned about.
    let (before, ran) = (logged(&daemon, SKIPPED).len(), ticks(&home));
    for _ in 0..3 {
        assert_eq!(paused_metric(&home), Some(1.0));
        status_doc(&home.endpoint(), false);
        skips(&daemon, logged(&daemon, SKIPPED).len(), 1);
    }
    assert!(logged(&daemon, SKIPPED).len() >= before + 3);
    assert_eq!(ticks(&home), ran, "a bad file ended the pause");
    let warned = logged(&daemon, BAD);
    assert_eq!(warned.len(), 1, "{warned:?}");
    let warning = &warned[0];
    assert_eq!(warning["level"], "WARN", "{warning}");
    assert_eq!(warning["file"], file.display().to_string(), "{warning}");
    assert!(
        warning["error"].as_str().is_some_and(|e| e.contains("EOF")),
        "{warning}"
    );
    assert!(
        warning["kept"].as_str().is_some_and(|k| k.contains("tick")),
        "{warning}"
    );
    let message = warning["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("fix the file, or remove it to end every pause"),
        "{message}"
    );
    assert!(
        logged(&daemon, "cannot read the pause file").is_empty(),
        "{}",
        daemon.log().text()
    );
    // A valid file without the pause replaces it: the job runs again.
    std::fs::write(&file, "{\"jobs\": {}}").expect("repaired");
    daemon.until("the job runs again", Duration::from_secs(10), || {
        (ticks(&home) > ran).then_some(())
    });
    assert_eq!(logged(&daemon, BAD).len(), 1, "warned again");
    assert_eq!(logged(&daemon, "the pause file can be used again").len(), 1);
}
