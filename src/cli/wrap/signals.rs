//! The signals `run` receives while its command runs: which are forwarded to the command's
//! process group, and which stop the final ping (docs/run.md, "Signals").

use super::*;

/// Whether `signal` is currently ignored (SIG_IGN) by this process.
fn ignored(signal: Signal) -> bool {
    // SAFETY: a query only (null new action); `old` is plain data filled by the kernel.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal as libc::c_int, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_IGN
    }
}

/// The signals `run` forwards to the command's group: every signal a process is sent to be told
/// something, so that a command's own handlers (SIGUSR1 to reopen logs, SIGHUP to reload) work
/// through the wrapper as they would without it, and no signal kills the wrapper and orphans the
/// command. Left alone: SIGCHLD (the wrapper's own), job control (SIGTSTP, SIGTTIN, SIGTTOU,
/// SIGCONT keep their meaning for a shell), faults and resource limits the kernel raises for the
/// wrapper itself (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT, SIGXCPU, SIGXFSZ),
/// the uncatchable SIGKILL and SIGSTOP, and the real-time signals. A signal ignored at start is
/// not forwarded (the command inherits the ignoring).
const FORWARDED: [Signal; 13] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGALRM,
    Signal::SIGVTALRM,
    Signal::SIGPROF,
    Signal::SIGWINCH,
    Signal::SIGURG,
    Signal::SIGIO,
    Signal::SIGPWR,
];

/// Of [`FORWARDED`], the signals that ask the wrapper itself to stop once the command ended.
const STOPPING: [Signal; 4] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// The [`FORWARDED`] signals, installed before the command starts, so none is lost (or kills
/// the wrapper) in between.
pub(super) struct Signals {
    streams: Vec<(Signal, tokio::signal::unix::Signal)>,
    /// Whether a [`STOPPING`] signal was received: no further attempt of the command starts.
    stop_received: bool,
}

impl Signals {
    pub(super) fn install() -> Signals {
        let mut streams = Vec::with_capacity(FORWARDED.len());
        for signal in FORWARDED {
            if ignored(signal) {
                // Started with it ignored (nohup, `cmd &` in a script): leave it so, and the
                // command inherits the ignoring, as under a shell.
                continue;
            }
            match tokio::signal::unix::signal(SignalKind::from_raw(signal as libc::c_int)) {
                Ok(stream) => streams.push((signal, stream)),
                Err(err) => warn!(signal = %signal, error = %err, "cannot forward this signal"),
            }
        }
        Signals {
            streams,
            stop_received: false,
        }
    }

    /// Whether a [`STOPPING`] signal was received since the signals were installed.
    pub(super) fn stop_received(&self) -> bool {
        self.stop_received
    }

    /// The next [`STOPPING`] signal received; the others are read and dropped (the command
    /// they were for has ended).
    pub(super) async fn recv_stop(&mut self) -> Signal {
        loop {
            let signal = self.recv().await;
            if STOPPING.contains(&signal) {
                return signal;
            }
            debug!(signal = %signal, "ignored: the command has ended");
        }
    }

    /// The next signal received (pending forever when none could be installed).
    pub(super) async fn recv(&mut self) -> Signal {
        let signal = std::future::poll_fn(|cx| {
            for (signal, stream) in &mut self.streams {
                if let Poll::Ready(Some(())) = stream.poll_recv(cx) {
                    return Poll::Ready(*signal);
                }
            }
            Poll::Pending
        })
        .await;
        self.stop_received |= STOPPING.contains(&signal);
        signal
    }
}

/// While the command runs, every signal received is forwarded to its process group.
impl crate::process::ChildRequests for &mut Signals {
    async fn next(&mut self) -> Option<crate::process::ChildControl> {
        let signal = self.recv().await;
        debug!(signal = %signal, "forwarding to the command's process group");
        Some(crate::process::ChildControl::Forward(signal))
    }
}
