//! In a `[cluster]`: whether this agent runs a fire. A `run_on = "one"` job's fire is claimed in
//! etcd ([`crate::cluster::Node::claim`]); the winner runs it, the others record which node
//! did, and when etcd cannot be asked `[cluster] on_unavailable` decides (`skip`: the fire is
//! not run here, logged and counted, so the check alarms unless another agent ran it; `run`:
//! it runs, a duplicate preferred to a gap). `run_on = "all"` jobs and agents without a
//! cluster run every fire.
//!
//! The claim is sent ahead of the fire ([`claim_early`] at [`claim_time`]:
//! [`crate::cluster::Node::claim_lead`] before it is due, 2 s or less with a short lease, and
//! not before the middle since the job's previous fire), so the spawn does not wait for etcd: with
//! 500 jobs due in the same second, a claim sent at the due time put the etcd round trip and
//! the batches ahead of it on every spawn (p99 1.6-1.8x a lone agent's, BENCHMARKS.md). At
//! the fire, the early answer is used when it is final: a win still bound to the lease held
//! now, or a loss. A win whose lease has gone since (etcd may have dropped the claim with it)
//! and an unavailable etcd are asked again at the fire. A fire claimed early but then not run
//! here (a run still going with `overlap = "skip"`, `pause --stop-jobs` in that second) is
//! not run by another agent either, which is why no early claim is sent while either holds.
//!
//! `overlap` counts runs that go, not fires waiting for their claim: a run of a claimed job
//! holds the job's [`JobState::gate`] from its won claim to its end, and the fire checks and
//! the early claim look at the gate. A fire waiting for its claim (which its agent may well
//! lose) therefore never makes the next fire skip: when etcd answered slower than a job's
//! period, every agent used to skip every other fire as "still running", and the check
//! alarmed. A fire whose claim is won while an earlier fire's run goes applies `overlap`
//! then: `skip` skips it (logged), `queue` waits for the gate.

use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::OwnedMutexGuard;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use super::job::{millis, Shared};
use super::state::JobState;
use crate::cluster::{node::CLAIM_KEEP, Claim, LeaseId, Node};
use crate::config::{Job, OnUnavailable, Overlap, RunOn};

/// A fire's claim sent before the fire was due; `claim` is `None` when none was sent.
pub(super) struct Early {
    /// The fire's scheduled time (before jitter).
    pub fire: DateTime<Utc>,
    claim: Option<JoinHandle<(Claim, Option<LeaseId>)>>,
}

/// The node that claims the fires of `job`, when they are claimed.
fn claimer<'a>(job: &Job, shared: &'a Shared) -> Option<&'a Arc<Node>> {
    shared.cluster.as_ref().filter(|_| job.run_on == RunOn::One)
}

/// Whether the fires of `job` are claimed (a `run_on = "one"` job in a cluster).
pub(super) fn claims(job: &Job, shared: &Shared) -> bool {
    claimer(job, shared).is_some()
}

/// A run admitted on this agent: for a claimed job whose `overlap` is not `allow`, it holds the
/// job's [`JobState::gate`] until dropped (when the run has ended).
pub(super) struct Admitted {
    _gate: Option<OwnedMutexGuard<()>>,
}

/// How long before its due time a fire of `job` is claimed (`None`: it is not claimed).
pub(super) fn lead(job: &Job, shared: &Shared) -> Option<TimeDelta> {
    let node = claimer(job, shared)?;
    TimeDelta::from_std(node.claim_lead()).ok()
}

/// When the claim of a fire due at `due` is sent: `lead` before it, but not before the middle
/// of the time since the job's previous fire (due at `last_due`). A job due every second
/// would otherwise claim each fire as the previous one starts, before that run shows as going
/// (it takes the job's gate a moment later): an agent whose run outlasts the period would win
/// fires that `overlap = "skip"` then makes it skip, and no other agent would run them.
pub(super) fn claim_time(
    due: DateTime<Utc>,
    lead: TimeDelta,
    last_due: Option<DateTime<Utc>>,
) -> DateTime<Utc> {
    let early = due - lead;
    match last_due {
        Some(last) if last < due => early.max(last + (due - last) / 2),
        _ => early,
    }
}

