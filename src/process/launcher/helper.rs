//! The helper process's side of the launcher: a single-threaded loop that forks a child per
//! [`Request`], reports it [`Reply::Started`] at once (without waiting for its exec), and
//! reports every child's exit. The child sets itself up and execs; if a step fails it sends
//! [`Reply::ExecFailed`] itself and exits with 127.
//!
//! The helper ignores SIGINT, SIGTERM, SIGHUP and SIGQUIT (a ^C on the daemon's terminal, or
//! systemd stopping the unit, must not take it away while the daemon still supervises jobs); it
//! exits when the daemon's end of the socket closes. The dispositions it found are restored in
//! each child, so jobs start as the daemon's own children would.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use nix::sys::signal::{SigHandler, SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use super::wire::{self, Reply, Request, Stage, MAX_REQUEST};

/// Signals the helper ignores for itself (restored in its children).
const IGNORED: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// Runs the helper until the daemon closes its end of `sock`, then exits the process.
pub(super) fn serve(sock: OwnedFd) -> ! {
    // Its command line is the daemon's; its name tells them apart in `ps -e` and `top`.
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"hb-launcher".as_ptr()) };
    // Dispositions to give back to children: the ones found, and SIGPIPE's default (Rust
    // ignores it in its own processes; std's spawn restores it too).
    let mut restore: Vec<(Signal, SigHandler)> = vec![(Signal::SIGPIPE, SigHandler::SigDfl)];
    for signal in IGNORED {
        // SAFETY: SIG_IGN installs no handler code; the process is single-threaded.
        if let Ok(old) = unsafe { nix::sys::signal::signal(signal, SigHandler::SigIgn) } {
            restore.push((signal, old));
        }
    }
    close_inherited(sock.as_raw_fd());
    raise_priority();
    crate::process::children_at_default_priority();
    let mut chld = SigSet::empty();
    chld.add(Signal::SIGCHLD);
    let exits = chld
        .thread_block()
        .ok()
        .and_then(|()| SignalFd::with_flags(&chld, SfdFlags::SFD_CLOEXEC).ok());
    let mut buf = vec![0u8; MAX_REQUEST];
    loop {
        let ready = wait_readable(sock.as_fd(), exits.as_ref().map(AsFd::as_fd));
        if ready.exits {
            if let Some(fd) = &exits {
                let _ = fd.read_signal();
            }
            report_exits(sock.as_fd());
        }
        if !ready.socket {
            continue;
        }
        match wire::receive(sock.as_fd(), &mut buf, nix::sys::socket::MsgFlags::empty()) {
            Ok((0, _)) => exit(),
            Ok((len, fds)) => launch(sock.as_fd(), &buf[..len], fds, &restore),
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::EMSGSIZE) => {}
            Err(_) => exit(),
        }
    }
}

/// Closes every descriptor the helper inherited except stdin, stdout, stderr and `keep`: above
/// all the daemon-side socket of another launcher (in tests), which would keep that helper
/// from ever seeing its daemon go.
fn close_inherited(keep: RawFd) {
    let keep = libc::c_uint::try_from(keep).unwrap_or(libc::c_uint::MAX);
    // SAFETY: close_range on this single-threaded process's own descriptors; nothing else
    // holds them (the OwnedFds in the daemon's data are never used in this process).
    unsafe {
        if keep > 3 {
            libc::syscall(libc::SYS_close_range, 3, keep - 1, 0);
        }
        libc::syscall(libc::SYS_close_range, keep + 1, libc::c_uint::MAX, 0);
    }
}

/// How much higher than the daemon the helper runs, when it may (root, or `CAP_SYS_NICE`).
const PRIORITY_BOOST: libc::c_int = 5;

/// Raises the helper's priority by [`PRIORITY_BOOST`] nice levels, if allowed and the daemon
/// is not itself running at a lowered priority. In a burst the helper competes for the CPU
/// with the jobs it has just started: at the same priority every fork waits behind them. Its
/// only work is one fork per job start, so it cannot take much from anyone; its children
/// start at the default priority (`SCHED_RESET_ON_FORK` resets a negative nice value). A
/// daemon started with a positive nice value keeps passing it on to its jobs, as before.
fn raise_priority() {
    // SAFETY: getpriority/setpriority on this process; errno is reset first as getpriority
    // may legitimately return -1.
    unsafe {
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, 0);
        if (nice == -1 && nix::errno::Errno::last_raw() != 0) || nice > 0 {
            return;
        }
        let _ = libc::setpriority(libc::PRIO_PROCESS, 0, (nice - PRIORITY_BOOST).max(-20));
    }
}

fn exit() -> ! {
    // SAFETY: ends the helper without running the daemon's exit handlers or destructors.
    unsafe { libc::_exit(0) }
}

