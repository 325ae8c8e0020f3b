//! What a heartbeat check recorded, as the API reads it: one event with the check's statistics
//! (`GET /v1/checks/heartbeats/{checkId}/events/{id}`), the events list and its query
//! ([`EventsQuery`]: a window and a count), the success-ratio statistics of the last 24 hours
//! and 7 days, and the admin API's injected events.
//!
//! Its own file because it only reads what the timer in `mod.rs` recorded (injected events
//! excepted, which bypass the timer on purpose): the rules of the events list and of the
//! statistics are the published schema's, not the timer's.

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use super::super::server::ApiError;
use super::super::state::{uuid, Event, HeartbeatCheck, Store};
use super::super::validate::{self, Field, Kind, NON_EMPTY, STR};
use crate::api::model::{HeartbeatStats, PeriodStats, SuccessRatio};

impl Store {
    /// `GET /v1/checks/heartbeats/{checkId}/events/{id}`: the event and its statistics.
    pub(crate) fn event_json(
        &self,
        check_id: &str,
        event_id: &str,
        now: DateTime<Utc>,
    ) -> Option<Value> {
        let check = self.checks.get(check_id)?;
        let event = check.events.iter().find(|e| e.id == event_id)?;
        Some(json!({"event": event.to_json(), "stats": check_stats(check, now)}))
    }

    /// `GET /v1/checks/heartbeats/{checkId}/events`: `[{"events": [...], "stats": {...}}]`, one
    /// object holding the events of the window (newest first, at most `limit`) and the check's
    /// statistics.
    pub(crate) fn events_json(
        &self,
        check_id: &str,
        now: DateTime<Utc>,
        query: &EventsQuery,
    ) -> Option<Value> {
        let check = self.checks.get(check_id)?;
        let events: Vec<Value> = check
            .events
            .iter()
            .rev()
            .filter(|e| query.from <= e.at && e.at <= query.to)
            .take(query.limit)
            .map(Event::to_json)
            .collect();
        Some(json!([{"events": events, "stats": check_stats(check, now)}]))
    }

    /// Records an event with any state (admin API), without touching the check's timer: lets
    /// tests prove that clients keep event states they do not know. Fields: `state` (required),
    /// `timestamp` (default now), `source`, `userAgent`.
    pub(crate) fn inject_event(
        &mut self,
        check_id: &str,
        body: &Map<String, Value>,
        now: DateTime<Utc>,
    ) -> Result<Value, ApiError> {
        let table = [
            Field::required("state", NON_EMPTY),
            Field::optional("timestamp", Kind::DateTime),
            Field::new("source", STR, json!("")),
            Field::new("userAgent", STR, json!("")),
        ];
        let fields = validate::normalize(body, &table, "", false)?;
        let check = self
            .checks
            .get_mut(check_id)
            .ok_or_else(ApiError::not_found)?;
        let text = |key: &str| fields[key].as_str().unwrap_or_default().to_owned();
        let at = fields
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map_or(now, |t| t.with_timezone(&Utc));
        let event = Event {
            id: uuid(),
            state: text("state"),
            at,
            source: text("source"),
            user_agent: text("userAgent"),
        };
        check.events.push(event.clone());
        check.events.sort_by_key(|e| e.at);
        Ok(event.to_json())
    }
}

/// The query of the events list: a window and a count.
///
/// `limit`: default 10, at most 10 (published schema: `maximum: 10, default: 10`); below 1 or a
/// fraction is a 400 (assumption: the schema gives no minimum). `startTime`/`endTime`: a date
/// (`YYYY-MM-DD`, the published `format: date`; an `endTime` date covers that whole day) or an
/// RFC 3339 time; the default window is the 24 hours before now (the published defaults up to
/// `checkly/docs` e1bc5530 were two timestamps exactly 24 h apart). An end before the start is
/// a 400.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EventsQuery {
    /// Oldest event time included.
    pub from: DateTime<Utc>,
    /// Newest event time included.
    pub to: DateTime<Utc>,
    /// Most events answered.
    pub limit: usize,
}

