//! A started child as the supervisor holds it: its pid, what tells the runtime that it ended,
//! and the read ends of its stdout and stderr pipes when they are not inherited.
//!
//! The end of the child is watched through a pidfd (`pidfd_open`, Linux 5.3), which becomes
//! readable when the child ends and is waited for on the runtime's reactor like a socket; where
//! the kernel has no pidfd (older kernels, some sandboxes), every `SIGCHLD` makes each waiting
//! child look again, as tokio's own process driver does. Either way the child is reaped by its
//! pid (`waitpid(pid)`), never as "any child": the orphan reaper of [`super::children`] relies
//! on that.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::signal::unix::{signal, Signal, SignalKind};

/// A child process and its captured pipes (the write ends are the child's alone).
#[derive(Debug)]
pub(crate) struct Child {
    pid: libc::pid_t,
    exit: Exit,
    /// Its exit status, once reaped.
    status: Option<ExitStatus>,
    /// The read end of its stdout pipe, when stdout is captured (blocking).
    pub(super) stdout: Option<OwnedFd>,
    /// The read end of its stderr pipe, when stderr is captured (blocking).
    pub(super) stderr: Option<OwnedFd>,
}

/// How the end of the child becomes known.
#[derive(Debug)]
enum Exit {
    /// Its pidfd, readable once it ended.
    Pidfd(AsyncFd<OwnedFd>),
    /// `SIGCHLD`, for any child: look again at each.
    Signal(Signal),
}

impl Child {
    /// The child `pid` (just started, not reaped) with its pipes. Must be called inside a
    /// tokio runtime.
    pub(super) fn new(
        pid: libc::pid_t,
        stdout: Option<OwnedFd>,
        stderr: Option<OwnedFd>,
    ) -> io::Result<Child> {
        let exit = match pidfd_open(pid) {
            // SAFETY: an OwnedFd is a valid open descriptor that stays the same until dropped.
            Ok(fd) => Exit::Pidfd(
                unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
                    .map_err(|err| err.into_parts().1)?,
            ),
            Err(_) => Exit::Signal(signal(SignalKind::child())?),
        };
        Ok(Child {
            pid,
            exit,
            status: None,
            stdout,
            stderr,
        })
    }

    /// The child's pid.
    pub(crate) fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Watches for the end by `SIGCHLD`, as where the kernel has no pidfd (tests that path).
    #[cfg(test)]
    pub(super) fn watch_sigchld_only(&mut self) -> io::Result<()> {
        self.exit = Exit::Signal(signal(SignalKind::child())?);
        Ok(())
    }

    /// Waits for the child to end and reaps it. Cancel-safe: a status reaped is kept.
    pub(super) async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        loop {
            match &mut self.exit {
                Exit::Pidfd(fd) => {
                    let mut ready = fd.readable().await?;
                    if let Some(status) = reap(self.pid)? {
                        self.status = Some(status);
                        return Ok(status);
                    }
                    ready.clear_ready();
                }
                Exit::Signal(sigchld) => {
                    // The stream counts every SIGCHLD since it was made, so an end between
                    // this look and the wait below is not missed.
                    if let Some(status) = reap(self.pid)? {
                        self.status = Some(status);
                        return Ok(status);
                    }
                    sigchld.recv().await;
                }
            }
        }
    }
}

/// `pidfd_open(pid, 0)`: a descriptor that becomes readable when `pid` ends (close-on-exec).
fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: a plain system call with integer arguments; on success it returns a new
    // descriptor that nothing else owns.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(|_| io::Error::other("pidfd out of range"))?;
    // SAFETY: `fd` was just returned by the kernel and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `waitpid(pid, WNOHANG)`: its status once it ended, `None` while it runs.
fn reap(pid: libc::pid_t) -> io::Result<Option<ExitStatus>> {
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child `pid` only, writing into a local.
        let got = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        match got {
            0 => return Ok(None),
            n if n == pid => return Ok(Some(ExitStatus::from_raw(status))),
            _ => {
                let err = io::Error::last_os_error();
                if err.kind() != io::ErrorKind::Interrupted {
                    return Err(err);
                }
            }
        }
    }
}

/// Makes `fd` (a pipe's read end) non-blocking, for the runtime's reactor.
pub(super) fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: F_SETFL on a descriptor we own; a pipe's read end has no other status flag that
    // F_SETFL could clear.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
