//! Run history: the last `history` runs of each job, kept under `<state_dir>/history/<job>/`
//! for the daemon's runs and for `run --job`, and read back by `heartbeat-agent history`, the
//! status endpoint's `GET /jobs/{name}/runs`, the `status` strip and the dashboard. The
//! shape of a run ([`Run`]) and of a job's runs ([`JobRuns`]) is a contract (docs/history.md).
//!
//! **Storage** ([`log`]): two files per job, `runs.jsonl` (the current generation) and
//! `runs.old.jsonl` (the one before), one JSON object per line, each run numbered (`seq`).
//! A run is appended with one `write(2)` of its line under the job's `flock(2)` lock; when the
//! appended run's number is a multiple of the job's limit, the current file is renamed over the
//! old one (a rename, no copy). A job so holds between `limit` and `2 x limit` runs on disk and
//! a reader keeps the newest `limit`: at most `2 x limit x (1 KiB + 6 x output_tail)` bytes per
//! job (a run's fields take about 400 bytes; 6 is the worst JSON escape of an output byte).
//!
//! **Writers.** The daemon hands each run to [`Recorder`] ([`recorder`]), a thread of its own
//! below the runtime's priority, which the daemon's shutdown joins within a bound; `run --job`
//! appends itself ([`History::record`]). A run is appended when it ends, before its final ping
//! (which may wait up to the ping budget for a hanging host); the pings' outcome follows as a
//! line of its own that every reader joins to the run ([`update`]).
//!
//! **In a cluster** ([`shared`]): a [`Shared`] given to the history receives each run
//! once it is written here, and every read merges in the runs it holds of the other nodes.
//!
//! **Served scrubbed.** A record is scrubbed when it is written, with the secrets known then;
//! every read ([`History::runs`]) scrubs it again with the secrets known by then (a ping URL
//! that sync learned after the run printed its token).
//!
//! **Crash-safety.** A kill -9 during an append leaves at most a torn last line (no newline):
//! the next append cuts it off with one warning, a reader skips it with one warning. Lines
//! already written are never rewritten. There is no fsync per run: a record outlives the death
//! of the process (the kernel's page cache holds it), not a power cut (like the daemon's fire
//! times).
//!
//! **Why files of JSON lines** and not an embedded database (SQLite, redb, sled): the whole
//! need is append, read the newest N and drop the oldest, which two generations of an
//! append-only file do with one `write` and one `rename`; the files read with `tail` and
//! `jq`; and `run` (which appends from cron) gains no dependency, no page cache of its own and
//! no start-up cost.

mod log;
mod recorder;
mod shared;
mod update;

pub(crate) use recorder::Recorder;
pub(crate) use shared::Shared;
pub(crate) use update::PingUpdate;

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::ping::PingKind;
use crate::run::record::{PingRecord, RunDoc, RunRecord};

/// One run of a job's history: `/status`'s `last_run` fields, its final ping, the node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Run {
    /// The run's number in its job's history (1, 2, ...; kept across restarts).
    #[serde(default)]
    pub seq: u64,
    /// How it ran and ended.
    #[serde(flatten)]
    pub run: RunDoc,
    /// Its final ping (the success or the fail ping); `null` when it pinged nothing.
    pub ping: Option<RunPing>,
    /// Its start ping (`start_url`), when it sent one and the answer came before the run's
    /// report (always when a final ping followed); `null` otherwise. Absent from older records.
    #[serde(default)]
    pub start_ping: Option<RunPing>,
    /// Whether its pings were still on their way when it was recorded and their outcome was
    /// not recorded since (the agent was killed meanwhile, or the ping is still waiting).
    #[serde(default)]
    pub ping_pending: bool,
    /// In a `[cluster]`, the node that ran it; `null` otherwise.
    pub node: Option<String>,
}

/// One of a run's pings.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RunPing {
    /// `success`, `fail` or `start`.
    pub kind: PingKind,
    /// When it was sent.
    pub at: DateTime<Utc>,
    /// `accepted` (2xx) or `failed`.
    pub result: String,
    /// The answer (`HTTP 200`) or the error; never the URL.
    pub detail: String,
    /// Whether it waits in the outbox (a later pass delivers it; never for a start ping).
    pub outbox: bool,
}

impl RunPing {
    /// The history's form of `ping`, its detail scrubbed.
    fn of(ping: &PingRecord) -> RunPing {
        RunPing {
            kind: ping.kind,
            at: ping.at,
            result: if ping.accepted { "accepted" } else { "failed" }.to_owned(),
            detail: crate::redact::scrub(&ping.detail),
            outbox: ping.queued,
        }
    }
}

impl Run {
    /// The history's form of `record` with its final ping `ping`, run on `node`.
    pub(crate) fn of(record: &RunRecord, ping: Option<&PingRecord>, node: Option<&str>) -> Run {
        Run {
            seq: 0,
            run: RunDoc::of(record),
            ping: ping.map(RunPing::of),
            start_ping: None,
            ping_pending: false,
            node: node.map(str::to_owned),
        }
    }

