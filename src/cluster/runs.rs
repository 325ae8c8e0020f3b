//! One history for the cluster: each agent copies the runs it records into etcd, and every
//! agent's `history`, `GET /jobs/{name}/runs`, `status` strip and dashboard show every node's
//! runs of a job (docs/history.md, "In a cluster"; docs/cluster.md).
//!
//! **Why etcd** (and not asking the other agents' status endpoints): what a node ran must be
//! readable after that node is gone (the question is often "what happened on the host that
//! died?"), and etcd is the one store every agent already reaches and that outlives any one of
//! them. A node's own history files stay the source of truth for its own runs; etcd holds a
//! bounded copy for the others to read.
//!
//! **Keys**: `<name>/runs/<job>/<node>/<seq>` (the run's number in that node's history, 20
//! digits so that key order is number order), the run's JSON ([`crate::history::Run`]) with its
//! output tail cut to its last [`SHARED_TAIL`] bytes. Runs are written in transactions (the
//! runs handed over within [`GATHER`] of each other, up to [`BATCH`]: a burst of runs ending in the same second costs
//! a few etcd writes, as the claims do) that also delete that node's runs of each job older
//! than the last `min(history, `[`MOST_SHARED`]`)`: a job holds at most that many keys per
//! node that ran it, whatever the number of runs, and a lowered `history` shrinks it at the
//! next run. The pings' outcome, known after the run, rewrites the same key.
//!
//! **Off the run's path**: the history's writer thread hands each run over after writing it to
//! its file ([`crate::history::Shared::publish`]), into a bounded queue ([`QUEUE`]) that a task
//! of its own empties (at shutdown for [`DRAIN`] at most: a run the history's writer writes
//! after that, in the last seconds of a stop, stays on its node); a full queue (etcd down or slow for long) drops the copy, never the
//! run, with one warning per outage. A down etcd so delays nothing and loses nothing of the
//! node's own history.
//!
//! **Reading**: a task reads the keys under `<name>/runs/` every [`POLL`], only those changed
//! since its last read (etcd's `min_mod_revision`), into memory; pages and the JSON routes
//! read that memory and never wait for etcd. When a read fails, what was read stays shown and
//! [`SharedRuns::unavailable`] says why. `history` (without a daemon) reads the job's keys
//! once, with a timeout ([`read_once`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::etcd::put_body;
use super::gateway::{int64, prefix_end, RangeAnswer};
use super::{Etcd, EtcdError, Keys};
use crate::history::{PingUpdate, Run, Shared};

/// The most runs of a job etcd keeps per node (fewer when the job's `history` is lower).
pub const MOST_SHARED: usize = 100;

/// The most of a run's output tail copied into etcd: its last 1 KiB (the whole tail stays in
/// the history files of the node that ran it).
pub const SHARED_TAIL: usize = 1024;

/// How often the other nodes' runs are read.
pub const POLL: Duration = Duration::from_secs(1);

/// How many runs may wait to be copied into etcd.
const QUEUE: usize = 1024;

/// The most runs copied in one transaction: two operations each, under etcd's default
/// `--max-txn-ops` (128).
const BATCH: usize = 60;

/// How long a run handed over waits for others to share its transaction.
const GATHER: Duration = Duration::from_millis(250);

/// How long the copies still queued at shutdown may take.
const DRAIN: Duration = Duration::from_secs(1);

/// How many runs recorded with their pings pending are remembered for their pings.
const PENDING: usize = 1024;

/// What the history's writer hands over.
enum Handed {
    /// A run of a job that keeps that many runs.
    Run(String, usize, Box<Run>),
    /// The pings of a job's run copied before.
    Pinged(String, PingUpdate),
}

/// The cluster's runs as this agent knows them, and the queue of its own runs to copy.
#[derive(Clone)]
pub struct SharedRuns {
    inner: Arc<Inner>,
}

struct Inner {
    etcd: Etcd,
    keys: Keys,
    node: String,
    /// Runs to copy; `None` for a read-only view (`history`).
    queue: Option<mpsc::Sender<Handed>>,
    known: Mutex<Known>,
}

/// What was read of the cluster's runs.
#[derive(Default)]
struct Known {
    /// By job, by node, by number.
    jobs: HashMap<String, JobRuns>,
    /// The etcd revision of the last read.
    revision: i64,
    /// Why the last read failed, when it did.
    unavailable: Option<String>,
    /// Whether the queue was found full since it was last not.
    dropping: bool,
}

