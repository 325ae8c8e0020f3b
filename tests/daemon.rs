//! Integration tests of `heartbeat-agent daemon`: the real binary with seconds-field schedules,
//! a loopback ping server, and its `--log-format json` stderr parsed to observe runs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

use crate::util::daemon::Daemon;
use crate::util::http::{FakeServer, Mode};
use crate::util::{self, Home};

mod every;
mod output_size;
mod pid1;
mod plugins;
mod retries;
mod runs;
mod signals;
mod start_fail;
mod state;
mod watches;

/// What the daemon tests do with a [`Home`]: write its jobs under a fixed `[agent]` section and
/// start the daemon on its config.
trait DaemonHome {
    /// Writes the config: `[agent]` with the state dir and a short shutdown timeout, then `jobs`.
    fn write_jobs(&self, jobs: &str);

    /// Starts `heartbeat-agent daemon` on the config, logging JSON on stderr.
    fn start(&self) -> Daemon {
        self.start_with(&[])
    }

    /// [`DaemonHome::start`] with extra environment variables.
    fn start_with(&self, env: &[(&str, &str)]) -> Daemon;
}

impl DaemonHome for Home {
    fn write_jobs(&self, jobs: &str) {
        self.write_config(&format!(
            "[agent]\nstate_dir = \"{}\"\nshutdown_timeout = \"2s\"\n\n{jobs}",
            self.state_dir().display()
        ));
    }

    fn start_with(&self, env: &[(&str, &str)]) -> Daemon {
        Daemon::on(self).envs(env.iter().copied()).start()
    }
}

/// A log line's `message` and `job` (from the event or its `run` span).
fn message(line: &Value) -> &str {
    line.get("message").and_then(Value::as_str).unwrap_or("")
}

fn job_of(line: &Value) -> Option<&str> {
    line.get("job").and_then(Value::as_str).or_else(|| {
        line.get("spans")?
            .as_array()?
            .iter()
            .find_map(|s| s.get("job")?.as_str())
    })
}

/// Whether `line` is the message `msg` about job `job`.
fn is(line: &Value, msg: &str, job: &str) -> bool {
    message(line).starts_with(msg) && job_of(line) == Some(job)
}

/// Requests that reached `path` on `server`.
fn hits(server: &FakeServer, path: &str) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.target == path)
        .count()
}

/// Receives from `server` until it saw `n` requests to `path`; panics after `timeout`.
fn wait_hits(server: &FakeServer, path: &str, n: usize, timeout: Duration) {
    let arrived = server.receive_until(timeout, |requests| {
        requests.iter().filter(|r| r.target == path).count() >= n
    });
    assert!(
        arrived,
        "waited {timeout:?} for {n} pings to {path}; got {:?}",
        server
            .requests()
            .iter()
            .map(|r| &r.target)
            .collect::<Vec<_>>()
    );
}

/// A ping server answering 200.
fn ping_server() -> FakeServer {
    FakeServer::start(Mode::Status(200))
}

/// Whether process `pid` is gone (or only a zombie).
fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state == "Z"),
    }
}

/// Reads a pid written by a job into `path`, waiting for it to appear.
fn read_pid(path: &Path) -> i32 {
    util::read_pid(path, Duration::from_secs(5))
}

const SECOND: Duration = Duration::from_secs(1);
