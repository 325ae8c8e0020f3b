//! The one run pipeline: everything between a fire (or a `heartbeat-agent run` invocation) and
//! its report, for both entry points.
//!
//! [`run_with_pings`] owns a run's corridor: the start ping (sent in a task of its own so the
//! command starts at once, never kept in the outbox), the attempts with retries and timeouts
//! ([`attempts`]: one loop), dropping a pending success of the job after a failure, the one
//! choice between the success ping and the fail ping ([`pings`]), their delivery through the
//! durable outbox after the start ping (so the service sees them in order), then the entry
//! point's after-ping work ([`Runner::after_ping`]: `run`'s held period change and outbox
//! catch-up, the daemon's [`AfterRun`] hooks) with the run's [`Report`].
//!
//! What differs between the entry points is given as a [`Runner`]: how one attempt runs (the
//! wrapper's command in the foreground with its signals forwarded; the daemon's command with
//! its output captured and logged, or a watch probe), what stops the run (a signal to the
//! wrapper; the daemon's shutdown), how notices are worded for its reader (the wrapper's
//! stderr; the daemon's structured log), and what is recorded where.
//!
//! Each run gets its id ([`RunId`]) here, before its start ping: its attempts, its record and
//! the `{run_id}` of its URLs all carry it.
//!
//! Whether a fire runs at all is decided before the pipeline starts, by an [`admission`]: a
//! local form (overlap and pause) and, in a cluster, the claim that `crate::cluster` gives the
//! daemon when it is assembled.

pub(crate) mod admission;
mod attempts;
pub(crate) mod hooks;
pub(crate) mod id;
pub(crate) mod pings;
pub(crate) mod record;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

pub(crate) use hooks::AfterRun;
pub(crate) use id::RunId;
pub(crate) use pings::Pings;
pub(crate) use record::{PingRecord, RunRecord};

use crate::ping::outbox::Outbox;
use crate::ping::{Ping, PingKind, PingOutcome};
use crate::retries::Retries;
use crate::run_end::{RunEnd, RunOutcome};

/// Which attempt of a run this is, of how many at most, and the run it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RunAttempt {
    /// 1 for the first attempt.
    pub number: u32,
    /// `retries + 1`.
    pub of: u32,
    /// The run's id (the same for all its attempts).
    pub run: RunId,
}

impl RunAttempt {
    /// The only attempt of a new run that has no retries.
    pub(crate) fn first() -> RunAttempt {
        RunAttempt {
            number: 1,
            of: 1,
            run: RunId::new(),
        }
    }
}

/// What one attempt (a command or a probe) came to.
#[derive(Debug, Clone)]
pub(crate) struct AttemptEnd {
    /// When the run started: its first attempt's start.
    pub started: DateTime<Utc>,
    /// How it ended.
    pub end: RunEnd,
    /// What that counts as, judged against the success exit codes.
    pub outcome: RunOutcome,
    /// The last output kept (the job's `output_tail`, already scrubbed: [`crate::process::Tail::text`];
    /// empty when nothing is kept).
    pub output_tail: Vec<u8>,
}

impl AttemptEnd {
    /// Whether the attempt counts as a success.
    pub(crate) fn success(&self) -> bool {
        self.outcome == RunOutcome::Success
    }

    /// An attempt that had no process of its own (it did not start, or a probe was
    /// abandoned at shutdown).
    pub(crate) fn without_process(end: RunEnd) -> AttemptEnd {
        AttemptEnd {
            started: Utc::now(),
            outcome: end.outcome(&[]),
            end,
            output_tail: Vec::new(),
        }
    }
}

/// A notice about the run whose wording belongs to the entry point (the wrapper writes for a
/// person at a terminal, the daemon for its structured log).
#[derive(Debug)]
pub(crate) enum Notice<'a> {
    /// An attempt failed and another follows after `wait`.
    Retrying {
        attempt: RunAttempt,
        ended: &'a AttemptEnd,
        wait: std::time::Duration,
    },
    /// An attempt failed, attempts remain, and a stop was asked: no further attempt.
    NoFurtherAttempt {
        attempt: RunAttempt,
        ended: &'a AttemptEnd,
    },
    /// The last attempt failed (only said when there was more than one).
    AllFailed {
        attempt: RunAttempt,
        ended: &'a AttemptEnd,
    },
    /// A later attempt succeeded.
    SucceededAfter { attempt: RunAttempt },
    /// The success (`fail: false`) or fail ping was cut short by a stop; it stays in the
    /// outbox.
    PingInterrupted { fail: bool },
}

/// What one entry point gives the pipeline (see the module header).
pub(crate) trait Runner {
    /// Runs attempt `attempt` of the command or probe to its end.
    fn attempt(&mut self, attempt: RunAttempt) -> impl Future<Output = AttemptEnd> + Send;

    /// Whether a stop was asked (no further attempt starts).
    fn stop_asked(&self) -> bool;

    /// Completes when a stop is asked (at once if one was asked and not yet seen here).
    fn stopped(&mut self) -> impl Future<Output = ()> + Send;

