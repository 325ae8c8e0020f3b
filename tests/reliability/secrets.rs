//! The security scan: every command and failure path runs with a known API key and known ping
//! tokens, in text and in JSON logs (at trace level), and as under systemd with journald
//! entries (every field, at trace level: [`super::journal`]), and nothing any of them prints,
//! sends to the journal or leaves readable under the home directory contains a secret. The
//! files that must hold a ping URL (the outbox's entries, sync's learned URLs) are checked to
//! be private (mode 0600) instead.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use heartbeat_agent::emulator::{EmulatorOptions, Fault, FaultKind, Fixtures};
use serde_json::json;

use super::journal::Journal;
use crate::util::{emulator::Background, Home};

const KEY: &str = "sk_live_RELIABILITY_KEY_4242";
const TOKEN_OK: &str = "5ec7e700-a1fa-4777-8777-000000007777";
const TOKEN_SYNCED: &str = "5ec7e700-be7a-4888-8888-000000008888";
const TOKEN_UNKNOWN: &str = "5ec7e700-9a3a-4999-8999-000000009999";
const TOKEN_DEAD: &str = "5ec7e700-de1a-4000-8000-000000000000";
const SECRETS: [&str; 5] = [KEY, TOKEN_OK, TOKEN_SYNCED, TOKEN_UNKNOWN, TOKEN_DEAD];

struct Scan {
    emulator: Background,
    home: Home,
    /// Everything produced so far: (what ran, stream, text).
    outputs: Vec<(String, &'static str, String)>,
    /// The stand-in journal of the `journald` format, once started.
    journal: Option<Journal>,
    /// Journal entries received so far.
    journal_entries: usize,
}

impl Scan {
    fn new() -> Scan {
        let emulator = Background::start_with(EmulatorOptions {
            api_key: KEY.to_owned(),
            fixtures: Fixtures::default(),
            ..EmulatorOptions::default()
        });
        for (id, token) in [("c-ok", TOKEN_OK), ("c-synced", TOKEN_SYNCED)] {
            emulator
                .add_heartbeat_check(&json!({"id": id, "name": id,
                    "heartbeat": {"period": 1, "periodUnit": "days", "grace": 1,
                                  "graceUnit": "hours", "pingToken": token}}))
                .expect("add a check");
        }
        let home = Home::new();
        let scan = Scan {
            emulator,
            home,
            outputs: Vec::new(),
            journal: None,
            journal_entries: 0,
        };
        scan.write_key(0o644);
        scan.write_config();
        scan
    }

    fn path(&self, name: &str) -> PathBuf {
        self.home.path(name)
    }

    fn write_key(&self, mode: u32) {
        std::fs::write(self.path("api-key"), format!("{KEY}\n")).expect("write the key");
        std::fs::set_permissions(self.path("api-key"), std::fs::Permissions::from_mode(mode))
            .expect("chmod the key");
    }

    fn ping_url(&self, token: &str) -> String {
        format!("{}/{token}", self.emulator.ping_url())
    }

    fn dead_url(&self) -> String {
        format!("http://127.0.0.1:1/{TOKEN_DEAD}")
    }

    fn write_config(&self) {
        let ping = self.emulator.ping_url();
        let text = format!(
            "[agent]\nstate_dir = \"{state}\"\nsync_jitter = \"0s\"\nshutdown_timeout = \"2s\"\n\n\
             [api]\nbase_url = \"{base}\"\nping_base_url = \"{ping}\"\naccount_id = \"{account}\"\n\
             api_key_file = \"{key}\"\n\n\
             [[jobs]]\nname = \"ok\"\nschedule = \"* * * * * *\"\n\
             command = [\"/bin/sh\", \"-c\", \"env; echo done\"]\nping_url = \"{ok}\"\n\n\
             [[jobs]]\nname = \"fail\"\nschedule = \"* * * * * *\"\ncommand = [\"/bin/false\"]\n\
             ping_url = \"{unknown}\"\n\n\
             [[jobs]]\nname = \"unknown\"\nschedule = \"*/2 * * * * *\"\ncommand = [\"/bin/true\"]\n\
             ping_url = \"{unknown}\"\n\n\
             [[jobs]]\nname = \"dead\"\nschedule = \"*/2 * * * * *\"\ncommand = [\"/bin/true\"]\n\
             ping_url = \"{dead}\"\n\n\
             [[jobs]]\nname = \"synced\"\nschedule = \"0 3 * * *\"\ncheck_id = \"c-synced\"\n\
             command = [\"/bin/true\"]\n",
            state = self.path("state").display(),
            base = self.emulator.base_url(),
            account = self.emulator.account(),
            key = self.path("api-key").display(),
            ok = self.ping_url(TOKEN_OK),
            unknown = self.ping_url(TOKEN_UNKNOWN),
            dead = self.dead_url(),
        );
        std::fs::write(self.path("config.toml"), text).expect("write the config");
        // It holds ping URLs: private, as `config check` asks.
        let private = std::fs::Permissions::from_mode(0o600);
        std::fs::set_permissions(self.path("config.toml"), private).expect("chmod the config");
    }

