//! Heartbeat checks: the definition (`PUT /v1/checks/heartbeat/{id}`; creating, listing and
//! deleting them live in `create.rs`), the timer that turns pings and silence into events, and
//! the check statuses list. Reading the events back (the events list, one event, their
//! statistics) lives in `events.rs`.
//!
//! A `PUT` merges, as the service does ("Our PUT endpoints however act like PATCH would […]
//! When a property is not set, it is kept intact": `checkly/checkly-go-sdk` commit d19fe3ba):
//! a field not sent keeps its value, `null` clears a nullable field (the Terraform provider
//! clears a description that way: `checkly/terraform-provider-checkly` 05c41685,
//! `resource_heartbeat_monitor_test.go` `TestAccHeartbeatMonitorDescriptionRemoval`), a sent
//! `heartbeat` object replaces the old one (its four timing fields are required) but keeps the
//! token unless a new one is sent. Keys the request schema does not have (read-only fields such
//! as `id`, `created_at`, `alertChannels`, which the Go SDK sends back) are ignored.
//!
//! The timer follows the real service's public documentation; sources are named by key, as in
//! docs/dev/emulator-sources.md section 1: **D** = `checkly/docs` at `28f3298`
//! (`detect/uptime-monitoring/heartbeat-monitors/overview.mdx`), **O** =
//! `checkly/docs.checklyhq.com` at `5bf1be4` (`site/content/docs/heartbeat-monitors/_index.md`).
//! The ledger in docs/emulator.md lists the same rules.
//!
//! - The first ping arms the timer (D overview.mdx:67, O _index.md:87); a check never pinged
//!   never fails.
//! - Every ping restarts it (D overview.mdx:68, O _index.md:91).
//! - The deadline is the timer's start + period + grace (O _index.md:57).
//! - After an alert the timer restarts (D overview.mdx:69, O _index.md:87,91): at each failing
//!   mark, `LATE_WINDOW` after the deadline, one `FAILING` event is recorded (timestamped at the
//!   deadline, "no ping by the end of the grace period") and the timer restarts at the mark, so
//!   silence records another `FAILING` every period + grace (+ the window). ASSUMPTION: the
//!   failing mark is the alert (no escalation or reminders are modelled), and a repeated failure
//!   records a new event each time.
//! - Re-activating a check (`activated` false -> true) or changing its period starts the timer
//!   when the check is saved (O _index.md:95, D overview.mdx:70). ASSUMPTIONS: the period is
//!   compared in seconds (60 minutes -> 1 hour is no change); a grace-only change restarts
//!   nothing (the deadline moves with it); a check never pinged stays unarmed; a period change
//!   keeps `hasFailures` until the next ping, a re-activation clears it.
//! - A deactivated check records no `FAILING` (D overview.mdx:70 "pausing"). ASSUMPTION: a ping
//!   to a deactivated check is recorded, judged as a first ping (`RECEIVED`), and restarts the
//!   timer.
//!
//! Event states (D overview.mdx:110-114), with `elapsed` the time since the timer started:
//! - first ping ever (nothing armed the timer yet): `RECEIVED`;
//! - `elapsed < period / 2`: `EARLY` (ASSUMPTION: no source gives the threshold);
//! - `elapsed <= period`: `RECEIVED`;
//! - `elapsed <= period + grace`: `GRACE`;
//! - within `LATE_WINDOW` after that, before the failing mark: `LATE` ("the few seconds between
//!   the end of the grace period and before the monitor is marked as failing"; ASSUMPTION: 5 s).
//!   A ping after a failing mark is judged against the restarted timer, so it is rarely `LATE`.
//!
//! The timer is advanced lazily: [`Store::tick`] runs before every read and every ping, and
//! records every mark that passed since the last one, at the time each happened. Every armed,
//! activated check is filed in `Store::due` under its next failing mark (`(mark, id)`, a
//! `BTreeSet`), so `tick` takes only the entries whose mark passed and a request's work does
//! not grow with the number of checks: a walk over every check per request, reading each one's
//! period and grace out of its JSON object, was 97 % of the fleet simulation's CPU with
//! 10,000 checks (`tests/sync/scale.rs`; its set-up alone did not end within 150 s), and 3.1-3.4x
//! the CPU of the whole run at 2,000 checks.

mod create;
mod events;

pub(crate) use create::ChecksQuery;
pub(crate) use events::EventsQuery;

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use super::server::ApiError;
use super::state::{timestamp, uuid, Event, HeartbeatCheck, Store};
use super::validate::{self, default_heartbeat, Field, Kind, Unknown, INT, NON_EMPTY, STR};

