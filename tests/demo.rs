//! `heartbeat-agent demo`: the real binary, its in-process emulator and daemon, on a
//! non-terminal (one line per change, then the final table).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use crate::util::{self, Home};

/// HOME, TMPDIR and every XDG directory, each empty, under one [`Home`] whose agent command
/// points them there.
struct Sandbox {
    root: Home,
    dirs: Vec<(&'static str, PathBuf)>,
}

impl Sandbox {
    fn new() -> Sandbox {
        let root = Home::new();
        let dirs = [
            "HOME",
            "TMPDIR",
            "XDG_CONFIG_HOME",
            "XDG_STATE_HOME",
            "XDG_CACHE_HOME",
            "XDG_DATA_HOME",
            "XDG_RUNTIME_DIR",
        ]
        .map(|var| {
            let dir = root.path(&var.to_lowercase());
            std::fs::create_dir(&dir).expect("mkdir");
            (var, dir)
        })
        .to_vec();
        Sandbox { root, dirs }
    }

    fn dir(&self, var: &str) -> &Path {
        &self.dirs.iter().find(|(v, _)| *v == var).expect("known").1
    }

    fn command(&self) -> Command {
        let mut cmd = self.root.agent();
        for (var, dir) in &self.dirs {
            cmd.env(var, dir);
        }
        cmd
    }

    /// The entries of `var`'s directory.
    fn entries(&self, var: &str) -> Vec<PathBuf> {
        std::fs::read_dir(self.dir(var))
            .expect("readable")
            .map(|e| e.expect("entry").path())
            .collect()
    }
}

/// Runs `cmd` to its end (killed after `limit`); returns status, stdout and stderr.
fn run(mut cmd: Command, limit: Duration) -> (ExitStatus, String, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        out.read_to_string(&mut text).map(|_| text)
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        err.read_to_string(&mut text).map(|_| text)
    });
    let Some(status) = util::wait_exit(&mut child, limit) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("demo still running after {limit:?}");
    };
    let out = out.join().expect("reader").expect("utf-8");
    let err = err.join().expect("reader").expect("utf-8");
    (status, out, err)
}

/// The final table's row of `job`.
fn final_row<'a>(stdout: &'a str, job: &str) -> &'a str {
    let table = stdout
        .split("final status:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no final table:\n{stdout}"));
    table
        .lines()
        .find(|line| line.split_whitespace().next() == Some(job))
        .unwrap_or_else(|| panic!("no row for {job}:\n{table}"))
}

#[test]
fn demo_runs_every_kind_of_job_and_writes_only_to_its_temp_dir() {
    let sandbox = Sandbox::new();
    let mut cmd = sandbox.command();
    cmd.args(["demo", "--duration", "8s", "--keep"]);
    let (status, stdout, stderr) = run(cmd, Duration::from_secs(60));
    assert_eq!(status.code(), Some(0), "{stdout}\n{stderr}");

    // A line per change while it runs (no terminal: no escape sequences, no redraw).
    assert!(!stdout.contains('\x1b'), "{stdout}");
    assert!(
        stdout.contains("backup: run 1: ok (exit 0) at "),
        "{stdout}"
    );
    // While it ran: each kind of outcome was shown (a run in progress at the stop ends as
    // "stopped by shutdown", so the final table may show that instead).
    for (job, outcome) in [
        ("backup", "ok (exit 0)"),
        ("report", "failed (exit 3)"),
        ("slow-export", "timed out"),
        ("api-up", "healthy"),
    ] {
        let shown = stdout
            .lines()
            .any(|l| l.starts_with(&format!("{job}: ")) && l.contains(&format!(": {outcome} at ")));
        assert!(shown, "{job} never shown as {outcome}:\n{stdout}");
    }
    // The final table: pings of the succeeding job and the watch only, all checks in sync.
    let backup = final_row(&stdout, "backup");
    for expected in ["ok HTTP 200", "in sync", "demo-backup: "] {
        assert!(backup.contains(expected), "{expected}: {backup}");
    }
    let events: u32 = backup
        .split("demo-backup: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no event count: {backup}"));
    assert!(events >= 3, "the emulator saw {events} pings: {backup}");
    // The failing jobs' checks were pinged once, when the demo created them (as checks that
    // once worked), and not since: within 8 s they are not failing yet.
    for job in ["report", "slow-export"] {
        let row = final_row(&stdout, job);
        for expected in [
            "not pinged",
            "in sync",
            "1 events, last RECEIVED",
            "no failures",
        ] {
            assert!(row.contains(expected), "{expected}: {row}");
        }
    }
    let watch = final_row(&stdout, "api-up");
    for expected in ["ok HTTP 200", "in sync"] {
        assert!(watch.contains(expected), "{expected}: {watch}");
    }
    assert!(
        !stdout.contains("sync failed") && !stdout.contains("refused"),
        "{stdout}"
    );

    // Only the demo's own directory was written, under TMPDIR; HOME and XDG stay empty.
    let kept = stdout
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("kept the demo's directory: "))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no kept path:\n{stdout}"));
    assert_eq!(sandbox.entries("TMPDIR"), std::slice::from_ref(&kept));
    for var in [
        "HOME",
        "XDG_CONFIG_HOME",
        "XDG_STATE_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "XDG_RUNTIME_DIR",
    ] {
        assert!(
            sandbox.entries(var).is_empty(),
            "{var}: {:?}",
            sandbox.entries(var)
        );
    }
    assert!(kept.join("config.toml").is_file());
    assert!(kept.join("state/sync").is_dir());

    // The API key (random, in the key file) appears in no output.
    let key = std::fs::read_to_string(kept.join("api-key")).expect("key file");
    let key = key.trim();
    assert!(key.len() >= 20, "{key}");
    assert!(!stdout.contains(key) && !stderr.contains(key), "key leaked");
}

