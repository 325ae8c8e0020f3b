//! What the daemon knows about each job while it runs: the last run, the next fire, the last
//! ping, the runs and skips so far; the main loop's liveness beat, the reloads by result and
//! the last failed reload's problems (readers outside `daemon/` get copies through [`super::view`]). What it keeps across
//! restarts under `state_dir`: the last fire time of `catch_up` jobs and the boot id an
//! `@reboot` job last ran in; and the pauses of `<state_dir>/pause.json`, held in memory
//! ([`crate::pause::LivePauses`]).
//!
//! Files (all small, written with [`crate::persist::file::write_atomic`], so a crash leaves the
//! old or the new one; directories created 0700):
//! - `<state_dir>/daemon/fires/<job>`: RFC 3339 time of the last fire (only `catch_up` jobs, so
//!   thousands of frequent jobs do not write a file per run);
//! - `<state_dir>/daemon/reboot/<job>`: the boot id (`/proc/sys/kernel/random/boot_id`) of the
//!   boot in which the `@reboot` job last ran.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::Notify;

use super::view::{Beat, JobView, ReloadError};
use crate::pause::LivePauses;
use crate::run::admission::Gate;
use crate::run::{PingRecord, RunRecord};
use crate::run_end::RunOutcome;

/// Where the kernel publishes the id of the current boot.
const BOOT_ID_FILE: &str = "/proc/sys/kernel/random/boot_id";

/// The part of a job's state behind the lock (what [`JobView`] copies).
#[derive(Debug, Default)]
struct Records {
    /// When the next run starts: the next fire time plus the job's stable jitter.
    next_fire: Option<DateTime<Utc>>,
    /// The most recent run, shared with the views that copied it.
    last_run: Option<Arc<RunRecord>>,
    /// The most recent ping.
    last_ping: Option<PingRecord>,
    /// When a fire was last skipped because the previous run still ran.
    last_skipped: Option<DateTime<Utc>>,
    /// The outcomes of the last [`RECENT`] runs, oldest first (from the history at start).
    recent: VecDeque<RunOutcome>,
}

/// How many outcomes a job's strip shows (`status`, the dashboard).
pub(crate) const RECENT: usize = 20;

/// One job's live state, shared by its scheduling task, its runs and the daemon's view.
#[derive(Debug, Default)]
pub(super) struct JobState {
    records: Mutex<Records>,
    /// Runs in progress (more than one only with `overlap = "allow"`).
    running: AtomicUsize,
    /// Runs finished (not counting skips).
    runs: AtomicU64,
    /// Fires skipped because a run was still going, or the job was paused with `--stop-jobs`.
    skipped: AtomicU64,
    /// Set once "no ping URL learned for the check" was logged, so it is not repeated per run.
    pub(super) warned_no_url: AtomicBool,
    /// Wakes the job's task: a run was asked for ([`JobState::request_run`]), a run ended (a
    /// queued fire may start), or the wall clock stepped ([`JobState::clock_stepped`]). One
    /// notification for the three, and [`JobState::wake_for`] says which: the task waits on one
    /// `Notified` instead of three and a clock subscription, which keeps each job's task
    /// (alive for the job's life) one 128-byte block smaller.
    wake: Notify,
    /// Why [`JobState::wake`] was signalled since the task last looked: [`Wake`] bits.
    wake_for: AtomicU8,
    /// Held by each run whose `overlap` is not `allow`, from its admission to its end: the
    /// overlap rule looks at runs that really go, not at fires still being decided.
    pub(super) gate: Gate,
}

/// Why a job's task was woken ([`JobState::woken`]): any of three reasons, together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Wake(u8);

impl Wake {
    /// `POST /jobs/{name}/run`: fire once now.
    pub(super) const RUN_REQUESTED: Wake = Wake(1);
    /// A run ended: a queued fire may start.
    pub(super) const RUN_ENDED: Wake = Wake(2);
    /// The wall clock stepped (or the machine slept): recompute the next fire.
    pub(super) const CLOCK_STEPPED: Wake = Wake(4);

