//! The agent's direct children, and reaping orphans when the agent inherits them (PID 1).
//!
//! In a container the daemon, or `run` as the entrypoint of a CronJob, may be PID 1: every
//! orphaned process (a job's background grandchild whose parent exited) is reparented to it and
//! stays a zombie until it is reaped. A process a supervisor made a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`) inherits orphans the same way; [`inherits_orphans`] covers both.
//! A `waitpid(-1)` reaper would also collect the exit status of our own job processes, which
//! tokio waits for by pid: tokio would then see `ECHILD` and the run's status would be lost.
//!
//! So the reaper never waits for "any child". It scans `/proc` for zombies whose parent is
//! this process and reaps each by its pid, skipping every pid in [`Children`]' set of live job
//! processes. That is provably safe when the set is exact:
//! - a pid enters the set under the set's lock, in the same critical section as the spawn, and
//!   the reaper holds the lock for its whole scan, so it can never see a job process that
//!   exists but is not yet in the set;
//! - a pid leaves the set only after tokio has reaped it (the run's supervision returned), so
//!   while a job process can still be a zombie, it is in the set;
//! - `waitpid(pid)` for an orphan's pid cannot touch any other process's status.
//!
//! The scan runs on every SIGCHLD and every 30 s (a pid reused between tokio's reaping and
//! the set update is caught by the next scan), while jobs run, not only once they ended. Where
//! orphans go to the real init no reaper runs.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;
use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::proc_stat::Stat;
use crate::process::{self, CommandSpec, Running, SpawnError};

/// Whether orphaned processes are reparented to this one: it is PID 1 (of its namespace) or a
/// child subreaper.
pub(crate) fn inherits_orphans() -> bool {
    std::process::id() == 1 || nix::sys::prctl::get_child_subreaper().unwrap_or(false)
}

/// The process groups of running jobs (each job process leads its own group).
#[derive(Debug, Default)]
pub(crate) struct Children {
    live: Mutex<HashSet<i32>>,
    /// Whether the orphan reaper runs (PID 1): only then must a spawn and its record be one
    /// critical section; otherwise spawns on different threads need not wait for each other.
    reaping: bool,
}

impl Children {
    /// The job processes of a daemon that reaps orphans (`reaping`, as PID 1) or not.
    pub(crate) fn new(reaping: bool) -> Children {
        Children {
            live: Mutex::default(),
            reaping,
        }
    }

    /// Spawns `spec` and records its pid (in the same critical section when reaping).
    pub(crate) fn spawn(&self, spec: &CommandSpec) -> Result<Running, SpawnError> {
        let held = self.reaping.then(|| self.lock());
        let running = process::spawn(spec)?;
        let mut live = held.unwrap_or_else(|| self.lock());
        if let Ok(pid) = i32::try_from(running.pid()) {
            live.insert(pid);
        }
        Ok(running)
    }

    /// Forgets `pid` once its supervision returned (tokio reaped it).
    pub(crate) fn ended(&self, pid: u32) {
        if let Ok(pid) = i32::try_from(pid) {
            self.lock().remove(&pid);
        }
    }

    /// How many job processes are running.
    pub(crate) fn running(&self) -> usize {
        self.lock().len()
    }

    /// Sends `signal` to every running job's process group (a forced exit).
    pub(crate) fn signal_all(&self, signal: Signal) {
        for &pid in self.lock().iter() {
            let _ = nix::sys::signal::killpg(Pid::from_raw(pid), signal);
        }
    }

    /// Reaps every zombie child of this process that is not a job process; returns how many.
    pub(crate) fn reap_orphans(&self) -> usize {
        self.reap_where(|_| true)
    }

    /// [`reap_orphans`](Self::reap_orphans) limited to pids `candidate` accepts (tests share
    /// their process with other tests' children).
    fn reap_where(&self, candidate: impl Fn(i32) -> bool) -> usize {
        let live = self.lock();
        let me = i32::try_from(std::process::id()).unwrap_or(1);
        let Ok(pids) = super::proc_stat::pids() else {
            return 0;
        };
        let mut reaped = 0;
        for pid in pids {
            if live.contains(&pid) || !candidate(pid) {
                continue;
            }
            let Some(stat) = super::proc_stat::read(pid) else {
                continue;
            };
            if zombie_child_of(&stat, me)
                && waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)).is_ok()
            {
                reaped += 1;
            }
        }
        reaped
    }

    fn lock(&self) -> MutexGuard<'_, HashSet<i32>> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether the process of `stat` is a zombie whose parent is `parent`.
fn zombie_child_of(stat: &Stat, parent: i32) -> bool {
    stat.state == 'Z' && stat.ppid == parent
}

/// The reaper task (only started when [`inherits_orphans`]).
pub(crate) async fn reap(children: std::sync::Arc<Children>, cancel: CancellationToken) {
    let mut sigchld = match signal(SignalKind::child()) {
        Ok(stream) => Some(stream),
        Err(err) => {
            warn!(error = %err, "cannot watch SIGCHLD; orphans are reaped every 30 s only");
            None
        }
    };
    let mut every = tokio::time::interval(Duration::from_secs(30));
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            _ = every.tick() => {}
            Some(()) = async { match sigchld.as_mut() { Some(s) => s.recv().await, None => std::future::pending().await } } => {}
        }
        let reaped = children.reap_orphans();
        if reaped > 0 {
            debug!(reaped, "reaped orphaned processes");
        }
    }
    children.reap_orphans();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zombie_children_are_recognised() {
        let zombie_child_of =
            |text, parent| Stat::parse(text).is_some_and(|s| zombie_child_of(&s, parent));
        assert!(zombie_child_of("12 (sh) Z 40 12 12 0", 40));
        assert!(!zombie_child_of("12 (sh) S 40 12 12 0", 40));
        assert!(!zombie_child_of("12 (a) b) Z 41 12 12", 40));
        assert!(!zombie_child_of("garbage", 40));
    }

    #[tokio::test]
    async fn reaping_orphans_leaves_job_statuses_alone() {
        // A job that exits at once, and a plain child of ours (standing in for an orphan).
        let children = Children::new(true);
        let spec = CommandSpec::from_argv(&["sh", "-c", "exit 7"]).expect("argv");
        let running = children.spawn(&spec).expect("spawn");
        let pid = running.pid();
        // Reaped below by the code under test, so never waited for here.
        #[allow(clippy::zombie_processes)]
        let orphan = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        // Both are zombies now; the reaper must take the orphan only.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut reaped = 0;
        while reaped == 0 && std::time::Instant::now() < deadline {
            let ours = |p: i32| p == pid as i32 || p == orphan.id() as i32;
            reaped += children.reap_where(ours);
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(reaped, 1);
        let proc_gone = !std::path::Path::new(&format!("/proc/{}", orphan.id())).exists();
        assert!(proc_gone, "the orphan stand-in was reaped");
        let (_tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let outcome = running
            .supervise(
                process::Limits {
                    timeout: None,
                    kill_after: Duration::from_secs(1),
                },
                rx,
            )
            .await;
        children.ended(pid);
        assert_eq!(
            outcome.end,
            process::RunEnd::Ended(process::ProcessEnd::Exited(7))
        );
        assert_eq!(children.running(), 0);
    }
}