    /// Says `notice` in the entry point's words.
    fn notice(&self, notice: Notice<'_>);

    /// The success ping, resolved now (a check's URL may have been learned during the run);
    /// also names the pending success that a failed run drops from the outbox.
    fn success_ping(&self) -> Option<Ping>;

    /// Whether the final ping is still sent now (the daemon sends none once it is stopping:
    /// the run was stopped by it, and the outbox keeps what was pending).
    fn pings_allowed(&self) -> bool {
        true
    }

    /// How long a final ping already on its way may still take for its answer once a stop is
    /// asked (zero: cut at once). A request abandoned after it reached the host is sent again
    /// from the outbox later: a duplicate.
    fn stop_grace(&self) -> Duration {
        Duration::ZERO
    }

    /// The fire time the run belongs to (`None`: a run with no fire, recorded at its start).
    fn scheduled(&self) -> Option<DateTime<Utc>> {
        None
    }

    /// The run ended (before its final ping): records it, releases what admitted it.
    /// `pinging`: a start or final ping is still on its way, whose outcome
    /// [`Runner::after_ping`] is given.
    fn ended(&mut self, record: &Arc<RunRecord>, pinging: bool);

    /// The success ping's result.
    fn pinged(&mut self, _ping: &PingRecord) {}

    /// The work after the final ping (the last step of every run, its ping interrupted or
    /// not): `run` sends a held period change and what its outbox holds, the daemon tells its
    /// after-run hooks.
    fn after_ping(&mut self, report: &Report) -> impl Future<Output = ()> + Send;
}

/// What a run came to, for the entry point's after-ping work and exit status.
#[derive(Debug)]
pub(crate) struct Report {
    /// How the last attempt ended.
    pub ended: AttemptEnd,
    /// The run's record (what status and the history keep).
    pub record: Arc<RunRecord>,
    /// The final ping's result: `None` when the run pinged nothing (or the daemon was
    /// stopping and sent none).
    pub ping: Option<PingRecord>,
    /// The start ping's result, when the run sent one and its answer came before the report
    /// (always, when a final ping followed: that waits for it).
    pub start_ping: Option<PingRecord>,
    /// Whether the service accepted the success ping (false for failures, for runs that ping
    /// nothing and for an interrupted ping).
    pub ping_accepted: bool,
    /// A final ping that could not be delivered and waits in the outbox.
    pub stored: Option<Ping>,
    /// Whether a stop cut the final ping short.
    pub interrupted: bool,
    /// When the pings began (the start ping's wait, then the final ping): what is left of a
    /// time budget for the pings is counted from here.
    pub pings_began: Instant,
}

/// Runs one run through the pipeline (see the module header), ending with the runner's
/// after-ping work, and reports it.
pub(crate) async fn run_with_pings<R: Runner>(
    runner: &mut R,
    retries: &Retries,
    pings: &Pings,
    outbox: &Outbox,
) -> Report {
    let report = run_and_ping(runner, retries, pings, outbox).await;
    runner.after_ping(&report).await;
    report
}

/// The run up to its final ping.
async fn run_and_ping<R: Runner>(
    runner: &mut R,
    retries: &Retries,
    pings: &Pings,
    outbox: &Outbox,
) -> Report {
    let run = RunId::new();
    let start = pings.send_start(run);
    let start_result = start.as_ref().map(|s| Arc::clone(&s.result));
    let mut report = run_and_ping_from(runner, retries, pings, outbox, start, run).await;
    report.start_ping = start_result.and_then(|slot| slot.get().cloned());
    report
}

/// [`run_and_ping`] once the start ping is on its way.
async fn run_and_ping_from<R: Runner>(
    runner: &mut R,
    retries: &Retries,
    pings: &Pings,
    outbox: &Outbox,
    start: Option<pings::Started>,
    run: RunId,
) -> Report {
    let (ended, attempt) = attempts::run(runner, retries, run).await;
    let success = ended.success();
    let success_ping = runner.success_ping().map(|ping| ping.for_run(run));
    if !success {
        pings.drop_pending_success(outbox, success_ping.as_ref());
    }
    let finish = pings::finish(pings, &ended, success_ping, run);
    let record = Arc::new(RunRecord::of(runner.scheduled(), &ended, attempt));
    let pinging = start.is_some() || (finish.is_some() && runner.pings_allowed());
    runner.ended(&record, pinging);
    let pings_began = Instant::now();
    let mut report = Report {
        ended,
        record,
        ping: None,
        start_ping: None,
        ping_accepted: false,
        stored: None,
        interrupted: false,
        pings_began,
    };
    let Some(ping) = finish.filter(|_| runner.pings_allowed()) else {
        return report;
    };
    let outcome = {
        let send = pings.deliver_after(start.map(|s| s.task), &ping, outbox);
        tokio::pin!(send);
        tokio::select! {
            sent = &mut send => Some(sent),
            // Stopping: a ping on its way gets the runner's grace for its answer.
            () = runner.stopped() => {
                match tokio::time::timeout(runner.stop_grace(), &mut send).await {
                    Ok(sent) => Some(sent),
                    Err(_) => {
                        runner.notice(Notice::PingInterrupted { fail: !success });
                        None
                    }
                }
            }
        }
    };
    let kind = if success {
        PingKind::Success
    } else {
        PingKind::Fail
    };
    let Some((at, outcome)) = outcome else {
        report.interrupted = true;
        report.ping = Some(PingRecord::interrupted(kind));
        return report;
    };
    if matches!(outcome, PingOutcome::Retryable { .. }) {
        report.stored = Some(ping);
    }
    let record = PingRecord::of(at, kind, &outcome);
    if success {
        report.ping_accepted = record.accepted;
        runner.pinged(&record);
    }
    report.ping = Some(record);
    report
}

#[cfg(test)]
mod tests;
