//! Helpers shared by the integration tests: the agent binary in a temporary home ([`Home`]),
//! waiting for something that happens in another process or thread ([`eventually`] and its
//! variants), receiving what a test server or reader hands over a channel ([`Inbox`],
//! [`receive_until`]), the daemon with its log handed over a channel ([`daemon`]), the fake
//! HTTP server that records every request ([`http`]), a ping host view of it ([`outbox`]), the
//! emulator ([`emulator`]), a real etcd cluster ([`etcd`]) and a clock moved by libfaketime
//! ([`faketime`]).

#![allow(dead_code)]

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub mod daemon;
pub mod emulator;
pub mod etcd;
pub mod http;
pub mod outbox;
pub mod tls;

/// The `heartbeat-agent` binary built for these tests.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heartbeat-agent"))
}

/// The variables of the developer's shell that would change what the agent does: an inherited
/// config, API key or ping URL, the default time zone (`TZ`), systemd's sockets and credentials,
/// the XDG dirs.
const INHERITED: [&str; 11] = [
    "TZ",
    "HEARTBEAT_AGENT_CONFIG",
    "HEARTBEAT_AGENT_API_KEY",
    "HEARTBEAT_AGENT_ACCOUNT",
    "HEARTBEAT_AGENT_PING_URL",
    "HEARTBEAT_AGENT_LOG",
    "CREDENTIALS_DIRECTORY",
    "NOTIFY_SOCKET",
    "JOURNAL_STREAM",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
];

/// A temporary home for one test: `HOME` of the agents it starts, the place of their config
/// file (`config.toml`) and state directory (`state/`); removed when dropped.
#[derive(Debug)]
pub struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    /// A new, empty home.
    pub fn new() -> Home {
        Home {
            dir: tempfile::tempdir().expect("a temporary home"),
        }
    }

    /// A new, empty home on a memory file system (`/dev/shm`) when there is one, for tests
    /// that write state files many thousand times (fsync there costs nothing); else [`Home::new`].
    pub fn in_memory() -> Home {
        match tempfile::tempdir_in("/dev/shm") {
            Ok(dir) => Home { dir },
            Err(_) => Home::new(),
        }
    }

    /// The home directory itself.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// `name` inside the home.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `config.toml` in the home (written by [`Home::write_config`]).
    pub fn config_path(&self) -> PathBuf {
        self.path("config.toml")
    }

    /// `state/` in the home: the agent's state directory unless a config or flag says otherwise.
    pub fn state_dir(&self) -> PathBuf {
        self.path("state")
    }

    /// Writes `text` as the config file; returns its path.
    pub fn write_config(&self, text: &str) -> PathBuf {
        let path = self.config_path();
        std::fs::write(&path, text).expect("write the config file");
        path
    }

    /// A `Command` for the agent binary with a clean, predictable environment: nothing inherited
    /// from the developer's shell (config, API key, ping URL, systemd sockets, XDG dirs),
    /// `HOME` set to this home and the default state directory and config directory inside it.
    pub fn agent(&self) -> Command {
        self.clean(Command::new(bin()))
    }

    /// [`Home::agent`] started through `wrapper` (a program and its arguments, followed by the
    /// agent binary): `unshare`, `nice` and the like.
    pub fn agent_via(&self, wrapper: &[&str]) -> Command {
        let (program, args) = wrapper.split_first().expect("a wrapper program");
        let mut cmd = Command::new(program);
        cmd.args(args).arg(bin());
        self.clean(cmd)
    }

    /// `cmd` with the environment of [`Home::agent`].
    fn clean(&self, mut cmd: Command) -> Command {
        for var in INHERITED {
            cmd.env_remove(var);
        }
        cmd.env("HOME", self.root());
        // The default state directory is /var/lib/heartbeat-agent for root: without this, tests
        // run as root would share one outbox and deliver each other's pending pings.
        cmd.env("STATE_DIRECTORY", self.state_dir());
        // The default config file is /etc/heartbeat-agent/config.toml for root: a test must never
        // read the machine's. `etc/` in the home is empty, as /etc is on a fresh machine; a test
        // that wants a config passes --config (or writes `etc/config.toml`).
        cmd.env("CONFIGURATION_DIRECTORY", self.path("etc"));
        cmd
    }
}

impl Default for Home {
    fn default() -> Home {
        Home::new()
    }
}

/// Whether a test that needs `what` (a tool or a privilege) can run here: true when
/// `available`. Otherwise, under CI (`CI` set, as `.ci/run` runs), the test fails, naming what is
/// missing and `how` to get it (scripts/test-tools.sh installs the tools as root); elsewhere it
/// prints that it is skipped and why, and returns false.
pub fn require(available: bool, what: &str, how: &str) -> bool {
    if available {
        return true;
    }
    let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false");
    assert!(!in_ci, "{what} is missing under CI: {how}");
    eprintln!("skipped: {what} is missing ({how})");
    false
}