    /// The history's form of `record` as it ended, run on `node`, before its pings' outcome
    /// (`pinging`: a start or final ping is on its way, and a [`PingUpdate`] follows).
    pub(crate) fn ended(record: &RunRecord, node: Option<&str>, pinging: bool) -> Run {
        Run {
            ping_pending: pinging,
            ..Run::of(record, None, node)
        }
    }

    /// The run with its texts scrubbed of every secret known now.
    fn scrubbed(mut self) -> Run {
        let scrub = crate::redact::scrub_in_place;
        scrub(&mut self.run.output_tail);
        let pings = [&mut self.ping, &mut self.start_ping].into_iter().flatten();
        for text in pings.map(|p| &mut p.detail).chain(self.run.reason.as_mut()) {
            scrub(text);
        }
        self
    }

    /// Whether the run counts as a success.
    pub(crate) fn success(&self) -> bool {
        self.run.outcome == "success"
    }
}

/// A job's runs, newest first: the answer of `GET /jobs/{name}/runs` and `history --json JOB`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct JobRuns {
    /// The job.
    pub job: String,
    /// Its runs, newest first.
    pub runs: Vec<Run>,
    /// In a cluster whose other nodes' runs cannot be read now, why (the runs are this
    /// node's); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_unavailable: Option<String>,
}

/// The mark of one outcome in a strip of runs (`status`, `history`): `✓` a success, `·` a run
/// stopped by the daemon's shutdown, `✗` any other end; in ASCII `+`, `-`, `x`.
pub(crate) fn glyph(outcome: &str, ascii: bool) -> char {
    match (outcome, ascii) {
        ("success", false) => '✓',
        ("success", true) => '+',
        ("stopped", false) => '·',
        ("stopped", true) => '-',
        (_, false) => '✗',
        (_, true) => 'x',
    }
}

/// The strip of `outcomes` (oldest first).
pub(crate) fn strip(outcomes: &[String], ascii: bool) -> String {
    outcomes.iter().map(|o| glyph(o, ascii)).collect()
}

/// Whether strips are drawn in ASCII: `asked` (`--ascii`), or the locale (`LC_ALL`, else
/// `LC_CTYPE`, else `LANG`) is not UTF-8, as in cron's and many containers' bare environment.
pub(crate) fn ascii_wanted(asked: bool) -> bool {
    let locale = ["LC_ALL", "LC_CTYPE", "LANG"]
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()))
        .unwrap_or_default()
        .to_ascii_lowercase();
    asked || !(locale.contains("utf-8") || locale.contains("utf8"))
}

/// The history of every job under one state directory.
#[derive(Debug, Clone)]
pub(crate) struct History {
    /// `<state_dir>/history`.
    dir: PathBuf,
    /// In a cluster, what it holds of the other nodes' runs ([`History::with_cluster`]).
    shared: Option<Arc<dyn Shared>>,
    /// Where its failed writes are counted.
    failures: crate::persist::Failures,
}

impl History {
    /// This node's history under `state_dir`, its failed writes counted in `failures`.
    pub(crate) fn new(state_dir: &Path, failures: &crate::persist::Failures) -> History {
        History::with_cluster(state_dir, None, failures)
    }

    /// The history under `state_dir`, in a cluster with `shared`: the runs it records are
    /// handed to it, and every read merges in what it holds of the other nodes. Its failed
    /// writes are counted in `failures`.
    pub(crate) fn with_cluster(
        state_dir: &Path,
        shared: Option<Arc<dyn Shared>>,
        failures: &crate::persist::Failures,
    ) -> History {
        History {
            dir: state_dir.join("history"),
            shared,
            failures: failures.clone(),
        }
    }

    /// Why the cluster's part of the runs is missing (in a cluster whose runs cannot be read
    /// now); `None` outside a cluster and while it is read.
    pub(crate) fn cluster_unavailable(&self) -> Option<String> {
        self.shared.as_ref().and_then(|s| s.unavailable())
    }

    /// Where the history lives (`<state_dir>/history`).
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends `run` to `job`'s history, which keeps `limit` runs (0: none, nothing written);
    /// returns the number it was given. A failure is logged (naming the job and the file) and
    /// counted; the run itself is not affected.
    pub(crate) fn record(&self, job: &str, limit: usize, run: Run) -> Option<u64> {
        if limit == 0 {
            return None;
        }
        log::append(&self.dir.join(job), job, limit, run)
            .inspect_err(|err| self.failed(job, err))
            .ok()
    }

    /// Appends `update`, the pings of a run recorded before, to `job`'s history.
    pub(crate) fn pinged(&self, job: &str, update: &PingUpdate) {
        if let Err(err) = log::append_update(&self.dir.join(job), job, update) {
            self.failed(job, &err);
        }
    }