#[derive(Default)]
struct JobRuns {
    nodes: HashMap<String, BTreeMap<u64, Run>>,
    generation: u64,
}

impl std::fmt::Debug for SharedRuns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedRuns")
            .field("node", &self.inner.node)
            .finish_non_exhaustive()
    }
}

/// The other end of a [`SharedRuns`]' queue, for its task ([`SharedRuns::run`]).
pub struct Copies(mpsc::Receiver<Handed>);

impl SharedRuns {
    /// The cluster's runs for agent `node`, and the queue its task empties.
    pub fn new(etcd: Etcd, keys: Keys, node: &str) -> (SharedRuns, Copies) {
        let (queue, copies) = mpsc::channel(QUEUE);
        (
            SharedRuns::with(etcd, keys, node, Some(queue)),
            Copies(copies),
        )
    }

    fn with(etcd: Etcd, keys: Keys, node: &str, queue: Option<mpsc::Sender<Handed>>) -> SharedRuns {
        SharedRuns {
            inner: Arc::new(Inner {
                etcd,
                keys,
                node: node.to_owned(),
                queue,
                known: Mutex::default(),
            }),
        }
    }

    fn known(&self) -> MutexGuard<'_, Known> {
        self.inner.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Copies this agent's runs into etcd and reads the cluster's every [`POLL`], until
    /// `cancel`.
    pub async fn run(self, copies: Copies, cancel: CancellationToken) {
        tokio::join!(self.copy(copies, cancel.clone()), self.poll(cancel));
    }

    async fn copy(&self, Copies(mut copies): Copies, cancel: CancellationToken) {
        // Runs copied with their pings pending, by job and number, until their pings come.
        let mut pending: HashMap<(String, u64), (usize, Run)> = HashMap::new();
        loop {
            let first = tokio::select! {
                () = cancel.cancelled() => break,
                copy = copies.recv() => match copy {
                    Some(copy) => copy,
                    None => return,
                },
            };
            // What comes within GATHER joins the first: one transaction for the runs that
            // ended together.
            let mut handed = vec![first];
            let until = tokio::time::Instant::now() + GATHER;
            while handed.len() < BATCH {
                tokio::select! {
                    () = cancel.cancelled() => break,
                    () = tokio::time::sleep_until(until) => break,
                    more = copies.recv() => match more {
                        Some(more) => handed.push(more),
                        None => break,
                    },
                }
            }
            self.send(handed, &mut pending).await;
        }
        // At shutdown, what was handed over is still copied, for at most DRAIN.
        let drain = async {
            loop {
                let mut handed = Vec::new();
                while handed.len() < BATCH {
                    match copies.try_recv() {
                        Ok(more) => handed.push(more),
                        Err(_) => break,
                    }
                }
                if handed.is_empty() {
                    return;
                }
                self.send(handed, &mut pending).await;
            }
        };
        let _ = tokio::time::timeout(DRAIN, drain).await;
    }

    /// Copies `handed` (runs, and the pings of runs copied before) in one transaction.
    async fn send(&self, handed: Vec<Handed>, pending: &mut HashMap<(String, u64), (usize, Run)>) {
        let mut runs = Vec::with_capacity(handed.len());
        for copy in handed {
            match copy {
                Handed::Run(job, limit, run) => {
                    if run.ping_pending {
                        if pending.len() >= PENDING {
                            pending.clear();
                        }
                        pending.insert((job.clone(), run.seq), (limit, (*run).clone()));
                    }
                    runs.push((job, limit, *run));
                }
                Handed::Pinged(job, update) => {
                    if let Some((limit, mut run)) = pending.remove(&(job.clone(), update.update)) {
                        update.apply(&mut run);
                        runs.push((job, limit, run));
                    }
                }
            }
        }
        if let Err(err) = self.put(&runs).await {
            debug!(runs = runs.len(), error = %err, "cannot copy runs into the cluster's history");
        }
    }

