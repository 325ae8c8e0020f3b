//! systemd service notification (`sd_notify(3)`): `READY=1`, `RELOADING=1`, `STOPPING=1`,
//! `STATUS=...` and `WATCHDOG=1` datagrams to `$NOTIFY_SOCKET`, and the watchdog interval from
//! `$WATCHDOG_USEC`.
//!
//! The assignments themselves and the `MONOTONIC_USEC` clock come from the `sd-notify` crate
//! ([`NotifyState`]). Its `notify()` is not used to send them, because it cannot give what the
//! daemon documents and its tests check:
//! - it connects to `NOTIFY_SOCKET` as a file path, so an abstract `@name` socket fails;
//! - it reads the variable again at every call, where [`Notifier::from_vars`] takes the values
//!   once (tests pass their own socket without touching the process environment);
//! - it ends every assignment with a newline and has no send timeout, where the datagrams here
//!   are exactly the assignments and a busy service manager cannot stall the daemon's loop;
//! - its `ExtendTimeoutUsec` holds 32 bits (71 minutes), shorter than a `shutdown_timeout` may be.
//!
//! So the socket, the send and `EXTEND_TIMEOUT_USEC` are written here. The watchdog rule is too:
//! `sd_notify::watchdog_enabled` reads only the process environment and counts `WATCHDOG_USEC=0`
//! or an unreadable `WATCHDOG_PID` as enabled for this process; here neither is.
//!
//! [`Notifier::from_env`] reads the variables once at start. It does not remove them from the
//! environment (that is unsound while other threads may read it); children never see them
//! because the process module removes `NOTIFY_SOCKET` and every `WATCHDOG_*` variable from each
//! child's environment. Without `NOTIFY_SOCKET` (not under systemd) every call is a no-op.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

use sd_notify::NotifyState;

/// How long one notification may wait for room in the socket's queue: the daemon's loop must
/// not stall on a busy service manager.
const SEND_TIMEOUT: Duration = Duration::from_secs(1);

/// Why `NOTIFY_SOCKET` could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotifyError {
    /// The variable is neither an absolute path nor an abstract `@name`.
    #[error("NOTIFY_SOCKET={0:?} is not a socket path or @abstract name; notifications are off")]
    Unsupported(String),
    /// The datagram socket could not be created or the address is invalid.
    #[error("NOTIFY_SOCKET {address}: {source}")]
    Socket {
        /// The socket address as given.
        address: String,
        /// What failed.
        source: io::Error,
    },
    /// Sending a notification failed.
    #[error("cannot notify systemd at {address}: {source}")]
    Send {
        /// The socket address as given.
        address: String,
        /// What failed.
        source: io::Error,
    },
}

/// Sends service notifications to systemd; a no-op when not started by systemd.
#[derive(Debug)]
pub(crate) struct Notifier {
    /// The socket and where to send, if `NOTIFY_SOCKET` was set and usable.
    target: Option<Target>,
    /// Half of `WATCHDOG_USEC`, if the watchdog is on for this process.
    watchdog: Option<Duration>,
}

/// An unbound datagram socket and the notify address.
#[derive(Debug)]
struct Target {
    /// Unbound: systemd identifies the sender by its credentials, not its address.
    socket: UnixDatagram,
    /// The notify socket's address (a path or an abstract name).
    address: SocketAddr,
    /// `NOTIFY_SOCKET` as given, for messages.
    shown: String,
}

