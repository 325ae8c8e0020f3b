//! Sending what the outbox holds: [`deliver_or_queue_for`] (a fresh ping: now, else stored),
//! [`deliver_pending`] (one pass over the pending entries, for `run` and `outbox flush`) and
//! [`drain`] (the daemon's task: continuous, with capped exponential backoff and full jitter
//! per target, honouring `Retry-After`).

use std::collections::HashMap;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::entry::now_ms;
use super::{Claimed, Outbox, OutboxError, PingContext};
use crate::backoff;
use crate::ping::{send_with, Budget, Ping, PingError, PingKind, PingOutcome, Sender};

/// Delivers `ping` within `budget`, through `outbox` when there is one: the ping is written
/// to it before the first attempt ([`Outbox::begin`]), made durable once an attempt failed,
/// removed when delivered, and kept as a pending entry when the budget runs out or this future
/// is dropped (the process is stopping). A success delivered now makes an older pending
/// success for the same target pointless (dropped, counted as coalesced). Logs failures,
/// redacted.
///
/// A start ping ([`PingKind::Start`]) never touches the outbox: it gets its attempts within
/// `budget` and is then given up, since a start delivered late would tell of a run that is
/// long over. This is the one place that rule lives, for `run` and the daemon alike.
pub(crate) async fn deliver_or_queue_for(
    sender: &Sender,
    ping: &Ping,
    budget: &Budget,
    outbox: Option<&Outbox>,
    context: &PingContext,
) -> PingOutcome {
    let job = context.job.as_deref().unwrap_or("");
    let start = ping.kind == PingKind::Start;
    let outbox = outbox.filter(|_| !start);
    let mut ahead = Ahead::begin(ping, budget, outbox, context);
    let watched = ahead.outbox.zip(ahead.claim.clone());
    let leaving = || {
        if let Some((outbox, claim)) = &watched {
            outbox.leaving(claim);
        }
    };
    let outcome = send_with(sender, ping, budget, &leaving, |error| {
        ahead.attempt_failed(error);
    })
    .await;
    drop(watched);
    match &outcome {
        PingOutcome::Delivered { status, attempts } => {
            debug!(job, target_url = %ping.redacted(), status, attempts, "ping delivered");
            if let Some(Err(err)) = ahead.delivered(ping) {
                warn!(job, error = %err, "cannot clear this ping's outbox entry (it may be sent once more)");
            }
        }
        PingOutcome::Retryable {
            error,
            attempts,
            retry_after,
        } => match ahead.keep(ping, context, *attempts, *retry_after, &error.to_string()) {
            Some(Ok(true)) => {
                warn!(job, target_url = %ping.redacted(), attempts, error = %error, "ping not delivered; kept in the outbox for a later retry");
            }
            Some(Ok(false)) => {
                warn!(job, target_url = %ping.redacted(), attempts, error = %error, "ping not delivered; not kept: a later run of the job failed meanwhile");
            }
            Some(Err(err)) => {
                warn!(job, target_url = %ping.redacted(), attempts, error = %error, outbox_error = %err, "ping not delivered and not kept: the outbox is unusable");
            }
            None if start => {
                warn!(job, target_url = %ping.redacted(), attempts, error = %error, "start ping not delivered; not kept (a late start would mislead)");
            }
            None => {
                warn!(job, target_url = %ping.redacted(), attempts, error = %error, "ping not delivered (no outbox to keep it)");
            }
        },
        PingOutcome::Permanent { error, attempts } => {
            ahead.discard();
            warn!(job, target_url = %ping.redacted(), attempts, error = %error, "ping refused by the server; check the ping URL");
        }
    }
    outcome
}

/// A fresh ping's outbox entry while it is being delivered: written before the first attempt,
/// and kept for later when dropped unsettled (the process stopping mid-delivery).
struct Ahead<'a> {
    outbox: Option<&'a Outbox>,
    claim: Option<Claimed>,
    /// Attempts that failed so far.
    failed: u32,
    job: String,
    target: String,
}

