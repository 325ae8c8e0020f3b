//! Cron schedules with the semantics of crontab(5) (Vixie cron / cronie) and fire times in a
//! time zone, following cron(8) across daylight-saving changes, and fixed-interval schedules
//! (`@every 90s`). Everything here is a pure function of an injected time; `docs/schedule.md`
//! is the user's description.
//!
//! `@every N` fires at every whole multiple of N seconds since the Unix epoch
//! (1970-01-01T00:00:00Z): the phase is the epoch's, so every host computes the same fire
//! times, a restart does not shift them, and neither the time zone nor a DST change moves them
//! (the daemon then adds the job's jitter to each, as for every schedule).
//!
//! - `fields`: one field's syntax and values; `parse`: whole expressions, macros and `@every`;
//! - `next`: the next fire time and the DST rules; `gap`: gaps between fires in real time (a
//!   schedule's cadence, the gap being timed now, gaps over a year), from which the sync
//!   derives a check's heartbeat period and the config checks the service's limits;
//! - [`Zone`]: an IANA time zone, from the system's zoneinfo or the compiled-in database;
//!   [`zone_from_tz`]: the default time zone, from `TZ` as cron and supercronic read it.

mod fields;
mod gap;
mod next;
mod parse;
#[cfg(test)]
mod tests;
mod zone;

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

pub(crate) use fields::FieldKind;
pub(crate) use gap::{cadence, long_gap, upcoming_gap, Cadence};
pub(crate) use parse::is_every;
use parse::Parsed;
pub use zone::{UnknownZone, Zone};

/// The environment variable naming the default time zone when neither `[agent] timezone` nor
/// `schedule --tz` gives one (as for cron and supercronic).
pub(crate) const TZ_ENV: &str = "TZ";

/// The default time zone for the value of `TZ` (`None` when unset): UTC when unset or empty,
/// else the IANA zone it names, written as `Europe/Berlin`, `:Europe/Berlin` (glibc's form) or
/// a path into a zoneinfo directory (`/usr/share/zoneinfo/Europe/Berlin`). A POSIX rule such as
/// `CET-1CEST,M3.5.0,M10.5.0/3` or an unknown name is an error saying so (the caller keeps UTC
/// and warns, or refuses).
pub(crate) fn zone_from_tz(value: Option<&str>) -> Result<Zone, String> {
    let Some(raw) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(Zone::UTC);
    };
    let name = raw.strip_prefix(':').unwrap_or(raw);
    let name = match name.rsplit_once("zoneinfo/") {
        Some((_, zone)) if name.starts_with('/') => zone,
        _ => name,
    };
    name.parse::<Zone>().map_err(|_| {
        format!(
            "{TZ_ENV}=\"{raw}\" in the environment is not an IANA time zone name (such as \
             Europe/Berlin or UTC; POSIX rules such as CET-1CEST are not read)"
        )
    })
}

/// A parsed schedule expression (5 or 6 fields, an `@` macro, or `@every DURATION`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The expression as written, for messages and `config check`.
    expr: String,
    /// What the expression means.
    parsed: Parsed,
}

/// Why a schedule expression is invalid; the message points at the bad field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ScheduleError {
    /// What is wrong, quoting the expression and naming the field, e.g.
    /// `invalid schedule "0 25 * * *": hour field "25": value 25 out of range 0-23`.
    pub message: String,
    /// The field at fault, when one is (a wrong field count or macro names none), so the config
    /// layer can point at it.
    pub field: Option<FieldKind>,
    /// The byte offset of the bad field's text in the expression, so a config error can give
    /// the column of the field rather than of the whole string.
    pub offset: Option<usize>,
}

impl Schedule {
    /// Parses a crontab(5) expression: 5 fields, an optional leading seconds field, or a macro;
    /// or `@every DURATION` (whole seconds, 1 s to 365 days). Rejects schedules that can never
    /// fire (`0 0 30 2 *`).
    pub fn parse(expr: &str) -> Result<Schedule, ScheduleError> {
        Ok(Schedule {
            expr: expr.to_owned(),
            parsed: parse::parse(expr)?,
        })
    }

