//! Whether a fire runs here, decided before the run counts as started and never undone
//! afterwards.
//!
//! The local rules are the same for every fire: a job stopped by `pause --stop-jobs` skips its
//! fires, and [`overlap`] applies the job's `overlap` to runs that really go (each run whose
//! `overlap` is not `allow` holds the job's [`Gate`] from its admission to its end). An
//! [`Admission`] given to the daemon when it is assembled may decide fires beyond that: in a
//! `[cluster]`, `crate::cluster` claims each fire of a `run_on = "one"` job in etcd, sending
//! the claim ahead of the fire so the spawn does not wait for etcd. A fire waiting for that
//! answer is not a run: it holds no gate, so it never makes the next fire skip; the overlap
//! rule is applied again once the claim is won ([`Gate::admit`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::OwnedMutexGuard;

use crate::config::{Job, Overlap};

/// What the local rules make of a fire while an earlier run of the job may still go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Overlapping {
    /// It runs (nothing goes, or `overlap = "allow"`).
    Go,
    /// It is skipped (`overlap = "skip"`).
    Skip,
    /// It waits for the run that goes (`overlap = "queue"`).
    Queue,
}

/// The overlap rule: what a fire of `job` does when `busy` (a run of it goes).
pub(crate) fn overlap(job: &Job, busy: bool) -> Overlapping {
    match (busy, job.overlap) {
        (false, _) | (true, Overlap::Allow) => Overlapping::Go,
        (true, Overlap::Skip) => Overlapping::Skip,
        (true, Overlap::Queue) => Overlapping::Queue,
    }
}

/// A job's gate: held by each of its runs whose `overlap` is not `allow`, from admission to
/// the run's end.
#[derive(Debug, Default, Clone)]
pub(crate) struct Gate(Arc<tokio::sync::Mutex<()>>);

/// A run admitted here: holds the job's [`Gate`] (when its `overlap` needs it) until dropped
/// at the run's end.
#[derive(Debug)]
pub(crate) struct Admitted {
    _gate: Option<OwnedMutexGuard<()>>,
}

impl Gate {
    /// Admits a run of `job` under its `overlap` rule: `None` when it is skipped because a
    /// run holds the gate; with `queue`, waits for that run to end.
    pub(crate) async fn admit(&self, job: &Job) -> Option<Admitted> {
        let gate = match job.overlap {
            Overlap::Allow => None,
            Overlap::Queue => Some(Arc::clone(&self.0).lock_owned().await),
            Overlap::Skip => Some(Arc::clone(&self.0).try_lock_owned().ok()?),
        };
        Some(Admitted { _gate: gate })
    }

    /// Admits a run now, without waiting: the local rules were applied by the caller.
    pub(crate) fn admit_now(&self, job: &Job) -> Admitted {
        let gate = match job.overlap {
            Overlap::Allow => None,
            _ => Arc::clone(&self.0).try_lock_owned().ok(),
        };
        Admitted { _gate: gate }
    }
}

/// A boxed future that outlives its caller (it runs on the daemon's run tracker).
pub(crate) type Pending<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Why a fire that the admission decided does not run here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Elsewhere {
    /// Another agent runs it (its node name).
    Taken(String),
    /// It could not be decided and the configured policy skips it (already logged).
    Undecided,
}

/// Decides fires beyond the local rules (see the module header); given to the daemon when it
/// is assembled. The daemon runs every future it returns on its own run tracker, so shutdown
/// waits for them.
pub(crate) trait Admission: Send + Sync {
    /// Whether this admission decides the fires of `job`; the others run under the local
    /// rules alone.
    fn decides(&self, job: &Job) -> bool;

    /// When the fire of `job` due at `due` is sent ahead ([`Admission::ahead`]), given when
    /// the job's previous fire was due; `None`: it is decided at the fire only.
    fn ahead_at(
        &self,
        job: &Job,
        due: DateTime<Utc>,
        last_due: Option<DateTime<Utc>>,
    ) -> Option<DateTime<Utc>>;

    /// Starts deciding the fire of `job` at `fire` (its scheduled time) ahead of it; the
    /// answer is kept for [`Admission::decide`].
    fn ahead(&self, job: &Arc<Job>, fire: DateTime<Utc>) -> Pending<()>;

    /// Decides the fire of `job` at `fire`, using an answer sent ahead when it is still good.
    fn decide(&self, job: &Arc<Job>, fire: DateTime<Utc>) -> Pending<Result<(), Elsewhere>>;

    /// The name this agent runs under (`HEARTBEAT_AGENT_NODE` of its children).
    fn node(&self) -> Option<&str>;
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::Config;

    fn job(overlap: &str) -> Job {
        let text = format!(
            "[[jobs]]\nname = \"j\"\nping_url = \"http://127.0.0.1:9/admission-token\"\n\
             schedule = \"@hourly\"\ncommand = [\"true\"]\noverlap = \"{overlap}\"\n"
        );
        let loaded = Config::from_text(Path::new("/test.toml"), &text).expect("valid");
        (*loaded.config.jobs[0]).clone()
    }

    #[test]
    fn the_overlap_rule_looks_only_at_a_run_that_goes() {
        for (overlap, busy) in [
            ("skip", Overlapping::Skip),
            ("queue", Overlapping::Queue),
            ("allow", Overlapping::Go),
        ] {
            assert_eq!(super::overlap(&job(overlap), true), busy, "{overlap}");
            assert_eq!(
                super::overlap(&job(overlap), false),
                Overlapping::Go,
                "{overlap}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_gate_skips_or_queues_behind_a_run_that_holds_it() {
        let gate = Gate::default();
        let (skip, queue, allow) = (job("skip"), job("queue"), job("allow"));
        let first = gate.admit(&skip).await.expect("nothing goes: admitted");
        assert!(gate.admit(&skip).await.is_none(), "skip: not admitted");
        assert!(
            gate.admit(&allow).await.is_some(),
            "allow: admitted beside it"
        );
        let queued = tokio::spawn({
            let gate = gate.clone();
            async move { gate.admit(&queue).await.is_some() }
        });
        tokio::task::yield_now().await;
        assert!(!queued.is_finished(), "queue: waits for the run to end");
        drop(first);
        assert!(queued.await.expect("task"), "queue: admitted once it ended");
    }
}
