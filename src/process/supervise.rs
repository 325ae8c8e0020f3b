//! Supervising a started child to its end: forwarding signals to its group, enforcing a timeout
//! with SIGTERM then SIGKILL, and cleaning up the group after a timeout or a stop.
//!
//! Leftover processes: when the supervisor itself ended the command (timeout or
//! [`ChildControl::Stop`]), nothing of the group may outlive the run, so after the child is reaped
//! the group gets until the kill deadline to empty and is then killed with SIGKILL. coreutils
//! `timeout` signals the group but exits as soon as its child does, leaving stragglers (such as
//! `sleep 300 &`) running; a monitor must not do that. When the command ends on its own, a
//! background process it started on purpose is left alone, as cron does.

use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::proc_stat::Stat;
use super::{Running, Tail, PIPE_GRACE};
use crate::run_end::{ProcessEnd, RunEnd};

/// Limits on one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// After this long the group gets SIGTERM; `None` lets it run as long as it wants.
    pub timeout: Option<Duration>,
    /// How long after that SIGTERM until SIGKILL.
    pub kill_after: Duration,
}

/// Requests to the supervisor while the child runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChildControl {
    /// Send this signal to the child's group (the wrapper received it).
    Forward(Signal),
    /// Stop the run: SIGTERM to the group, SIGKILL after `grace` (daemon shutdown).
    Stop {
        /// Time between SIGTERM and SIGKILL.
        grace: Duration,
    },
}

/// Where the supervisor's requests come from while the child runs: the one select loop of
/// [`Running::supervise`] asks for the next one beside the child's end, the timeout and the
/// kill deadline. `None`: no request will come any more.
pub(crate) trait ChildRequests: Send {
    /// The next request; must be cancel-safe (the supervisor drops it when something else
    /// happens first, and asks again).
    fn next(&mut self) -> impl std::future::Future<Output = Option<ChildControl>> + Send;
}

impl ChildRequests for UnboundedReceiver<ChildControl> {
    fn next(&mut self) -> impl std::future::Future<Output = Option<ChildControl>> + Send {
        self.recv()
    }
}

/// How a supervised run ended.
#[derive(Debug, Clone)]
pub(crate) struct ChildOutcome {
    /// How it ended: by itself, at its timeout or by a stop, and how its process ended.
    pub end: RunEnd,
    /// Wall time from the start of supervision to the child's end.
    pub elapsed: Duration,
    /// The last output, when captured ([`super::Io::Capture`], [`super::Io::Tee`]).
    pub tail: Option<Tail>,
}

/// Who, besides the command itself, was ending the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// It ran past [`Limits::timeout`].
    TimedOut,
    /// A [`ChildControl::Stop`] ended it.
    Stopped,
}

/// `killpg(group, signal)`; a group that is already gone is not an error.
pub(super) fn signal_group(group: Pid, signal: Signal) -> nix::Result<()> {
    match killpg(group, signal) {
        Err(Errno::ESRCH) | Ok(()) => Ok(()),
        Err(err) => Err(err),
    }
}