impl<'a> Ahead<'a> {
    fn begin(
        ping: &Ping,
        budget: &Budget,
        outbox: Option<&'a Outbox>,
        context: &PingContext,
    ) -> Ahead<'a> {
        let claim = outbox.and_then(|o| {
            o.begin(ping, context, budget.total)
                .inspect_err(|err| warn!(job = context.job.as_deref().unwrap_or(""), error = %err, "cannot write the ping to the outbox before sending it; sending it anyway"))
                .ok()
        });
        Ahead {
            outbox,
            claim,
            failed: 0,
            job: context.job.clone().unwrap_or_default(),
            target: ping.redacted(),
        }
    }

    fn attempt_failed(&mut self, error: &PingError) {
        self.failed = self.failed.saturating_add(1);
        let (Some(outbox), Some(claim)) = (self.outbox, &self.claim) else {
            return;
        };
        outbox.attempt_ended(claim, error);
        if self.failed == 1 {
            outbox.attempt_failed(claim);
        }
    }

    fn delivered(&mut self, ping: &Ping) -> Option<Result<(), OutboxError>> {
        let outbox = self.outbox?;
        Some(match self.claim.take() {
            Some(claim) => outbox.delivered_fresh(claim, ping),
            None => outbox.delivered_directly(ping),
        })
    }

    /// Keeps the ping for later: its own entry when it has one, else a new one (`Ok(false)`:
    /// not kept, a later failed run dropped it).
    fn keep(
        &mut self,
        ping: &Ping,
        context: &PingContext,
        attempts: u32,
        retry_after: Option<Duration>,
        error: &str,
    ) -> Option<Result<bool, OutboxError>> {
        let outbox = self.outbox?;
        Some(match self.claim.take() {
            Some(claim) => outbox.keep(claim, attempts, retry_after, error),
            None => outbox
                .store(ping, context, attempts, retry_after, error)
                .map(|()| true),
        })
    }

    fn discard(&mut self) {
        if let (Some(outbox), Some(claim)) = (self.outbox, self.claim.take()) {
            if let Err(err) = outbox.discard(claim) {
                warn!(job = %self.job, error = %err, "cannot remove the refused ping's outbox entry");
            }
        }
    }
}

impl Drop for Ahead<'_> {
    /// The delivery was abandoned (the process is stopping): the ping stays in the outbox.
    fn drop(&mut self) {
        let (Some(outbox), Some(claim)) = (self.outbox, self.claim.take()) else {
            return;
        };
        match outbox.keep(
            claim,
            self.failed,
            None,
            "abandoned: the agent stopped mid-delivery",
        ) {
            Ok(true) => {
                warn!(job = %self.job, target_url = %self.target, "ping not delivered yet: the agent is stopping; kept in the outbox (the next run, `outbox flush` or the daemon sends it)")
            }
            Ok(false) => {}
            Err(err) => {
                warn!(job = %self.job, target_url = %self.target, error = %err, "ping not delivered and not kept: the agent is stopping and the outbox is unusable")
            }
        }
    }
}

/// How one pass over the pending entries goes.
#[derive(Debug, Clone, Default)]
pub struct PassOptions {
    /// The budget of each entry's delivery (they run concurrently).
    pub budget: Budget,
    /// Skip entries whose server asked (`Retry-After`) to wait longer (`run`); `flush` does
    /// not, a person asked for it.
    pub honour_retry_after: bool,
    /// Leave this target alone (the ping `run` just stored after failing to send it).
    pub skip: Option<Ping>,
}

/// What a pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Entries delivered.
    pub delivered: usize,
    /// Entries that failed and are pending again.
    pub failed: usize,
    /// Entries refused for good (moved to `failed/`).
    pub permanent: usize,
    /// Entries left pending or in flight (by any process) after the pass.
    pub remaining: usize,
}

/// Claims every pending entry (as `options` allow) and tries each once within
/// `options.budget`, concurrently, through `sender`.
pub async fn deliver_pending(
    sender: &Sender,
    outbox: &Outbox,
    options: &PassOptions,
) -> Result<PassReport, OutboxError> {
    let skip = options.skip.as_ref().map(|p| super::entry::key(p.target()));
    let now = now_ms();
    let claimed = outbox.claim(
        usize::MAX,
        |key| Some(key) != skip.as_deref(),
        |_, entry| !options.honour_retry_after || entry.not_before_ms <= now,
    )?;
    let mut tasks = JoinSet::new();
    for claim in claimed {
        let (budget, sender, outbox) = (options.budget, sender.clone(), outbox.clone());
        tasks.spawn(async move {
            let outcome = attempt(&sender, &outbox, &claim, &budget).await;
            (claim, outcome)
        });
    }
    let mut report = PassReport::default();
    while let Some(joined) = tasks.join_next().await {
        let Ok((claim, outcome)) = joined else {
            continue;
        };
        match outcome {
            PingOutcome::Delivered { .. } => report.delivered += 1,
            PingOutcome::Retryable { .. } => report.failed += 1,
            PingOutcome::Permanent { .. } => report.permanent += 1,
        }
        outbox.finish(claim, &outcome)?;
    }
    report.remaining = outbox.list()?.len();
    Ok(report)
}

/// The most a `run`'s catch-up of older entries adds to the run: the run's own ping is
/// settled by then, and one hanging ping host must not make every later cron run take the
/// whole ping budget. An entry not answered in time stays pending for the daemon's drainer,
/// `outbox flush` or the next run.
pub(crate) const CATCH_UP_BUDGET: Duration = Duration::from_secs(2);