    /// Whether `why` is among the reasons.
    pub(super) fn has(self, why: Wake) -> bool {
        self.0 & why.0 != 0
    }
}

impl JobState {
    /// A copy of the job's state now: a run's or a skip's record and its count change together
    /// under the lock, so a view never shows one without the other.
    pub(super) fn view(&self) -> JobView {
        let records = lock(&self.records);
        JobView {
            next_fire: records.next_fire,
            last_run: records.last_run.clone(),
            last_ping: records.last_ping.clone(),
            last_skipped: records.last_skipped,
            recent: records.recent.iter().copied().collect(),
            running: self.running(),
            runs: self.runs.load(Ordering::Relaxed),
            skipped: self.skipped.load(Ordering::Relaxed),
        }
    }

    /// How many runs are in progress.
    pub(super) fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// Asks the job's scheduling task to fire now (outside the schedule), under the job's
    /// overlap rule. Does nothing for jobs without a task (external or disabled ones).
    pub(super) fn request_run(&self) {
        self.wake(Wake::RUN_REQUESTED);
    }

    /// Tells the job's task that the wall clock stepped, so it recomputes its next fire.
    pub(super) fn clock_stepped(&self) {
        self.wake(Wake::CLOCK_STEPPED);
    }

    /// Wakes the job's task for `why` (kept until the task looks, as the wake-up itself).
    fn wake(&self, why: Wake) {
        self.wake_for.fetch_or(why.0, Ordering::SeqCst);
        self.wake.notify_one();
    }

    /// Waits until the job's task is woken, and returns every reason since it last looked.
    pub(super) async fn woken(&self) -> Wake {
        self.wake.notified().await;
        Wake(self.wake_for.swap(0, Ordering::SeqCst))
    }

    pub(super) fn set_next_fire(&self, next: Option<DateTime<Utc>>) {
        lock(&self.records).next_fire = next;
    }

    pub(super) fn run_started(&self) {
        self.running.fetch_add(1, Ordering::SeqCst);
    }

    pub(super) fn run_finished(&self, record: Arc<RunRecord>) {
        let mut records = lock(&self.records);
        push_recent(&mut records.recent, record.outcome);
        records.last_run = Some(record);
        self.runs.fetch_add(1, Ordering::Relaxed);
        self.running.fetch_sub(1, Ordering::SeqCst);
        drop(records);
        self.wake(Wake::RUN_ENDED);
    }

    /// Seeds the strip with the outcomes of earlier runs (oldest first), before any run.
    pub(super) fn seed_recent(&self, outcomes: impl IntoIterator<Item = RunOutcome>) {
        let mut records = lock(&self.records);
        for outcome in outcomes {
            push_recent(&mut records.recent, outcome);
        }
    }