/// Most events one list answer holds, and its default.
pub(crate) const EVENTS_LIMIT: usize = 10;

impl EventsQuery {
    /// The query from the request's parameters, at `now`.
    pub(crate) fn parse(
        param: impl Fn(&str) -> Option<String>,
        now: DateTime<Utc>,
    ) -> Result<Self, ApiError> {
        let limit = match param("limit") {
            None => EVENTS_LIMIT,
            Some(text) => match text.trim().parse::<f64>() {
                Ok(n) if n.fract() == 0.0 && (1.0..=EVENTS_LIMIT as f64).contains(&n) => n as usize,
                Ok(n) if n.fract() == 0.0 && n > EVENTS_LIMIT as f64 => {
                    return Err(validate::bad(
                        "limit",
                        format!("must be less than or equal to {EVENTS_LIMIT}"),
                    ))
                }
                Ok(_) => {
                    return Err(validate::bad(
                        "limit",
                        format!("must be an integer from 1 to {EVENTS_LIMIT}"),
                    ))
                }
                Err(_) => return Err(validate::bad("limit", "must be a number")),
            },
        };
        let time = |name: &str, end: bool| -> Result<Option<DateTime<Utc>>, ApiError> {
            let Some(text) = param(name) else {
                return Ok(None);
            };
            if let Ok(at) = DateTime::parse_from_rfc3339(&text) {
                return Ok(Some(at.with_timezone(&Utc)));
            }
            let day = chrono::NaiveDate::parse_from_str(&text, "%Y-%m-%d").map_err(|_| {
                validate::bad(name, "must be a date (YYYY-MM-DD) or an ISO 8601 date-time")
            })?;
            let day = if end {
                day.succ_opt().unwrap_or(day)
            } else {
                day
            };
            let midnight = day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc();
            Ok(Some(if end {
                midnight - chrono::Duration::milliseconds(1)
            } else {
                midnight
            }))
        };
        let day = chrono::Duration::hours(24);
        let (from, to) = match (time("startTime", false)?, time("endTime", true)?) {
            (Some(from), Some(to)) => (from, to),
            (Some(from), None) => (from, now),
            (None, Some(to)) => (to - day, to),
            (None, None) => (now - day, now),
        };
        if to < from {
            return Err(validate::bad("endTime", "must not be before startTime"));
        }
        Ok(EventsQuery { from, to, limit })
    }
}

/// `stats` of an event answer, built with the client's own model types so the two cannot
/// disagree on field names.
fn check_stats(check: &HeartbeatCheck, now: DateTime<Utc>) -> Value {
    let stats = HeartbeatStats {
        last_24_hours: Some(stats(&check.events, now, chrono::Duration::hours(24))),
        last_7_days: Some(stats(&check.events, now, chrono::Duration::days(7))),
    };
    serde_json::to_value(stats).unwrap_or(Value::Null)
}

/// Statistics over `window`: success ratio (percent of events that are not `FAILING`; 100 with
/// no events) for the current and the previous window, and the count in the current one.
pub(super) fn stats(events: &[Event], now: DateTime<Utc>, window: chrono::Duration) -> PeriodStats {
    let ratio = |from: DateTime<Utc>, to: DateTime<Utc>| {
        let in_window: Vec<&Event> = events
            .iter()
            .filter(|e| e.at > from && e.at <= to)
            .collect();
        let ok = in_window.iter().filter(|e| e.state != "FAILING").count();
        let ratio = if in_window.is_empty() {
            100.0
        } else {
            100.0 * ok as f64 / in_window.len() as f64
        };
        (ratio, in_window.len())
    };
    let (current, count) = ratio(now - window, now);
    let (previous, _) = ratio(now - window - window, now - window);
    PeriodStats {
        success_ratio: SuccessRatio {
            previous_period: Some(previous),
            current_period: Some(current),
        },
        total_entities_current_period: count as u64,
    }
}