/// A shell script that counts its runs in the file `counter`, prints `attempt N`, and fails
/// until its `succeed_from`th run: a command that fails N times, then succeeds.
pub fn flaky_script(counter: &Path, succeed_from: u32) -> String {
    format!(
        "n=$(cat {c} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {c}; echo attempt $n; \
         [ $n -ge {succeed_from} ]",
        c = counter.display()
    )
}

/// How many times a [`flaky_script`] ran (0 before its first run).
pub fn runs_counted(counter: &Path) -> u32 {
    std::fs::read_to_string(counter)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

/// Starts `cmd` as a session leader whose controlling terminal is a new pty (stdin, stdout and
/// stderr on it), as a login shell's job would be; returns the child and the pty's master side.
pub fn spawn_on_pty(mut cmd: Command) -> (std::process::Child, std::fs::File) {
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let pty = nix::pty::openpty(None, None).expect("openpty");
    cmd.stdin(Stdio::from(pty.slave.try_clone().expect("dup")))
        .stdout(Stdio::from(pty.slave.try_clone().expect("dup")))
        .stderr(Stdio::from(pty.slave));
    // SAFETY: setsid and ioctl are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().expect("spawn on a pty");
    (child, std::fs::File::from(pty.master))
}

/// Whether `program` runs here (`program args` exits 0).
pub fn runs(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// How often [`eventually`] looks again.
const POLL: Duration = Duration::from_millis(20);

/// Calls `probe` every `every` until it returns `Ok`, for at most `timeout`: `Ok` with its value,
/// or `Err` with the last state it reported. `probe` runs at least once, and once more at or
/// after the deadline. For tests that assert on what they find either way.
pub fn poll<T, S>(
    timeout: Duration,
    every: Duration,
    mut probe: impl FnMut() -> Result<T, S>,
) -> Result<T, S> {
    let deadline = Instant::now() + timeout;
    loop {
        let state = match probe() {
            Ok(value) => return Ok(value),
            Err(state) => state,
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(state);
        }
        std::thread::sleep(every.min(left));
    }
}

/// [`poll`] for a condition: whether `done` became true within `timeout`.
pub fn wait_until(timeout: Duration, every: Duration, mut done: impl FnMut() -> bool) -> bool {
    poll(timeout, every, || if done() { Ok(()) } else { Err(()) }).is_ok()
}

/// Waits until `probe` returns `Ok` and returns its value; after `timeout`, panics naming
/// `what` and the last state `probe` reported as its `Err`. Polls every 20 ms.
pub fn eventually<T, S: Display>(
    timeout: Duration,
    what: &str,
    probe: impl FnMut() -> Result<T, S>,
) -> T {
    eventually_every(POLL, timeout, what, probe)
}

/// [`eventually`], polling every `every`: for probes that cost a process or a request.
pub fn eventually_every<T, S: Display>(
    every: Duration,
    timeout: Duration,
    what: &str,
    probe: impl FnMut() -> Result<T, S>,
) -> T {
    poll(timeout, every, probe)
        .unwrap_or_else(|state| panic!("waited {timeout:?} for {what}; last seen: {state}"))
}

/// [`eventually`] inside a tokio runtime: sleeps with tokio, so tasks on a current-thread
/// runtime go on while the test waits.
pub async fn eventually_async<T, S: Display>(
    timeout: Duration,
    what: &str,
    mut probe: impl FnMut() -> Result<T, S>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        let state = match probe() {
            Ok(value) => return value,
            Err(state) => state,
        };
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "waited {timeout:?} for {what}; last seen: {state}"
        );
        tokio::time::sleep(POLL.min(left)).await;
    }
}

/// Waits at most `timeout` for `child` to exit: its status, or `None` if it still runs.
pub fn wait_exit(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    poll(timeout, Duration::from_millis(10), || {
        match child.try_wait().expect("the child can be waited for") {
            Some(status) => Ok(status),
            None => Err(()),
        }
    })
    .ok()
}

/// Waits at most `timeout` for a pid to be written into `path` (by a job or a command that
/// reports its own), and returns it.
pub fn read_pid(path: &Path, timeout: Duration) -> i32 {
    eventually(timeout, &format!("a pid in {}", path.display()), || {
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        text.trim().parse().map_err(|_| format!("{text:?}"))
    })
}

/// The peak resident size (`VmHWM`) of process `pid` so far, in KiB.
pub fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

