//! Cron schedules with the semantics of crontab(5) (Vixie cron / cronie) and fire times in a
//! time zone, following cron(8) across daylight-saving changes. Everything here is a pure
//! function of an injected `now`.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

/// A parsed schedule expression (5 or 6 fields, or an `@` macro).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    expr: String,
}

/// Why a schedule expression is invalid; the message points at the bad field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ScheduleError {
    /// What is wrong, naming the field.
    pub message: String,
}

impl Schedule {
    /// Parses a crontab(5) expression.
    pub fn parse(expr: &str) -> Result<Schedule, ScheduleError> {
        Ok(Schedule {
            expr: expr.to_owned(),
        })
    }

    /// The expression as written.
    pub fn as_str(&self) -> &str {
        &self.expr
    }

    /// The first fire time strictly after `after`, in time zone `tz`.
    pub fn next_after(&self, _after: DateTime<Utc>, _tz: Tz) -> Option<DateTime<Utc>> {
        None
    }
}