#[test]
fn demo_removes_its_temp_dir_unless_kept() {
    let sandbox = Sandbox::new();
    let mut cmd = sandbox.command();
    cmd.args(["demo", "--duration", "1s"]);
    let (status, stdout, stderr) = run(cmd, Duration::from_secs(60));
    assert_eq!(status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("final status:\nJOB "), "{stdout}");
    assert!(!stdout.contains("kept"), "{stdout}");
    assert!(
        sandbox.entries("TMPDIR").is_empty(),
        "{:?}",
        sandbox.entries("TMPDIR")
    );
    assert!(sandbox.entries("HOME").is_empty());
}

#[test]
fn demo_duration_needs_a_unit() {
    let sandbox = Sandbox::new();
    let mut cmd = sandbox.command();
    cmd.args(["demo", "--duration", "8"]);
    let (status, stdout, stderr) = run(cmd, Duration::from_secs(20));
    assert_eq!(status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("invalid value '8' for '--duration <DUR>'")
            && stderr.contains("duration \"8\" has no unit: write \"8s\""),
        "{stderr}"
    );
    assert!(sandbox.entries("TMPDIR").is_empty());
}

/// `demo` is read here, not through [`crate::util::daemon::Daemon`]: it is not `daemon` on a
/// config, and its two outputs are checked apart (the narrative on stdout, the daemon's log on
/// stderr).
#[test]
fn ctrl_c_stops_the_demo_in_order_and_removes_its_dir() {
    use std::io::BufRead;
    let sandbox = Sandbox::new();
    let mut child = sandbox
        .command()
        .arg("demo")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("piped");
    let (lines_tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut stderr = child.stderr.take().expect("piped");
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut seen = Vec::new();
    let ran = util::receive_until(&lines, Duration::from_secs(30), |line: String| {
        let ok = line.starts_with("backup: run 1: ok");
        seen.push(line);
        ok
    });
    if !ran {
        let _ = child.kill();
        panic!("no successful run: {seen:?}");
    }
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
    let status = util::wait_exit(&mut child, Duration::from_secs(15)).expect("still running");
    let stderr = stderr.join().expect("reader");
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("stopping: running jobs get SIGTERM"),
        "{stderr}"
    );
    assert!(stderr.contains("daemon stopped"), "{stderr}");
    let rest: Vec<String> = lines.try_iter().collect();
    assert!(rest.iter().any(|l| l == "final status:"), "{rest:?}");
    assert!(
        sandbox.entries("TMPDIR").is_empty(),
        "{:?}",
        sandbox.entries("TMPDIR")
    );
}

/// The demo shows an alarm: the failing jobs' checks, armed at creation, are `FAILING` under
/// the service's timer well within 90 seconds, and the table says so; the healthy ones are not.
#[test]
fn demo_shows_an_alarm_within_ninety_seconds() {
    let sandbox = Sandbox::new();
    let mut cmd = sandbox.command();
    cmd.args(["demo", "--duration", "50s"]);
    let started = std::time::Instant::now();
    let (status, stdout, stderr) = run(cmd, Duration::from_secs(90));
    assert_eq!(status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(started.elapsed() < Duration::from_secs(90));
    for job in ["report", "slow-export"] {
        let row = final_row(&stdout, job);
        for expected in ["last FAILING", "hasFailures"] {
            assert!(row.contains(expected), "{job}: {expected}: {row}\n{stdout}");
        }
    }
    for job in ["backup", "api-up"] {
        let row = final_row(&stdout, job);
        assert!(row.contains("no failures"), "{job}: {row}");
        assert!(!row.contains("FAILING"), "{job}: {row}");
    }
}