/// What a `run` does after its own ping: gives each pending entry one attempt, concurrently,
/// within `left` of its ping budget and at most [`CATCH_UP_BUDGET`] (entries under a
/// `Retry-After` are left alone), so hosts without the daemon still catch up. `stored` (the
/// ping the run just failed to send and stored) is not tried again. Problems are logged.
pub(crate) async fn catch_up(
    sender: &Sender,
    outbox: &Outbox,
    budget: &Budget,
    left: Duration,
    stored: Option<Ping>,
) {
    let left = left.min(CATCH_UP_BUDGET);
    if left.is_zero() {
        return;
    }
    let options = PassOptions {
        budget: Budget {
            total: left,
            attempts: 1,
            connect_timeout: budget.connect_timeout.min(left),
        },
        honour_retry_after: true,
        skip: stored,
    };
    match deliver_pending(sender, outbox, &options).await {
        Ok(report) => debug!(
            delivered = report.delivered,
            failed = report.failed,
            remaining = report.remaining,
            "outbox catch-up"
        ),
        Err(err) => warn!(error = %err, "cannot deliver what the outbox holds"),
    }
}

/// One delivery of a claimed entry, its requests marked as they leave (see
/// [`super::claims`]).
async fn attempt(
    sender: &Sender,
    outbox: &Outbox,
    claim: &Claimed,
    budget: &Budget,
) -> PingOutcome {
    match claim.entry.ping() {
        Ok(ping) => {
            let leaving = || outbox.leaving(claim);
            send_with(sender, &ping, budget, &leaving, |error| {
                outbox.attempt_ended(claim, error);
            })
            .await
        }
        Err(err) => PingOutcome::Permanent {
            error: crate::ping::PingError::Protocol(err.to_string()),
            attempts: 0,
        },
    }
}

/// How the daemon's drainer works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainOptions {
    /// How often the directory is looked at for entries written by other processes (`run`).
    pub poll: Duration,
    /// Time limit of one attempt.
    pub attempt_timeout: Duration,
    /// Backoff of a failing target: `random(0, min(cap, base * 2^n))` after its n-th failure.
    pub backoff_base: Duration,
    /// See `backoff_base`.
    pub backoff_cap: Duration,
    /// At most this many attempts at once (each to a different target).
    pub max_in_flight: usize,
    /// When the drainer is cancelled (the daemon stops), how long attempts already on their way
    /// get to bring their answer back before they are abandoned and put back: a request that
    /// reached a slow host and is abandoned is sent again by the next start, a duplicate.
    pub stop_grace: Duration,
}

impl Default for DrainOptions {
    /// Poll every 500 ms, 30 s per attempt, backoff 1 s doubling up to 5 min, 16 at once, 2 s
    /// for the answers on their way at a stop.
    fn default() -> DrainOptions {
        DrainOptions {
            poll: Duration::from_millis(500),
            attempt_timeout: Duration::from_secs(30),
            backoff_base: Duration::from_secs(1),
            backoff_cap: Duration::from_secs(300),
            max_in_flight: 16,
            stop_grace: crate::ping::STOP_GRACE,
        }
    }
}

/// A target's failures in a row and when it may be tried again.
type Backoff = HashMap<String, (u32, Instant)>;

/// The longest a target waits for a `Retry-After` read from an entry before its entry is read
/// again (the entry may have been replaced or removed by another process meanwhile).
const MAX_WAIT: Duration = Duration::from_secs(3600);