fn send(group: Pid, signal: Signal) {
    if let Err(err) = signal_group(group, signal) {
        warn!(pgid = group.as_raw(), signal = %signal, error = %err, "cannot signal the command's process group");
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What ended the wait for the child: its status, whether and why the supervisor was ending
/// it (and when SIGKILL was due), and whether SIGKILL was sent.
struct Waited {
    status: std::io::Result<std::process::ExitStatus>,
    ending: Option<(Ending, Instant)>,
    killed: bool,
}

impl Running {
    /// Waits for the child to end, obeying `limits` and the requests of `control`; see the
    /// module documentation for what happens to the rest of its process group.
    pub(crate) async fn supervise(
        mut self,
        limits: Limits,
        control: impl ChildRequests,
    ) -> ChildOutcome {
        let group = self.pid;
        let started = Instant::now();
        // Captured output is read here, alongside the wait, rather than by tasks of its own.
        let mut capture = self.tail.take();
        let mut output = Output {
            capture: capture.as_mut(),
        };
        let waited = output
            .alongside(wait(&mut self.child, group, limits, control))
            .await;
        let elapsed = started.elapsed();
        // Give the terminal back before anything else can print.
        drop(self.terminal.take());
        let end = match waited.status {
            Ok(status) => ProcessEnd::from_status(status),
            Err(err) => {
                warn!(error = %err, "cannot get the command's exit status");
                ProcessEnd::Exited(1)
            }
        };
        let killed = waited.killed;
        let end = match waited.ending {
            Some((why, deadline)) => {
                output.alongside(sweep_group(group, deadline)).await;
                match why {
                    Ending::TimedOut => RunEnd::TimedOut { end, killed },
                    Ending::Stopped => RunEnd::Stopped {
                        end: Some(end),
                        killed,
                    },
                }
            }
            None => RunEnd::Ended(end),
        };
        // A background grandchild may hold the pipes open forever: read on only briefly.
        if let Some(capture) = output.capture.take() {
            let _ = tokio::time::timeout(PIPE_GRACE, capture.pump()).await;
        }
        let tail = match self.tee.take() {
            Some(tee) => Some(tee.finish().await),
            None => capture.map(super::tail::Capture::into_tail),
        };
        ChildOutcome { end, elapsed, tail }
    }
}

/// Waits for `child` to end, sending SIGTERM at the timeout and SIGKILL after the grace, and
/// obeying `control`.
async fn wait(
    child: &mut super::child::Child,
    group: Pid,
    limits: Limits,
    mut control: impl ChildRequests,
) -> Waited {
    let timeout_at = limits.timeout.map(|t| Instant::now() + t);
    // Set once the supervisor starts ending the run: why, and when SIGKILL follows.
    let mut ending: Option<(Ending, Instant)> = None;
    let mut killed = false;
    let mut control_open = true;
    loop {
        let kill_at = ending.map(|(_, at)| at).filter(|_| !killed);
        tokio::select! {
            status = child.wait() => return Waited { status, ending, killed },
            () = sleep_until(timeout_at), if ending.is_none() && timeout_at.is_some() => {
                debug!(pgid = group.as_raw(), "timeout: sending SIGTERM to the group");
                send(group, Signal::SIGTERM);
                ending = Some((Ending::TimedOut, Instant::now() + limits.kill_after));
            }
            () = sleep_until(kill_at), if kill_at.is_some() => {
                debug!(pgid = group.as_raw(), "grace over: sending SIGKILL to the group");
                send(group, Signal::SIGKILL);
                killed = true;
            }
            msg = control.next(), if control_open => match msg {
                None => control_open = false,
                Some(ChildControl::Forward(signal)) => send(group, signal),
                Some(ChildControl::Stop { grace }) if ending.is_none() => {
                    send(group, Signal::SIGTERM);
                    ending = Some((Ending::Stopped, Instant::now() + grace));
                }
                Some(ChildControl::Stop { .. }) => {}
            },
        }
    }
}

/// The captured output of a run (if any), read while the supervisor does other work.
struct Output<'a> {
    /// `None` without capture, or once both pipes are closed.
    capture: Option<&'a mut super::tail::Capture>,
}

impl Output<'_> {
    /// Runs `work` to its end, reading output meanwhile (reading is cancel-safe: what was read
    /// is kept when `work` ends first).
    async fn alongside<T>(&mut self, work: impl std::future::Future<Output = T>) -> T {
        let Some(capture) = self.capture.as_deref_mut() else {
            return work.await;
        };
        tokio::pin!(work);
        {
            let pump = capture.pump();
            tokio::pin!(pump);
            tokio::select! {
                out = &mut work => return out,
                () = &mut pump => {}
            }
        }
        // Both pipes are closed: nothing more to read.
        self.capture = None;
        work.await
    }
}

/// After the supervisor ended a run and its leader was reaped: waits until no process of the
/// group is left or `deadline` passes, then kills what remains.
async fn sweep_group(group: Pid, deadline: Instant) {
    const POLL: Duration = Duration::from_millis(20);
    const KILL_SETTLE: Duration = Duration::from_millis(500);
    loop {
        if !group_alive(group) {
            return;
        }
        if Instant::now() >= deadline {
            debug!(pgid = group.as_raw(), "killing what is left of the group");
            send(group, Signal::SIGKILL);
            // SIGKILL is not instant: wait (briefly) until the kernel and their new parent
            // have done away with them, so "ended" really means gone.
            let gone_by = Instant::now() + KILL_SETTLE;
            while group_alive(group) && Instant::now() < gone_by {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            return;
        }
        tokio::time::sleep(POLL.min(deadline - Instant::now())).await;
    }
}

/// Whether a process of `group` is still alive. Zombies do not count: they are dead, and an init
/// that is slow to reap them (a container's PID 1) would otherwise hold every sweep to its
/// deadline.
pub(super) fn group_alive(group: Pid) -> bool {
    // Signal 0 only checks for existence; ESRCH means the group is empty.
    if let Err(Errno::ESRCH) = killpg(group, None) {
        return false;
    }
    let Ok(pids) = super::proc_stat::pids() else {
        return true;
    };
    pids.filter_map(super::proc_stat::read)
        .any(|stat| live_member(&stat, group.as_raw()))
}

/// Whether the process of `stat` is a live member of `group`.
fn live_member(stat: &Stat, group: i32) -> bool {
    stat.pgrp == group && !stat.ended()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_is_parsed_past_odd_names() {
        let live_member = |text, group| Stat::parse(text).is_some_and(|s| live_member(&s, group));
        assert!(live_member("12 (a b) c) S 1 40 40 0", 40));
        assert!(!live_member("12 (sleep) Z 1 40 40 0", 40));
        assert!(!live_member("12 (sleep) S 1 41 41 0", 40));
        assert!(!live_member("garbage", 40));
    }
}
