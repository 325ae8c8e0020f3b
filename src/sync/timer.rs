//! When sync may restart the service's timer: the rule that keeps a `PUT` from postponing an
//! alarm (docs/sync.md, "Period changes and the service's timer").
//!
//! The service starts a check's timer afresh when a `PUT` changes its period or re-activates
//! it ("When a check is deactivated and activated again, the timer will start when the check
//! is saved. This is also the case when changing the period of a check.",
//! `checkly/docs.checklyhq.com` `site/content/docs/heartbeat-monitors/_index.md`:95 at
//! `5bf1be4`; the emulator models it, docs/emulator.md). Such a `PUT` sent at a fire, before
//! the run's ping, or after a run that failed, would hide that run's failure for up to a whole
//! period. So a period change or a re-activation is sent only right after an accepted ping of
//! the check, when the ping has just restarted the timer anyway:
//!
//! - an accepted ping was recorded ([`record_ping`]) after the last accepted `PUT`, and
//! - no fire of the job's schedule came after the fire that ping belongs to.
//!
//! Until then the change is *held*: the `PUT` (if anything else changed) carries the accepted
//! period, grace and activation. Everything else (name, tags, alerting, a deactivation, a
//! grace that changes alone) goes out at once: it does not restart the timer. The first `PUT`
//! of a check (nothing accepted yet) goes at once: the job learns its ping URL from its answer.
//!
//! Who records the ping: the daemon for the jobs it runs (then it runs a pass at once), and
//! `run --job` for jobs run elsewhere (cron), which then sends its job's held change itself.

use std::path::Path;

use chrono::{DateTime, TimeDelta, Utc};

use super::desired::{diff, Change, Definition};
use super::state::{self, CheckRecord, StateError};
use crate::api::model::HeartbeatSpec;
use crate::config::Job;

/// Records that the service accepted a ping of `job`'s check `check_id` at `at`, for the run
/// of the fire `fire` (the scheduled time the run belongs to): from now until the next fire,
/// a held period change may go out.
pub fn record_ping(
    state_dir: &Path,
    failures: &crate::persist::Failures,
    job: &str,
    check_id: &str,
    fire: DateTime<Utc>,
    at: DateTime<Utc>,
) -> Result<CheckRecord, StateError> {
    state::update(state_dir, failures, job, check_id, |s| {
        s.acked_fire = Some(s.acked_fire.map_or(fire, |old| old.max(fire)));
        s.acked_at = Some(s.acked_at.map_or(at, |old| old.max(at)));
    })
}

/// The fire a run started at `started` belongs to: the latest fire at or before it (a run
/// started by cron, or by hand between fires), else `started` (a schedule without fire times).
pub fn fire_of_run(job: &Job, started: DateTime<Utc>) -> DateTime<Utc> {
    started
        .checked_add_signed(TimeDelta::nanoseconds(1))
        .and_then(|after| job.schedule.prev_before(after, job.timezone))
        .unwrap_or(started)
}

/// Whether a `PUT` at `now` may restart the timer of `job`'s check (see the module header).
pub fn may_restart(job: &Job, known: Option<&CheckRecord>, now: DateTime<Utc>) -> bool {
    let Some(known) = known.filter(|k| k.accepted.is_some()) else {
        return true;
    };
    let (Some(fire), Some(pinged)) = (known.acked_fire, known.acked_at) else {
        return false;
    };
    if known.accepted_at.is_some_and(|put| put >= pinged) {
        return false;
    }
    let latest = now
        .checked_add_signed(TimeDelta::nanoseconds(1))
        .and_then(|after| job.schedule.prev_before(after, job.timezone));
    latest.map_or(true, |latest| fire >= latest)
}

/// Whether sending `desired` after `accepted` restarts the service's timer: another period
/// (compared in seconds) or a re-activation.
pub fn restarts_timer(accepted: &Definition, desired: &Definition) -> bool {
    let seconds = |d: &Definition| {
        d.body
            .heartbeat
            .as_ref()
            .map(|h: &HeartbeatSpec| h.period_unit.seconds().map(|unit| unit * h.period))
    };
    let active = |d: &Definition| d.body.activated != Some(false);
    seconds(accepted) != seconds(desired) || (!active(accepted) && active(desired))
}

