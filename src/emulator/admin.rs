//! The admin API under `/_emulator/` on the API listener (no authentication, never recorded,
//! never faulted): add fixtures, record events of any state, read recorded requests and pings,
//! move the clock forward, inject and clear faults, reset. The in-process handle calls the same
//! `Shared` methods.

use std::time::Duration;

use axum::http::Method;
use serde_json::{json, Value};

use super::faults::Fault;
use super::fixtures::{FixtureError, Fixtures};
use super::server::{query_pairs, ApiError, Reply, ADMIN_PREFIX};
use super::state::{lock, timestamp, Listener, RecordedRequest, Shared, Store};
use super::validate::{bad, parse_object};

impl Shared {
    /// Loads a fixtures document on top of the current resources, all or nothing; returns the
    /// heartbeat checks it created (with `pingUrl`).
    pub(crate) fn load_fixtures(&self, fixtures: &Fixtures) -> Result<Vec<Value>, FixtureError> {
        let (mut store, now) = self.store();
        let mut scratch = store.clone();
        fixtures.load(&mut scratch, &self.config.account, now)?;
        let created = scratch
            .checks
            .keys()
            .filter(|id| !store.checks.contains_key(*id))
            .filter_map(|id| scratch.check_json(id, &self.config.ping_base))
            .collect();
        *store = scratch;
        Ok(created)
    }

    /// Adds one heartbeat check (fixture shape); returns it with `pingUrl`.
    pub(crate) fn add_heartbeat_check(&self, check: &Value) -> Result<Value, ApiError> {
        let body = check
            .as_object()
            .ok_or_else(|| bad("value", "must be of type object"))?;
        let (mut store, now) = self.store();
        let id = store.add_check(body, now)?;
        store
            .check_json(&id, &self.config.ping_base)
            .ok_or_else(ApiError::not_found)
    }

    /// Records an event of any state on a check (see `Store::inject_event`); returns it.
    pub(crate) fn add_heartbeat_event(
        &self,
        check_id: &str,
        event: &Value,
    ) -> Result<Value, ApiError> {
        let body = event
            .as_object()
            .ok_or_else(|| bad("value", "must be of type object"))?;
        let (mut store, now) = self.store();
        store.inject_event(check_id, body, now)
    }

    /// A heartbeat check as the API would answer it, with `pingUrl`.
    pub(crate) fn heartbeat_check(&self, id: &str) -> Option<Value> {
        let (store, _) = self.store();
        store.check_json(id, &self.config.ping_base)
    }

    /// Deletes a heartbeat check, as someone could in the web UI (its token stops pinging, a PUT
    /// on it is answered 404); false when there is none.
    pub(crate) fn delete_heartbeat_check(&self, id: &str) -> bool {
        let (mut store, _) = self.store();
        store.delete_check(id)
    }

    /// Recorded requests of one listener (or both), oldest first.
    pub(crate) fn recorded(&self, listener: Option<Listener>) -> Vec<RecordedRequest> {
        lock(&self.log)
            .iter()
            .filter(|r| listener.map_or(true, |l| r.listener == l))
            .cloned()
            .collect()
    }

    /// Back to the start: the initial fixtures only, no records, faults, rate-limit windows or
    /// clock offset.
    pub(crate) fn reset(&self) {
        let mut fresh = Store::default();
        let now = self.clock.now();
        // The initial fixtures loaded once at start, so they load again.
        if let Err(err) = self
            .config
            .fixtures
            .load(&mut fresh, &self.config.account, now)
        {
            tracing::warn!(error = %err, "emulator could not reload its fixtures on reset");
        }
        self.clock.reset();
        *lock(&self.store) = fresh;
        lock(&self.faults).clear();
        lock(&self.log).clear();
        lock(&self.limiter).clear();
    }
}

/// Answers one admin request.
pub(crate) fn handle(
    shared: &Shared,
    method: &Method,
    path: &str,
    query: Option<&str>,
    body: &[u8],
) -> Reply {
    route(shared, method, path, query, body).unwrap_or_else(Reply::from)
}

