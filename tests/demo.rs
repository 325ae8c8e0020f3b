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

/// Starts `cmd` (stdin from /dev/null) with its stdout read line by line into the returned
/// channel, as it comes.
fn spawn_reading_lines(
    mut cmd: Command,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    use std::io::BufRead;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
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
    (child, lines)
}

/// The last line shown for `job` while the demo ran (one line per change, never cut).
fn last_change<'a>(stdout: &'a str, job: &str) -> &'a str {
    let prefix = format!("{job}: ");
    stdout
        .split("final status:\n")
        .next()
        .unwrap_or_default()
        .lines()
        .rfind(|line| line.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no line for {job}:\n{stdout}"))
}

/// The final table's row of `job`: its line and the service's line under it.
fn final_row(stdout: &str, job: &str) -> String {
    let table = stdout
        .split("final status:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no final table:\n{stdout}"));
    let lines: Vec<&str> = table.lines().collect();
    let at = lines
        .iter()
        .position(|line| line.split_whitespace().next() == Some(job))
        .unwrap_or_else(|| panic!("no row for {job}:\n{table}"));
    let service = lines.get(at + 1).copied().unwrap_or_default();
    assert!(service.starts_with("  service: "), "{table}");
    format!("{}\n{service}", lines[at])
}

/// Each job of the demo and how its runs end, in the words of every view.
const RUNS: [(&str, &str); 4] = [
    ("backup", "success"),
    ("report", "failed (exit 3)"),
    ("slow-export", "timed_out"),
    ("api-up", "success"),
];

