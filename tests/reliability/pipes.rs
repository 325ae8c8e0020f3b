//! A closed log or output pipe never stops the agent: the daemon piped into a reader that goes
//! away (`| head -n 2`, a `tee` stopped with Ctrl-C) drops the lines it cannot write, counts
//! them, goes on recording runs and keeps its exit code at SIGTERM; `run` and the other
//! commands with a closed stdout or stderr keep their exit codes.

use std::io::{BufRead, BufReader};
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use heartbeat_agent::status::client::Endpoint;

use super::newest_run;
use crate::util::Home;

/// A pipe, both ends close-on-exec: a child holds only the end it is given.
fn pipe() -> (OwnedFd, OwnedFd) {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("a pipe")
}

/// A pipe whose reader is already gone: a write to it fails with EPIPE.
fn closed_pipe() -> Stdio {
    let (read, write) = pipe();
    drop(read);
    Stdio::from(write)
}

#[test]
fn the_daemon_piped_into_head_goes_on_recording_runs_and_counts_the_lines_dropped() {
    let home = Home::new();
    let socket = home.path("status.sock");
    home.write_config(&format!(
        "[agent]\nstate_dir = \"{}\"\nshutdown_timeout = \"2s\"\n\n[status]\nlisten = \"{}\"\n\n\
         [[jobs]]\nname = \"tick\"\nschedule = \"* * * * * *\"\ncommand = [\"false\"]\n",
        home.state_dir().display(),
        socket.display()
    ));
    // A failing job: a log line every second.
    // `daemon 2>&1 | head -n 2`: both outputs into one pipe whose reader reads two lines and
    // leaves.
    let (read, write) = pipe();
    let mut daemon = home
        .agent()
        .arg("--config")
        .arg(home.config_path())
        .arg("daemon")
        .stdin(Stdio::null())
        .stdout(Stdio::from(write.try_clone().expect("dup")))
        .stderr(Stdio::from(write))
        .spawn()
        .expect("start the daemon");
    let mut head = BufReader::new(std::fs::File::from(read));
    for _ in 0..2 {
        let mut line = String::new();
        head.read_line(&mut line).expect("a log line");
        assert!(!line.is_empty(), "the daemon's log ended early");
    }
    drop(head);
    let closed = Instant::now();
    let before = newest_run(&home, "tick");
    std::thread::sleep(Duration::from_secs(5));
    assert!(
        daemon.try_wait().expect("wait").is_none(),
        "the daemon stopped when its log pipe closed: {:?}",
        daemon.try_wait()
    );
    let recorded = crate::util::eventually_every(
        Duration::from_millis(200),
        Duration::from_secs(10),
        "runs recorded after the log closed",
        || {
            let now = newest_run(&home, "tick");
            if now >= before + 3 {
                Ok(now)
            } else {
                Err(format!("{before} runs, then {now}"))
            }
        },
    );
    let metrics = Endpoint::Unix(socket)
        .request("GET", "/metrics", None, Duration::from_secs(10))
        .expect("the endpoint answers");
    let dropped = metrics
        .body
        .lines()
        .find_map(|l| l.strip_prefix("heartbeat_agent_log_lines_dropped_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .expect("the dropped lines' metric");
    assert!(dropped >= 1.0, "{}", metrics.body);
    super::signal(daemon.id(), libc::SIGTERM);
    let status = crate::util::wait_exit(&mut daemon, Duration::from_secs(15))
        .expect("the daemon stops at SIGTERM");
    assert_eq!(status.code(), Some(0), "{status:?}");
    eprintln!(
        "alive {:?} after its log closed, {} runs recorded, {dropped} lines dropped",
        closed.elapsed(),
        recorded - before
    );
}

/// The agent's exit code for `args` with stdout and stderr open, then with both closed.
fn codes(home: &Home, args: &[&str]) -> (Option<i32>, Option<i32>) {
    let command = || {
        let mut command = Command::new(crate::util::bin());
        command.env_remove("HEARTBEAT_AGENT_CONFIG");
        command.env("HOME", home.root());
        command.env("STATE_DIRECTORY", home.state_dir());
        command.arg("--config").arg(home.config_path()).args(args);
        command.stdin(Stdio::null());
        command
    };
    let open = command().output().expect("run the agent").status.code();
    let closed = command()
        .stdout(closed_pipe())
        .stderr(closed_pipe())
        .status()
        .expect("run the agent")
        .code();
    (open, closed)
}

#[test]
fn commands_with_a_closed_stdout_and_stderr_keep_their_exit_codes() {
    let home = Home::new();
    let ping = crate::util::http::refused_url("/ping");
    home.write_config(&format!(
        "[agent]\nstate_dir = \"{}\"\n\n[status]\nlisten = \"{}\"\n\n\
         [[jobs]]\nname = \"fails\"\nschedule = \"@daily\"\nping_url = \"{ping}\"\n\
         command = [\"sh\", \"-c\", \"exit 3\"]\n",
        home.state_dir().display(),
        home.path("none.sock").display(),
    ));
    let cases: [(&[&str], i32); 6] = [
        // A failed job and an unreachable ping: exit 3, with warnings on stderr.
        (&["run", "--job", "fails"], 3),
        (&["run", "--ping-url", &ping, "--", "sh", "-c", "exit 5"], 5),
        (&["config", "check"], 0),
        (&["schedule", "* * * * *", "--count", "50"], 0),
        (&["history"], 0),
        // No daemon answers: 1, with its message on the closed stderr.
        (&["status"], 1),
    ];
    for (args, expected) in cases {
        let (open, closed) = codes(&home, args);
        assert_eq!(open, Some(expected), "{args:?} with open outputs");
        assert_eq!(closed, Some(expected), "{args:?} with closed outputs");
    }
}
