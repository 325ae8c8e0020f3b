//! Files planted in the state directory by someone who may write there: a FIFO as the
//! history's old generation is set aside, with a warning naming it, and never waited on, by
//! the daemon and by `run --job` alike; a FIFO put in place of the configuration and then the
//! good file restored leaves no reload error behind.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use heartbeat_agent::status::client::Endpoint;
use serde_json::Value;

use super::newest_run;
use crate::util::daemon::Daemon;
use crate::util::Home;

fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
}

/// A config with job `tick` every second (history 5) and the endpoint on a unix socket.
fn write_config(home: &Home) -> Endpoint {
    let socket = home.path("status.sock");
    home.write_config(&format!(
        "[agent]\nstate_dir = \"{}\"\nshutdown_timeout = \"2s\"\n\n[status]\nlisten = \"{}\"\n\n\
         [[jobs]]\nname = \"tick\"\nschedule = \"* * * * * *\"\nhistory = 5\n\
         command = [\"true\"]\n",
        home.state_dir().display(),
        socket.display()
    ));
    Endpoint::Unix(socket)
}

/// `runs.old.jsonl` of job `tick` made a FIFO, `runs.jsonl` empty; returns the job's directory.
fn plant_fifo(home: &Home) -> PathBuf {
    let dir = home.state_dir().join("history").join("tick");
    std::fs::create_dir_all(&dir).expect("the history directory");
    std::fs::write(dir.join("runs.jsonl"), "").expect("an empty current generation");
    mkfifo(&dir.join("runs.old.jsonl"));
    dir
}

/// The names in `dir` that start with `runs.old.jsonl.set-aside.`.
fn set_aside(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("read the history directory")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("runs.old.jsonl.set-aside."))
        .collect()
}

#[test]
fn a_fifo_as_the_old_history_does_not_stop_the_daemon_recording_runs() {
    let home = Home::new();
    let endpoint = write_config(&home);
    let dir = plant_fifo(&home);
    let started = Instant::now();
    let daemon = Daemon::on(&home).terminate_on_drop().start();
    let warned = daemon
        .log()
        .wait_for(1, Duration::from_secs(15), |line: &Value| {
            line["message"]
                .as_str()
                .is_some_and(|m| m.contains("was set aside"))
                && line["file"]
                    .as_str()
                    .is_some_and(|f| f.ends_with("history/tick/runs.old.jsonl"))
        });
    assert!(
        warned[0]["problem"]
            .as_str()
            .is_some_and(|p| p.contains("a FIFO")),
        "{}",
        warned[0]
    );
    // Past a rotation (history 5): the new old generation is a regular file again.
    let runs = crate::util::eventually_every(
        Duration::from_millis(200),
        Duration::from_secs(30),
        "seven runs of tick recorded",
        || match newest_run(&home, "tick") {
            n if n >= 7 => Ok(n),
            n => Err(format!("{n} runs")),
        },
    );
    let took = started.elapsed();
    assert_eq!(set_aside(&dir).len(), 1, "{:?}", set_aside(&dir));
    let page = endpoint
        .request(
            "GET",
            "/jobs/tick/runs?limit=1",
            None,
            Duration::from_secs(10),
        )
        .expect("the endpoint answers");
    assert_eq!(page.status, 200, "{}", page.body);
    eprintln!("{runs} runs recorded in {took:?} with a FIFO planted as runs.old.jsonl");
}

#[test]
fn run_job_with_a_fifo_as_the_old_history_records_its_run_without_waiting() {
    let home = Home::new();
    write_config(&home);
    let dir = plant_fifo(&home);
    let started = Instant::now();
    let child = home
        .agent()
        .arg("--config")
        .arg(home.config_path())
        .args(["run", "--job", "tick"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn run --job");
    let out = super::wait_bounded(child, Duration::from_secs(20));
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("was set aside"), "{stderr}");
    assert!(stderr.contains("runs.old.jsonl"), "{stderr}");
    assert_eq!(newest_run(&home, "tick"), 1);
    assert_eq!(set_aside(&dir).len(), 1);
    eprintln!("run --job took {took:?} with a FIFO planted as runs.old.jsonl");
}

/// `config.last_reload_error` of the daemon's `/status`.
fn reload_error(endpoint: &Endpoint) -> Value {
    let answer = endpoint
        .request("GET", "/status", None, Duration::from_secs(10))
        .expect("the endpoint answers");
    let doc: Value = serde_json::from_str(&answer.body).expect("JSON");
    doc["config"]["last_reload_error"].clone()
}

#[test]
fn restoring_the_same_good_config_after_a_fifo_clears_the_reload_error() {
    let home = Home::new();
    let endpoint = write_config(&home);
    let good = std::fs::read(home.config_path()).expect("the config");
    let daemon = Daemon::on(&home).terminate_on_drop().start();
    daemon.until("the endpoint answers", Duration::from_secs(10), || {
        endpoint
            .request("GET", "/healthz", None, Duration::from_secs(1))
            .ok()
            .map(|_| ())
    });
    std::fs::remove_file(home.config_path()).expect("remove the config");
    mkfifo(&home.config_path());
    // The watch sees the FIFO (and reads nothing from it) before the SIGHUP.
    std::thread::sleep(Duration::from_secs(1));
    daemon.signal(nix::sys::signal::Signal::SIGHUP);
    let error =
        crate::util::eventually(
            Duration::from_secs(10),
            "the reload error",
            || match reload_error(&endpoint) {
                Value::Null => Err("none yet"),
                error => Ok(error),
            },
        );
    assert!(error.to_string().contains("FIFO"), "{error}");
    std::fs::remove_file(home.config_path()).expect("remove the FIFO");
    let restored = home.path("config.new");
    std::fs::write(&restored, &good).expect("the same config");
    std::fs::rename(&restored, home.config_path()).expect("restore the config");
    let started = Instant::now();
    crate::util::eventually(
        Duration::from_secs(10),
        "the reload error cleared without a SIGHUP",
        || match reload_error(&endpoint) {
            Value::Null => Ok(()),
            error => Err(error.to_string()),
        },
    );
    eprintln!(
        "reload error cleared {:?} after the restore",
        started.elapsed()
    );
}