    /// The agent with the config, secrets in its environment (the key and a ping URL, which
    /// no child may inherit) and `format` logs: `text`, `json` (at trace level) or `journald`
    /// (`auto` with stderr the journal's stream, at trace level, in the journal's namespace).
    fn command(&self, format: &str) -> Command {
        let mut cmd = self.home.agent();
        cmd.arg("--config").arg(self.path("config.toml"));
        match format {
            "json" => cmd.args(["--log-format", "json", "--log-level", "trace"]),
            "journald" => cmd.args(["--log-format", "auto", "--log-level", "trace"]),
            _ => cmd.args(["--log-format", format]),
        };
        cmd.env("HEARTBEAT_AGENT_API_KEY", KEY)
            .env("HEARTBEAT_AGENT_PING_URL", self.ping_url(TOKEN_OK));
        let mut cmd = match (&self.journal, format) {
            (Some(journal), "journald") => journal.wrap(&cmd),
            _ => cmd,
        };
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Keeps what a run produced: stdout, stderr and, in the journald format, every journal
    /// entry it sent. Returns (stdout, stderr followed by the journal entries).
    fn record(&mut self, what: String, out: &Output) -> (String, String) {
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        self.outputs.push((what.clone(), "stdout", stdout.clone()));
        self.outputs.push((what.clone(), "stderr", stderr.clone()));
        if let Some(journal) = what
            .starts_with("journald")
            .then_some(())
            .and(self.journal.as_ref())
        {
            let entries = journal.take();
            let text = entries.join("\n");
            stderr = format!("{stderr}\n{text}");
            self.journal_entries += entries.len();
            self.outputs.push((what, "journal", text));
        }
        (stdout, stderr)
    }

    /// Runs `args` in `format`, records its output and returns (exit code, stdout, stderr).
    fn run(&mut self, format: &str, args: &[&str]) -> (Option<i32>, String, String) {
        let child = self.command(format).args(args).spawn().expect("spawn");
        let out = super::wait_bounded(child, Duration::from_secs(60));
        let (stdout, stderr) = self.record(format!("{format}: {args:?}"), &out);
        (out.status.code(), stdout, stderr)
    }

    /// Runs the daemon for `secs`, then SIGTERM; returns its stderr. Started here, not through
    /// [`crate::util::daemon::Daemon`]: it runs in each log format (text, JSON, journald) through
    /// the same [`Scan::command`] as every other command of the sweep, and its stdout, stderr
    /// and journal entries are recorded apart, byte for byte, to be searched for secrets.
    fn daemon(&mut self, format: &str, secs: u64) -> String {
        let child = self
            .command(format)
            .arg("daemon")
            .spawn()
            .expect("spawn the daemon");
        let pid = child.id();
        std::thread::sleep(Duration::from_secs(secs));
        super::signal(pid, libc::SIGTERM);
        let out = super::wait_bounded(child, Duration::from_secs(30));
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.record(format!("{format}: daemon"), &out).1
    }

    /// Every command and failure path once in `format`.
    fn every_command(&mut self, format: &str) {
        let dead = format!("http://127.0.0.1:1/{TOKEN_DEAD}");
        let unknown = self.ping_url(TOKEN_UNKNOWN);
        let (code, _, err) = self.run(format, &["config", "check"]);
        assert_eq!(code, Some(0), "{err}");
        assert!(err.contains("readable by group/others"), "{err}");
        assert_eq!(
            self.run(format, &["run", "--job", "ok", "--", "/bin/true"])
                .0,
            Some(0)
        );
        assert_eq!(
            self.run(format, &["run", "--job", "fail", "--", "/bin/false"])
                .0,
            Some(1)
        );
        self.run(format, &["run", "--ping-url", &dead, "--", "/bin/true"]);
        self.run(format, &["run", "--ping-url", &unknown, "--", "/bin/true"]);
        self.run(
            format,
            &["run", "--ping-url", &unknown, "--", "/nonexistent/program"],
        );
        self.run(format, &["ping", "--job", "ok"]);
        self.run(format, &["ping", "--ping-url", &dead]);
        self.run(format, &["ping", "--ping-url", &unknown]);
        self.run(format, &["outbox", "list"]);
        self.run(format, &["outbox", "flush"]);
        let (code, _, err) = self.run(format, &["sync", "--dry-run"]);
        assert_eq!(code, Some(0), "{err}");
        let (code, _, err) = self.run(format, &["sync"]);
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(self.run(format, &["api", "check-statuses"]).0, Some(0));
        let fault = self.emulator.add_fault(Fault {
            status: Some(401),
            ..Fault::new(FaultKind::Status)
        });
        self.run(format, &["api", "check-statuses"]);
        self.run(format, &["sync", "--force"]);
        self.emulator.remove_fault(fault);
        let fault = self.emulator.add_fault(Fault::new(FaultKind::Drop));
        self.run(format, &["api", "check-statuses"]);
        self.emulator.remove_fault(fault);
        self.run(format, &["api", "heartbeat", "--help"]);
        let crontab = self.path("crontab");
        std::fs::write(&crontab, "*/5 * * * * /usr/bin/backup --full\n").expect("crontab");
        self.run(format, &["import", "crontab", &crontab.to_string_lossy()]);
        self.run(format, &["schedule", "*/5 * * * *"]);
        let daemon = self.daemon(format, 4);
        assert!(
            daemon.contains("HEARTBEAT_AGENT_JOB=ok"),
            "no env dump: {daemon}"
        );
        assert!(!daemon.contains("HEARTBEAT_AGENT_API_KEY"), "{daemon}");
        assert!(!daemon.contains("HEARTBEAT_AGENT_PING_URL"), "{daemon}");
    }

    /// Runs the emulator binary at trace level with the key and a token, calls both.
    fn emulator_binary(&mut self) {
        let fixtures = self.path("fixtures.json");
        std::fs::write(
            &fixtures,
            json!({"heartbeatChecks": [{"id": "e1", "name": "e1",
                "heartbeat": {"period": 1, "periodUnit": "days", "grace": 1,
                              "graceUnit": "hours", "pingToken": TOKEN_OK}}]})
            .to_string(),
        )
        .expect("fixtures");
        let mut child = self
            .home
            .agent()
            .args(["--log-level", "trace", "--log-format", "json", "emulator"])
            .args(["--listen", "127.0.0.1:0", "--ping-listen", "127.0.0.1:0"])
            .args(["--api-key", KEY, "--fixtures", &fixtures.to_string_lossy()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the emulator");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
        let base = lines.next().expect("base_url line").expect("utf-8");
        let ping = lines.next().expect("ping_url line").expect("utf-8");
        let base = base.trim_start_matches("base_url=").to_owned();
        let ping = ping.trim_start_matches("ping_url=").to_owned();
        let statuses = get_status(&format!("{base}/v1/check-statuses"), KEY);
        assert_eq!(statuses, 200);
        assert_eq!(get_status(&format!("{ping}/{TOKEN_OK}"), ""), 200);
        super::signal(child.id(), libc::SIGTERM);
        let out = super::wait_bounded(child, Duration::from_secs(20));
        self.record("emulator --log-level trace".to_owned(), &out);
    }

    /// Files under the home directory: (path, contents), except the key file and the config.
    fn files(&self) -> Vec<(PathBuf, Vec<u8>)> {
        let mut found = Vec::new();
        let mut dirs = vec![self.home.root().to_owned()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("read a dir") {
                let path = entry.expect("an entry").path();
                if path.is_dir() {
                    dirs.push(path);
                } else if !["api-key", "config.toml", "fixtures.json"]
                    .iter()
                    .any(|n| path == self.path(n))
                {
                    found.push((path.clone(), std::fs::read(&path).unwrap_or_default()));
                }
            }
        }
        found
    }
}

/// The status of a GET of `url` by curl, with `key` as the bearer token when not empty.
fn get_status(url: &str, key: &str) -> u16 {
    let mut cmd = Command::new("curl");
    cmd.args([
        "-s",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--max-time",
        "10",
    ]);
    if !key.is_empty() {
        cmd.args(["-H", &format!("Authorization: Bearer {key}")]);
    }
    let out = cmd.arg(url).output().expect("run curl");
    String::from_utf8_lossy(&out.stdout)
        .parse()
        .expect("a status code")
}

fn leaks(text: &str) -> Vec<&'static str> {
    SECRETS.into_iter().filter(|s| text.contains(s)).collect()
}

/// A file allowed to hold a ping URL: an outbox entry or sync's learned state.
fn holds_urls_by_design(state: &Path, path: &Path) -> bool {
    path.starts_with(state.join("outbox")) || path.starts_with(state.join("sync"))
}

#[test]
fn no_command_or_failure_path_shows_the_api_key_or_a_ping_token() {
    let started = Instant::now();
    let mut scan = Scan::new();
    scan.every_command("text");
    scan.every_command("json");
    scan.emulator_binary();
    let private_files = assert_nothing_leaks(&scan);
    let outputs = scan.outputs.len();
    eprintln!(
        "scanned {outputs} outputs and {private_files} private files in {:?}",
        started.elapsed()
    );
}

#[test]
fn no_journald_field_shows_the_api_key_or_a_ping_token() {
    let started = Instant::now();
    let mut scan = Scan::new();
    let how = "a mount namespace needs root and util-linux's unshare (scripts/test-tools.sh)";
    let Some(journal) = Journal::start(&scan.path("journal")) else {
        crate::util::require(false, "unshare --mount", how);
        return;
    };
    scan.journal = Some(journal);
    scan.every_command("journald");
    let private_files = assert_nothing_leaks(&scan);
    let journal: Vec<&str> = scan
        .outputs
        .iter()
        .filter(|(_, stream, _)| *stream == "journal")
        .map(|(_, _, text)| text.as_str())
        .collect();
    // The entries really are the agent's, with its fields (not a fallback to stderr).
    let all = journal.join("\n");
    for field in [
        "SYSLOG_IDENTIFIER=heartbeat-agent",
        "PRIORITY=",
        "JOB=ok",
        "MESSAGE=",
    ] {
        assert!(
            all.contains(field),
            "no {field} in the journal entries:\n{all}"
        );
    }
    eprintln!(
        "scanned {} journal entries from {} runs and {private_files} private files in {:?}",
        scan.journal_entries,
        journal.len(),
        started.elapsed()
    );
}

/// Fails naming every output and file that shows a secret, and every file holding ping URLs by
/// design that others can read; returns how many of the latter were checked.
fn assert_nothing_leaks(scan: &Scan) -> usize {
    let mut problems = Vec::new();
    for (what, stream, text) in &scan.outputs {
        let found = leaks(text);
        if !found.is_empty() {
            problems.push(format!("{what} {stream} shows {found:?}:\n{text}"));
        }
    }
    let state = scan.path("state");
    let mut private_files = 0;
    for (path, bytes) in scan.files() {
        let text = String::from_utf8_lossy(&bytes);
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode() & 0o777;
        if holds_urls_by_design(&state, &path) {
            private_files += 1;
            if mode & 0o077 != 0 {
                problems.push(format!(
                    "{} holds ping URLs with mode {mode:o}",
                    path.display()
                ));
            }
        } else if !leaks(&text).is_empty() {
            problems.push(format!("{} shows {:?}", path.display(), leaks(&text)));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    assert!(
        private_files >= 2,
        "the outbox and the sync state were not written"
    );
    private_files
}

#[test]
fn a_private_key_file_gets_no_warning() {
    let mut scan = Scan::new();
    scan.write_key(0o600);
    let (code, _, err) = scan.run("text", &["config", "check"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("readable by group/others"), "{err}");
}
