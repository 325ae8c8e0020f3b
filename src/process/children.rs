//! The agent's direct children, and reaping orphans when the agent inherits them (PID 1).
//!
//! In a container the daemon, or `run` as the entrypoint of a CronJob, may be PID 1: every
//! orphaned process (a job's background grandchild whose parent exited) is reparented to it and
//! stays a zombie until it is reaped. A process a supervisor made a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`) inherits orphans the same way; [`inherits_orphans`] covers both.
//! A `waitpid(-1)` reaper would also collect the exit status of our own job processes, which
//! their supervisors wait for by pid ([`super::child`]): they would then see `ECHILD` and the
//! run's status would be lost.
//!
//! So the reaper never waits for "any child". It scans `/proc` for zombies whose parent is
//! this process and reaps each by its pid, skipping every pid in [`Children`]' set of live job
//! processes. That is provably safe when the set is exact:
//! - a pid enters the set under the set's lock, in the same critical section as the spawn, and
//!   the reaper holds the lock for its whole scan, so it can never see a job process that
//!   exists but is not yet in the set;
//! - a pid leaves the set only after its supervisor reaped it (the run's supervision returned), so
//!   while a job process can still be a zombie, it is in the set;
//! - `waitpid(pid)` for an orphan's pid cannot touch any other process's status.
//!
//! The scan runs on every SIGCHLD and every 30 s (a pid reused between tokio's reaping and
//! the set update is caught by the next scan), while jobs run, not only once they ended. Where
//! orphans go to the real init no reaper runs.
//!
//! **The spawner threads.** The daemon starts its job processes from threads of their own
//! ([`Children::spawn_on_spawner`]), while the runtime's workers only prepare runs and finish
//! them. Every new process starts with a copy of the daemon's descriptor table and closes, at
//! its `exec`, every descriptor it copied; each run in progress holds three (its two pipes and
//! its pidfd). When the workers spawned themselves, a burst of 1,000 runs due at one second
//! queued every fire ahead of the ends of the runs already finished, so the table grew to 1,876
//! descriptors and the children's close-on-exec took 30 % of the daemon's side of the burst
//! (`perf`, docs/dev/profiles/profile-burst.md). With the spawns off the workers, the workers
//! read each ended run's pipes and reap it while the next ones start, and the table holds
//! little more than the runs still in progress (at most 97 in the same burst). As many threads
//! as cores, at most 4: each waits while its child reaches `exec` (glibc's `posix_spawn` is a
//! vfork), so two spawn side by side on two cores; one thread was slower than the workers' own
//! spawns (BENCHMARKS.md). Requests are taken in order; a request whose caller went away (its
//! run was cancelled) is dropped unspawned.

use std::collections::HashSet;
use std::sync::{mpsc, Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::oneshot;
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

    /// [`spawn`](Self::spawn) on a spawner thread (see the module's header), or inline when
    /// no such thread could be started. Must be called inside a tokio runtime.
    pub(crate) async fn spawn_on_spawner(
        self: &Arc<Self>,
        spec: CommandSpec,
    ) -> Result<Running, SpawnError> {
        let (answer, answered) = oneshot::channel();
        let program = spec.program.clone();
        let request = Request {
            children: Arc::clone(self),
            spec,
            runtime: tokio::runtime::Handle::current(),
            answer,
        };
        let request = match spawner() {
            Some(spawner) => match spawner.send(request) {
                Ok(()) => None,
                Err(mpsc::SendError(request)) => Some(request),
            },
            None => Some(request),
        };
        if let Some(request) = request {
            request.serve();
        }
        answered.await.unwrap_or_else(|_| {
            // Only when a spawner thread died mid-request (a panic): nothing was started.
            Err(SpawnError::Other {
                program: program.to_string_lossy().into_owned(),
                source: std::io::Error::other("the daemon's spawner thread stopped"),
            })
        })
    }

    /// Forgets `pid` once its supervision returned (its supervisor reaped it).
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
        lock(&self.live)
    }
}

/// A spawn asked of the spawner threads.
struct Request {
    children: Arc<Children>,
    spec: CommandSpec,
    /// The caller's runtime: a child's pidfd and pipes register with its reactor.
    runtime: tokio::runtime::Handle,
    answer: oneshot::Sender<Result<Running, SpawnError>>,
}

