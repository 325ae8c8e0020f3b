//! A check's heartbeat period and grace from a job's schedule: the cadence of the schedule
//! (steady or irregular, measured in real time over a look-ahead), the period the check needs
//! right now, the auto grace, the service's limits with clamping, and the units sent.
//!
//! Everything here is a pure function of the schedule, the zone and an injected `now`.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Offset, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;

use crate::api::model::TimeUnit;
use crate::config::{CheckDuration, Job};
use crate::schedule::Schedule;

/// The shortest heartbeat period the service accepts.
pub const MIN_PERIOD: Duration = Duration::from_secs(30);
/// The longest heartbeat period the service accepts (365 days).
pub const MAX_PERIOD: Duration = Duration::from_secs(365 * DAY);
/// The longest grace the service accepts (365 days).
pub const MAX_GRACE: Duration = Duration::from_secs(365 * DAY);
/// Schedules whose longest gap is at most this keep one period (the longest gap) even when
/// irregular: adapting would cost a PUT per run for little gain.
pub const ADAPT_ABOVE: Duration = Duration::from_secs(3_600);

const DAY: u64 = 86_400;
/// How far ahead the cadence is measured: a year and a bit, so every DST change is seen.
const LOOK_AHEAD_DAYS: i64 = 400;
/// At most this many fires are walked from `now` (a frequent schedule reaches it in weeks);
/// the DST changes of the year are then measured on their own.
const LOOK_AHEAD_FIRES: usize = 5_000;
/// Fires walked around each change of the zone's UTC offset.
const AROUND_CHANGE_FIRES: usize = 2_000;

/// How a schedule's fires are spaced, in real time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cadence {
    /// The shortest gap between consecutive fires.
    pub shortest: Duration,
    /// The longest gap: what a period (plus grace) must cover.
    pub longest: Duration,
    /// The most frequent gap (the longer one on a tie): a steady schedule's period.
    pub typical: Duration,
    /// The largest change of the zone's UTC offset within the look-ahead (DST; 0 for UTC).
    pub dst_shift: Duration,
}

impl Cadence {
    /// The one period a steady schedule keeps, and the slack added to its grace; `None` for an
    /// irregular schedule, whose period follows the upcoming gap.
    ///
    /// Steady: every gap is within twice the DST shift of every other (a daily job's 23 h and
    /// 25 h days; a skipped or repeated local time moves a fixed-time job by up to one shift on
    /// each side), so the period is the typical gap and the grace covers the longest; or the
    /// longest gap is at most [`ADAPT_ABOVE`], so the period is the longest gap.
    pub fn steady(&self) -> Option<(Duration, Duration)> {
        if self.longest - self.shortest <= self.dst_shift * 2 {
            Some((self.typical, self.longest - self.typical))
        } else if self.longest <= ADAPT_ABOVE {
            Some((self.longest, Duration::ZERO))
        } else {
            None
        }
    }
}

/// Measures the cadence of `schedule` in `tz` at `now`: the fires of the 400 days from the
/// latest fire at or before `now` (so the gap being timed counts; at most 5,000 fires), plus
/// those around every change of the zone's offset in that time. `None` when the schedule has
/// no two fires (`@reboot`).
pub fn cadence(schedule: &Schedule, tz: Tz, now: DateTime<Utc>) -> Option<Cadence> {
    let mut gaps: BTreeMap<Duration, usize> = BTreeMap::new();
    let from = now
        .checked_add_signed(TimeDelta::nanoseconds(1))
        .and_then(|after| schedule.prev_before(after, tz))
        .and_then(|latest| latest.checked_sub_signed(TimeDelta::seconds(1)))
        .unwrap_or(now);
    let end = from.checked_add_signed(TimeDelta::days(LOOK_AHEAD_DAYS))?;
    record_gaps(schedule, tz, from, end, LOOK_AHEAD_FIRES, &mut gaps);
    let (changes, dst_shift) = offset_changes(tz, from, end);
    for change in changes {
        let window = TimeDelta::hours(36);
        if let (Some(start), Some(stop)) = (
            change.checked_sub_signed(window),
            change.checked_add_signed(window),
        ) {
            record_gaps(schedule, tz, start, stop, AROUND_CHANGE_FIRES, &mut gaps);
        }
    }
    let shortest = *gaps.keys().next()?;
    let longest = *gaps.keys().next_back()?;
    let typical = gaps
        .iter()
        .max_by_key(|(gap, count)| (**count, **gap))
        .map(|(gap, _)| *gap)?;
    Some(Cadence {
        shortest,
        longest,
        typical,
        dst_shift,
    })
}

