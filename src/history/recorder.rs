//! The daemon's writer of the history ([`Recorder`]): one thread of its own, below the
//! runtime's priority, that appends the runs handed to it in order, waits out bursts of starts
//! within a bound, and is joined at the daemon's shutdown within a bound too.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tracing::{info, warn};

use super::{History, PingUpdate, Run};

/// The daemon's writer of the history: runs are handed to one thread of their own, below the
/// runtime's priority (nice + 10), which appends them in order, a few milliseconds after each
/// run ends. While runs are starting (one began or had its process spawned less than
/// [`STARTS_QUIET`] ago, as told by [`Recorder::run_starting`]) the writer waits, at most
/// [`MOST_DEFERRED`] after a run was
/// handed over: the append's system calls, and the directory and files a job's first run
/// creates (about 1.2 ms of CPU per job on ext4), then run after a burst of spawns rather than
/// during it. When 1,000 jobs were due at one second the writer held 6-12 % of the CPU while
/// the children were still being started, at nice + 10 (docs/dev/profiles/profile-burst.md).
/// A run is handed over when it ends ([`Recorder::record`]), its pings' outcome after them
/// ([`Recorder::pinged`]), written as a [`PingUpdate`] of the number the run was given.
/// [`Recorder::finish`] (the daemon's shutdown) closes the queue, waits for what was handed
/// over and joins the thread, within a bound.
#[derive(Debug)]
pub(crate) struct Recorder {
    history: History,
    /// The writer's queue; `None` once [`Recorder::finish`] closed it.
    queue: Mutex<Option<mpsc::Sender<Message>>>,
    /// The writer thread, and what tells that it ended (its sender is dropped when the
    /// thread's function returns or unwinds); `None` once joined, or when it could not start.
    writer: Mutex<Option<(std::thread::JoinHandle<()>, mpsc::Receiver<()>)>>,
    starts: Arc<Starts>,
}

/// How long after the last run's start the writer counts the daemon as quiet.
const STARTS_QUIET: Duration = Duration::from_millis(100);
/// The longest a run handed to the writer waits for a quiet moment.
pub(super) const MOST_DEFERRED: Duration = Duration::from_secs(2);

/// When the daemon last started a run, in milliseconds since `epoch` (0: never).
#[derive(Debug)]
struct Starts {
    epoch: Instant,
    last: AtomicU64,
}

impl Starts {
    fn mark(&self) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(ms.max(1), Ordering::Relaxed);
    }

    /// Sleeps until no run started for [`STARTS_QUIET`], or until `deadline`.
    fn wait_for_quiet(&self, deadline: Instant) {
        loop {
            let last = self.last.load(Ordering::Relaxed);
            if last == 0 {
                return;
            }
            let quiet_at = self.epoch + Duration::from_millis(last) + STARTS_QUIET;
            let now = Instant::now();
            if quiet_at <= now || deadline <= now {
                return;
            }
            std::thread::sleep(quiet_at.min(deadline) - now);
        }
    }
}

