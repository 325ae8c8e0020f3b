//! The order of a job's output: stdout and stderr written 0 ms apart keep the order they were
//! written in wherever both go to one place (the daemon's capture: its fail body, `/status`,
//! the history, the dashboard and its log; `run --job` whose stdout and stderr are one file),
//! and each stream its own order where they go to two (`run --job` with two pipes); `run`
//! passes both through untouched.

use std::process::Stdio;
use std::time::Duration;

use heartbeat_agent::status::client::Endpoint;
use serde_json::Value;

use super::{history_json, runs};
use crate::util::daemon::Daemon;
use crate::util::http::{FakeServer, Mode};
use crate::util::Home;

/// Sixteen writes, alternating streams, with no pause between them.
const SCRIPT: &str = "for i in 1 2 3 4 5 6 7 8; do echo out$i; echo err$i >&2; done; exit 1";

/// What [`SCRIPT`] writes, in order.
fn written() -> String {
    (1..=8).map(|i| format!("out{i}\nerr{i}\n")).collect()
}

/// The lines of one stream of [`SCRIPT`], in order.
fn stream(name: &str) -> String {
    (1..=8).map(|i| format!("{name}{i}\n")).collect()
}

fn config(home: &Home, fail: &str, socket: &std::path::Path) {
    home.write_config(&format!(
        "[agent]\nstate_dir = \"{}\"\nshutdown_timeout = \"2s\"\n\n[status]\nlisten = \"{}\"\n\n\
         [[jobs]]\nname = \"mixed\"\nschedule = \"* * * * * *\"\nfail_url = \"{fail}\"\n\
         fail_body = \"output_tail\"\ncommand = [\"sh\", \"-c\", \"{SCRIPT}\"]\n",
        home.path("state").display(),
        socket.display(),
    ));
}

#[test]
fn the_daemon_keeps_the_order_stdout_and_stderr_were_written_in() {
    let home = Home::new();
    let host = FakeServer::start(Mode::Status(200));
    let socket = home.path("status.sock");
    config(&home, &host.url("/fail"), &socket);
    let daemon = Daemon::on(&home).terminate_on_drop().start();
    let bodies = host.wait_for(5, Duration::from_secs(30));
    let endpoint = Endpoint::Unix(socket);
    let get = |path: &str| {
        let answer = endpoint
            .request("GET", path, None, Duration::from_secs(10))
            .expect("request");
        assert_eq!(answer.status, 200, "{path}: {}", answer.body);
        answer.body
    };
    let status: Value = serde_json::from_str(&get("/status")).expect("JSON");
    let page = get("/jobs/mixed");
    let logs = daemon.stop();
    for body in &bodies {
        assert_eq!(body.text(), written(), "a fail body");
    }
    let job = &status["jobs"][0];
    assert_eq!(job["last_run"]["output_tail"], written(), "{job}");
    let history = history_json(&home, &["mixed"]);
    assert!(runs(&history).len() >= 5, "{history}");
    for run in runs(&history) {
        assert_eq!(run["output_tail"], written(), "{run}");
    }
    assert!(
        page.contains(&format!("<pre>{}</pre>", written())),
        "{page}"
    );
    // The log has the lines in order, each told as coming from either stream.
    let lines: Vec<&Value> = logs.iter().filter(|l| l["message"] == "output").collect();
    for sixteen in lines.chunks(16).filter(|c| c.len() == 16) {
        let text: Vec<&str> = sixteen
            .iter()
            .map(|l| l["line"].as_str().unwrap_or(""))
            .collect();
        let expected: Vec<String> = written().lines().map(str::to_owned).collect();
        assert_eq!(text, expected, "{sixteen:?}");
        assert!(
            sixteen.iter().all(|l| l["stream"] == "stdout+stderr"),
            "{sixteen:?}"
        );
    }
}

/// `run --job mixed` (and plain `run` when `job` is false) with the agent's stdout and stderr
/// as given; the fail body received, if any.
fn run_with(home: &Home, job: bool, stdout: Stdio, stderr: Stdio) -> std::process::ExitStatus {
    let mut cmd = home.agent();
    cmd.arg("--config").arg(home.config_path()).arg("run");
    if job {
        cmd.args(["--job", "mixed"]);
    } else {
        cmd.args(["--", "sh", "-c", SCRIPT]);
    }
    cmd.stdout(stdout).stderr(stderr).status().expect("run")
}

#[test]
fn run_job_keeps_the_written_order_into_one_file_and_each_streams_into_two() {
    let home = Home::new();
    let host = FakeServer::start(Mode::Status(200));
    config(&home, &host.url("/fail"), &home.path("unused.sock"));
    // One file for both, as cron's mail pipe or `>log 2>&1`.
    let both = home.path("both.log");
    let file = std::fs::File::create(&both).expect("create");
    let status = run_with(
        &home,
        true,
        Stdio::from(file.try_clone().expect("clone")),
        Stdio::from(file),
    );
    assert_eq!(status.code(), Some(1));
    let text = std::fs::read_to_string(&both).expect("read");
    assert!(text.contains(&written()), "{text:?}");
    let body = host.wait_for(1, Duration::from_secs(10))[0].text();
    assert_eq!(body, written(), "the fail body");
    let history = history_json(&home, &["mixed"]);
    assert_eq!(runs(&history)[0]["output_tail"], written(), "{history}");
    // Two files: each stream passed through byte for byte, each keeping its own order.
    host.clear();
    for job in [true, false] {
        let (out, err) = (home.path("out.log"), home.path("err.log"));
        let status = run_with(
            &home,
            job,
            Stdio::from(std::fs::File::create(&out).expect("create")),
            Stdio::from(std::fs::File::create(&err).expect("create")),
        );
        assert_eq!(status.code(), Some(1));
        let (out, err) = (
            std::fs::read_to_string(&out).expect("read"),
            std::fs::read_to_string(&err).expect("read"),
        );
        assert_eq!(out, stream("out"), "job {job}: stdout untouched");
        assert!(
            err.contains(&stream("err")),
            "job {job}: stderr untouched: {err:?}"
        );
    }
    let body = host.wait_for(1, Duration::from_secs(10))[0].text();
    // Each stream's lines in their order, however the two interleave.
    for name in ["out", "err"] {
        let own: String = body
            .lines()
            .filter(|l| l.starts_with(name))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(own, stream(name), "{body:?}");
    }
    assert_eq!(body.len(), written().len(), "{body:?}");
}
