//! `heartbeat-agent daemon` for the tests: [`Daemon::on`] a [`Home`] gives a [`Launch`] (the
//! options the tests need: config, environment, a wrapper such as `unshare`, extra global
//! flags, the log format, which output to read), [`Launch::start`] runs it. A reader thread
//! per output read parses each line as JSON and hands it to the test through a channel; the
//! test side, a [`Log`], keeps what it received and offers the waits the tests use: N lines
//! matching a predicate within a timeout, a count, every line so far, the raw text for failure
//! messages. A [`Log`] may outlive its daemon and carry on with the next one started on the
//! same home ([`Launch::log_into`]), as after a `kill -9` and a restart.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, ExitStatus, Stdio};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

use super::{Home, Inbox};

/// Which of the daemon's outputs the log reads; the other goes to `/dev/null`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// stderr, where the daemon logs.
    Stderr,
    /// stdout and stderr, both into the one log (each line whole, the two interleaved as they
    /// arrive): for checks that no output at all holds a secret.
    Both,
}

/// How to start a daemon: built by [`Daemon::on`], started by [`Launch::start`].
#[derive(Debug)]
pub struct Launch<'a> {
    /// Where the daemon runs: its environment ([`Home::agent`]) and default config.
    home: &'a Home,
    /// A program and its arguments the agent runs through (`unshare`, `nice`...); none if empty.
    wrapper: Vec<String>,
    /// Added to the home's environment.
    env: Vec<(OsString, OsString)>,
    /// Removed from the environment (variables of the developer's shell a test must not pass on).
    env_remove: Vec<OsString>,
    /// `--config`: the home's `config.toml` unless [`Launch::config`] says otherwise.
    config: PathBuf,
    /// Global flags before `daemon` (such as `--state-dir DIR`).
    args: Vec<OsString>,
    /// `--log-format json` unless [`Launch::text_log`]: the reader parses each line.
    json: bool,
    output: Output,
    /// The log to append to; a new one unless [`Launch::log_into`].
    log: Option<Log>,
    /// How the daemon is stopped when dropped.
    on_drop: Signal,
}

impl<'a> Launch<'a> {
    /// Runs the agent through `wrapper` (a program and its arguments: `unshare`, `nice`...).
    pub fn via(mut self, wrapper: &[&str]) -> Launch<'a> {
        self.wrapper = wrapper.iter().map(|w| (*w).to_owned()).collect();
        self
    }

    /// `--config path` instead of the home's `config.toml`.
    pub fn config(mut self, path: impl Into<PathBuf>) -> Launch<'a> {
        self.config = path.into();
        self
    }

    /// A global flag (or its value) before `daemon`, such as `--state-dir`.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Launch<'a> {
        self.args.push(arg.into());
        self
    }

    /// Adds `key=value` to the daemon's environment.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Launch<'a> {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Adds each `(key, value)` of `vars` to the daemon's environment.
    pub fn envs<K, V>(mut self, vars: impl IntoIterator<Item = (K, V)>) -> Launch<'a>
    where
        K: Into<OsString>,
        V: Into<OsString>,
    {
        let vars = vars.into_iter().map(|(k, v)| (k.into(), v.into()));
        self.env.extend(vars);
        self
    }

    /// Removes each of `keys` from the daemon's environment.
    pub fn env_remove<K: Into<OsString>>(
        mut self,
        keys: impl IntoIterator<Item = K>,
    ) -> Launch<'a> {
        self.env_remove.extend(keys.into_iter().map(Into::into));
        self
    }

    /// The daemon's default (text) log instead of `--log-format json`: for tests that check
    /// what a person reads. Each line is then a [`Value::String`] in the [`Log`].
    pub fn text_log(mut self) -> Launch<'a> {
        self.json = false;
        self
    }

    /// Reads stdout too (see [`Output::Both`]).
    pub fn both_outputs(mut self) -> Launch<'a> {
        self.output = Output::Both;
        self
    }

    /// Appends to `log` (a clone of an earlier daemon's [`Daemon::log`]) instead of a new one.
    pub fn log_into(mut self, log: &Log) -> Launch<'a> {
        self.log = Some(log.clone());
        self
    }

    /// Stops the daemon with SIGTERM (and waits for its shutdown) when dropped, instead of
    /// SIGKILL.
    pub fn terminate_on_drop(mut self) -> Launch<'a> {
        self.on_drop = Signal::SIGTERM;
        self
    }

    /// Starts the daemon and its readers.
    pub fn start(self) -> Daemon {
        let Launch {
            home,
            wrapper,
            env,
            env_remove,
            config,
            args,
            json,
            output,
            log,
            on_drop,
        } = self;
        let mut command = if wrapper.is_empty() {
            home.agent()
        } else {
            let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
            home.agent_via(&wrapper)
        };
        for key in env_remove {
            command.env_remove(key);
        }
        command.envs(env).args(args);
        if json {
            command.args(["--log-format", "json"]);
        }
        command.arg("--config").arg(config).arg("daemon");
        let stdout = match output {
            Output::Stderr => Stdio::null(),
            Output::Both => Stdio::piped(),
        };
        let mut child = command
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the daemon");
        let log = log.unwrap_or_default();
        let mut readers = vec![log.read(child.stderr.take().expect("piped stderr"))];
        if let Some(stdout) = child.stdout.take() {
            readers.push(log.read(stdout));
        }
        Daemon {
            child,
            log,
            readers,
            on_drop,
        }
    }
}