/// `desired`, with its period, grace and activation held at the accepted ones when it would
/// restart the timer and [`may_restart`] does not allow that now; and the held changes (empty
/// when nothing is held).
pub fn hold(
    job: &Job,
    known: Option<&CheckRecord>,
    desired: Definition,
    now: DateTime<Utc>,
) -> (Definition, Vec<Change>) {
    let Some(accepted) = known.and_then(|k| k.accepted.as_ref()) else {
        return (desired, Vec::new());
    };
    if !restarts_timer(accepted, &desired) || may_restart(job, known, now) {
        return (desired, Vec::new());
    }
    let mut sent = desired.clone();
    sent.body.activated = match (accepted.body.activated, desired.body.activated) {
        (Some(false), _) => Some(false),
        (_, wanted) => wanted,
    };
    if let (Some(kept), Some(spec)) = (&accepted.body.heartbeat, sent.body.heartbeat.as_mut()) {
        spec.period = kept.period;
        spec.period_unit = kept.period_unit.clone();
        spec.grace = kept.grace;
        spec.grace_unit = kept.grace_unit.clone();
    }
    let held = diff(Some(&sent), &desired);
    (sent, held)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::period::Timing;
    use std::time::Duration;

    fn job(schedule: &str) -> Job {
        let text = format!(
            "[[jobs]]\nname = \"j\"\nschedule = \"{schedule}\"\ncheck_id = \"c\"\ncommand = [\"true\"]\n"
        );
        let loaded =
            crate::config::Config::from_text(Path::new("/test.toml"), &text).expect("valid config");
        (*loaded.config.jobs[0]).clone()
    }

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("RFC 3339")
    }

    fn definition(job: &Job, days: u64, activated: bool) -> Definition {
        let timing = Timing {
            period: Duration::from_secs(days * 86_400),
            grace: Duration::from_secs(3_600),
        };
        let mut definition = crate::sync::desired::desired(job, timing, None, None);
        definition.body.activated = Some(activated);
        definition
    }

    fn record(job: &Job, accepted_at: &str, acked: Option<(&str, &str)>) -> CheckRecord {
        CheckRecord {
            check_id: "c".into(),
            accepted: Some(definition(job, 1, true)),
            accepted_at: Some(at(accepted_at)),
            acked_fire: acked.map(|(fire, _)| at(fire)),
            acked_at: acked.map(|(_, when)| at(when)),
            ..CheckRecord::default()
        }
    }

    #[test]
    fn a_period_change_waits_for_the_ping_of_the_latest_fire() {
        let job = job("0 9 * * 1-5");
        let friday = definition(&job, 3, true);
        // Friday 09:00:01, at the fire, before its ping: held.
        let before = record(
            &job,
            "2026-11-19T09:00:02Z",
            Some(("2026-11-19T09:00:00Z", "2026-11-19T09:00:01Z")),
        );
        let (sent, held) = hold(
            &job,
            Some(&before),
            friday.clone(),
            at("2026-11-20T09:00:01Z"),
        );
        assert_eq!(sent.body.heartbeat.as_ref().map(|h| h.period), Some(1));
        assert_eq!(held.len(), 1, "{held:?}");
        assert_eq!(held[0].field, "heartbeat.period");
        // Right after Friday's accepted ping: sent.
        let after = record(
            &job,
            "2026-11-19T09:00:02Z",
            Some(("2026-11-20T09:00:00Z", "2026-11-20T09:03:00Z")),
        );
        let (sent, held) = hold(
            &job,
            Some(&after),
            friday.clone(),
            at("2026-11-20T09:03:01Z"),
        );
        assert_eq!((sent, held.len()), (friday.clone(), 0));
        // Once a PUT followed that ping, a later change waits for the next ping.
        let put_after = record(
            &job,
            "2026-11-20T09:03:01Z",
            Some(("2026-11-20T09:00:00Z", "2026-11-20T09:03:00Z")),
        );
        assert!(!may_restart(
            &job,
            Some(&put_after),
            at("2026-11-20T12:00:00Z")
        ));
        // A ping of an older fire (Friday's run failed; Thursday's was the last): held.
        assert!(!may_restart(
            &job,
            Some(&before),
            at("2026-11-20T12:00:00Z")
        ));
        // Nothing accepted yet: the first PUT goes at once.
        assert!(may_restart(&job, None, at("2026-11-20T12:00:00Z")));
    }

    #[test]
    fn a_reactivation_is_held_a_deactivation_is_not() {
        let job = job("@daily");
        let mut known = record(&job, "2026-11-20T00:00:05Z", None);
        let now = at("2026-11-20T12:00:00Z");
        let (sent, held) = hold(&job, Some(&known), definition(&job, 1, false), now);
        assert_eq!((sent.body.activated, held.len()), (Some(false), 0));
        known.accepted = Some(definition(&job, 1, false));
        let (sent, held) = hold(&job, Some(&known), definition(&job, 1, true), now);
        assert_eq!(sent.body.activated, Some(false));
        assert_eq!(held[0].field, "activated");
    }

    #[test]
    fn a_recorded_ping_keeps_the_latest_fire() {
        let job = &job("@daily");
        let dir = tempfile::tempdir().expect("temp dir");
        let fire = at("2026-11-21T00:00:00Z");
        let saved = record_ping(
            dir.path(),
            &crate::persist::Failures::default(),
            "j",
            "c",
            fire,
            at("2026-11-21T00:00:03Z"),
        )
        .expect("saved");
        assert_eq!(saved.acked_fire, Some(fire));
        let older = record_ping(
            dir.path(),
            &crate::persist::Failures::default(),
            "j",
            "c",
            at("2026-11-20T00:00:00Z"),
            at("2026-11-21T00:00:01Z"),
        )
        .expect("saved");
        assert_eq!(
            older.acked_fire,
            Some(fire),
            "an older fire never moves it back"
        );
        assert_eq!(fire_of_run(job, at("2026-11-21T00:00:02Z")), fire);
    }
}