#[test]
fn demo_runs_every_kind_of_job_and_writes_only_to_its_temp_dir() {
    let sandbox = Sandbox::new();
    let mut cmd = sandbox.command();
    cmd.args(["demo", "--duration", "8s", "--keep"]);
    let (status, stdout, stderr) = run(cmd, Duration::from_secs(60));
    assert_eq!(status.code(), Some(0), "{stdout}\n{stderr}");

    // A line per change while it runs (no terminal: no escape sequences, no redraw).
    assert!(!stdout.contains('\x1b'), "{stdout}");
    assert!(stdout.contains("backup: run 1: success at "), "{stdout}");
    // While it ran: each kind of outcome was shown (a run in progress at the stop ends as
    // "stopped", so the final table may show that instead): in the words of every view.
    for (job, outcome) in RUNS {
        let shown = stdout
            .lines()
            .any(|l| l.starts_with(&format!("{job}: ")) && l.contains(&format!(": {outcome} at ")));
        assert!(shown, "{job} never shown as {outcome}:\n{stdout}");
    }
    // The final table: pings of the succeeding job and the watch only, all checks in sync;
    // every line fits 80 columns, and the legend says what the SERVICE column means.
    let table = stdout.split("final status:\n").nth(1).expect("final table");
    for line in table.lines() {
        assert!(line.chars().count() <= 80, "{line:?}");
    }
    assert!(
        table.contains("(EARLY: a ping before the period ended, fine)"),
        "{table}"
    );
    let backup = final_row(&stdout, "backup");
    for expected in ["accepted HTTP 200", "in_sync", "up, "] {
        assert!(backup.contains(expected), "{expected}: {backup}");
    }
    // The service's own count of pings, not the length of the (at most 10) events listed.
    let line = last_change(&stdout, "backup");
    let events: u32 = line
        .split("service up, ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no event count: {line}"));
    assert!(events >= 3, "the emulator saw {events} pings: {line}");
    // The failing jobs' checks were pinged once, when the demo created them (as checks that
    // once worked), and not since: within 8 s they are not failing yet.
    for job in ["report", "slow-export"] {
        let row = final_row(&stdout, job);
        for expected in ["not pinged", "in_sync"] {
            assert!(row.contains(expected), "{expected}: {row}");
        }
        let line = last_change(&stdout, job);
        assert!(
            line.ends_with("; service up, 1 event, last RECEIVED"),
            "{line}"
        );
    }
    let watch = final_row(&stdout, "api-up");
    for expected in ["accepted HTTP 200", "in_sync"] {
        assert!(watch.contains(expected), "{expected}: {watch}");
    }
    assert!(
        !stdout.contains("sync failed") && !stdout.contains("ping failed"),
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
    let sandbox = Sandbox::new();
    let mut cmd = sandbox.command();
    cmd.arg("demo").stderr(Stdio::piped());
    let (mut child, lines) = spawn_reading_lines(cmd);
    let mut stderr = child.stderr.take().expect("piped");
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut seen = Vec::new();
    let ran = util::receive_until(&lines, Duration::from_secs(30), |line: String| {
        let ok = line.starts_with("backup: run 1: success");
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
        assert!(row.contains("!! failing"), "{job}: {row}\n{stdout}");
        let line = last_change(&stdout, job);
        assert!(line.contains("; service failing, "), "{job}: {line}");
        assert!(line.ends_with(", last FAILING"), "{job}: {line}");
        assert!(!line.contains("hasFailures") && !row.contains("hasFailures"));
    }
    for job in ["backup", "api-up"] {
        let row = final_row(&stdout, job);
        assert!(!row.contains("!!"), "{job}: {row}");
        let line = last_change(&stdout, job);
        assert!(line.contains("; service up, "), "{job}: {line}");
        assert!(!line.contains("FAILING"), "{job}: {line}");
    }
}

/// What the demo puts on screen first names its directory and its logs, and the `status`
/// command line it prints reads the demo daemon's status endpoint as it is (run here as shown,
/// from a second process).
#[test]
fn demo_names_its_directory_and_serves_the_status_it_tells_to_try() {
    let sandbox = Sandbox::new();
    let mut cmd = sandbox.command();
    cmd.args(["demo", "--duration", "20s"])
        .stderr(Stdio::null());
    let (mut child, lines) = spawn_reading_lines(cmd);
    let mut seen = Vec::new();
    // Until each job's run was told once: a success, a failure, a timeout, a watch's success.
    let ran = util::receive_until(&lines, Duration::from_secs(30), |line: String| {
        seen.push(line);
        [
            "backup: run ",
            "report: run ",
            "slow-export: run ",
            "api-up: probe ",
        ]
        .iter()
        .all(|job| seen.iter().any(|l| l.starts_with(job)))
    });
    let stop = |child: &mut std::process::Child| {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
        util::wait_exit(child, Duration::from_secs(15))
    };
    if !ran {
        stop(&mut child);
        panic!("no successful run: {seen:?}");
    }
    assert_eq!(
        seen.first().map(String::as_str),
        Some("heartbeat-agent demo")
    );
    let dir = seen
        .iter()
        .find_map(|l| l.strip_prefix("demo directory: "))
        .and_then(|rest| rest.strip_suffix(" (removed at the end; --keep keeps it)"))
        .unwrap_or_else(|| panic!("no directory line: {seen:?}"));
    assert_eq!(sandbox.entries("TMPDIR"), [PathBuf::from(dir)]);
    assert!(seen.iter().any(|l| l == "logs: on stderr"), "{seen:?}");
    let try_line = seen
        .iter()
        .find_map(|l| l.strip_prefix("in a second terminal, try: "))
        .unwrap_or_else(|| panic!("no status line: {seen:?}"))
        .to_owned();
    let words: Vec<&str> = try_line.split(' ').collect();
    let [program, "status", "--url", url] = words[..] else {
        panic!("not a status command line: {try_line}");
    };
    assert!(url.starts_with("http://127.0.0.1:"), "{try_line}");
    // Beside it, the dashboard's URL on the same endpoint, which serves the dashboard.
    let dashboard = seen
        .iter()
        .find_map(|l| l.strip_prefix("dashboard, in a browser: "))
        .unwrap_or_else(|| panic!("no dashboard line: {seen:?}"));
    assert_eq!(dashboard, format!("{url}/"), "{seen:?}");
    let endpoint = heartbeat_agent::status::client::Endpoint::parse(url).expect("the URL");
    let page = endpoint
        .request("GET", "/", None, Duration::from_secs(10))
        .expect("the dashboard answers");
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body
            .to_ascii_lowercase()
            .starts_with("<!doctype html>"),
        "{:.200}",
        page.body
    );
    for job in ["backup", "report", "slow-export", "api-up"] {
        assert!(page.body.contains(job), "no {job} on the dashboard");
    }
    let mut status = Command::new(program);
    status.args(["status", "--url", url]).env_clear();
    let out = status.output().expect("the printed command runs");
    stop(&mut child);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The demo and `status` tell each job's run and check with the same words.
    for (job, run) in RUNS {
        let told = seen
            .iter()
            .rfind(|l| {
                ["run", "probe"]
                    .iter()
                    .any(|k| l.starts_with(&format!("{job}: {k} ")))
            })
            .unwrap_or_else(|| panic!("no line of {job}: {seen:?}"));
        assert!(told.contains(&format!(": {run} at ")), "{told}");
        let sync = told
            .split("; sync ")
            .nth(1)
            .and_then(|rest| rest.split(';').next())
            .unwrap_or_else(|| panic!("no sync in {told}"));
        let cells = util::table_row(&text, job);
        assert_eq!(cells.len(), 7, "{text}");
        assert_eq!(cells[5], sync, "{job}: {told}\n{text}");
        let last = cells[2].split_once(" ago ").map_or("running", |(_, w)| w);
        assert!(
            last == run || last == "running",
            "{job}: {last} / {run}\n{text}"
        );
    }
}