/// A running daemon; stopped when dropped (SIGKILL, or SIGTERM after
/// [`Launch::terminate_on_drop`]).
#[derive(Debug)]
pub struct Daemon {
    child: Child,
    log: Log,
    /// The threads reading its outputs; they end at the outputs' end.
    readers: Vec<JoinHandle<()>>,
    on_drop: Signal,
}

impl Daemon {
    /// How to start a daemon on `home`'s config: JSON log on stderr, read into a new [`Log`].
    pub fn on(home: &Home) -> Launch<'_> {
        Launch {
            home,
            wrapper: Vec::new(),
            env: Vec::new(),
            env_remove: Vec::new(),
            config: home.config_path(),
            args: Vec::new(),
            json: true,
            output: Output::Stderr,
            log: None,
            on_drop: Signal::SIGKILL,
        }
    }

    /// Its log (shared with every daemon started [`Launch::log_into`] it); the [`Log`]'s waits
    /// and reads are also the daemon's own (`daemon.wait_for(..)`), through `Deref`.
    pub fn log(&self) -> &Log {
        &self.log
    }

    /// Stops it with SIGTERM (and waits for its shutdown) when dropped, instead of SIGKILL.
    pub fn terminate_on_drop(mut self) -> Daemon {
        self.on_drop = Signal::SIGTERM;
        self
    }

    /// Polls `probe` every 50 ms until it gives a value (for what the daemon shows elsewhere than
    /// in its log: its status endpoint, files); fails the test naming `what`, with the log,
    /// after `timeout`.
    pub fn until<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut probe: impl FnMut() -> Option<T>,
    ) -> T {
        let every = Duration::from_millis(50);
        super::eventually_every(every, timeout, what, || {
            probe().ok_or_else(|| format!("log:\n{}", self.text()))
        })
    }

    /// The pid of the process started (the wrapper's, when there is one).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` to the process.
    pub fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).expect("a pid fits pid_t"));
        kill(pid, signal).expect("signal the daemon");
    }

    /// Whether it still runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits at most `timeout` for the process to exit: its status, or `None` if it still runs.
    /// Once it exited, waits (within the same `timeout`) for the readers to reach the end of its
    /// outputs, so the log holds every line it wrote.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        let status = super::wait_exit(&mut self.child, timeout)?;
        super::wait_until(
            deadline.saturating_duration_since(Instant::now()),
            Duration::from_millis(10),
            || self.readers.iter().all(JoinHandle::is_finished),
        );
        Some(status)
    }

    /// [`Daemon::wait_exit`], failing the test with the log after `timeout`.
    pub fn exit_within(&mut self, timeout: Duration) -> ExitStatus {
        match self.wait_exit(timeout) {
            Some(status) => status,
            None => panic!(
                "the daemon (pid {}) did not exit within {timeout:?}; log:\n{}",
                self.pid(),
                self.text()
            ),
        }
    }

    /// SIGTERM, then waits (up to 5 s) for exit 0; returns the whole log.
    pub fn stop(mut self) -> Vec<Value> {
        self.signal(Signal::SIGTERM);
        let status = self.wait_exit(Duration::from_secs(5));
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(0),
            "daemon did not stop cleanly; log:\n{}",
            self.text()
        );
        self.lines()
    }

    /// `kill -9`, and reaped.
    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaped");
    }
}

/// A test reads a daemon's log far more often than it handles the process: `daemon.wait_for`,
/// `daemon.text` and the rest of [`Log`] work on the daemon itself.
impl std::ops::Deref for Daemon {
    type Target = Log;