struct Ready {
    socket: bool,
    exits: bool,
}

/// Blocks until the socket or the SIGCHLD descriptor can be read.
fn wait_readable(sock: BorrowedFd<'_>, exits: Option<BorrowedFd<'_>>) -> Ready {
    let mut fds = [
        libc::pollfd {
            fd: sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: exits.map_or(-1, |fd| fd.as_raw_fd()),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    // Without a SIGCHLD descriptor, exits are polled once a second.
    let timeout = if exits.is_some() { -1 } else { 1000 };
    // SAFETY: `fds` is a valid array of two pollfd for the duration of the call.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout) };
    if n < 0 {
        return Ready {
            socket: false,
            exits: false,
        };
    }
    Ready {
        socket: fds[0].revents != 0,
        exits: fds[1].revents != 0 || exits.is_none(),
    }
}

/// Reaps every ended child and reports it.
fn report_exits(sock: BorrowedFd<'_>) {
    loop {
        let mut status = 0;
        // SAFETY: plain waitpid on our own children.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return;
        }
        let _ = wire::send(sock, &Reply::Exited { pid, status }.encode(), &[]);
    }
}

/// Forks the child for one request and reports it.
fn launch(sock: BorrowedFd<'_>, bytes: &[u8], fds: Vec<OwnedFd>, restore: &[(Signal, SigHandler)]) {
    let Some(request) = Request::decode(bytes) else {
        return;
    };
    if fds.len() != 3 {
        let reply = Reply::ForkFailed {
            id: request.id,
            errno: libc::EINVAL,
        };
        let _ = wire::send(sock, &reply.encode(), &[]);
        return;
    }
    // Everything the child needs is prepared before the fork.
    let argv = pointers(&request.argv);
    let envp = pointers(&request.envp);
    let stdio: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    // SAFETY: the helper is single-threaded; the child only makes system calls on data
    // prepared above and then execs or exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let (stage, errno) = child(&request, &stdio, &argv, &envp, restore);
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        let _ = wire::send(sock, &Reply::ExecFailed { pid, stage, errno }.encode(), &[]);
        // SAFETY: the child ends without running the parent's exit handlers.
        unsafe { libc::_exit(127) }
    }
    let forked_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_nanos()).ok());
    drop(fds);
    let reply = if pid < 0 {
        Reply::ForkFailed {
            id: request.id,
            errno: nix::errno::Errno::last_raw(),
        }
    } else {
        // Both sides set the group, so the daemon can signal it as soon as it learns the pid.
        // SAFETY: setpgid on our own child; it fails harmlessly once the child has exec'd.
        unsafe { libc::setpgid(pid, pid) };
        Reply::Started {
            id: request.id,
            pid,
            at: forked_at.unwrap_or_default(),
        }
    };
    let _ = wire::send(sock, &reply.encode(), &[]);
}

/// A NULL-terminated array of pointers into `items` (valid while `items` lives).
fn pointers(items: &[CString]) -> Vec<*const libc::c_char> {
    items
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// The child's steps up to `execve`; returns only when one failed (with its errno).
fn child(
    request: &Request,
    stdio: &[RawFd],
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    restore: &[(Signal, SigHandler)],
) -> (Stage, i32) {
    let failed = |stage| (stage, nix::errno::Errno::last_raw());
    // SAFETY (whole block): system calls on our own process with arguments prepared before
    // the fork; the pointer arrays are NULL-terminated and point into live CStrings.
    unsafe {
        for &(signal, handler) in restore {
            let _ = nix::sys::signal::signal(signal, handler);
        }
        let _ = SigSet::empty().thread_set_mask();
        if libc::setpgid(0, 0) != 0 {
            return failed(Stage::Setup);
        }
        // Move the three descriptors above 2 first, so no dup2 below overwrites one of them.
        let mut high = [-1; 3];
        for (slot, &fd) in high.iter_mut().zip(stdio) {
            *slot = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3);
            if *slot < 0 {
                return failed(Stage::Setup);
            }
        }
        for (target, &fd) in high.iter().enumerate() {
            if libc::dup2(fd, target as RawFd) < 0 {
                return failed(Stage::Setup);
            }
        }
        if let Some(dir) = &request.cwd {
            if libc::chdir(dir.as_ptr()) != 0 {
                return failed(Stage::Chdir);
            }
        }
        if let Some((uid, gid, groups)) = &request.run_as {
            if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                || libc::setgid(*gid) != 0
                || libc::setuid(*uid) != 0
            {
                return failed(Stage::User);
            }
        }
        libc::execve(request.path.as_ptr(), argv.as_ptr(), envp.as_ptr());
    }
    failed(Stage::Exec)
}
