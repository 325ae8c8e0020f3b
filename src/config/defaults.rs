//! The values a setting takes when the file leaves it out, and the rule for a pending
//! success's age limit, which depends on the job when `outbox_max_age` is not set.

use std::time::Duration;

use super::Job;

/// The default `kill_after`.
pub(crate) const KILL_AFTER: Duration = Duration::from_secs(10);
/// The default `history`: runs kept per job.
pub(crate) const HISTORY: usize = 100;

/// The most runs `history` may keep per job: with the largest `output_tail` a job's files stay
/// within a few hundred MiB (docs/history.md gives the formula).
pub(crate) const MAX_HISTORY: usize = 10_000;

/// The default `history_keep_removed`: 7 days.
pub(crate) const HISTORY_KEEP_REMOVED: Duration = Duration::from_secs(7 * 86_400);

/// The default `output_tail`: 10 KiB.
pub(crate) const OUTPUT_TAIL: usize = 10 * 1024;
/// The largest `output_tail`: 1 MiB. Every job's last output tail stays in the daemon's memory
/// (for `/status`), so the limit bounds the daemon's size whatever its jobs print.
pub(crate) const OUTPUT_TAIL_MAX: usize = 1024 * 1024;
/// The most of a run's output a fail ping carries (`fail_body = "output_tail"` with a larger
/// `output_tail` is an error): a body stays well below what heartbeat services store, and an
/// undelivered fail ping stays a small outbox entry.
pub(crate) const FAIL_BODY_MAX: usize = 100 * 1024;
/// The default `shutdown_timeout`.
pub(crate) const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);
/// The default `resync_interval`.
pub(crate) const RESYNC_INTERVAL: Duration = Duration::from_secs(6 * 3600);
/// The default `reassert_interval`.
pub(crate) const REASSERT_INTERVAL: Duration = Duration::from_secs(86_400);
/// The default `sync_jitter`.
pub(crate) const SYNC_JITTER: Duration = Duration::from_secs(30);
/// The default `shell_program`.
pub(crate) const SHELL: &str = "/bin/sh";

/// The default `[agent] outbox_max_entries`: far more targets than one host pings, small
/// enough that a scan of the outbox directory stays instant.
pub const OUTBOX_MAX_ENTRIES: usize = 1000;

/// How long a pending success is kept when neither `outbox_max_age` nor the job's period is
/// known.
pub(crate) const OUTBOX_MAX_AGE: Duration = Duration::from_secs(3600);

/// The age limit of a pending success: `outbox_max_age` when set (`configured`), else the
/// job's period (the gap after its next fire), else [`OUTBOX_MAX_AGE`].
pub(crate) fn outbox_max_age(configured: Option<Duration>, job: Option<&Job>) -> Duration {
    configured
        .or_else(|| {
            let job = job?;
            let next = job.schedule.next_after(chrono::Utc::now(), job.timezone)?;
            job.schedule.gap_after(next, job.timezone)
        })
        .unwrap_or(OUTBOX_MAX_AGE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_age_prefers_the_setting_then_the_jobs_period() {
        assert_eq!(
            outbox_max_age(Some(Duration::from_secs(5)), None),
            Duration::from_secs(5)
        );
        assert_eq!(outbox_max_age(None, None), OUTBOX_MAX_AGE);
        let text =
            "[[jobs]]\nname = \"j\"\nschedule = \"*/5 * * * *\"\nping_url = \"http://p/t\"\n";
        let loaded = super::super::Config::from_text(std::path::Path::new("c.toml"), text).unwrap();
        let job = &loaded.config.jobs[0];
        assert_eq!(outbox_max_age(None, Some(job)), Duration::from_secs(300));
        assert_eq!(
            outbox_max_age(Some(Duration::from_secs(5)), Some(job)),
            Duration::from_secs(5)
        );
    }
}