    /// Writes `runs` (job, its `history`, run) in one transaction, and deletes this node's
    /// runs of each job older than its bound. etcd refuses a transaction that puts a key twice
    /// or puts a key it deletes: a run given twice (with its pings) is put once, as last given,
    /// and a run older than its job's bound is not put.
    async fn put(&self, runs: &[(String, usize, Run)]) -> Result<(), EtcdError> {
        let keys = &self.inner.keys;
        let node = &self.inner.node;
        // By job: the first number kept; by job and number: the run as last given.
        let mut first_kept: BTreeMap<&str, u64> = BTreeMap::new();
        let mut puts: BTreeMap<(&str, u64), &Run> = BTreeMap::new();
        for (job, limit, run) in runs {
            let keep = (*limit).clamp(1, MOST_SHARED) as u64;
            let first = (run.seq + 1).saturating_sub(keep);
            let kept = first_kept.entry(job).or_insert(0);
            *kept = (*kept).max(first);
            puts.insert((job, run.seq), run);
        }
        let mut ops = Vec::new();
        let mut named = None;
        for ((job, seq), run) in puts {
            if seq < first_kept.get(job).copied().unwrap_or(0) {
                continue;
            }
            let key = keys.run(job, node, seq);
            let mut copy = run.clone();
            cut_tail(&mut copy.run.output_tail, SHARED_TAIL);
            let value = serde_json::to_vec(&copy).unwrap_or_default();
            ops.push(json!({ "request_put": put_body(&key, &value, None) }));
            named.get_or_insert(key);
        }
        for (job, first) in first_kept.into_iter().filter(|(_, first)| *first > 1) {
            ops.push(json!({ "request_delete_range": {
                "key": BASE64.encode(keys.node_runs(job, node)),
                "range_end": BASE64.encode(keys.run(job, node, first)),
            }}));
        }
        let Some(key) = named else {
            return Ok(());
        };
        let body = json!({ "success": ops });
        self.inner
            .etcd
            .call::<Value>("/v3/kv/txn", &key, &body)
            .await
            .map(drop)
    }

    async fn poll(&self, cancel: CancellationToken) {
        let mut every = tokio::time::interval(POLL);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = every.tick() => {}
            }
            let since = self.known().revision;
            let prefix = self.inner.keys.all_runs();
            let read = tokio::select! {
                () = cancel.cancelled() => return,
                read = read(&self.inner.etcd, &prefix, since) => read,
            };
            self.take(read);
        }
    }

    /// Keeps what a read of the runs found (or why it failed).
    fn take(&self, read: Result<(i64, Vec<(String, Run)>), EtcdError>) {
        let prefix = self.inner.keys.all_runs();
        let mut known = self.known();
        match read {
            Ok((revision, runs)) => {
                known.revision = known.revision.max(revision);
                known.unavailable = None;
                for (key, run) in runs {
                    let Some((job, node, seq)) = parse_key(&key, &prefix) else {
                        continue;
                    };
                    let job = known.jobs.entry(job.to_owned()).or_default();
                    job.generation += 1;
                    let kept = job.nodes.entry(node.to_owned()).or_default();
                    kept.insert(seq, run);
                    while kept.len() > MOST_SHARED {
                        kept.pop_first();
                    }
                }
            }
            Err(err) => {
                known.unavailable = Some(format!(
                    "the runs of the cluster's other nodes cannot be read from etcd: {err}"
                ));
            }
        }
    }
}

impl Shared for SharedRuns {
    fn publish(&self, job: &str, limit: usize, run: &Run) {
        let Some(queue) = &self.inner.queue else {
            return;
        };
        let copy = Handed::Run(job.to_owned(), limit, Box::new(run.clone()));
        let full = queue.try_send(copy).is_err();
        let mut known = self.known();
        if full && !known.dropping {
            warn!(job = %job, "the cluster's history is not keeping up (etcd down or slow): runs are kept in this node's history but not copied into etcd until it catches up");
        }
        known.dropping = full;
    }

    fn pinged(&self, job: &str, update: &PingUpdate) {
        if let Some(queue) = &self.inner.queue {
            let _ = queue.try_send(Handed::Pinged(job.to_owned(), update.clone()));
        }
    }

    fn runs(&self, job: &str) -> Vec<Run> {
        let known = self.known();
        let mut runs: Vec<Run> = known
            .jobs
            .get(job)
            .map(|j| j.nodes.values().flat_map(|r| r.values().cloned()).collect())
            .unwrap_or_default();
        runs.sort_by_key(|r| std::cmp::Reverse(r.run.ended));
        runs
    }

