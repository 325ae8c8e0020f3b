//! A check's heartbeat period and grace from a job: the period the check needs right now
//! (explicit, the steady period of the schedule's cadence, or the gap being timed), the auto
//! grace, and both clamped to the service's limits.
//!
//! Everything here is a pure function of the job, the schedule's cadence and an injected `now`;
//! the cadence itself is measured by [`crate::schedule::cadence`].

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::api::model::limits::{ceil_secs, MAX_GRACE, MAX_PERIOD, MIN_PERIOD};
use crate::config::{CheckDuration, Job};
use crate::schedule::{upcoming_gap, Cadence};

/// What a check's heartbeat should say, before units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// The period, within the service's limits.
    pub period: Duration,
    /// The grace, within the service's limits.
    pub grace: Duration,
}

/// The auto grace: `timeout + jitter + margin`, where margin is a tenth of the period, at least
/// one minute and at most one hour, plus what the job's retries can add to a run (`retries ×
/// timeout` and every wait between attempts at its cap), so that a success on the last attempt
/// never alarms; rounded up to a whole minute.
pub fn auto_grace(job: &Job, period: Duration) -> Duration {
    let margin = (period / 10).clamp(Duration::from_secs(60), Duration::from_secs(3_600));
    let total =
        job.timeout.unwrap_or_default() + job.jitter + margin + job.retries.extra_time(job.timeout);
    Duration::from_secs(ceil_secs(total).div_ceil(60) * 60)
}

/// The heartbeat timing of `job` at `now`: the period (explicit, steady, or the upcoming gap),
/// the grace (explicit or auto, plus the DST slack of a steady schedule), clamped to the
/// service's limits with any period over 365 days moved into the grace. `None` when the
/// period is auto and the schedule has no fire times.
pub fn timing(
    job: &Job,
    cadence: Option<&Cadence>,
    now: DateTime<Utc>,
    acked: Option<DateTime<Utc>>,
) -> Option<Timing> {
    let (period, slack) = match job.check.period {
        CheckDuration::Fixed(period) => (period, Duration::ZERO),
        CheckDuration::Auto => match cadence.and_then(Cadence::steady) {
            Some(steady) => steady,
            None => (
                upcoming_gap(&job.schedule, job.timezone, now, acked)?,
                Duration::ZERO,
            ),
        },
    };
    let period = Duration::from_secs(ceil_secs(period));
    let overflow = period.saturating_sub(MAX_PERIOD);
    let period = period.clamp(MIN_PERIOD, MAX_PERIOD);
    let grace = match job.check.grace {
        CheckDuration::Fixed(grace) => Duration::from_secs(ceil_secs(grace)),
        CheckDuration::Auto => auto_grace(job, period) + slack,
    };
    Some(Timing {
        period,
        grace: (grace + overflow).min(MAX_GRACE),
    })
}

#[cfg(test)]
mod tests;