/// The fields of a heartbeat check as `PUT` takes them, with the spec's defaults.
fn request_table() -> Vec<Field> {
    let response_time = |name, default| {
        Field::nullable(
            name,
            Kind::Num {
                integer: false,
                min: Some(0.0),
                max: Some(300_000.0),
            },
            json!(default),
        )
    };
    vec![
        Field::nullable("script", STR, json!("")),
        Field::optional("name", NON_EMPTY),
        Field::optional("checkType", Kind::OneOf(&["HEARTBEAT"])),
        Field {
            nullable: true,
            ..Field::optional("intent", Kind::Intent)
        },
        Field {
            nullable: true,
            ..Field::optional("aiAutoRepairEnabled", Kind::Bool)
        },
        Field::new("activated", Kind::Bool, json!(true)),
        Field::new("muted", Kind::Bool, json!(false)),
        Field::new("doubleCheck", Kind::Bool, json!(true)),
        Field::new("shouldFail", Kind::Bool, json!(false)),
        Field::nullable("locations", Kind::Locations, json!([])),
        Field::new("tags", Kind::Strings, json!([])),
        Field::nullable("alertSettings", Kind::AlertSettings, Value::Null),
        Field::new("useGlobalAlertSettings", Kind::Bool, json!(true)),
        Field::nullable("groupId", INT, Value::Null),
        Field::nullable(
            "groupOrder",
            Kind::Num {
                integer: false,
                min: Some(0.0),
                max: None,
            },
            Value::Null,
        ),
        Field::nullable("runtimeId", Kind::Runtime, Value::Null),
        Field::new("alertChannelSubscriptions", Kind::Subscriptions, json!([])),
        Field::nullable("triggerIncident", Kind::TriggerIncident, Value::Null),
        Field::new("runParallel", Kind::Bool, json!(false)),
        Field::nullable(
            "description",
            Kind::Str {
                max_len: Some(500),
                non_empty: false,
            },
            Value::Null,
        ),
        Field::new("frequency", INT, json!(10)),
        Field::new(
            "frequencyOffset",
            Kind::Num {
                integer: true,
                min: Some(1.0),
                max: None,
            },
            json!(1),
        ),
        Field::nullable("request", Kind::Object, json!({})),
        Field::new("heartbeat", Kind::Heartbeat, default_heartbeat()),
        Field::nullable("scriptPath", STR, Value::Null),
        Field::nullable("sslCheckDomain", STR, json!("")),
        Field::nullable("environmentVariables", Kind::CheckEnvVars, Value::Null),
        Field::nullable("setupSnippetId", INT, Value::Null),
        Field::nullable("tearDownSnippetId", INT, Value::Null),
        Field::nullable("localSetupScript", STR, Value::Null),
        Field::nullable("localTearDownScript", STR, Value::Null),
        response_time("degradedResponseTime", 10_000),
        response_time("maxResponseTime", 20_000),
    ]
}

/// The fields a fixture (or the admin API) may give a check: the request fields with a
/// required `name`, plus the response-only ones.
fn fixture_table() -> Vec<Field> {
    let mut table = request_table();
    for field in &mut table {
        if field.name == "name" {
            field.required = true;
        }
    }
    table.extend([
        Field::optional("id", NON_EMPTY),
        Field::nullable("alertChannels", Kind::AlertChannels, Value::Null),
        Field::optional("created_at", Kind::DateTime),
        Field::nullable("updated_at", Kind::DateTime, Value::Null),
    ]);
    table
}

