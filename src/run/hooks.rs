//! The after-run hook: what plug-ins (sync, the status metrics, the cluster's relay of accepted
//! pings) are told about every run of the daemon, once its ping was sent.

use chrono::{DateTime, Utc};

use crate::config::Job;

/// Called after every run of a job (not after skips), once its ping (if any) was sent.
pub(crate) trait AfterRun: Send + Sync {
    /// `fire` is the scheduled time the run belongs to; `ping_accepted` tells whether the
    /// success ping was accepted by the server (false for failures and for jobs that ping
    /// nothing). Runs on the run's task: do not block; hand heavy work to your own task.
    fn after_run(&self, job: &Job, fire: DateTime<Utc>, ping_accepted: bool);
}