/// Delivers the outbox's entries until `cancel`: the daemon's task. Entries stored through
/// `outbox` (or a clone) are noticed at once, others within `options.poll`. Each target backs
/// off on its own; the server's `Retry-After` is honoured. On cancellation, attempts in flight
/// are abandoned and their entries put back. Pings leave through `sender`.
pub async fn drain(
    sender: Sender,
    outbox: Outbox,
    cancel: CancellationToken,
    options: DrainOptions,
) {
    let budget = Budget {
        total: options.attempt_timeout,
        attempts: 1,
        connect_timeout: options
            .attempt_timeout
            .min(Budget::default().connect_timeout),
    };
    let mut backoff = Backoff::new();
    let mut in_flight: HashMap<String, Claimed> = HashMap::new();
    let mut tasks: JoinSet<(String, PingOutcome)> = JoinSet::new();
    let mut last_error = String::new();
    loop {
        let free = options.max_in_flight.max(1).saturating_sub(in_flight.len());
        if free > 0 {
            let now = Instant::now();
            let wall = now_ms();
            // A target already in flight is not claimed again: a newer success stored for it
            // meanwhile waits, else the second claim would replace the first in `in_flight`
            // and the first would stay claimed (in flight) until its lease ran out. A target
            // backing off is skipped before its file is read: an idle drainer with many
            // pending entries reads none of them at a wake-up.
            let wanted = |key: &str| {
                !in_flight.contains_key(key) && backoff.get(key).map_or(true, |(_, at)| *at <= now)
            };
            // An entry under the server's `Retry-After` (stored by another process) is read
            // once; its target then waits in `backoff` until the time the server gave.
            let waiting = std::cell::RefCell::new(Vec::new());
            let due = |key: &str, entry: &super::Entry| {
                let due = entry.not_before_ms <= wall;
                if !due {
                    waiting
                        .borrow_mut()
                        .push((key.to_owned(), entry.not_before_ms - wall));
                }
                due
            };
            let claimed = outbox.claim(free, wanted, due);
            for (key, wait_ms) in waiting.take() {
                let failures = backoff.get(&key).map_or(0, |(n, _)| *n);
                let until = now
                    .checked_add(Duration::from_millis(wait_ms).min(MAX_WAIT))
                    .unwrap_or(now);
                backoff.insert(key, (failures, until));
            }
            match claimed {
                Ok(claimed) => {
                    last_error.clear();
                    for claim in claimed {
                        let key = claim.key.clone();
                        let (copy, sender, outbox) =
                            (claim.clone(), sender.clone(), outbox.clone());
                        tasks.spawn(async move {
                            (key, attempt(&sender, &outbox, &copy, &budget).await)
                        });
                        in_flight.insert(claim.key.clone(), claim);
                    }
                }
                Err(err) => {
                    let text = err.to_string();
                    if text != last_error {
                        warn!(error = %text, "cannot read the outbox; retrying");
                        last_error = text;
                    }
                }
            }
        }
        tokio::select! {
            () = cancel.cancelled() => break,
            () = outbox.stored() => {}
            () = tokio::time::sleep(options.poll) => {}
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                let Ok((key, outcome)) = joined else { continue };
                note(&mut backoff, &key, &outcome, &options);
                if let Some(claim) = in_flight.remove(&key) {
                    if let Err(err) = outbox.finish(claim, &outcome) {
                        warn!(error = %err, "cannot record a delivery attempt in the outbox");
                    }
                }
            }
        }
    }
    // Stopping: nothing new leaves; what is on its way gets `stop_grace` to be answered.
    let grace = tokio::time::sleep(options.stop_grace);
    tokio::pin!(grace);
    while !tasks.is_empty() {
        tokio::select! {
            () = &mut grace => break,
            Some(joined) = tasks.join_next() => {
                let Ok((key, outcome)) = joined else { continue };
                if let Some(claim) = in_flight.remove(&key) {
                    if let Err(err) = outbox.finish(claim, &outcome) {
                        warn!(error = %err, "cannot record a delivery attempt in the outbox");
                    }
                }
            }
        }
    }
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    for (_, claim) in in_flight {
        if let Err(err) = outbox.release(claim) {
            warn!(error = %err, "cannot put an outbox entry back");
        }
    }
}

/// Updates a target's backoff after an attempt.
fn note(backoff: &mut Backoff, key: &str, outcome: &PingOutcome, options: &DrainOptions) {
    match outcome {
        PingOutcome::Retryable { retry_after, .. } => {
            let failures = backoff.get(key).map_or(0, |(n, _)| *n).saturating_add(1);
            let pause =
                backoff::full_jitter(failures - 1, options.backoff_base, options.backoff_cap);
            let pause = retry_after.map_or(pause, |after| after.max(pause));
            backoff.insert(key.to_owned(), (failures, Instant::now() + pause));
        }
        _ => {
            backoff.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ping::PingError;

    #[test]
    fn backoff_grows_per_target_and_honours_retry_after() {
        let options = DrainOptions {
            backoff_base: Duration::from_millis(10),
            backoff_cap: Duration::from_millis(40),
            ..DrainOptions::default()
        };
        let mut backoff = Backoff::new();
        let failed = |retry_after| PingOutcome::Retryable {
            error: PingError::Status(503),
            attempts: 1,
            retry_after,
        };
        let before = Instant::now();
        note(
            &mut backoff,
            "a",
            &failed(Some(Duration::from_secs(7))),
            &options,
        );
        assert!(backoff["a"].1 >= before + Duration::from_secs(7));
        note(&mut backoff, "a", &failed(None), &options);
        assert_eq!(backoff["a"].0, 2);
        assert!(backoff["a"].1 <= Instant::now() + options.backoff_cap);
        assert!(!backoff.contains_key("b"), "targets back off on their own");
        note(
            &mut backoff,
            "a",
            &PingOutcome::Delivered {
                status: 200,
                attempts: 1,
            },
            &options,
        );
        assert!(backoff.is_empty());
    }
}