    /// The expression as written.
    pub fn as_str(&self) -> &str {
        &self.expr
    }

    /// `@reboot`: runs once per boot of the machine and has no fire times.
    pub(crate) fn is_reboot(&self) -> bool {
        self.parsed == Parsed::Reboot
    }

    /// The interval of an `@every` schedule; `None` for the others.
    pub(crate) fn every(&self) -> Option<Duration> {
        match self.parsed {
            Parsed::Every(secs) => Some(Duration::from_secs(secs)),
            _ => None,
        }
    }

    /// A leading seconds field was written (a sub-minute schedule is possible).
    pub(crate) fn has_seconds(&self) -> bool {
        matches!(self.parsed, Parsed::Times { seconds: true, .. })
    }

    /// A job at a particular time of day in the sense of cron(8): neither the minute nor the
    /// hour field starts with `*` (so not `@hourly`). Such jobs fire once at a DST jump that
    /// skips their time, and only at the first occurrence of a repeated time.
    pub(crate) fn is_fixed_time(&self) -> bool {
        match &self.parsed {
            Parsed::Times { fields, .. } => !fields.minute.star && !fields.hour.star,
            Parsed::Reboot | Parsed::Every(_) => false,
        }
    }

    /// Whether a local (wall-clock) time matches every field; false for `@reboot` and
    /// `@every`, which have no fields.
    #[cfg(test)]
    pub(crate) fn matches_local(&self, local: chrono::NaiveDateTime) -> bool {
        match &self.parsed {
            Parsed::Times { fields, .. } => fields.matches(local),
            Parsed::Reboot | Parsed::Every(_) => false,
        }
    }

    /// The first fire time strictly after `after`, in time zone `tz` (which `@every` ignores).
    /// None for `@reboot`, or when nothing fires within 28 years.
    pub fn next_after(&self, after: DateTime<Utc>, tz: Zone) -> Option<DateTime<Utc>> {
        match &self.parsed {
            Parsed::Times { fields, .. } => {
                next::next_fire(fields, self.is_fixed_time(), after, tz)
            }
            Parsed::Every(secs) => next::next_every(*secs, after),
            Parsed::Reboot => None,
        }
    }

    /// The fire times strictly after `after`, in order.
    pub(crate) fn fire_times(&self, after: DateTime<Utc>, tz: Zone) -> FireTimes<'_> {
        FireTimes {
            schedule: self,
            tz,
            last: Some(after),
        }
    }

    /// The last fire time strictly before `before` (within 28 years), e.g. to know which run
    /// a check is waiting for at start-up. Consistent with [`Schedule::fire_times`].
    pub(crate) fn prev_before(&self, before: DateTime<Utc>, tz: Zone) -> Option<DateTime<Utc>> {
        if let Parsed::Every(secs) = self.parsed {
            return next::prev_every(secs, before);
        }
        let mut window = TimeDelta::minutes(2);
        while window <= TimeDelta::days(28 * 366) {
            let found = self
                .fire_times(before.checked_sub_signed(window)?, tz)
                .take_while(|fire| *fire < before)
                .last();
            if found.is_some() {
                return found;
            }
            window = window * 4;
        }
        None
    }
}

impl std::str::FromStr for Schedule {
    type Err = ScheduleError;

    fn from_str(expr: &str) -> Result<Schedule, ScheduleError> {
        Schedule::parse(expr)
    }
}

impl std::fmt::Display for Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.expr)
    }
}

/// Iterator over fire times, from [`Schedule::fire_times`].
#[derive(Debug, Clone)]
pub(crate) struct FireTimes<'a> {
    /// The schedule being followed.
    schedule: &'a Schedule,
    /// The zone its fields are read in.
    tz: Zone,
    /// The previous fire (or the start); None once the schedule has no more fires.
    last: Option<DateTime<Utc>>,
}

impl Iterator for FireTimes<'_> {
    type Item = DateTime<Utc>;

    fn next(&mut self) -> Option<DateTime<Utc>> {
        let next = self.schedule.next_after(self.last?, self.tz);
        self.last = next;
        next
    }
}
