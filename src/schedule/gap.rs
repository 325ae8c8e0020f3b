//! Gaps between consecutive fire times, measured in real (UTC) time: a schedule's cadence
//! (steady or irregular over a year's look-ahead), the gap a heartbeat must cover right now, and
//! the long gaps (over a year) that no heartbeat can. A daily job's gap is 23 h or 25 h across a
//! DST change, so "steady" here allows for the zone's offset changes.
//!
//! Everything here is a pure function of the schedule, the zone and an injected `now`.

use std::collections::BTreeMap;
use std::time::Duration;

use super::Zone;
use chrono::{DateTime, TimeDelta, Utc};

use super::Schedule;

/// Schedules whose longest gap is at most this keep one period (the longest gap) even when
/// irregular: adapting would cost a PUT per run for little gain.
pub(crate) const ADAPT_ABOVE: Duration = Duration::from_secs(3_600);

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
    pub(crate) fn steady(&self) -> Option<(Duration, Duration)> {
        if self.longest - self.shortest <= self.dst_shift * 2 {
            Some((self.typical, self.longest - self.typical))
        } else if self.longest <= ADAPT_ABOVE {
            Some((self.longest, Duration::ZERO))
        } else {
            None
        }
    }
}

impl Schedule {
    /// The time from the fire at `fire` to the next one; None when there is no next fire.
    pub(crate) fn gap_after(&self, fire: DateTime<Utc>, tz: Zone) -> Option<Duration> {
        let next = self.next_after(fire, tz)?;
        (next - fire).to_std().ok()
    }
}

/// Measures the cadence of `schedule` in `tz` at `now`: the fires of the 400 days from the
/// latest fire at or before `now` (so the gap being timed counts; at most 5,000 fires), plus
/// those around every change of the zone's offset in that time. `None` when the schedule has
/// no two fires (`@reboot`). An `@every` schedule's gaps are all its interval, in every zone:
/// its cadence is that, with no DST shift.
pub(crate) fn cadence(schedule: &Schedule, tz: Zone, now: DateTime<Utc>) -> Option<Cadence> {
    if let Some(interval) = schedule.every() {
        return Some(Cadence {
            shortest: interval,
            longest: interval,
            typical: interval,
            dst_shift: Duration::ZERO,
        });
    }
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
    tz: Zone,
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
    tz: Zone,
    from: DateTime<Utc>,
    end: DateTime<Utc>,
) -> (Vec<DateTime<Utc>>, Duration) {
    let offset = |t: DateTime<Utc>| i64::from(tz.offset_seconds(t));
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

/// The gap a check must time at `now` for an irregular schedule: the gap after the latest fire
/// at or before `now`; while that fire's ping has not been accepted (`acked` is the latest
/// fire whose ping was), the check still times the gap before it, so the longer of the two.
/// This way a longer gap is covered as soon as its fire comes, and a shorter one is sent only
/// after the ping that starts it was accepted.
pub(crate) fn upcoming_gap(
    schedule: &Schedule,
    tz: Zone,
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

/// The longest gap between consecutive fires that starts in the 400 days after `now`, as far
/// as it exceeds a year (shorter gaps come back as `Duration::ZERO`); `None` without fires.
///
/// A gap longer than a year that starts in that window contains one of the probe points `now`,
/// `now + 365 d`, `now + 730 d`, and `next_after` from that point lands more than a year later;
/// `prev_before` then gives the gap's start. A few `next_after` probes instead of a walk over
/// every fire keep this cheap enough for config loading.
pub(crate) fn long_gap(schedule: &Schedule, tz: Zone, now: DateTime<Utc>) -> Option<Duration> {
    let year = TimeDelta::days(365);
    let mut longest = Duration::ZERO;
    let mut any = false;
    for step in 0..3 {
        let Some(probe) = now.checked_add_signed(year * step) else {
            break;
        };
        let Some(next) = schedule.next_after(probe, tz) else {
            break;
        };
        any = true;
        if next - probe > year {
            let start = schedule.prev_before(next, tz).unwrap_or(now);
            if let Ok(gap) = (next - start).to_std() {
                longest = longest.max(gap);
            }
        }
    }
    any.then_some(longest)
}