    fn generation(&self, job: &str) -> u64 {
        self.known().jobs.get(job).map_or(0, |j| j.generation)
    }

    fn unavailable(&self) -> Option<String> {
        self.known().unavailable.clone()
    }
}

/// The cluster's runs of `job` (of every job when `None`), read once within `timeout` by a
/// reader that copies nothing (`history` without a daemon).
pub async fn read_once(etcd: Etcd, keys: Keys, job: Option<&str>, timeout: Duration) -> SharedRuns {
    let shared = SharedRuns::with(etcd, keys, "", None);
    let prefix = match job {
        Some(job) => shared.inner.keys.runs(job),
        None => shared.inner.keys.all_runs(),
    };
    let read = match tokio::time::timeout(timeout, read(&shared.inner.etcd, &prefix, 0)).await {
        Ok(read) => read,
        Err(_) => Err(EtcdError::Unavailable(vec![super::Failure {
            endpoint: shared.inner.etcd.endpoints().join(", "),
            detail: format!(
                "no answer within {}",
                crate::duration::human_duration(timeout)
            ),
        }])),
    };
    shared.take(read);
    shared
}

/// The runs under `prefix` changed after revision `since` (every one for 0), and the revision
/// read at.
async fn read(
    etcd: &Etcd,
    prefix: &str,
    since: i64,
) -> Result<(i64, Vec<(String, Run)>), EtcdError> {
    #[derive(Deserialize)]
    struct Header {
        #[serde(default, deserialize_with = "int64")]
        revision: i64,
    }
    #[derive(Deserialize)]
    struct Answer {
        header: Option<Header>,
        #[serde(flatten)]
        range: RangeAnswer,
    }
    let mut body = json!({
        "key": BASE64.encode(prefix),
        "range_end": BASE64.encode(prefix_end(prefix.as_bytes())),
    });
    if since > 0 {
        body["min_mod_revision"] = json!((since + 1).to_string());
    }
    let answer: Answer = etcd.call("/v3/kv/range", prefix, &body).await?;
    let revision = answer.header.map_or(0, |h| h.revision);
    let runs = answer
        .range
        .kvs
        .into_iter()
        .filter_map(|kv| {
            let key = String::from_utf8(BASE64.decode(&kv.key).ok()?).ok()?;
            let run = serde_json::from_slice(&BASE64.decode(&kv.value).ok()?).ok()?;
            Some((key, run))
        })
        .collect();
    Ok((revision, runs))
}

/// `(job, node, seq)` of a run's key under `prefix` (`<name>/runs/`).
fn parse_key<'k>(key: &'k str, prefix: &str) -> Option<(&'k str, &'k str, u64)> {
    let mut parts = key.strip_prefix(prefix)?.splitn(3, '/');
    let job = parts.next()?;
    let node = parts.next()?;
    let seq = parts.next()?.parse().ok()?;
    Some((job, node, seq))
}

/// Cuts `text` to its last `max` bytes, at a character boundary.
fn cut_tail(text: &mut String, max: usize) {
    let mut cut = text.len().saturating_sub(max);
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    text.drain(..cut);
}

#[cfg(test)]
mod tests {
    use super::{cut_tail, parse_key};
    use crate::cluster::Keys;

    #[test]
    fn a_run_key_reads_back_as_its_job_node_and_number() {
        let keys = Keys::new("prod");
        let key = keys.run("backup", "alpha", 42);
        assert_eq!(key, "prod/runs/backup/alpha/00000000000000000042");
        assert!(key.starts_with(&keys.node_runs("backup", "alpha")));
        assert!(key.starts_with(&keys.runs("backup")));
        assert_eq!(
            parse_key(&key, &keys.all_runs()),
            Some(("backup", "alpha", 42))
        );
        assert_eq!(parse_key("prod/runs/backup", &keys.all_runs()), None);
        // Key order is number order, which the deletion of older runs relies on.
        assert!(keys.run("b", "a", 9) < keys.run("b", "a", 10));
    }

    #[test]
    fn a_tail_is_cut_at_a_character_boundary() {
        let mut text = "aé".repeat(10);
        cut_tail(&mut text, 4);
        assert_eq!(text, "aé");
        let mut short = "ok".to_owned();
        cut_tail(&mut short, 1024);
        assert_eq!(short, "ok");
    }
}
