//! The cluster's [`Admission`]: whether this agent runs a fire. A `run_on = "one"` job's fire
//! is claimed in etcd ([`Node::claim`]); the winner runs it, the others record which node did,
//! and when etcd cannot be asked `[cluster] on_unavailable` decides (`skip`: the fire is not
//! run here, logged and counted, so the check alarms unless another agent ran it; `run`: it
//! runs, a duplicate preferred to a gap). `run_on = "all"` jobs are not decided here: they run
//! every fire under the local rules alone.
//!
//! The claim is sent ahead of the fire ([`Admission::ahead`] at [`claim_time`]:
//! [`Node::claim_lead`] before it is due, 2 s or less with a short lease, and not before the
//! middle since the job's previous fire), so the spawn does not wait for etcd's round trip and
//! the batches ahead of it in a burst. The answer is kept here, one per job, until the fire
//! asks for it ([`Admission::decide`]), which uses it when it is final: a win or a loss. A
//! claim key is bound to no lease and outlives its winner (see [`super::node`]), so a win
//! stays this agent's whatever happened to its lease since, and a stalled agent that runs it
//! late still runs the slot once; a win answered too late to be sure is no win
//! ([`super::ClaimError::Late`]). An unavailable etcd is asked again at the fire. The daemon
//! sends no fire ahead that its local rules would not run now (a run going that `overlap`
//! makes it skip or queue behind, `pause --stop-jobs`): a fire claimed ahead but not run here
//! would not run on another agent either.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::watch;
use tracing::{debug, warn};

use super::node::CLAIM_KEEP;
use super::{Claim, Node};
use crate::config::{Job, OnUnavailable, RunOn};
use crate::run::admission::{Admission, Elsewhere, Pending};

/// The fire sent ahead and its answer once it came.
type Ahead = (DateTime<Utc>, watch::Receiver<Option<Claim>>);

/// The claims of this agent's `run_on = "one"` jobs.
pub struct Claims {
    node: Arc<Node>,
    /// Per job, the fire sent ahead and its answer once it came.
    ahead: Arc<Mutex<HashMap<String, Ahead>>>,
}

impl Claims {
    /// The admission of `node`'s agent.
    pub fn new(node: Arc<Node>) -> Claims {
        Claims {
            node,
            ahead: Arc::default(),
        }
    }

    /// The answer sent ahead for the fire of `job` at `fire`, if one was.
    fn take_ahead(&self, job: &str, fire: DateTime<Utc>) -> Option<watch::Receiver<Option<Claim>>> {
        let mut ahead = self.ahead.lock().unwrap_or_else(|e| e.into_inner());
        match ahead.remove(job) {
            Some((sent, answer)) if sent == fire => Some(answer),
            Some(other) => {
                // Sent for a later fire: it stays for that one.
                if other.0 > fire {
                    ahead.insert(job.to_owned(), other);
                }
                None
            }
            None => None,
        }
    }
}

/// When the claim of a fire due at `due` is sent: `lead` before it, but not before the middle
/// of the time since the job's previous fire (due at `last_due`). A job due every second
/// would otherwise claim each fire as the previous one starts, before that run shows as going:
/// an agent whose run outlasts the period would win fires that `overlap = "skip"` then makes
/// it skip, and no other agent would run them.
pub(crate) fn claim_time(
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

impl Admission for Claims {
    fn decides(&self, job: &Job) -> bool {
        job.run_on == RunOn::One
    }

    fn ahead_at(
        &self,
        _job: &Job,
        due: DateTime<Utc>,
        last_due: Option<DateTime<Utc>>,
    ) -> Option<DateTime<Utc>> {
        let lead = TimeDelta::from_std(self.node.claim_lead()).ok()?;
        Some(claim_time(due, lead, last_due))
    }

    fn ahead(&self, job: &Arc<Job>, fire: DateTime<Utc>) -> Pending<()> {
        let (answer, receiver) = watch::channel(None);
        self.ahead
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(job.name.clone(), (fire, receiver));
        let (node, job) = (Arc::clone(&self.node), Arc::clone(job));
        Box::pin(async move {
            let claim = node.claim(&job.name, fire, job.jitter + CLAIM_KEEP).await;
            let _ = answer.send(Some(claim));
        })
    }

    fn decide(&self, job: &Arc<Job>, fire: DateTime<Utc>) -> Pending<Result<(), Elsewhere>> {
        let sent = self.take_ahead(&job.name, fire);
        let (node, job) = (Arc::clone(&self.node), Arc::clone(job));
        Box::pin(async move {
            let keep = job.jitter + CLAIM_KEEP;
            let early = match sent {
                Some(mut answer) => answer
                    .wait_for(Option::is_some)
                    .await
                    .ok()
                    .and_then(|a| a.clone()),
                None => None,
            };
            let claim = match early {
                Some(claim @ (Claim::Won | Claim::Lost(_))) => claim,
                _ => node.claim(&job.name, fire, keep).await,
            };
            node.record(&job.name, fire, &claim);
            verdict(&node, &job, fire, claim)
        })
    }

    fn node(&self) -> Option<&str> {
        Some(&self.node.name)
    }
}

/// Whether a fire whose claim came to `claim` runs here.
fn verdict(node: &Node, job: &Job, fire: DateTime<Utc>, claim: Claim) -> Result<(), Elsewhere> {
    let scheduled = fire.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    match claim {
        Claim::Won => Ok(()),
        Claim::Lost(other) => {
            debug!(job = %job.name, scheduled = %scheduled, ran_on = %other, "fire claimed by another agent of the cluster; not run here");
            Err(Elsewhere::Taken(other))
        }
        Claim::Unavailable(why) => match node.on_unavailable {
            OnUnavailable::Skip => {
                warn!(job = %job.name, scheduled = %scheduled, "fire skipped: it cannot be claimed in etcd ({why}); on_unavailable = \"skip\": the check alarms unless another agent ran it");
                Err(Elsewhere::Undecided)
            }
            OnUnavailable::Run => {
                warn!(job = %job.name, scheduled = %scheduled, "fire run without a claim: etcd cannot be asked ({why}); on_unavailable = \"run\": other agents may run it too");
                Ok(())
            }
        },
    }
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