/// Counts the gaps after the fires in `(from, end]` (each to its successor), at most `limit`.
fn record_gaps(
    schedule: &Schedule,
    tz: Tz,
    from: DateTime<Utc>,
    end: DateTime<Utc>,
    limit: usize,
    gaps: &mut BTreeMap<Duration, usize>,
) {
    let mut fires = schedule.fire_times(from, tz);
    let Some(mut previous) = fires.next() else {
        return;
    };
    for (n, fire) in fires.enumerate() {
        if previous > end || n >= limit {
            break;
        }
        if let Ok(gap) = (fire - previous).to_std() {
            *gaps.entry(gap).or_default() += 1;
        }
        previous = fire;
    }
}

/// The days on which `tz` changes its UTC offset in `[from, end]` (to within a day), and the
/// largest change.
fn offset_changes(
    tz: Tz,
    from: DateTime<Utc>,
    end: DateTime<Utc>,
) -> (Vec<DateTime<Utc>>, Duration) {
    let offset = |t: DateTime<Utc>| {
        i64::from(
            tz.offset_from_utc_datetime(&t.naive_utc())
                .fix()
                .local_minus_utc(),
        )
    };
    let (mut changes, mut shift) = (Vec::new(), 0u64);
    let mut day = from;
    let mut last = offset(day);
    while day < end {
        day += TimeDelta::days(1);
        let now = offset(day);
        if now != last {
            changes.push(day);
            shift = shift.max(now.abs_diff(last));
            last = now;
        }
    }
    (changes, Duration::from_secs(shift))
}

/// What a check's heartbeat should say, before units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// The period, within the service's limits.
    pub period: Duration,
    /// The grace, within the service's limits.
    pub grace: Duration,
}

/// The period a check needs at `now` for an irregular schedule: the gap after the latest fire
/// at or before `now`; while that fire's ping has not been accepted (`acked` is the latest
/// fire whose ping was), the check still times the gap before it, so the longer of the two.
/// This way a longer gap is covered as soon as its fire comes, and a shorter one is sent only
/// after the ping that starts it was accepted.
pub fn upcoming_gap(
    schedule: &Schedule,
    tz: Tz,
    now: DateTime<Utc>,
    acked: Option<DateTime<Utc>>,
) -> Option<Duration> {
    let latest = now
        .checked_add_signed(TimeDelta::nanoseconds(1))
        .and_then(|after| schedule.prev_before(after, tz));
    let Some(latest) = latest else {
        let next = schedule.next_after(now, tz)?;
        return schedule.gap_after(next, tz);
    };
    let after = schedule.gap_after(latest, tz)?;
    if acked.is_some_and(|acked| acked >= latest) {
        return Some(after);
    }
    let before = schedule
        .prev_before(latest, tz)
        .and_then(|previous| (latest - previous).to_std().ok());
    Some(before.map_or(after, |before| before.max(after)))
}

/// The auto grace: `timeout + jitter + margin`, where margin is a tenth of the period, at least
/// one minute and at most one hour; rounded up to a whole minute.
pub fn auto_grace(job: &Job, period: Duration) -> Duration {
    let margin = (period / 10).clamp(Duration::from_secs(60), Duration::from_secs(3_600));
    let total = job.timeout.unwrap_or_default() + job.jitter + margin;
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

/// Why `job` (bound to a check) cannot get a heartbeat within the service's limits, for
/// `config check`; `None` when it can. `now` anchors the look-ahead.
pub fn limit_problem(job: &Job, now: DateTime<Utc>) -> Option<String> {
    if let CheckDuration::Fixed(grace) = job.check.grace {
        if grace > MAX_GRACE {
            return Some(format!(
                "grace {} is longer than the service's limit of 365 days",
                describe(grace)
            ));
        }
    }
    if let CheckDuration::Fixed(period) = job.check.period {
        if period < MIN_PERIOD || period > MAX_PERIOD {
            return Some(format!(
                "period {} is outside the service's limits of 30 seconds to 365 days",
                describe(period)
            ));
        }
        return None;
    }
    let Some(cadence) = cadence(&job.schedule, job.timezone, now) else {
        return Some(format!(
            "schedule \"{}\" has no fire times, so period = \"auto\" cannot be derived",
            job.schedule
        ));
    };
    if cadence.longest < MIN_PERIOD {
        return Some(format!(
            "schedule \"{}\" fires every {}, more often than the heartbeat period limit of \
             30 seconds allows",
            job.schedule,
            describe(cadence.longest)
        ));
    }
    if cadence.longest > MAX_PERIOD + MAX_GRACE {
        return Some(format!(
            "schedule \"{}\" has gaps of {}, longer than the heartbeat limit of 365 days \
             period plus 365 days grace",
            job.schedule,
            describe(cadence.longest)
        ));
    }
    None
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

/// Whole seconds, rounding up.
fn ceil_secs(duration: Duration) -> u64 {
    duration.as_secs() + u64::from(duration.subsec_nanos() > 0)
}

#[cfg(test)]
#[path = "period_tests.rs"]
mod tests;