    pub(super) fn record_skip(&self, at: DateTime<Utc>) {
        let mut records = lock(&self.records);
        records.last_skipped = Some(at);
        self.skipped.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn record_ping(&self, ping: PingRecord) {
        lock(&self.records).last_ping = Some(ping);
    }
}

/// Adds `outcome` to a job's strip, dropping the oldest beyond [`RECENT`].
fn push_recent(recent: &mut VecDeque<RunOutcome>, outcome: RunOutcome) {
    if recent.len() == RECENT {
        recent.pop_front();
    }
    recent.push_back(outcome);
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Every job's state by name, what [`super::view::DaemonView`] reads. Jobs removed by a reload
/// are dropped from it; unchanged and changed jobs keep their entry.
#[derive(Debug, Default)]
pub(super) struct DaemonState {
    jobs: RwLock<BTreeMap<String, Arc<JobState>>>,
    /// When the main loop last made progress (Unix ms) and its tick interval (ms): liveness.
    beat: AtomicU64,
    beat_interval: AtomicU64,
    /// Reloads since start by result: `ok`, then `invalid` (the running config kept).
    reloads: [AtomicU64; 2],
    /// Why the last reload failed, until one succeeds.
    reload_error: Mutex<Option<ReloadError>>,
}

impl DaemonState {
    /// When the daemon's main loop (which controls scheduling) last ticked, and how often it
    /// ticks (`None` before the first tick).
    pub(super) fn last_beat(&self) -> Option<Beat> {
        let at = self.beat.load(Ordering::Relaxed);
        let at = DateTime::from_timestamp_millis(i64::try_from(at).ok()?).filter(|_| at > 0)?;
        Some(Beat {
            at,
            every: Duration::from_millis(self.beat_interval.load(Ordering::Relaxed)),
        })
    }

    pub(super) fn beat(&self, interval: Duration) {
        let now = u64::try_from(Utc::now().timestamp_millis()).unwrap_or(0);
        self.beat_interval.store(
            u64::try_from(interval.as_millis()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        self.beat.store(now, Ordering::Relaxed);
    }

    /// Counts one reload: `Ok` or, with its problems, invalid; keeps the problems of a failed
    /// one until a reload succeeds.
    pub(super) fn count_reload(&self, result: Result<(), &[String]>) {
        self.reloads[usize::from(result.is_err())].fetch_add(1, Ordering::Relaxed);
        *lock(&self.reload_error) = result.err().map(|problems| ReloadError {
            at: Utc::now(),
            problems: problems.to_vec(),
        });
    }

    /// Why the last reload failed, if no reload succeeded since.
    pub(super) fn last_reload_error(&self) -> Option<ReloadError> {
        lock(&self.reload_error).clone()
    }

    /// Reloads so far by result, both results always present (`ok`, then `invalid`).
    pub(super) fn reload_counts(&self) -> [(&'static str, u64); 2] {
        let n = |i: usize| self.reloads[i].load(Ordering::Relaxed);
        [("ok", n(0)), ("invalid", n(1))]
    }

    /// The state of job `name`, if it is configured.
    pub(super) fn job(&self, name: &str) -> Option<Arc<JobState>> {
        self.read().get(name).cloned()
    }

    /// Every job's name and state, by name.
    pub(super) fn jobs(&self) -> Vec<(String, Arc<JobState>)> {
        self.read()
            .iter()
            .map(|(name, state)| (name.clone(), Arc::clone(state)))
            .collect()
    }

    /// The state of `name`, created when new.
    pub(super) fn entry(&self, name: &str) -> Arc<JobState> {
        let mut jobs = self.jobs.write().unwrap_or_else(|e| e.into_inner());
        Arc::clone(jobs.entry(name.to_owned()).or_default())
    }

    /// Keeps only the jobs named in `names`.
    pub(super) fn retain(&self, names: &std::collections::HashSet<&str>) {
        let mut jobs = self.jobs.write().unwrap_or_else(|e| e.into_inner());
        jobs.retain(|name, _| names.contains(name.as_str()));
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<JobState>>> {
        self.jobs.read().unwrap_or_else(|e| e.into_inner())
    }
}

/// The persistent part under `<state_dir>/daemon/`, and the pauses of `<state_dir>/pause.json`.
#[derive(Debug, Clone)]
pub(super) struct Persisted {
    dir: PathBuf,
    /// Where its failed writes are counted.
    failures: crate::persist::Failures,
    /// The pauses in memory, following the file (a daemon task watches it).
    pauses: Arc<LivePauses>,
}

impl Persisted {
    /// The daemon's files under `state_dir`, their failed writes counted in `failures`; the
    /// pause file is read once now.
    pub(super) fn new(state_dir: &Path, failures: &crate::persist::Failures) -> Persisted {
        Persisted {
            dir: state_dir.join("daemon"),
            failures: failures.clone(),
            pauses: Arc::new(LivePauses::load(state_dir)),
        }
    }

    /// Whether `job` is paused with `--stop-jobs` at `now`, from the pauses in memory (a fire
    /// never reads the file: [`LivePauses`] follows it).
    pub(super) fn stopped_by_pause(&self, job: &str, now: DateTime<Utc>) -> bool {
        self.pauses.current().stops(job, now)
    }

    /// The pauses in memory, for the task that watches the file and for the status endpoint.
    pub(super) fn pauses(&self) -> &Arc<LivePauses> {
        &self.pauses
    }

    /// The last fire time recorded for `job`, if any (and readable).
    pub(super) fn last_fire(&self, job: &str) -> Option<DateTime<Utc>> {
        let text = read_line(&self.dir.join("fires").join(job))?;
        DateTime::parse_from_rfc3339(text.trim())
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }

    /// Records `fire` as `job`'s last fire time.
    pub(super) fn set_last_fire(&self, job: &str, fire: DateTime<Utc>) -> io::Result<()> {
        write_line(&self.dir.join("fires"), job, &fire.to_rfc3339())
            .inspect_err(|_| self.failures.failed(crate::persist::What::FireTime))
    }

    /// The boot id `job` (an `@reboot` job) last ran in.
    pub(super) fn reboot_marker(&self, job: &str) -> Option<String> {
        read_line(&self.dir.join("reboot").join(job)).map(|s| s.trim().to_owned())
    }

    /// Records that `job` ran in boot `boot_id`.
    pub(super) fn set_reboot_marker(&self, job: &str, boot_id: &str) -> io::Result<()> {
        write_line(&self.dir.join("reboot"), job, boot_id)
            .inspect_err(|_| self.failures.failed(crate::persist::What::RebootMarker))
    }
}

/// The current boot's id, from [`BOOT_ID_FILE`].
pub(super) fn boot_id() -> io::Result<String> {
    Ok(std::fs::read_to_string(BOOT_ID_FILE)?.trim().to_owned())
}

/// The text of a one-line state file (a fire time, a boot id), read as every state file is
/// ([`crate::persist::file::read_state`]: never blocking, a planted FIFO set aside); `None` when
/// missing, unreadable or not text.
fn read_line(path: &Path) -> Option<String> {
    let bytes = crate::persist::file::read_state(path, 4096).ok()??;
    String::from_utf8(bytes).ok()
}

/// Writes `dir/name` crash-safely as `text` and a newline (directories made with mode 0700).
fn write_line(dir: &Path, name: &str, text: &str) -> io::Result<()> {
    crate::persist::file::private_dir(dir)?;
    crate::persist::file::write_atomic(&dir.join(name), format!("{text}\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fire_times_and_reboot_markers_survive_a_restart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fire = DateTime::parse_from_rfc3339("2026-03-29T01:00:00Z")
            .expect("time")
            .with_timezone(&Utc);
        let first = Persisted::new(dir.path(), &crate::persist::Failures::default());
        assert_eq!(first.last_fire("backup"), None);
        first.set_last_fire("backup", fire).expect("write");
        first.set_reboot_marker("warm", "abc").expect("write");
        let again = Persisted::new(dir.path(), &crate::persist::Failures::default());
        assert_eq!(again.last_fire("backup"), Some(fire));
        assert_eq!(again.reboot_marker("warm").as_deref(), Some("abc"));
        assert_eq!(again.reboot_marker("other"), None);
    }

    #[test]
    fn a_failed_write_is_counted_in_the_failures_it_was_given() {
        use crate::persist::What;
        let dir = tempfile::tempdir().expect("tempdir");
        for planted in ["daemon/fires/backup/x", "daemon/reboot/warm/x"] {
            std::fs::create_dir_all(dir.path().join(planted)).expect("a directory in the way");
        }
        let failures = crate::persist::Failures::default();
        let persisted = Persisted::new(dir.path(), &failures);
        assert!(persisted.set_last_fire("backup", Utc::now()).is_err());
        assert!(persisted.set_reboot_marker("warm", "abc").is_err());
        assert!(persisted.set_reboot_marker("warm", "abc").is_err());
        assert_eq!(failures.count(What::FireTime), 1);
        assert_eq!(failures.count(What::RebootMarker), 2);
        assert!(persisted.set_last_fire("other", Utc::now()).is_ok());
        assert_eq!(failures.count(What::FireTime), 1);
    }

    #[test]
    fn boot_id_is_readable() {
        let id = boot_id().expect("linux has a boot id");
        assert_eq!(id.len(), 36, "{id}");
    }
}
