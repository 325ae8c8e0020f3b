//! A stand-in for journald, for the secrets scan: a datagram socket in the test's home that
//! receives what the agent writes with the native journal protocol, and a wrapper that runs the
//! agent in a private mount namespace where that socket is `/run/systemd/journal/socket` and
//! `JOURNAL_STREAM` names its stderr, as under systemd. Needs `unshare` and mount rights
//! (root); [`Journal::start`] returns `None` where they are missing.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::util;

/// Mounts `$1` over `/run/systemd/journal` (on a private `/run`), sets `JOURNAL_STREAM` to the
/// device and inode of stderr, and runs the rest of the arguments.
const WRAPPER: &str = "d=$1; shift
mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/journal && mount --bind \"$d\" /run/systemd/journal || exit 97
JOURNAL_STREAM=$(stat -L -c %d:%i /proc/self/fd/2) || exit 97
export JOURNAL_STREAM
exec \"$@\"";

/// The receiving socket and what arrived.
pub struct Journal {
    dir: PathBuf,
    /// Datagrams received and not yet taken, each as (lossy) text.
    received: Arc<Mutex<Vec<String>>>,
    /// When the last datagram arrived.
    last: Arc<Mutex<Instant>>,
    stop: Arc<AtomicBool>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Journal {
    /// Binds `dir/socket` and starts receiving; `None` when this machine cannot run the agent
    /// in a mount namespace.
    pub fn start(dir: &Path) -> Option<Journal> {
        let usable = in_namespace(&std::env::temp_dir())
            .arg("true")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !usable {
            return None;
        }
        std::fs::create_dir_all(dir).expect("the journal directory");
        let socket = UnixDatagram::bind(dir.join("socket")).expect("bind the journal socket");
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .expect("a read timeout");
        let received = Arc::new(Mutex::new(Vec::new()));
        let last = Arc::new(Mutex::new(Instant::now()));
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (received, last, stop) = (received.clone(), last.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut buffer = vec![0u8; 1 << 20];
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(n) = socket.recv(&mut buffer) {
                        let text = String::from_utf8_lossy(&buffer[..n]).into_owned();
                        received.lock().expect("not poisoned").push(text);
                        *last.lock().expect("not poisoned") = Instant::now();
                    }
                }
            })
        };
        Some(Journal {
            dir: dir.to_owned(),
            received,
            last,
            stop,
            reader: Some(reader),
        })
    }

    /// `agent` (a command for the agent binary) run with this journal as the system's.
    pub fn wrap(&self, agent: &Command) -> Command {
        let mut cmd = in_namespace(&self.dir);
        cmd.arg(agent.get_program()).args(agent.get_args());
        for (name, value) in agent.get_envs() {
            match value {
                Some(value) => cmd.env(name, value),
                None => cmd.env_remove(name),
            };
        }
        cmd
    }

    /// Every datagram received since the last call (the raw entries, field names and values),
    /// once none has arrived for 300 ms: call after the writer exited.
    pub fn take(&self) -> Vec<String> {
        let start = Instant::now();
        std::thread::sleep(Duration::from_millis(100));
        let left = Duration::from_secs(10).saturating_sub(start.elapsed());
        util::wait_until(left, Duration::from_millis(50), || {
            self.last.lock().expect("not poisoned").elapsed() >= Duration::from_millis(300)
        });
        std::mem::take(&mut *self.received.lock().expect("not poisoned"))
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// `unshare` running [`WRAPPER`] with `dir` as the journal directory; the command to run in the
/// private mount namespace follows as further arguments.
fn in_namespace(dir: &Path) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        WRAPPER,
        "sh",
    ])
    .arg(dir);
    cmd
}