/// Sends the claim of the fire of `job` at `fire` now, in the background, unless a run of the
/// job is going that would make this agent skip or queue it, or the job is stopped by a pause
/// (see the module header): such a fire is claimed when it comes.
pub(super) fn claim_early(
    job: &Arc<Job>,
    shared: &Shared,
    state: &JobState,
    fire: DateTime<Utc>,
) -> Early {
    let busy = job.overlap != Overlap::Allow && state.gate_held();
    let paused = || shared.persisted.stopped_by_pause(&job.name, Utc::now());
    let claim = claimer(job, shared)
        .filter(|_| !busy && !paused())
        .map(|node| {
            let (node, job) = (Arc::clone(node), Arc::clone(job));
            tokio::spawn(async move { node.claim(&job.name, fire, job.jitter + CLAIM_KEEP).await })
        });
    Early { fire, claim }
}

/// Whether the fire of `job` at `scheduled` runs on this agent, from its early claim when one
/// was sent for it, and then (for a claimed job) under its `overlap` rule against the runs
/// that really go: a fire waiting for its claim does not hold back the next fire, whose claim
/// may be answered first. When it does not run, the fire counted by `state.run_started()` is
/// taken back.
pub(super) async fn runs_here(
    job: &Job,
    shared: &Shared,
    state: &Arc<JobState>,
    scheduled: DateTime<Utc>,
    early: Option<Early>,
) -> Option<Admitted> {
    let Some(node) = claimer(job, shared) else {
        return Some(Admitted { _gate: None });
    };
    let keep = job.jitter + CLAIM_KEEP;
    let early = early
        .filter(|early| early.fire == scheduled)
        .and_then(|early| early.claim);
    let claim = match early {
        Some(sent) => match sent.await {
            Ok((Claim::Won, lease)) if lease.is_some() && lease == node.lease() => Claim::Won,
            Ok((Claim::Lost(other), _)) => Claim::Lost(other),
            _ => node.claim(&job.name, scheduled, keep).await.0,
        },
        None => node.claim(&job.name, scheduled, keep).await.0,
    };
    node.record(&job.name, scheduled, &claim);
    let runs = match claim {
        Claim::Won => true,
        Claim::Lost(other) => {
            debug!(job = %job.name, scheduled = %millis(scheduled), ran_on = %other, "fire claimed by another agent of the cluster; not run here");
            false
        }
        Claim::Unavailable(why) => match node.on_unavailable {
            OnUnavailable::Skip => {
                warn!(job = %job.name, scheduled = %millis(scheduled), "fire skipped: it cannot be claimed in etcd ({why}); on_unavailable = \"skip\": the check alarms unless another agent ran it");
                false
            }
            OnUnavailable::Run => {
                warn!(job = %job.name, scheduled = %millis(scheduled), "fire run without a claim: etcd cannot be asked ({why}); on_unavailable = \"run\": other agents may run it too");
                true
            }
        },
    };
    if !runs {
        state.run_not_started();
        return None;
    }
    let gate = match job.overlap {
        Overlap::Allow => None,
        Overlap::Queue => Some(Arc::clone(&state.gate).lock_owned().await),
        Overlap::Skip => {
            if let Ok(gate) = Arc::clone(&state.gate).try_lock_owned() {
                Some(gate)
            } else {
                info!(job = %job.name, scheduled = %millis(scheduled), skipped = true, "run skipped: the previous run is still running (overlap = \"skip\"); its claim was answered after this fire came");
                state.record_skip(Utc::now());
                state.run_not_started();
                return None;
            }
        }
    };
    Some(Admitted { _gate: gate })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_goes_lead_early_but_not_before_the_middle_since_the_last_fire() {
        let t = |s: i64| DateTime::from_timestamp(s, 0).expect("time");
        let lead = TimeDelta::seconds(2);
        assert_eq!(claim_time(t(100), lead, None), t(98));
        assert_eq!(claim_time(t(100), lead, Some(t(90))), t(98));
        // Every second: half a second before.
        assert_eq!(
            claim_time(t(100), lead, Some(t(99))),
            t(99) + TimeDelta::milliseconds(500)
        );
        // A clock stepped back: the lead alone.
        assert_eq!(claim_time(t(100), lead, Some(t(120))), t(98));
    }
}