    /// Logs and counts a failed write of `job`'s history.
    fn failed(&self, job: &str, err: &io::Error) {
        self.failures.failed(crate::persist::What::History);
        warn!(job = %job, dir = %self.dir.join(job).display(), error = %err, "cannot record the run in the job's history");
    }

    /// `job`'s last `n` runs (at most its configured `history`), newest first, read from the
    /// ends of its files: the cost of `n` runs, not of the whole history (the dashboard's
    /// overview of every job, the strips seeded at start). A job with no history has none.
    /// Each is scrubbed of every secret known now (see the module header). In a cluster, the
    /// other nodes' runs are merged in (by end, newest first; see [`shared`]).
    pub(crate) fn runs(&self, job: &str, n: usize) -> io::Result<Vec<Run>> {
        let mut runs = Vec::new();
        self.each_run(job, n, |run| {
            runs.push(run);
            true
        })?;
        Ok(runs)
    }

    /// Hands `job`'s last `n` runs to `each`, newest first, one at a time (until it answers
    /// false), each scrubbed as [`History::runs`] does: a reader that shows runs one by one
    /// never holds more than one run's output (the dashboard's page of a job with megabytes of
    /// output per run).
    pub(crate) fn each_run(
        &self,
        job: &str,
        n: usize,
        mut each: impl FnMut(Run) -> bool,
    ) -> io::Result<()> {
        let dir = self.dir.join(job);
        let others = self
            .shared
            .as_ref()
            .map(|s| s.runs(job))
            .unwrap_or_default();
        if others.is_empty() {
            return log::visit_last(&dir, job, n, |run| each(run.scrubbed()));
        }
        shared::merged(
            others,
            n,
            |local| log::visit_last(&dir, job, n, local),
            |run| each(run.scrubbed()),
        )
    }

    /// What identifies the present state of `job`'s history: the length and modification
    /// time of its current file (`None` without one), in a cluster with the generation of
    /// the cluster's runs of it added to the length. Every append, here or on another node,
    /// changes it, so a reader may keep what it read while it stays the same.
    pub(crate) fn version(&self, job: &str) -> Option<(u64, SystemTime)> {
        let meta = std::fs::metadata(self.dir.join(job).join(log::CURRENT));
        let local = meta.and_then(|m| Ok((m.len(), m.modified()?))).ok();
        match self.shared.as_ref().map(|s| s.generation(job)) {
            None | Some(0) => local,
            Some(generation) => {
                let (len, at) = local.unwrap_or((0, SystemTime::UNIX_EPOCH));
                Some((len.wrapping_add(generation << 32), at))
            }
        }
    }

    /// In a cluster whose runs are read, the outcomes of `job`'s last `n` runs on every node,
    /// oldest first, from what was read of the cluster (which holds this node's runs too, a
    /// moment after they end): the `status` strip of a cluster. `None` outside a cluster,
    /// while the cluster cannot be read, and for a job no node copied a run of.
    pub(crate) fn cluster_outcomes(&self, job: &str, n: usize) -> Option<Vec<String>> {
        let shared = self.shared.as_ref()?;
        if shared.unavailable().is_some() {
            return None;
        }
        let mut runs = shared.runs(job);
        if runs.is_empty() {
            return None;
        }
        runs.truncate(n);
        Some(runs.into_iter().rev().map(|r| r.run.outcome).collect())
    }

    /// The outcomes of `job`'s last `n` runs, oldest first (for the `status` strip after a
    /// restart).
    pub(crate) fn recent_outcomes(&self, job: &str, n: usize) -> Vec<String> {
        let mut runs = self.runs(job, n).unwrap_or_default();
        runs.reverse();
        runs.into_iter().map(|r| r.run.outcome).collect()
    }

    /// Removes the history of each job not in `jobs` whose last run is older than `keep`
    /// (`history_keep_removed`); returns the names removed.
    pub(crate) fn prune_removed(&self, jobs: &HashSet<&str>, keep: Duration) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let now = SystemTime::now();
        let mut removed = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if jobs.contains(name.as_str()) || !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let last = log::last_written(&entry.path());
            let age = last.and_then(|t| now.duration_since(t).ok());
            if age.is_some_and(|age| age < keep) {
                continue;
            }
            match std::fs::remove_dir_all(entry.path()) {
                Ok(()) => {
                    info!(job = %name, "removed the history of a job no longer in the configuration");
                    removed.push(name);
                }
                Err(err) => {
                    warn!(job = %name, dir = %entry.path().display(), error = %err, "cannot remove the history of a job no longer in the configuration");
                }
            }
        }
        removed.sort();
        removed
    }

    /// The jobs that have a history, sorted.
    pub(crate) fn jobs(&self) -> Vec<String> {
        let mut jobs: Vec<String> = std::fs::read_dir(&self.dir)
            .map(|entries| {
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        jobs.sort();
        jobs
    }
}

#[cfg(test)]
mod tests;
