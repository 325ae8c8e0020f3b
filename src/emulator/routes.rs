//! The routing table of the emulated API: which method and path is which operation of the
//! spec, the store call that answers it, 405 for a known path with another method and 404 for
//! the rest; in debug builds every answer is first checked readable by the client.
//!
//! Its own file because it is the one place that maps the spec's operations to the store,
//! and grows with every operation the emulator learns; `server.rs` only brings a request here
//! once it passed the front door (recording, faults, authentication, the rate limit).

use axum::http::Method;

use super::resources::ListQuery;
use super::server::{query_pairs, ApiError, Reply};
use super::state::Shared;
use super::validate::{bad, parse_object};
use crate::api::Operation as Op;

fn bool_param(pairs: &[(String, String)], name: &str) -> Result<(), ApiError> {
    match pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
    {
        None | Some("true") | Some("false") => Ok(()),
        Some(_) => Err(bad(name, "must be a boolean")),
    }
}

pub(super) fn route(
    shared: &Shared,
    method: &Method,
    path: &str,
    query: Option<&str>,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let pairs = query_pairs(query);
    let param = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let account = &shared.config.account;
    let ping_base = &shared.config.ping_base;
    let (mut store, now) = shared.store();
    let mut status = 200;
    let (operation, reply) = match (method.clone(), segments.as_slice()) {
        (Method::GET, ["v1", "status-pages", "services"]) => {
            let query = ListQuery {
                limit: param("limit"),
                next_id: param("nextId"),
                paginated: param("paginated"),
            };
            (Op::ListStatusPageServices, store.list_services(&query)?)
        }
        (Method::POST, ["v1", "status-pages", "services"]) => {
            let body = parse_object(body)?;
            (
                Op::CreateStatusPageService,
                store.create_service(&body, account, now)?,
            )
        }
        (Method::GET, ["v1", "maintenance-windows", window, "maintenances", id]) => {
            (Op::GetMaintenance, store.maintenance(window, id)?)
        }
        (Method::PATCH, ["v1", "maintenance-windows", window, "maintenances", id]) => {
            let body = parse_object(body)?;
            (
                Op::UpdateMaintenanceDates,
                store.patch_maintenance(window, id, &body, now)?,
            )
        }
        (Method::PUT, ["v1", "checks", "heartbeat", id]) => {
            bool_param(&pairs, "autoAssignAlerts")?;
            store.put_check(id, &parse_object(body)?, now)?;
            let check = store.check_json(id, ping_base);
            (
                Op::UpdateHeartbeatCheck,
                check.ok_or_else(ApiError::not_found)?,
            )
        }
        (Method::POST, ["v1", "checks", "heartbeat"]) => {
            bool_param(&pairs, "autoAssignAlerts")?;
            let body = parse_object(body)?;
            let id = store.create_check(&body, shared.config.max_checks, now)?;
            status = 201;
            let check = store.check_json(&id, ping_base);
            (
                Op::CreateHeartbeatCheck,
                check.ok_or_else(ApiError::not_found)?,
            )
        }
        (Method::GET, ["v1", "checks"]) => {
            let query = super::checks::ChecksQuery::from_pairs(&pairs);
            (Op::ListChecks, store.list_checks_json(&query, ping_base)?)
        }
        (Method::DELETE, ["v1", "checks", id]) => {
            if !store.delete_check(id) {
                return Err(ApiError::not_found());
            }
            return Ok(Reply::no_content());
        }
        (Method::GET, ["v1", "checks", id]) => {
            let check = store.check_json(id, ping_base);
            (Op::GetCheck, check.ok_or_else(ApiError::not_found)?)
        }
        (Method::GET, ["v1", "checks", "heartbeats", check, "events"]) => {
            let query = super::checks::EventsQuery::parse(param, now)?;
            let events = store.events_json(check, now, &query);
            (
                Op::ListHeartbeatEvents,
                events.ok_or_else(ApiError::not_found)?,
            )
        }
        (Method::GET, ["v1", "checks", "heartbeats", check, "events", event]) => {
            let event = store.event_json(check, event, now);
            (
                Op::GetHeartbeatEvent,
                event.ok_or_else(ApiError::not_found)?,
            )
        }
        (Method::GET, ["v1", "check-groups", id]) => (Op::GetCheckGroup, store.group(id)?),
        (Method::PUT, ["v2", "check-groups", id]) => {
            bool_param(&pairs, "autoAssignAlerts")?;
            let body = parse_object(body)?;
            (Op::UpdateCheckGroup, store.put_group(id, &body, now)?)
        }
        (Method::GET, ["v1", "check-statuses"]) => (Op::ListCheckStatuses, store.statuses_json()),
        (Method::GET, ["v1", "test-session-error-groups", "projects", project]) => {
            (Op::ListErrorGroups, store.error_groups_json(project)?)
        }
        (Method::DELETE, ["v1", "snippets", id]) => {
            store.delete_snippet(id)?;
            return Ok(Reply::no_content());
        }
        (_, segments) if is_api_path(segments) => return Err(ApiError::method_not_allowed()),
        _ => return Err(ApiError::not_found()),
    };
    if cfg!(debug_assertions) {
        // Debug builds (the tests, scripts/schemathesis.sh) prove every answer readable by the
        // client: one that is not is an emulator bug, answered 500 so fuzzers see it.
        super::selfcheck::readable(operation, &reply).map_err(|detail| {
            ApiError::new(
                500,
                format!("emulator answer to {operation} is not readable by the client: {detail}"),
            )
        })?;
    }
    Ok(Reply::json(status, reply))
}

/// Whether the path names an operation (so a wrong method is a 405, not a 404).
fn is_api_path(segments: &[&str]) -> bool {
    matches!(
        segments,
        ["v1", "status-pages", "services"]
            | ["v1", "maintenance-windows", _, "maintenances", _]
            | ["v1", "checks"]
            | ["v1", "checks", _]
            | ["v1", "checks", "heartbeat", _]
            | ["v1", "checks", "heartbeats", _, "events"]
            | ["v1", "checks", "heartbeats", _, "events", _]
            | ["v1" | "v2", "check-groups", _]
            | ["v1", "check-statuses"]
            | ["v1", "test-session-error-groups", "projects", _]
            | ["v1", "snippets", _]
    )
}