/// What the writer thread is given.
enum Message {
    /// Append this run of this job, which keeps that many runs; handed over at that instant.
    Run(String, usize, Box<Run>, Instant),
    /// Append the pings of the run of this job with this id (when that run was recorded with
    /// its pings pending).
    Pinged(String, String, PingUpdate, Instant),
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Recorder {
    /// Starts the writer thread of `history`.
    pub(crate) fn start(history: History) -> Recorder {
        let (queue, received) = mpsc::channel::<Message>();
        let (ended, writer_ended) = mpsc::channel::<()>();
        let writer = history.clone();
        let starts = Arc::new(Starts {
            epoch: Instant::now(),
            last: AtomicU64::new(0),
        });
        let quiet = Arc::clone(&starts);
        let started = std::thread::Builder::new()
            .name("history".to_owned())
            .spawn(move || {
                // Dropped when this function returns or unwinds: the thread's last act.
                let _ended = ended;
                lower_priority();
                // The numbers given to runs recorded with their pings pending, by job and run
                // id, until their pings come.
                let mut pending: HashMap<(String, String), u64> = HashMap::new();
                for message in received {
                    match message {
                        Message::Run(job, limit, run, handed) => {
                            quiet.wait_for_quiet(handed + MOST_DEFERRED);
                            let id = run.run.run_id.clone().filter(|_| run.ping_pending);
                            let shared = writer.shared.as_ref().map(|_| run.clone());
                            let seq = writer.record(&job, limit, *run);
                            if let (Some(shared), Some(mut run), Some(seq)) =
                                (&writer.shared, shared, seq)
                            {
                                run.seq = seq;
                                shared.publish(&job, limit, &run);
                            }
                            if let (Some(id), Some(seq)) = (id, seq) {
                                pending.insert((job, id), seq);
                            }
                        }
                        Message::Pinged(job, id, mut update, handed) => {
                            quiet.wait_for_quiet(handed + MOST_DEFERRED);
                            if let Some(seq) = pending.remove(&(job.clone(), id)) {
                                update.update = seq;
                                writer.pinged(&job, &update);
                                if let Some(shared) = &writer.shared {
                                    shared.pinged(&job, &update);
                                }
                            }
                        }
                    }
                }
            });
        let writer = started
            .inspect_err(|err| warn!(error = %err, "cannot start the history's writer thread; runs will not be recorded"))
            .ok()
            .map(|thread| (thread, writer_ended));
        Recorder {
            history,
            queue: Mutex::new(Some(queue)),
            writer: Mutex::new(writer),
            starts,
        }
    }

    /// Says that a run is starting: the writer waits until runs stop starting (see [`Recorder`]).
    pub(crate) fn run_starting(&self) {
        self.starts.mark();
    }

    /// The history it writes.
    pub(crate) fn history(&self) -> &History {
        &self.history
    }

    /// Hands `run` of `job` (which keeps `limit` runs; 0: none) to the writer.
    pub(crate) fn record(&self, job: &str, limit: usize, run: Run) {
        if limit == 0 {
            return;
        }
        let Some(queue) = &*lock(&self.queue) else {
            return;
        };
        let _ = queue.send(Message::Run(
            job.to_owned(),
            limit,
            Box::new(run),
            Instant::now(),
        ));
    }

    /// Hands the pings of `report`'s run of `job` to the writer: recorded when the run was
    /// recorded with its pings pending.
    pub(crate) fn pinged(&self, job: &str, report: &crate::run::Report) {
        let Some(queue) = &*lock(&self.queue) else {
            return;
        };
        let _ = queue.send(Message::Pinged(
            job.to_owned(),
            report.record.run_id.text(),
            PingUpdate::of(0, report),
            Instant::now(),
        ));
    }

    /// Closes the queue (what is handed over later is dropped), waits at most `timeout` for
    /// the writer to write every run handed over so far and end, and joins it; says in the log
    /// which of the two happened. A writer that does not end in time (a hung file system) is
    /// left behind, so that it never holds up the exit of the process; true when it was joined.
    pub(crate) fn finish(&self, timeout: Duration) -> bool {
        drop(lock(&self.queue).take());
        let Some((thread, ended)) = lock(&self.writer).take() else {
            return false;
        };
        match ended.recv_timeout(timeout) {
            Err(mpsc::RecvTimeoutError::Timeout) => {
                warn!("the history's writer did not finish within {timeout:?}; the last runs may be missing from it");
                false
            }
            // Disconnected: the thread's function has returned (it sends nothing else).
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                if thread.join().is_err() {
                    warn!("the history's writer ended with a panic; the last runs may be missing from it");
                }
                info!("history writer stopped");
                true
            }
        }
    }
}

/// Puts the calling thread 10 below the daemon's priority (nice + 10, at most 19; Linux gives
/// each thread its own nice value).
fn lower_priority() {
    // The base is the main thread's: this thread may have started at 0 (the daemon's
    // SCHED_RESET_ON_FORK resets a raised priority in new threads and children).
    // SAFETY: getpriority, setpriority, getpid and gettid take plain integers and touch no
    // memory of ours. getpriority's -1 is also a valid answer; a wrong base only shifts it.
    let failed = unsafe {
        let tid = libc::gettid() as libc::id_t;
        let nice = libc::getpriority(libc::PRIO_PROCESS, libc::getpid() as libc::id_t);
        libc::setpriority(libc::PRIO_PROCESS, tid, (nice + 10).min(19))
    } != 0;
    if failed {
        tracing::debug!("cannot lower the history writer's priority");
    }
}