/// On a terminal the logs go to the file the screen names, and that file holds plain text: the
/// colour of the log lines is for a terminal only, even though logging was set up on one.
#[test]
fn demo_on_a_terminal_names_its_log_file_and_writes_it_without_colour() {
    let sandbox = Sandbox::new();
    let mut cmd = sandbox.command();
    cmd.args(["demo", "--duration", "4s", "--keep"])
        .env("TERM", "xterm");
    let (mut child, mut master) = util::spawn_on_pty(cmd);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut screen = String::new();
    let done = util::receive_until(&rx, Duration::from_secs(40), |chunk: Vec<u8>| {
        screen.push_str(&String::from_utf8_lossy(&chunk));
        screen.contains("kept the demo's directory: ") && screen.ends_with('\n')
    });
    let status = util::wait_exit(&mut child, Duration::from_secs(15));
    assert!(done, "{screen:?}");
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{screen:?}");
    let kept = screen
        .lines()
        .find_map(|l| {
            l.trim_end_matches('\r')
                .strip_prefix("kept the demo's directory: ")
        })
        .map(PathBuf::from)
        .expect("kept line");
    let log = kept.join("daemon.log");
    assert!(
        screen.contains(&format!("logs: {}", log.display())),
        "{screen:?}"
    );
    assert!(
        screen.contains(&format!(
            "demo directory: {} (kept at the end (--keep))",
            kept.display()
        )),
        "{screen:?}"
    );
    let text = std::fs::read_to_string(&log).expect("daemon.log");
    assert!(
        text.contains("job finished") || text.contains("INFO"),
        "{text}"
    );
    assert!(
        !text.contains('\x1b'),
        "colour codes in {}: {text:?}",
        log.display()
    );
}

/// The README starts with the two commands for a fresh machine (the second is the one `.ci/run`
/// runs), says where the binary is and how to put it on the PATH, and names what the demo
/// shows first: its directory, its log file, the `status` command to try and the alarm.
#[test]
fn the_readme_starts_with_the_two_commands_and_says_where_the_binary_is() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let first_block = readme
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a first sh block");
    assert_eq!(
        first_block,
        "cargo run --profile demo -- demo\nbash scripts/test.sh\n"
    );
    let ci = std::fs::read_to_string(root.join(".ci/run")).expect(".ci/run");
    assert!(
        ci.lines()
            .any(|l| l.trim_end().ends_with(" bash scripts/test.sh")),
        "{ci}"
    );
    let before_install = readme
        .split("cargo install --locked --path .")
        .next()
        .expect("text");
    assert!(
        before_install.len() < readme.len(),
        "no `cargo install --locked --path .`"
    );
    for named in [
        "target/demo/heartbeat-agent",
        "target/release/heartbeat-agent",
        "daemon.log",
        "status --url http://127.0.0.1:",
        "!! failing",
        "`EARLY`",
        "`tinyproxy`",
        "`openssl`",
        "`etcd`",
        "`faketime`",
    ] {
        assert!(readme.contains(named), "the README does not name {named}");
    }
}

/// `demo --help` lists only the options the demo uses; the global options it replaces with its
/// own (config, state directory, API) are refused, before or after `demo`, and nothing starts.
#[test]
fn demo_help_lists_only_the_options_it_uses() {
    let sandbox = Sandbox::new();
    let help = sandbox
        .command()
        .args(["demo", "--help"])
        .output()
        .expect("help");
    assert_eq!(help.status.code(), Some(0));
    let text = String::from_utf8_lossy(&help.stdout);
    for shown in ["--duration", "--keep", "--log-level", "--log-format"] {
        assert!(text.contains(shown), "{shown}: {text}");
    }
    for hidden in ["--config", "--state-dir", "--base-url"] {
        assert!(!text.contains(hidden), "{hidden}: {text}");
    }
    let run_help = sandbox
        .command()
        .args(["run", "--help"])
        .output()
        .expect("help");
    assert!(String::from_utf8_lossy(&run_help.stdout).contains("--config <FILE>"));
    for args in [
        &["demo", "--config", "x.toml"][..],
        &["--state-dir", "/tmp/x", "demo"][..],
        &["demo", "--base-url", "http://127.0.0.1:1"][..],
    ] {
        let (status, stdout, stderr) = run(
            {
                let mut cmd = sandbox.command();
                cmd.args(args);
                cmd
            },
            Duration::from_secs(20),
        );
        assert_eq!(status.code(), Some(2), "{args:?}: {stdout}{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("does not apply: the demo brings its own"),
            "{stderr}"
        );
        assert!(stdout.is_empty(), "{stdout}");
    }
    assert!(sandbox.entries("TMPDIR").is_empty());
}