/// A fixture's `created_at` as the check's answers carry it: a date-time, as the published
/// schema types it (`ChecksV1HeartbeatCheck`, `format: date-time`); a fixture may give a date
/// (`YYYY-MM-DD`), which stands for its midnight UTC.
fn created_at_as_time(body: &Map<String, Value>) -> Map<String, Value> {
    let mut body = body.clone();
    if let Some(created) = body.get_mut("created_at") {
        let date = created
            .as_str()
            .and_then(|text| chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").ok());
        if let Some(date) = date {
            *created = json!(timestamp(date.and_time(chrono::NaiveTime::MIN).and_utc()));
        }
    }
    body
}

impl Store {
    /// Adds a check from a fixture object; returns its id.
    pub(crate) fn add_check(
        &mut self,
        body: &Map<String, Value>,
        now: DateTime<Utc>,
    ) -> Result<String, ApiError> {
        let body = created_at_as_time(body);
        let mut object = validate::normalize(&body, &fixture_table(), "", false)?;
        let id = match object.get("id").and_then(Value::as_str) {
            Some(id) => id.to_owned(),
            None => uuid(),
        };
        if self.checks.contains_key(&id) {
            return Err(ApiError::new(409, format!("check \"{id}\" already exists")));
        }
        object.insert("id".into(), json!(id));
        object.insert("checkType".into(), json!("HEARTBEAT"));
        object
            .entry("created_at")
            .or_insert_with(|| json!(timestamp(now)));
        let token = self.claim_token(&id, &mut object)?;
        self.tokens.insert(token, id.clone());
        let check = HeartbeatCheck {
            object,
            timer_start: None,
            failing: false,
            events: Vec::new(),
            mark: None,
        };
        self.checks.insert(id.clone(), check);
        Ok(id)
    }

    /// `PUT /v1/checks/heartbeat/{id}`: merges the sent fields into the definition (see the
    /// module header); the token is kept unless one is sent.
    pub(crate) fn put_check(
        &mut self,
        id: &str,
        body: &Map<String, Value>,
        now: DateTime<Utc>,
    ) -> Result<(), ApiError> {
        let sent = validate::sent(body, &request_table(), "", Unknown::Ignore)?;
        let old = self.checks.get(id).ok_or_else(ApiError::not_found)?;
        let mut object = old.object.clone();
        object.extend(sent);
        object.insert("updated_at".into(), json!(timestamp(now)));
        let old_token = old.token().to_owned();
        if let Some(heartbeat) = object.get_mut("heartbeat").and_then(Value::as_object_mut) {
            heartbeat
                .entry("pingToken")
                .or_insert_with(|| json!(old_token));
        }
        let token = self.claim_token(id, &mut object)?;
        self.tokens.remove(&old_token);
        self.tokens.insert(token, id.to_owned());
        if let Some(check) = self.checks.get_mut(id) {
            let before = (activated(check), timer(check).0);
            check.object = object;
            restart_on_save(check, before, now);
        }
        self.schedule(id);
        Ok(())
    }

    /// Removes a check and its token; false when there is none.
    pub(crate) fn delete_check(&mut self, id: &str) -> bool {
        let Some(check) = self.checks.remove(id) else {
            return false;
        };
        self.tokens.remove(check.token());
        if let Some(mark) = check.mark {
            self.due.remove(&(mark, id.to_owned()));
        }
        true
    }

    /// Makes sure the object's heartbeat has a token no other check uses; returns it.
    fn claim_token(&self, id: &str, object: &mut Map<String, Value>) -> Result<String, ApiError> {
        let heartbeat = object
            .entry("heartbeat")
            .or_insert_with(default_heartbeat)
            .as_object_mut()
            .ok_or_else(|| validate::bad("heartbeat", "must be of type object"))?;
        let token = match heartbeat.get("pingToken").and_then(Value::as_str) {
            Some(token) => token.to_owned(),
            None => uuid(),
        };
        if self.tokens.get(&token).is_some_and(|owner| owner != id) {
            return Err(validate::bad(
                "heartbeat.pingToken",
                "is already used by another check",
            ));
        }
        heartbeat.insert("pingToken".into(), json!(token));
        Ok(token)
    }

    /// The check as the API answers it, with `heartbeat.pingUrl` on the ping host.
    pub(crate) fn check_json(&self, id: &str, ping_base: &str) -> Option<Value> {
        let check = self.checks.get(id)?;
        let mut object = check.object.clone();
        let url = format!("{ping_base}/{}", check.token());
        if let Some(heartbeat) = object.get_mut("heartbeat").and_then(Value::as_object_mut) {
            heartbeat.insert("pingUrl".into(), json!(url));
        }
        Some(Value::Object(object))
    }

    /// Brings every activated, armed check's timer up to `now`: each failing mark that passed
    /// records a `FAILING` event and restarts the timer (see the module header). Only the
    /// checks filed in `due` under a mark before `now` are touched.
    pub(crate) fn tick(&mut self, now: DateTime<Utc>) {
        while self.due.first().is_some_and(|(mark, _)| *mark < now) {
            let Some((_, id)) = self.due.pop_first() else {
                break;
            };
            let Some(check) = self.checks.get_mut(&id) else {
                continue;
            };
            check.mark = None;
            let span = span(check);
            while let Some(start) = check.timer_start {
                let deadline = start + span;
                let mark = deadline + late_window();
                if now <= mark {
                    break;
                }
                check.failing = true;
                check.timer_start = Some(mark);
                check.events.push(Event {
                    id: uuid(),
                    state: "FAILING".into(),
                    at: deadline,
                    source: String::new(),
                    user_agent: String::new(),
                });
            }
            self.schedule(&id);
        }
    }

    /// Files the check under its next failing mark in `due` (or takes it out when it has none:
    /// never pinged, or deactivated). Called after every change to a check's timer start,
    /// activation or timing.
    fn schedule(&mut self, id: &str) {
        let Some(check) = self.checks.get_mut(id) else {
            return;
        };
        let mark = failing_mark(check);
        if mark == check.mark {
            return;
        }
        if let Some(old) = check.mark {
            self.due.remove(&(old, id.to_owned()));
        }
        if let Some(new) = mark {
            self.due.insert((new, id.to_owned()));
        }
        check.mark = mark;
    }

    /// Records a ping of the check owning `token`; `None` when no check does. The caller has
    /// ticked the store to `now` (so a mark that passed is already recorded).
    pub(crate) fn ping(
        &mut self,
        token: &str,
        now: DateTime<Utc>,
        source: String,
        user_agent: String,
    ) -> Option<(String, Event)> {
        let id = self.tokens.get(token)?.clone();
        let check = self.checks.get_mut(&id)?;
        let state = ping_state(check, now);
        let event = Event {
            id: uuid(),
            state: state.into(),
            at: now,
            source,
            user_agent,
        };
        check.events.push(event.clone());
        check.timer_start = Some(now);
        check.failing = false;
        self.schedule(&id);
        Some((id, event))
    }

    /// `GET /v1/check-statuses`: one entry per heartbeat check (by id), then the fixtures' extras.
    pub(crate) fn statuses_json(&self) -> Value {
        let mut items: Vec<Value> = self
            .checks
            .values()
            .map(|check| {
                let field = |key: &str| check.object.get(key).cloned().unwrap_or(Value::Null);
                json!({
                    "name": field("name"),
                    "checkId": check.id(),
                    "hasFailures": check.failing,
                    "hasErrors": false,
                    "isDegraded": false,
                    "longestRun": null,
                    "shortestRun": null,
                    "lastRunLocation": null,
                    "lastCheckRunId": check.events.last().map(|e| e.id.clone()),
                    "sslDaysRemaining": null,
                    // A check status's `created_at` is a date (the check's is a date-time).
                    "created_at": field("created_at")
                        .as_str()
                        .and_then(|time| time.get(..10))
                        .map_or(Value::Null, |day| json!(day)),
                    "updated_at": field("updated_at"),
                })
            })
            .collect();
        items.extend(self.extra_statuses.iter().cloned());
        Value::Array(items)
    }
}

fn activated(check: &HeartbeatCheck) -> bool {
    check.object.get("activated") != Some(&Value::Bool(false))
}

/// The check's period and grace.
fn timer(check: &HeartbeatCheck) -> (chrono::Duration, chrono::Duration) {
    let empty = Map::new();
    let heartbeat = check
        .object
        .get("heartbeat")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let span = |amount, unit| {
        let secs = validate::seconds(heartbeat, amount, unit);
        chrono::Duration::milliseconds((secs * 1000.0) as i64)
    };
    (span("period", "periodUnit"), span("grace", "graceUnit"))
}

/// The deadline's distance from the timer's start: period + grace. Periods are at least 30 s
/// (validated); the floor of 1 s keeps a zero span from looping in `Store::tick`.
fn span(check: &HeartbeatCheck) -> chrono::Duration {
    let (period, grace) = timer(check);
    (period + grace).max(chrono::Duration::seconds(1))
}

/// When an activated, armed check is next marked failing: the deadline + `LATE_WINDOW`.
fn failing_mark(check: &HeartbeatCheck) -> Option<DateTime<Utc>> {
    let start = check.timer_start.filter(|_| activated(check))?;
    Some(start + span(check) + late_window())
}

/// How long after the deadline a check is marked failing: a ping in between is `LATE`.
/// ASSUMPTION: the sources say "a few seconds" (D overview.mdx:113); 5 s of emulated time.
pub(crate) const LATE_WINDOW_SECS: i64 = 5;

fn late_window() -> chrono::Duration {
    chrono::Duration::seconds(LATE_WINDOW_SECS)
}

/// The timer part of a `PUT` (O _index.md:95): re-activation, or a new period (in seconds),
/// restarts an armed timer at the save time `now`; `before` is (activated, period) before it.
fn restart_on_save(
    check: &mut HeartbeatCheck,
    before: (bool, chrono::Duration),
    now: DateTime<Utc>,
) {
    if check.timer_start.is_none() {
        return;
    }
    let reactivated = !before.0 && activated(check);
    if reactivated {
        check.failing = false;
    }
    if reactivated || (activated(check) && timer(check).0 != before.1) {
        check.timer_start = Some(now);
    }
}

/// The state of a ping arriving at `now` (see the module header).
fn ping_state(check: &HeartbeatCheck, now: DateTime<Utc>) -> &'static str {
    let Some(start) = check.timer_start.filter(|_| activated(check)) else {
        return "RECEIVED";
    };
    let (period, grace) = timer(check);
    let elapsed = now - start;
    if elapsed > period + grace {
        "LATE"
    } else if elapsed > period {
        "GRACE"
    } else if elapsed < period / 2 {
        "EARLY"
    } else {
        "RECEIVED"
    }
}

#[cfg(test)]
mod tests;