/// The environment that runs a program `offset` off the real clock through Debian's
/// libfaketime (what `faketime -f OFFSET` sets; given directly, so the agent is our child and
/// not the `faketime` script's, and a kill reaches it); `None` when libfaketime is not
/// installed (the test is then skipped, except under CI).
pub fn faketime(offset: &str) -> Option<Vec<(String, String)>> {
    let lib = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|dir| dir.path().join("faketime/libfaketime.so.1"))
        .find(|path| path.exists());
    let how = "run scripts/test-tools.sh as root (Debian's faketime)";
    if !crate::util::require(lib.is_some(), "libfaketime", how) {
        return None;
    }
    let lib = lib?.display().to_string();
    Some(vec![
        ("LD_PRELOAD".to_owned(), lib),
        ("FAKETIME".to_owned(), offset.to_owned()),
    ])
}

/// The cells of the row whose first word is `first` in a table the agent printed (`status`,
/// `history`): cells are apart by two spaces or more, and none of them holds two spaces.
pub fn table_row(table: &str, first: &str) -> Vec<String> {
    let row = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(first))
        .unwrap_or_else(|| panic!("no row of {first} in:\n{table}"));
    row.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A probe for [`eventually`]: whether `path` exists, naming it when it does not.
pub fn exists(path: &Path) -> Result<(), String> {
    if path.exists() {
        Ok(())
    } else {
        Err(format!("no {}", path.display()))
    }
}

/// Receives from `channel` for at most `timeout`, handing each item to `take` until it returns
/// true; returns whether it did. Wakes on each item, without polling.
pub fn receive_until<T>(
    channel: &Receiver<T>,
    timeout: Duration,
    mut take: impl FnMut(T) -> bool,
) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match channel.recv_timeout(left) {
            Ok(item) => {
                if take(item) {
                    return true;
                }
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return false,
        }
    }
}

/// What a test server or a log reader hands to the test: the receiving end of its channel, and
/// everything taken from it so far (for the checks that look at all of it).
#[derive(Debug)]
pub struct Inbox<T> {
    state: Mutex<(Receiver<T>, Vec<T>)>,
}

impl<T: Clone> Inbox<T> {
    /// An inbox reading `channel`.
    pub fn new(channel: Receiver<T>) -> Inbox<T> {
        Inbox {
            state: Mutex::new((channel, Vec::new())),
        }
    }

    /// Everything that arrived so far, in order, without waiting.
    pub fn all(&self) -> Vec<T> {
        let mut state = self.state.lock().expect("inbox lock");
        let (channel, taken) = &mut *state;
        taken.extend(channel.try_iter());
        taken.clone()
    }

    /// Forgets everything that arrived so far.
    pub fn clear(&self) {
        let mut state = self.state.lock().expect("inbox lock");
        let (channel, taken) = &mut *state;
        taken.extend(channel.try_iter());
        taken.clear();
    }

    /// Receives until `done(everything so far)` holds or `timeout` passed; returns whether it
    /// held.
    pub fn receive_until(&self, timeout: Duration, mut done: impl FnMut(&[T]) -> bool) -> bool {
        let mut state = self.state.lock().expect("inbox lock");
        let (channel, taken) = &mut *state;
        taken.extend(channel.try_iter());
        if done(taken) {
            return true;
        }
        receive_until(channel, timeout, |item| {
            taken.push(item);
            done(taken)
        })
    }
}

/// The waiting helpers fail when they should: a wait that never ends must fail its test.
mod checks {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::{eventually, poll, Inbox};

    const SHORT: Duration = Duration::from_millis(50);

    #[test]
    #[should_panic(expected = "for the answer; last seen: still 41")]
    fn eventually_names_what_and_the_last_state() {
        eventually(SHORT, "the answer", || Err::<(), _>("still 41"));
    }

    #[test]
    fn poll_returns_the_value_or_the_last_state() {
        let mut n = 0;
        let found = poll(SHORT, Duration::from_millis(1), || {
            n += 1;
            if n == 3 {
                Ok(n)
            } else {
                Err(n)
            }
        });
        assert_eq!(found, Ok(3));
        assert_eq!(poll(SHORT, SHORT, || Err::<(), _>(7)), Err(7));
    }

    #[test]
    fn an_inbox_wakes_on_arrival_and_gives_up_at_the_timeout() {
        let (tx, rx) = mpsc::channel();
        let inbox = Inbox::new(rx);
        assert!(!inbox.receive_until(SHORT, |all| !all.is_empty()));
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            tx.send(1).expect("the inbox listens");
            tx.send(2).expect("the inbox listens");
        });
        assert!(inbox.receive_until(Duration::from_secs(5), |all| all.len() == 2));
        assert_eq!(inbox.all(), vec![1, 2]);
        inbox.clear();
        assert!(inbox.all().is_empty());
    }
}
