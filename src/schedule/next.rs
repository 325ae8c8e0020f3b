//! Fire-time computation: the next matching local (wall-clock) time, found field by field
//! (month, day, hour, minute, second) rather than second by second, and its mapping to UTC in
//! an IANA zone with the DST rules of cron(8).
//!
//! The UTC timeline is walked in segments of constant UTC offset. Inside a segment local time
//! is UTC plus a constant, so the first matching local time gives the first fire. At a
//! transition the search restarts with the new offset: after a spring-forward jump the skipped
//! local times are passed over (wildcard jobs) or fire once at the jump (fixed-time jobs);
//! after a fall-back the repeated local times match again (wildcard jobs) or are skipped
//! because they already ran at their first occurrence (fixed-time jobs).
//!
//! `@every N` needs none of this: its fires are the multiples of N seconds since the Unix
//! epoch, the same instants in every zone ([`next_every`], [`prev_every`]).

use super::Zone;
use chrono::{
    DateTime, Datelike, Days, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta,
    Timelike, Utc,
};

use super::parse::Fields;

/// How far ahead a fire is searched for: a Feb 29 schedule may wait 8 years (2096 -> 2104);
/// 28 years covers every combination of a date and a weekday.
const SEARCH_DAYS: u64 = 28 * 366;

/// The step at which the zone is probed for an offset change; zones change offset at most a
/// few times a year, never twice within a day.
const PROBE: TimeDelta = TimeDelta::days(1);

impl Fields {
    /// Whether a date matches the day fields: both restricted (neither starts with `*`) means
    /// either may match, as in cronie; otherwise both must.
    pub(crate) fn day_matches(&self, date: NaiveDate) -> bool {
        let dom = self.dom.contains(date.day());
        let dow = self.dow.contains(date.weekday().num_days_from_sunday());
        if self.dom.star || self.dow.star {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// Whether a local time matches every field.
    #[cfg(test)]
    pub(crate) fn matches(&self, local: NaiveDateTime) -> bool {
        self.month.contains(local.month())
            && self.day_matches(local.date())
            && self.hour.contains(local.hour())
            && self.minute.contains(local.minute())
            && self.second.contains(local.second())
    }

    /// The first matching time of day at or after `lower`.
    fn next_time(&self, lower: NaiveTime) -> Option<NaiveTime> {
        let (h, m, s) = (lower.hour(), lower.minute(), lower.second());
        let time = |h, m, s| NaiveTime::from_hms_opt(h, m, s);
        if self.hour.contains(h) {
            if self.minute.contains(m) {
                if let Some(s) = self.second.next_from(s) {
                    return time(h, m, s);
                }
            }
            if let Some(m) = self.minute.next_from(m + 1) {
                return time(h, m, self.second.first());
            }
        }
        let h = self.hour.next_from(h + 1)?;
        time(h, self.minute.first(), self.second.first())
    }

    /// The first matching local time at or after `from`, no later than the date `until`.
    pub(crate) fn next_local(
        &self,
        from: NaiveDateTime,
        until: NaiveDate,
    ) -> Option<NaiveDateTime> {
        let mut date = from.date();
        let mut lower = from.time();
        while date <= until {
            if !self.month.contains(date.month()) {
                date = match self.month.next_from(date.month() + 1) {
                    Some(month) => NaiveDate::from_ymd_opt(date.year(), month, 1)?,
                    None => NaiveDate::from_ymd_opt(date.year() + 1, self.month.first(), 1)?,
                };
                lower = NaiveTime::MIN;
                continue;
            }
            if self.day_matches(date) {
                if let Some(time) = self.next_time(lower) {
                    return Some(date.and_time(time));
                }
            }
            date = date.succ_opt()?;
            lower = NaiveTime::MIN;
        }
        None
    }
}

/// The first fire strictly after `after`. `fixed` selects the DST rules for jobs at a fixed
/// time of day (see the module header).
pub(crate) fn next_fire(
    fields: &Fields,
    fixed: bool,
    after: DateTime<Utc>,
    tz: Zone,
) -> Option<DateTime<Utc>> {
    let mut start = DateTime::from_timestamp(after.timestamp(), 0)? + TimeDelta::seconds(1);
    let until = start
        .date_naive()
        .checked_add_days(Days::new(SEARCH_DAYS))?;
    loop {
        let offset = offset_at(tz, start);
        let local = start.naive_utc().checked_add_signed(offset)?;
        let candidate = fields.next_local(local, until)?;
        let fire = candidate.checked_sub_signed(offset)?.and_utc();
        match first_transition(tz, start, fire, offset) {
            None if fixed && is_repeat(tz, candidate, fire) => start = fire + TimeDelta::seconds(1),
            None => return Some(fire),
            Some(jump) => {
                let new_offset = offset_at(tz, jump);
                let skipped = new_offset > offset && candidate < jump.naive_utc() + new_offset;
                if fixed && skipped {
                    return Some(jump);
                }
                start = jump;
            }
        }
    }
}

/// The zone's offset from UTC at an instant.
fn offset_at(tz: Zone, at: DateTime<Utc>) -> TimeDelta {
    TimeDelta::seconds(i64::from(tz.offset_seconds(at)))
}

/// Whether `fire` is the second occurrence of the repeated local time `local`.
fn is_repeat(tz: Zone, local: NaiveDateTime, fire: DateTime<Utc>) -> bool {
    match tz.instants(local) {
        LocalResult::Ambiguous(first, _) => first != fire,
        _ => false,
    }
}

/// The first instant in `(from, to]` whose offset differs from `offset` (the offset at `from`).
fn first_transition(
    tz: Zone,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    offset: TimeDelta,
) -> Option<DateTime<Utc>> {
    let mut low = from;
    loop {
        if low >= to {
            return None;
        }
        let probe = (low + PROBE).min(to);
        if offset_at(tz, probe) != offset {
            return Some(bisect(tz, low, probe, offset));
        }
        low = probe;
    }
}

/// The first second in `(low, high]` with an offset other than `offset`, given that `low` has
/// `offset` and `high` does not.
fn bisect(
    tz: Zone,
    mut low: DateTime<Utc>,
    mut high: DateTime<Utc>,
    offset: TimeDelta,
) -> DateTime<Utc> {
    while high - low > TimeDelta::seconds(1) {
        let mid = low + (high - low) / 2;
        let mid = DateTime::from_timestamp(mid.timestamp(), 0).unwrap_or(mid);
        if offset_at(tz, mid) == offset {
            low = mid;
        } else {
            high = mid;
        }
    }
    high
}

/// The first multiple of `interval` seconds since the Unix epoch strictly after `after`.
pub(crate) fn next_every(interval: u64, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let interval = i64::try_from(interval).ok().filter(|n| *n > 0)?;
    let slot = after.timestamp().div_euclid(interval).checked_add(1)?;
    DateTime::from_timestamp(slot.checked_mul(interval)?, 0)
}

/// The last multiple of `interval` seconds since the Unix epoch strictly before `before`.
pub(crate) fn prev_every(interval: u64, before: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let interval = i64::try_from(interval).ok().filter(|n| *n > 0)?;
    // `timestamp()` rounds down, so the latest whole second strictly before `before` is it, or
    // the one before it when `before` is a whole second.
    let mut latest = before.timestamp();
    if before.timestamp_subsec_nanos() == 0 {
        latest = latest.checked_sub(1)?;
    }
    DateTime::from_timestamp(latest.div_euclid(interval).checked_mul(interval)?, 0)
}
