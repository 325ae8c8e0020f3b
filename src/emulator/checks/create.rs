//! Creating, listing and deleting checks, the three operations the real service publishes
//! outside the spec (`checkly/docs` at `28f3298`, `api-reference/openapi.json`):
//!
//! - `POST /v1/checks/heartbeat` (`postV1ChecksHeartbeat`): the body is
//!   `ChecksV1HeartbeatCheckCreate`, the update's fields with `name` and `heartbeat` required;
//!   keys outside it are ignored as the `PUT` ignores them; every tag is a non-empty string
//!   (`tags.items.minLength: 1`). The answer is the new check, status 201. When the account
//!   already holds the emulator's check limit (`--max-checks`), 402 `Payment Required`, as the
//!   service answers a plan without room for another check. `autoAssignAlerts` is checked to be
//!   a boolean and otherwise ignored (the emulator has no alert channels to assign).
//! - `GET /v1/checks` (`getV1Checks`): `tag` (repeatable: a check matches when it carries any
//!   of them, exactly), `checkType` (one of the schema's 13 types; only `HEARTBEAT` checks
//!   exist here), `page` (from 1) and `limit` (1 to 100, default 10). ASSUMPTION: the service
//!   does not document the order; the emulator lists oldest first (`created_at`, then id), so
//!   pages are stable while checks are added. A page past the end is an empty array.
//! - `DELETE /v1/checks/{id}` (`deleteV1ChecksId`): 204, or 404 when there is no such check
//!   (the published operation lists no 404; the emulator answers the spec's 404 body, as for a
//!   `GET` of it).

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use super::request_table;
use crate::emulator::server::ApiError;
use crate::emulator::state::Store;
use crate::emulator::validate::{self, bad, Unknown};

/// The `checkType` values of the published list filter.
const CHECK_TYPES: &[&str] = &[
    "AGENTIC",
    "API",
    "BROWSER",
    "HEARTBEAT",
    "ICMP",
    "MULTI_STEP",
    "TCP",
    "PLAYWRIGHT",
    "TRACEROUTE",
    "URL",
    "DNS",
    "SSL",
    "GRPC",
];

/// The query of `GET /v1/checks`, as sent (percent-decoded).
#[derive(Debug, Default)]
pub(crate) struct ChecksQuery {
    /// Every `tag` parameter.
    pub tags: Vec<String>,
    /// `checkType`.
    pub check_type: Option<String>,
    /// `page`.
    pub page: Option<String>,
    /// `limit`.
    pub limit: Option<String>,
}

impl ChecksQuery {
    /// The query of `pairs`.
    pub(crate) fn from_pairs(pairs: &[(String, String)]) -> Self {
        let one = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        ChecksQuery {
            tags: pairs
                .iter()
                .filter(|(k, _)| k == "tag")
                .map(|(_, v)| v.clone())
                .collect(),
            check_type: one("checkType"),
            page: one("page"),
            limit: one("limit"),
        }
    }
}

impl Store {
    /// `POST /v1/checks/heartbeat`: validates the body, adds the check; returns its id.
    pub(crate) fn create_check(
        &mut self,
        body: &Map<String, Value>,
        max_checks: Option<usize>,
        now: DateTime<Utc>,
    ) -> Result<String, ApiError> {
        let sent = validate::sent(body, &request_table(), "", Unknown::Ignore)?;
        for required in ["name", "heartbeat"] {
            if !sent.get(required).is_some_and(|v| !v.is_null()) {
                return Err(bad(required, "is required"));
            }
        }
        if let Some(tags) = sent.get("tags").and_then(Value::as_array) {
            if let Some(i) = tags.iter().position(|t| t.as_str() == Some("")) {
                return Err(bad(&format!("tags[{i}]"), "must not be empty"));
            }
        }
        if max_checks.is_some_and(|max| self.checks.len() >= max) {
            return Err(ApiError::new(
                402,
                format!(
                    "the account has reached its limit of {} checks",
                    max_checks.unwrap_or_default()
                ),
            ));
        }
        self.add_check(&sent, now)
    }

    /// `GET /v1/checks`: one page of the checks the query matches, as the API answers them.
    pub(crate) fn list_checks_json(
        &self,
        query: &ChecksQuery,
        ping_base: &str,
    ) -> Result<Value, ApiError> {
        let limit = match &query.limit {
            None => 10,
            Some(raw) => raw
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=100).contains(n))
                .ok_or_else(|| bad("limit", "must be an integer from 1 to 100"))?,
        };
        let page = match &query.page {
            None => 1,
            Some(raw) => raw
                .parse::<usize>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| bad("page", "must be a number greater than 0"))?,
        };
        if let Some(kind) = &query.check_type {
            if !CHECK_TYPES.contains(&kind.as_str()) {
                return Err(bad(
                    "checkType",
                    format!("must be one of {}", CHECK_TYPES.join(", ")),
                ));
            }
        }
        let mut matching: Vec<(&str, &str)> = self
            .checks
            .values()
            .filter(|_| {
                query
                    .check_type
                    .as_deref()
                    .map_or(true, |kind| kind == "HEARTBEAT")
            })
            .filter(|check| {
                query.tags.is_empty()
                    || check.object["tags"]
                        .as_array()
                        .is_some_and(|tags| tags.iter().any(|t| query.tags.iter().any(|q| t == q)))
            })
            .map(|check| {
                let created = check.object["created_at"].as_str().unwrap_or_default();
                (created, check.id())
            })
            .collect();
        matching.sort_unstable();
        let entries: Vec<Value> = matching
            .iter()
            .skip((page - 1).saturating_mul(limit))
            .take(limit)
            .filter_map(|(_, id)| self.check_json(id, ping_base))
            .collect();
        Ok(json!(entries))
    }
}