fn route(
    shared: &Shared,
    method: &Method,
    path: &str,
    query: Option<&str>,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let rest = path.strip_prefix(ADMIN_PREFIX).unwrap_or(path);
    let segments: Vec<&str> = rest.trim_matches('/').split('/').collect();
    let reply = match (method.clone(), segments.as_slice()) {
        (Method::GET, [""]) | (Method::GET, ["clock"]) => clock(shared),
        (Method::POST, ["clock", "advance"]) => {
            let body = parse_object(body)?;
            let seconds = body
                .get("seconds")
                .and_then(Value::as_f64)
                .filter(|s| s.is_finite() && *s >= 0.0)
                .ok_or_else(|| bad("seconds", "must be a number >= 0"))?;
            shared.clock.advance(Duration::from_secs_f64(seconds));
            clock(shared)
        }
        (Method::POST, ["fixtures"]) => {
            let text = String::from_utf8_lossy(body);
            let fixtures = Fixtures::parse(&text, "document").map_err(fixture_error)?;
            let created = shared.load_fixtures(&fixtures).map_err(fixture_error)?;
            return Ok(Reply::json(201, json!({"heartbeatChecks": created})));
        }
        (Method::POST, ["heartbeat-checks"]) => {
            let check = Value::Object(parse_object(body)?);
            return Ok(Reply::json(201, shared.add_heartbeat_check(&check)?));
        }
        (Method::POST, ["heartbeat-checks", id, "events"]) => {
            let event = Value::Object(parse_object(body)?);
            return Ok(Reply::json(201, shared.add_heartbeat_event(id, &event)?));
        }
        (Method::GET, ["heartbeat-checks", id]) => {
            shared.heartbeat_check(id).ok_or_else(ApiError::not_found)?
        }
        (Method::DELETE, ["heartbeat-checks", id]) => {
            if !shared.delete_heartbeat_check(id) {
                return Err(ApiError::not_found());
            }
            return Ok(Reply::no_content());
        }
        (Method::GET, ["requests"]) => {
            let listener = match query_pairs(query)
                .iter()
                .find(|(k, _)| k == "listener")
                .map(|(_, v)| v.as_str())
            {
                None => None,
                Some("api") => Some(Listener::Api),
                Some("ping") => Some(Listener::Ping),
                Some(_) => return Err(bad("listener", "must be one of [api, ping]")),
            };
            json!(shared.recorded(listener))
        }
        (Method::GET, ["pings"]) => json!(shared.recorded(Some(Listener::Ping))),
        (Method::DELETE, ["requests"]) => {
            lock(&shared.log).clear();
            return Ok(Reply::no_content());
        }
        (Method::GET, ["faults"]) => json!(lock(&shared.faults).list()),
        (Method::POST, ["faults"]) => {
            let fault: Fault = serde_json::from_slice(body)
                .map_err(|err| ApiError::bad_request(format!("invalid fault: {err}")))?;
            fault.validate().map_err(ApiError::bad_request)?;
            let id = lock(&shared.faults).add(fault);
            return Ok(Reply::json(201, json!({"id": id})));
        }
        (Method::DELETE, ["faults"]) => {
            lock(&shared.faults).clear();
            return Ok(Reply::no_content());
        }
        (Method::DELETE, ["faults", id]) => {
            let id: u64 = id.parse().map_err(|_| bad("id", "must be a number"))?;
            if !lock(&shared.faults).remove(id) {
                return Err(ApiError::not_found());
            }
            return Ok(Reply::no_content());
        }
        (Method::POST, ["reset"]) => {
            shared.reset();
            return Ok(Reply::no_content());
        }
        _ => return Err(ApiError::not_found()),
    };
    Ok(Reply::ok(reply))
}

fn clock(shared: &Shared) -> Value {
    json!({"now": timestamp(shared.clock.now()), "scale": shared.clock.scale()})
}

fn fixture_error(err: FixtureError) -> ApiError {
    ApiError::bad_request(err.to_string())
}