impl Request {
    /// Spawns, unless the caller went away; a process whose caller went away in the meantime
    /// is left to run unsupervised, as it would have been had the caller gone after the spawn.
    fn serve(self) {
        if self.answer.is_closed() {
            return;
        }
        let _entered = self.runtime.enter();
        let _ = self.answer.send(self.children.spawn(&self.spec));
    }
}

/// Starts the spawner threads now (they start at the first spawn otherwise). The daemon calls
/// it from its main thread before anything sets `SCHED_RESET_ON_FORK`, which a thread's new
/// threads inherit: started later, from a runtime worker, the spawners would run at the
/// default priority instead of the daemon's.
pub(crate) fn start_spawners() {
    spawner();
}

/// The spawner threads' queue, started at the first request; `None` when no thread could be
/// started (then every spawn is inline).
fn spawner() -> Option<&'static mpsc::Sender<Request>> {
    // One per process: the spawner threads are the process's, started before its runtime.
    static SPAWNER: OnceLock<Option<mpsc::Sender<Request>>> = OnceLock::new();
    SPAWNER
        .get_or_init(|| {
            let (queue, requests) = mpsc::channel::<Request>();
            let requests = Arc::new(Mutex::new(requests));
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
            let started = (0..threads)
                .filter(|_| {
                    let requests = Arc::clone(&requests);
                    std::thread::Builder::new()
                        .name("spawner".into())
                        .stack_size(256 * 1024)
                        .spawn(move || {
                            process::children_at_default_priority();
                            loop {
                                // Held while waiting for a request, not while serving it.
                                let next = lock(&requests).recv();
                                let Ok(request) = next else { break };
                                request.serve();
                            }
                        })
                        .map_err(|err| warn!(error = %err, "cannot start a spawner thread"))
                        .is_ok()
                })
                .count();
            (started > 0).then_some(queue)
        })
        .as_ref()
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
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
            crate::run_end::RunEnd::Ended(crate::run_end::ProcessEnd::Exited(7))
        );
        assert_eq!(children.running(), 0);
    }

    /// Runs `count` jobs through the spawner threads at once, on a new runtime of the given
    /// flavour, and returns each one's exit code and captured output.
    fn spawn_many_on_spawner(count: usize, multi_thread: bool) -> Vec<(Option<i32>, String)> {
        let mut builder = if multi_thread {
            tokio::runtime::Builder::new_multi_thread()
        } else {
            tokio::runtime::Builder::new_current_thread()
        };
        let runtime = builder
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let children = Arc::new(Children::new(false));
            let runs = (0..count).map(|n| {
                let children = Arc::clone(&children);
                tokio::spawn(async move {
                    let script = format!("echo out-{n}; echo err-{n} >&2; exit {}", n % 3);
                    let mut spec = CommandSpec::from_argv(&["sh", "-c", &script]).expect("argv");
                    spec.io = process::Io::Capture { tail_bytes: 256 };
                    let running = children.spawn_on_spawner(spec).await.expect("spawn");
                    let pid = running.pid();
                    let (_tx, rx) = tokio::sync::mpsc::unbounded_channel();
                    let limits = process::Limits {
                        timeout: Some(Duration::from_secs(20)),
                        kill_after: Duration::from_secs(1),
                    };
                    let outcome = running.supervise(limits, rx).await;
                    children.ended(pid);
                    let tail = outcome.tail.expect("captured").text();
                    (outcome.end.exit_code(), tail)
                })
            });
            let mut ended = Vec::new();
            for run in runs.collect::<Vec<_>>() {
                ended.push(run.await.expect("run task"));
            }
            assert_eq!(children.running(), 0);
            ended
        })
    }

    #[test]
    fn the_spawner_threads_serve_each_callers_runtime_and_every_run_ends_as_its_process_did() {
        // Two runtimes one after the other: the spawner threads must register each
        // process with the runtime that asked for it (the first is gone when the second asks).
        for (count, multi_thread) in [(40, false), (200, true)] {
            let ended = spawn_many_on_spawner(count, multi_thread);
            assert_eq!(ended.len(), count);
            for (n, (code, output)) in ended.iter().enumerate() {
                assert_eq!(
                    *code,
                    Some(i32::try_from(n % 3).unwrap()),
                    "run {n}: {output}"
                );
                assert!(
                    output.contains(&format!("out-{n}\n")),
                    "run {n}: {output:?}"
                );
                assert!(
                    output.contains(&format!("err-{n}\n")),
                    "run {n}: {output:?}"
                );
            }
        }
    }
}