    fn deref(&self) -> &Log {
        &self.log
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.on_drop == Signal::SIGKILL {
            let _ = self.child.kill();
        } else {
            let pid = Pid::from_raw(self.child.id() as i32);
            let _ = kill(pid, self.on_drop);
            // A daemon that does not stop is killed: a test must end.
            if super::wait_exit(&mut self.child, Duration::from_secs(10)).is_none() {
                let _ = self.child.kill();
            }
        }
        let _ = self.child.wait();
    }
}

/// One line of a daemon's output: as written, and parsed.
#[derive(Debug, Clone)]
struct Line {
    text: String,
    /// The line as JSON, or [`Value::String`] of it when it is not JSON (a text log, a panic).
    value: Value,
    json: bool,
}

/// What the daemons' readers handed to the test: the test side of the channel and every line
/// received so far. Clones share it.
#[derive(Debug, Clone, Default)]
pub struct Log {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// Cloned into each reader thread.
    sender: Sender<Line>,
    inbox: Inbox<Line>,
}

impl Default for Shared {
    fn default() -> Shared {
        let (sender, channel) = mpsc::channel();
        Shared {
            sender,
            inbox: Inbox::new(channel),
        }
    }
}

impl Log {
    /// A thread that reads `output` line by line into this log until its end.
    fn read(&self, output: impl Read + Send + 'static) -> JoinHandle<()> {
        let sender = self.shared.sender.clone();
        std::thread::spawn(move || {
            for text in BufReader::new(output).lines() {
                let Ok(text) = text else { break };
                let (value, json) = match serde_json::from_str(&text) {
                    Ok(value) => (value, true),
                    Err(_) => (Value::String(text.clone()), false),
                };
                if sender.send(Line { text, value, json }).is_err() {
                    break;
                }
            }
        })
    }

    /// Every line so far, in order: each JSON line parsed, any other as a [`Value::String`].
    pub fn lines(&self) -> Vec<Value> {
        self.shared
            .inbox
            .all()
            .into_iter()
            .map(|l| l.value)
            .collect()
    }

    /// The lines so far that are JSON, in order (what a JSON log holds besides a panic or a
    /// wrapper's words).
    pub fn json(&self) -> Vec<Value> {
        let all = self.shared.inbox.all();
        all.into_iter()
            .filter(|l| l.json)
            .map(|l| l.value)
            .collect()
    }

    /// How many lines so far match `pred`.
    pub fn count(&self, pred: impl Fn(&Value) -> bool) -> usize {
        self.lines().iter().filter(|l| pred(l)).count()
    }

    /// Receives until `done(every line so far)` holds or `timeout` passed; returns whether it
    /// held. Wakes on each line, without polling.
    pub fn receive_until(&self, timeout: Duration, mut done: impl FnMut(&[Value]) -> bool) -> bool {
        let mut values = Vec::new();
        self.shared.inbox.receive_until(timeout, |lines| {
            values.extend(lines[values.len()..].iter().map(|l| l.value.clone()));
            done(&values)
        })
    }

    /// Waits until `n` lines match `pred` and returns them all; fails the test with the log
    /// after `timeout`.
    pub fn wait_for(
        &self,
        n: usize,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Vec<Value> {
        let mut found = Vec::new();
        let arrived = self.receive_until(timeout, |lines| {
            found = lines.iter().filter(|l| pred(l)).cloned().collect();
            found.len() >= n
        });
        assert!(
            arrived,
            "waited {timeout:?} for {n} matching log lines; log:\n{}",
            self.text()
        );
        found
    }

    /// Every line so far as it was written, one per line.
    pub fn text(&self) -> String {
        let lines = self.shared.inbox.all();
        lines
            .into_iter()
            .map(|l| l.text)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The log side fails when it should: a wait for a line that never comes fails its test.
mod checks {
    use std::time::Duration;

    use super::Log;

    #[test]
    fn a_log_parses_json_keeps_other_lines_and_fails_a_wait_that_times_out() {
        let log = Log::default();
        let reader = log.read(&b"{\"message\":\"a\"}\nnot json\n{\"message\":\"b\"}\n"[..]);
        reader.join().expect("the reader ends with its input");
        let found = log.wait_for(2, Duration::from_secs(1), |l| l.get("message").is_some());
        assert_eq!(found.len(), 2);
        assert_eq!(log.lines()[1], "not json");
        assert_eq!(log.json().len(), 2);
        assert_eq!(log.count(|l| l["message"] == "b"), 1);
        assert_eq!(
            log.text(),
            "{\"message\":\"a\"}\nnot json\n{\"message\":\"b\"}"
        );
        let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            log.wait_for(3, Duration::from_millis(50), |l| l.get("message").is_some())
        }));
        assert!(waited.is_err(), "a wait that times out fails");
    }
}