impl Notifier {
    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` from this process's
    /// environment. An unusable socket is logged as a warning and notifications are off.
    pub(crate) fn from_env() -> Self {
        let socket = std::env::var_os("NOTIFY_SOCKET");
        let usec = std::env::var("WATCHDOG_USEC").ok();
        let pid = std::env::var("WATCHDOG_PID").ok();
        Self::from_vars(socket.as_deref(), usec.as_deref(), pid.as_deref()).unwrap_or_else(|err| {
            tracing::warn!(error = %err, "systemd notification disabled");
            Self::disabled()
        })
    }

    /// A notifier from the given variable values (as [`from_env`](Self::from_env) reads them).
    pub(crate) fn from_vars(
        notify_socket: Option<&OsStr>,
        watchdog_usec: Option<&str>,
        watchdog_pid: Option<&str>,
    ) -> Result<Self, NotifyError> {
        let watchdog = watchdog_interval(watchdog_usec, watchdog_pid, std::process::id());
        let target = match notify_socket.filter(|s| !s.is_empty()) {
            Some(raw) => Some(Target::new(raw)?),
            None => None,
        };
        Ok(Notifier { target, watchdog })
    }

    /// A notifier that sends nothing (not under systemd, or in tests).
    pub(crate) fn disabled() -> Self {
        Notifier {
            target: None,
            watchdog: None,
        }
    }

    /// Whether notifications go anywhere.
    #[cfg(test)]
    pub(crate) fn is_enabled(&self) -> bool {
        self.target.is_some()
    }

    /// How often to send `WATCHDOG=1`: half of `WATCHDOG_USEC`, or `None` when the watchdog is
    /// off, meant for another process (`WATCHDOG_PID`), or there is no socket to send to.
    pub(crate) fn watchdog_interval(&self) -> Option<Duration> {
        self.target.as_ref().and(self.watchdog)
    }

    /// `READY=1`: start-up finished (config valid, signal handlers installed, listener bound).
    /// Also sent after a reload.
    pub(crate) fn ready(&self) -> Result<(), NotifyError> {
        self.notify(&[NotifyState::Ready])
    }

    /// `RELOADING=1` with `MONOTONIC_USEC=` (systemd 253 and later match it against the reload
    /// request); follow with [`ready`](Self::ready) when the reload is done.
    pub(crate) fn reloading(&self) -> Result<(), NotifyError> {
        let now = NotifyState::MonotonicUsec(monotonic_usec().into());
        self.notify(&[NotifyState::Reloading, now])
    }

    /// `STOPPING=1`: shutdown began.
    pub(crate) fn stopping(&self) -> Result<(), NotifyError> {
        self.notify(&[NotifyState::Stopping])
    }

    /// `STATUS=text`, shown by `systemctl status`; newlines become spaces (one line only).
    pub(crate) fn status(&self, text: &str) -> Result<(), NotifyError> {
        self.notify(&[NotifyState::Status(&text.replace(['\n', '\r'], " "))])
    }

    /// `WATCHDOG=1`: the service is alive. Send only while the main loop makes progress.
    pub(crate) fn watchdog(&self) -> Result<(), NotifyError> {
        self.notify(&[NotifyState::Watchdog])
    }

    /// `EXTEND_TIMEOUT_USEC=`: asks for `extra` more time in the current start-up or shutdown
    /// phase (a shutdown that waits for jobs longer than `TimeoutStopSec`).
    pub(crate) fn extend_timeout(&self, extra: Duration) -> Result<(), NotifyError> {
        // Written here: the crate's `ExtendTimeoutUsec` holds a u32 (at most 71 minutes).
        self.send(&format!("EXTEND_TIMEOUT_USEC={}", extra.as_micros()))
    }

    /// Sends `states` as one datagram, one assignment per line and no newline after the last.
    fn notify(&self, states: &[NotifyState<'_>]) -> Result<(), NotifyError> {
        if self.target.is_none() {
            return Ok(());
        }
        let mut message = String::new();
        for state in states {
            if !message.is_empty() {
                message.push('\n');
            }
            let _ = write!(message, "{state}");
        }
        self.send(&message)
    }

    /// Sends `message` (newline-separated `KEY=value` assignments) as one datagram; `Ok` without
    /// sending when disabled.
    pub(crate) fn send(&self, message: &str) -> Result<(), NotifyError> {
        let Some(target) = &self.target else {
            return Ok(());
        };
        target
            .socket
            .send_to_addr(message.as_bytes(), &target.address)
            .map(drop)
            .map_err(|source| NotifyError::Send {
                address: target.shown.clone(),
                source,
            })
    }
}

impl Target {
    /// Resolves `NOTIFY_SOCKET`: an absolute path, or `@name` for an abstract socket.
    fn new(raw: &OsStr) -> Result<Self, NotifyError> {
        let shown = raw.to_string_lossy().into_owned();
        let socket_error = |source| NotifyError::Socket {
            address: shown.clone(),
            source,
        };
        let bytes = raw.as_bytes();
        let address = match bytes.first() {
            Some(b'/') => SocketAddr::from_pathname(raw).map_err(socket_error)?,
            Some(b'@') => abstract_address(&bytes[1..]).map_err(socket_error)?,
            _ => return Err(NotifyError::Unsupported(shown)),
        };
        let socket = UnixDatagram::unbound().map_err(socket_error)?;
        socket
            .set_write_timeout(Some(SEND_TIMEOUT))
            .map_err(socket_error)?;
        Ok(Target {
            socket,
            address,
            shown,
        })
    }
}

/// An abstract socket address (Linux only).
#[cfg(target_os = "linux")]
fn abstract_address(name: &[u8]) -> io::Result<SocketAddr> {
    <SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(name)
}

/// Abstract sockets exist only on Linux.
#[cfg(not(target_os = "linux"))]
fn abstract_address(_name: &[u8]) -> io::Result<SocketAddr> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "abstract sockets need Linux",
    ))
}

/// Half of `WATCHDOG_USEC` when it is set, positive, and `WATCHDOG_PID` (if set) is `own_pid`.
fn watchdog_interval(usec: Option<&str>, pid: Option<&str>, own_pid: u32) -> Option<Duration> {
    if let Some(pid) = pid {
        if pid.trim().parse::<u32>().ok() != Some(own_pid) {
            return None;
        }
    }
    let usec: u64 = usec?.trim().parse().ok().filter(|&usec| usec > 0)?;
    Some(Duration::from_micros(usec) / 2)
}

/// `CLOCK_MONOTONIC` in microseconds, the clock systemd compares `MONOTONIC_USEC` against; 0 if
/// it cannot be read (it always can on Linux).
fn monotonic_usec() -> u64 {
    match NotifyState::monotonic_usec_now() {
        Ok(NotifyState::MonotonicUsec(usec)) => u64::try_from(usec).unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receive(socket: &UnixDatagram) -> String {
        let mut buffer = [0u8; 4096];
        let n = socket.recv(&mut buffer).expect("receive a datagram");
        String::from_utf8(buffer[..n].to_vec()).expect("utf-8")
    }

    fn listener() -> (tempfile::TempDir, std::path::PathBuf, UnixDatagram) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("notify.sock");
        let socket = UnixDatagram::bind(&path).expect("bind notify socket");
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("read timeout");
        (dir, path, socket)
    }

    #[test]
    fn sends_each_state_to_a_path_socket() {
        let (_dir, path, socket) = listener();
        let notifier =
            Notifier::from_vars(Some(path.as_os_str()), None, None).expect("usable socket");
        assert!(notifier.is_enabled());
        notifier.ready().expect("send");
        assert_eq!(receive(&socket), "READY=1");
        notifier
            .status("running 3 jobs\nnext at 10:00")
            .expect("send");
        assert_eq!(receive(&socket), "STATUS=running 3 jobs next at 10:00");
        notifier.watchdog().expect("send");
        assert_eq!(receive(&socket), "WATCHDOG=1");
        notifier.stopping().expect("send");
        assert_eq!(receive(&socket), "STOPPING=1");
        notifier
            .extend_timeout(Duration::from_secs(2))
            .expect("send");
        assert_eq!(receive(&socket), "EXTEND_TIMEOUT_USEC=2000000");
    }

    #[test]
    fn reloading_carries_the_monotonic_clock() {
        let (_dir, path, socket) = listener();
        let notifier =
            Notifier::from_vars(Some(path.as_os_str()), None, None).expect("usable socket");
        let before = monotonic_usec();
        notifier.reloading().expect("send");
        let after = monotonic_usec();
        let message = receive(&socket);
        let usec: u64 = message
            .strip_prefix("RELOADING=1\nMONOTONIC_USEC=")
            .expect("reloading then the clock")
            .parse()
            .expect("a number");
        assert!(before > 0 && (before..=after).contains(&usec), "{message}");
    }

    #[test]
    fn abstract_socket_names_work() {
        let name = format!("heartbeat-notify-test-{:08x}", rand::random::<u32>());
        let address = abstract_address(name.as_bytes()).expect("abstract address");
        let socket = UnixDatagram::bind_addr(&address).expect("bind abstract socket");
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("read timeout");
        let variable = format!("@{name}");
        let notifier = Notifier::from_vars(Some(OsStr::new(&variable)), None, None)
            .expect("usable abstract socket");
        notifier.ready().expect("send");
        assert_eq!(receive(&socket), "READY=1");
    }

    #[test]
    fn unset_socket_is_a_no_op() {
        let notifier = Notifier::from_vars(None, Some("10000000"), None).expect("no socket");
        assert!(!notifier.is_enabled());
        assert_eq!(notifier.watchdog_interval(), None);
        notifier.ready().expect("no-op");
        assert!(Notifier::disabled().stopping().is_ok());
    }

    #[test]
    fn relative_socket_is_rejected_with_a_message() {
        let err = Notifier::from_vars(Some(OsStr::new("relative.sock")), None, None)
            .expect_err("not a path or abstract name");
        assert_eq!(
            err.to_string(),
            "NOTIFY_SOCKET=\"relative.sock\" is not a socket path or @abstract name; \
             notifications are off"
        );
    }

    #[test]
    fn send_to_a_vanished_socket_reports_the_address() {
        let (dir, path, socket) = listener();
        let notifier =
            Notifier::from_vars(Some(path.as_os_str()), None, None).expect("usable socket");
        drop(socket);
        drop(dir);
        let err = notifier.ready().expect_err("nobody listens");
        assert!(
            err.to_string()
                .starts_with(&format!("cannot notify systemd at {}: ", path.display())),
            "{err}"
        );
    }

    #[test]
    fn watchdog_interval_is_half_and_only_for_us() {
        let own = 4242;
        let half = Some(Duration::from_secs(5));
        assert_eq!(watchdog_interval(Some("10000000"), None, own), half);
        assert_eq!(watchdog_interval(Some("10000000"), Some("4242"), own), half);
        assert_eq!(watchdog_interval(Some("10000000"), Some("1"), own), None);
        assert_eq!(watchdog_interval(Some("0"), None, own), None);
        assert_eq!(watchdog_interval(Some("soon"), None, own), None);
        assert_eq!(watchdog_interval(None, None, own), None);
    }

    #[test]
    fn watchdog_interval_needs_a_socket() {
        let (_dir, path, _socket) = listener();
        let pid = std::process::id().to_string();
        let notifier = Notifier::from_vars(Some(path.as_os_str()), Some("3000000"), Some(&pid))
            .expect("usable socket");
        assert_eq!(
            notifier.watchdog_interval(),
            Some(Duration::from_millis(1500))
        );
    }
}
