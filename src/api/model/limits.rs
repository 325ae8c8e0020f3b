//! The service's limits on a heartbeat check's timing (period 30 s to 365 days, grace up to
//! 365 days) and how a duration is stated in the units a [`super::HeartbeatSpec`] carries; and
//! the sets of values the service accepts in `alertSettings` and `triggerIncident`, which both
//! `config check` and the emulator check against (one home, so the two cannot disagree).
//!
//! The sets are those of the service's published schema (`checkly/docs` `api-reference/openapi.json`
//! at 28f329851b7a: `escalationType`, `reminders.amount`, `reminders.interval`,
//! `runBasedEscalation.failedRunThreshold`, `timeBasedEscalation.minutesFailingThreshold`,
//! `parallelRunFailureThreshold.percentage`, `triggerIncident.severity`), the same as the
//! official CLI's `alert-escalation-policy.ts` and `incident.ts` (`checkly/checkly-cli` c25a9045).

use std::time::Duration;

use super::TimeUnit;

const DAY: u64 = 86_400;

/// The shortest heartbeat period the service accepts.
pub const MIN_PERIOD: Duration = Duration::from_secs(30);
/// The longest heartbeat period the service accepts (365 days).
pub const MAX_PERIOD: Duration = Duration::from_secs(365 * DAY);
/// The longest grace the service accepts (365 days).
pub const MAX_GRACE: Duration = Duration::from_secs(365 * DAY);

/// `alertSettings.escalationType`.
pub const ESCALATION_TYPES: &[&str] = &["RUN_BASED", "TIME_BASED"];
/// `alertSettings.reminders.amount` (0 disables, 100000 is unlimited).
pub const REMINDER_AMOUNTS: &[u32] = &[0, 1, 2, 3, 4, 5, 100_000];
/// `alertSettings.reminders.interval`, minutes.
pub const REMINDER_INTERVALS: &[u32] = &[1, 2, 3, 4, 5, 10, 15, 30];
/// `alertSettings.runBasedEscalation.failedRunThreshold`.
pub const FAILED_RUN_THRESHOLDS: &[u32] = &[1, 2, 3, 4, 5];
/// `alertSettings.timeBasedEscalation.minutesFailingThreshold`.
pub const MINUTES_FAILING_THRESHOLDS: &[u32] = &[5, 10, 15, 30];
/// `alertSettings.parallelRunFailureThreshold.percentage`.
pub const FAILURE_PERCENTAGES: &[u32] = &[10, 20, 30, 40, 50, 60, 70, 80, 90, 100];
/// `triggerIncident.severity`.
pub const SEVERITIES: &[&str] = &["CRITICAL", "MAJOR", "MEDIUM", "MINOR"];

/// Whether `text` is a UUID in its canonical 8-4-4-4-12 hex form (the service's `guid`/`uuid`
/// fields: ping tokens, status page service ids).
pub fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, len)| g.len() == len && g.chars().all(|c| c.is_ascii_hexdigit()))
}

/// `[a, b, c]`: a value set for messages.
pub fn list<T: std::fmt::Display>(values: &[T]) -> String {
    let items: Vec<String> = values.iter().map(ToString::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// A duration as a value in the largest of days, hours, minutes and seconds that states it
/// exactly (sub-second parts are rounded up to a second).
pub fn in_units(duration: Duration) -> (u64, TimeUnit) {
    let secs = ceil_secs(duration);
    for (unit, size) in [
        (TimeUnit::Days, DAY),
        (TimeUnit::Hours, 3_600),
        (TimeUnit::Minutes, 60),
    ] {
        if secs > 0 && secs % size == 0 {
            return (secs / size, unit);
        }
    }
    (secs, TimeUnit::Seconds)
}

/// `5 minutes`, `25 hours`, `1 day`: a duration in its exact unit, for messages.
pub fn describe(duration: Duration) -> String {
    let (value, unit) = in_units(duration);
    let name = unit.as_str().trim_end_matches('s');
    if value == 1 {
        format!("1 {name}")
    } else {
        format!("{value} {name}s")
    }
}

/// Whole seconds, rounding up: the service takes whole units, and a period or grace rounded
/// down could alarm early.
pub fn ceil_secs(duration: Duration) -> u64 {
    duration.as_secs() + u64::from(duration.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: u64 = 3_600;

    #[test]
    fn units_are_the_largest_that_state_the_value_exactly() {
        assert_eq!(in_units(Duration::from_secs(300)), (5, TimeUnit::Minutes));
        assert_eq!(in_units(Duration::from_secs(86_400)), (1, TimeUnit::Days));
        assert_eq!(
            in_units(Duration::from_secs(25 * HOUR)),
            (25, TimeUnit::Hours)
        );
        assert_eq!(in_units(Duration::from_secs(90)), (90, TimeUnit::Seconds));
        assert_eq!(
            in_units(Duration::from_millis(1_500)),
            (2, TimeUnit::Seconds)
        );
        assert_eq!(in_units(Duration::ZERO), (0, TimeUnit::Seconds));
        assert_eq!(describe(Duration::from_secs(10)), "10 seconds");
        assert_eq!(describe(Duration::from_secs(86_400)), "1 day");
    }
}
