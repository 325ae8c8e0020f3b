//! In a `[cluster]`: whether this agent runs a fire. A `run_on = "one"` job's fire is claimed in
//! etcd first ([`crate::cluster::Node::claim`]); the winner runs it, the others record which
//! node did, and when etcd cannot be asked `[cluster] on_unavailable` decides (`skip`: the fire
//! is not run here, logged and counted, so the check alarms unless another agent ran it;
//! `run`: it runs, a duplicate preferred to a gap). `run_on = "all"` jobs and agents without a
//! cluster run every fire.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tracing::{debug, warn};

use super::job::{millis, Shared};
use super::state::JobState;
use crate::cluster::{node::CLAIM_KEEP, Claim};
use crate::config::{Job, OnUnavailable, RunOn};

/// Whether the fire of `job` at `scheduled` runs on this agent. When it does not, the fire
/// counted by `state.run_started()` is taken back.
pub(super) async fn runs_here(
    job: &Job,
    shared: &Shared,
    state: &Arc<JobState>,
    scheduled: DateTime<Utc>,
) -> bool {
    let Some(node) = shared.cluster.as_ref().filter(|_| job.run_on == RunOn::One) else {
        return true;
    };
    let runs = match node
        .claim(&job.name, scheduled, job.jitter + CLAIM_KEEP)
        .await
    {
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
    }
    runs
}
