//! The other resources of the account: status page services (create, cursor-paginated list),
//! maintenances (get, patch dates with an `updates` entry), check groups (v1 get, v2 put),
//! snippets (delete) and test session error groups (list per project).
//!
//! Each has an `add_*` used by fixtures and the admin API, validated with the same tables.

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use super::server::ApiError;
use super::shapes::List;
use super::state::{date, timestamp, uuid, Store};
use super::validate::{self, bad, Field, Kind, INT, NON_EMPTY, STR};

/// Default and bounds of the services list `limit`.
const DEFAULT_LIMIT: usize = 20;
const MAX_LIMIT: usize = 100;

/// Query parameters of `GET /v1/status-pages/services`.
#[derive(Debug, Default)]
pub(crate) struct ListQuery {
    /// Page size as sent.
    pub limit: Option<String>,
    /// Cursor: id of the first entry of the page.
    pub next_id: Option<String>,
    /// `false` returns everything at once.
    pub paginated: Option<String>,
}

fn service_table() -> Vec<Field> {
    vec![
        Field::required("name", NON_EMPTY),
        Field::optional("id", NON_EMPTY),
        Field::optional("accountId", NON_EMPTY),
        Field::optional("created_at", Kind::Date),
        Field::nullable("updated_at", Kind::Date, Value::Null),
    ]
}

fn maintenance_table() -> Vec<Field> {
    vec![
        Field::required("id", NON_EMPTY),
        Field::required(
            "maintenanceWindowId",
            Kind::Num {
                integer: true,
                min: Some(0.0),
                max: None,
            },
        ),
        Field::required("startsAt", Kind::Date),
        Field::required("endsAt", Kind::Date),
        Field::new("status", NON_EMPTY, json!("scheduled")),
        Field::optional("created_at", Kind::Date),
        Field::optional("updated_at", Kind::Date),
        Field::new("updates", Kind::List(List::MaintenanceUpdates), json!([])),
    ]
}

/// The check group `PUT`'s read-only keys, which clients send back on update and the service
/// ignores: the keys the answer has and the request schema lacks (published schema,
/// `checkly/docs` `api-reference/openapi.json`: `CheckGroupRead` less
/// `CheckGroupCreateOrUpdateV2`, `MaintenanceWindowMaintenance` less the `PATCH` body), and the
/// camelCase `createdAt`/`updatedAt` the official Go SDK sends
/// (`checkly/checkly-go-sdk` `types.go`, `GroupV2`).
const GROUP_READ_ONLY: &[&str] = &[
    "id",
    "created_at",
    "updated_at",
    "createdAt",
    "updatedAt",
    "projectBindings",
];
/// The maintenance `PATCH`'s read-only keys (see [`GROUP_READ_ONLY`]).
const MAINTENANCE_READ_ONLY: &[&str] = &[
    "id",
    "maintenanceWindowId",
    "status",
    "updates",
    "created_at",
    "updated_at",
    "createdAt",
    "updatedAt",
];

/// The check group fields of a v2 `PUT`, with the spec's defaults.
fn group_table() -> Vec<Field> {
    let api_defaults = json!({"url": "", "headers": [], "queryParameters": [], "assertions": [],
        "basicAuth": {"username": "", "password": ""}});
    vec![
        Field::required("name", NON_EMPTY),
        Field::new("activated", Kind::Bool, json!(true)),
        Field::new("muted", Kind::Bool, json!(false)),
        Field::new("tags", Kind::Strings, json!([])),
        Field::new("locations", Kind::Locations, json!([])),
        Field::new(
            "concurrency",
            Kind::Num {
                integer: true,
                min: Some(1.0),
                max: Some(f64::from(u32::MAX)),
            },
            json!(3),
        ),
        Field::new("apiCheckDefaults", Kind::ApiCheckDefaults, api_defaults),
        Field::optional("browserCheckDefaults", STR),
        Field::nullable("runtimeId", Kind::Runtime, Value::Null),
        Field::nullable("environmentVariables", Kind::EnvVars, json!([])),
        Field::new("alertChannelSubscriptions", Kind::Subscriptions, json!([])),
        Field::nullable("setupSnippetId", INT, Value::Null),
        Field::nullable("tearDownSnippetId", INT, Value::Null),
        Field::nullable("localSetupScript", STR, Value::Null),
        Field::nullable("localTearDownScript", STR, Value::Null),
        Field::nullable("privateLocations", Kind::Strings, Value::Null),
        Field::nullable("runParallel", Kind::Bool, json!(false)),
        // The published schema's answer has no `null` here: null and absent both give its
        // `default`.
        Field::nullable("alertSettings", Kind::AlertSettings, group_alert_settings()),
        Field::new("retryStrategy", Kind::RetryStrategy, json!("FALLBACK")),
        Field::nullable("useGlobalAlertSettings", Kind::Bool, json!(true)),
        Field::new("doubleCheck", Kind::Bool, json!(false)),
    ]
}

/// A check group's alert settings when a `PUT` or fixture gives none (or `null`): the
/// `default` of `CheckGroupAlertSettings` in the published schema (`checkly/docs`
/// `api-reference/openapi.json`), whose answers never carry `null` there.
fn group_alert_settings() -> Value {
    json!({"escalationType": "RUN_BASED", "runBasedEscalation": {"failedRunThreshold": 1},
        "reminders": {"amount": 0, "interval": 5},
        "parallelRunFailureThreshold": {"enabled": false, "percentage": 10}})
}

/// `group` with a `null` `alertSettings` replaced by the default (see [`group_alert_settings`]).
fn default_alert_settings(group: &mut Map<String, Value>) {
    if group.get("alertSettings").is_some_and(Value::is_null) {
        group.insert("alertSettings".into(), group_alert_settings());
    }
}

fn error_group_table() -> Vec<Field> {
    vec![
        Field::required("id", NON_EMPTY),
        Field::nullable("environments", Kind::Strings, Value::Null),
        Field::required("errorHash", STR),
        Field::nullable("rawErrorMessage", STR, Value::Null),
        Field::required("cleanedErrorMessage", STR),
        Field::required("firstSeen", Kind::DateTime),
        Field::required("lastSeen", Kind::DateTime),
        Field::new("archivedUntilNextEvent", Kind::Bool, json!(false)),
        Field::nullable("pwtMetadata", Kind::List(List::PwtMetadata), Value::Null),
        Field::nullable("projectId", STR, Value::Null),
        Field::new(
            "rootCauseAnalyses",
            Kind::List(List::RootCauseAnalyses),
            json!([]),
        ),
    ]
}

/// Parses a path segment that the spec types as an integer.
pub(crate) fn int_id(name: &str, raw: &str) -> Result<u64, ApiError> {
    raw.parse().map_err(|_| bad(name, "must be a number"))
}

impl Store {
    /// Adds a status page service (the create operation and fixtures share it).
    pub(crate) fn add_service(
        &mut self,
        body: &Map<String, Value>,
        account: &str,
        now: DateTime<Utc>,
    ) -> Result<Value, ApiError> {
        let mut service = validate::normalize(body, &service_table(), "", false)?;
        service.entry("id").or_insert_with(|| json!(uuid()));
        service.entry("accountId").or_insert_with(|| json!(account));
        service
            .entry("created_at")
            .or_insert_with(|| json!(date(now)));
        let id = service["id"].clone();
        if self.services.iter().any(|s| s["id"] == id) {
            return Err(ApiError::new(409, format!("service {id} already exists")));
        }
        let service = Value::Object(service);
        self.services.push(service.clone());
        Ok(service)
    }

    /// `POST /v1/status-pages/services`: only `name` may be sent.
    pub(crate) fn create_service(
        &mut self,
        body: &Map<String, Value>,
        account: &str,
        now: DateTime<Utc>,
    ) -> Result<Value, ApiError> {
        if let Some(key) = body.keys().find(|k| *k != "name") {
            return Err(bad(key, "is not allowed"));
        }
        self.add_service(body, account, now)
    }

    /// `GET /v1/status-pages/services`: pages in creation order; `nextId` is the id of the first
    /// entry of the next page.
    pub(crate) fn list_services(&self, query: &ListQuery) -> Result<Value, ApiError> {
        let limit = match &query.limit {
            None => DEFAULT_LIMIT,
            Some(raw) => raw
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=MAX_LIMIT).contains(n))
                .ok_or_else(|| bad("limit", "must be an integer from 1 to 100"))?,
        };
        let paginated = match query.paginated.as_deref() {
            None | Some("true") => true,
            Some("false") => false,
            Some(_) => return Err(bad("paginated", "must be a boolean")),
        };
        let start = match &query.next_id {
            None => 0,
            Some(id) => self
                .services
                .iter()
                .position(|s| s["id"] == id.as_str())
                .ok_or_else(|| bad("nextId", "does not name a service"))?,
        };
        let end = if paginated {
            (start + limit).min(self.services.len())
        } else {
            self.services.len()
        };
        let entries = &self.services[start..end];
        let next_id = self.services.get(end).map(|s| s["id"].clone());
        Ok(json!({"length": entries.len(), "entries": entries, "nextId": next_id}))
    }

    /// Adds a maintenance from a fixture.
    pub(crate) fn add_maintenance(
        &mut self,
        body: &Map<String, Value>,
        now: DateTime<Utc>,
    ) -> Result<Value, ApiError> {
        let mut maintenance = validate::normalize(body, &maintenance_table(), "", false)?;
        for key in ["created_at", "updated_at"] {
            maintenance.entry(key).or_insert_with(|| json!(date(now)));
        }
        let key = maintenance_key(&maintenance);
        if self.maintenances.contains_key(&key) {
            return Err(ApiError::new(
                409,
                format!("maintenance {:?} of window {} already exists", key.1, key.0),
            ));
        }
        let maintenance = Value::Object(maintenance);
        self.maintenances.insert(key, maintenance.clone());
        Ok(maintenance)
    }

    /// `GET /v1/maintenance-windows/{id}/maintenances/{maintenanceId}`.
    pub(crate) fn maintenance(&self, window: &str, id: &str) -> Result<Value, ApiError> {
        let window = int_id("id", window)?;
        self.maintenances
            .get(&(window, id.to_owned()))
            .cloned()
            .ok_or_else(ApiError::not_found)
    }

    /// `PATCH .../maintenances/{maintenanceId}`: moves the dates and records an `updates` entry
    /// with the previous dates and the adjustment.
    pub(crate) fn patch_maintenance(
        &mut self,
        window: &str,
        id: &str,
        body: &Map<String, Value>,
        now: DateTime<Utc>,
    ) -> Result<Value, ApiError> {
        let table = [
            Field::optional("startsAt", Kind::Date),
            Field::optional("endsAt", Kind::Date),
        ];
        let body = validate::without_read_only(body, MAINTENANCE_READ_ONLY);
        let dates = validate::normalize(&body, &table, "", false)?;
        if dates.is_empty() {
            return Err(bad("startsAt", "or \"endsAt\" is required"));
        }
        let window = int_id("id", window)?;
        let maintenance = self
            .maintenances
            .get_mut(&(window, id.to_owned()))
            .and_then(Value::as_object_mut)
            .ok_or_else(ApiError::not_found)?;
        let field = |key: &str| maintenance.get(key).cloned().unwrap_or(Value::Null);
        let (old_start, old_end, status) = (field("startsAt"), field("endsAt"), field("status"));
        let start = dates.get("startsAt").cloned().unwrap_or(old_start.clone());
        let end = dates.get("endsAt").cloned().unwrap_or(old_end.clone());
        if end.as_str() < start.as_str() {
            return Err(bad("endsAt", "must not be before \"startsAt\""));
        }
        let update = json!({
            "id": uuid(),
            "maintenanceWindowId": window,
            "maintenanceId": id,
            "status": status,
            "description": "Maintenance dates adjusted",
            "notifySubscribers": false,
            "created_at": date(now),
            "previousStatus": status,
            "previousStartsAt": old_start,
            "previousEndsAt": old_end,
            "dateAdjustments": {"startsAt": start, "endsAt": end},
        });
        maintenance.insert("startsAt".into(), start);
        maintenance.insert("endsAt".into(), end);
        maintenance.insert("updated_at".into(), json!(date(now)));
        match maintenance.get_mut("updates").and_then(Value::as_array_mut) {
            Some(updates) => updates.push(update),
            None => {
                maintenance.insert("updates".into(), json!([update]));
            }
        }
        Ok(Value::Object(maintenance.clone()))
    }

    /// Adds a check group from a fixture (`id` required).
    pub(crate) fn add_group(
        &mut self,
        body: &Map<String, Value>,
        now: DateTime<Utc>,
    ) -> Result<Value, ApiError> {
        let mut table = group_table();
        table.extend([
            Field::required(
                "id",
                Kind::Num {
                    integer: true,
                    min: Some(0.0),
                    max: None,
                },
            ),
            Field::optional("created_at", Kind::Date),
            Field::nullable("updated_at", Kind::DateTime, Value::Null),
        ]);
        let mut group = validate::normalize(body, &table, "", false)?;
        default_alert_settings(&mut group);
        group
            .entry("created_at")
            .or_insert_with(|| json!(date(now)));
        let id = group["id"].as_u64().unwrap_or_default();
        if self.groups.contains_key(&id) {
            return Err(ApiError::new(
                409,
                format!("check group {id} already exists"),
            ));
        }
        let group = Value::Object(group);
        self.groups.insert(id, group.clone());
        Ok(group)
    }

    /// `GET /v1/check-groups/{id}`.
    pub(crate) fn group(&self, id: &str) -> Result<Value, ApiError> {
        let id = int_id("id", id)?;
        self.groups
            .get(&id)
            .cloned()
            .ok_or_else(ApiError::not_found)
    }

    /// `PUT /v2/check-groups/{id}`: replaces the group; fields not sent return to defaults;
    /// read-only fields sent back are ignored.
    pub(crate) fn put_group(
        &mut self,
        id: &str,
        body: &Map<String, Value>,
        now: DateTime<Utc>,
    ) -> Result<Value, ApiError> {
        let id = int_id("id", id)?;
        let body = validate::without_read_only(body, GROUP_READ_ONLY);
        let mut group = validate::normalize(&body, &group_table(), "", false)?;
        default_alert_settings(&mut group);
        let old = self.groups.get_mut(&id).ok_or_else(ApiError::not_found)?;
        group.insert("id".into(), json!(id));
        group.insert("created_at".into(), old["created_at"].clone());
        group.insert("updated_at".into(), json!(timestamp(now)));
        *old = Value::Object(group);
        Ok(old.clone())
    }

    /// Adds a snippet from a fixture: `id` (integer) required, other fields free (the spec does
    /// not show them).
    pub(crate) fn add_snippet(&mut self, body: &Map<String, Value>) -> Result<Value, ApiError> {
        let table = [
            Field::required(
                "id",
                Kind::Num {
                    integer: true,
                    min: Some(0.0),
                    max: None,
                },
            ),
            Field::optional("name", STR),
        ];
        let snippet = validate::normalize(body, &table, "", true)?;
        let id = snippet["id"].as_u64().unwrap_or_default();
        if self.snippets.contains_key(&id) {
            return Err(ApiError::new(409, format!("snippet {id} already exists")));
        }
        let snippet = Value::Object(snippet);
        self.snippets.insert(id, snippet.clone());
        Ok(snippet)
    }

    /// `DELETE /v1/snippets/{id}`.
    pub(crate) fn delete_snippet(&mut self, id: &str) -> Result<(), ApiError> {
        let id = int_id("id", id)?;
        self.snippets
            .remove(&id)
            .map(|_| ())
            .ok_or_else(ApiError::not_found)
    }

    /// Adds error groups of a project from a fixture (an empty list makes the project known).
    pub(crate) fn add_error_groups(
        &mut self,
        project: &str,
        items: &[Value],
    ) -> Result<(), ApiError> {
        if !validate::is_uuid(project) {
            return Err(bad("projectId", "must be a valid GUID"));
        }
        let mut groups = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let object = item
                .as_object()
                .ok_or_else(|| bad(&format!("[{i}]"), "must be of type object"))?;
            let mut group = validate::normalize(object, &error_group_table(), "", false)?;
            if group["projectId"].is_null() {
                group.insert("projectId".into(), json!(project));
            }
            groups.push(Value::Object(group));
        }
        self.error_groups
            .entry(project.to_owned())
            .or_default()
            .extend(groups);
        Ok(())
    }

    /// `GET /v1/test-session-error-groups/projects/{projectId}`.
    pub(crate) fn error_groups_json(&self, project: &str) -> Result<Value, ApiError> {
        if !validate::is_uuid(project) {
            return Err(bad("projectId", "must be a valid GUID"));
        }
        self.error_groups
            .get(project)
            .map(|groups| json!(groups))
            .ok_or_else(ApiError::not_found)
    }
}

fn maintenance_key(maintenance: &Map<String, Value>) -> (u64, String) {
    let window = maintenance["maintenanceWindowId"]
        .as_u64()
        .unwrap_or_default();
    let id = maintenance["id"].as_str().unwrap_or_default().to_owned();
    (window, id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with_services(n: usize) -> Store {
        let mut store = Store::default();
        for i in 0..n {
            let body = json!({"name": format!("s{i}")});
            store
                .add_service(body.as_object().expect("object"), "acc", Utc::now())
                .expect("valid");
        }
        store
    }

    #[test]
    fn pages_walk_every_service_once_in_order() {
        let store = store_with_services(45);
        let mut query = ListQuery {
            limit: Some("20".into()),
            ..ListQuery::default()
        };
        let mut names = Vec::new();
        loop {
            let page = store.list_services(&query).expect("valid query");
            for entry in page["entries"].as_array().expect("array") {
                names.push(entry["name"].as_str().expect("name").to_owned());
            }
            match page["nextId"].as_str() {
                Some(next) => query.next_id = Some(next.to_owned()),
                None => break,
            }
        }
        let expected: Vec<String> = (0..45).map(|i| format!("s{i}")).collect();
        assert_eq!(names, expected);
    }

    #[test]
    fn bad_limits_name_the_parameter() {
        let store = store_with_services(1);
        for limit in ["0", "101", "x"] {
            let query = ListQuery {
                limit: Some(limit.into()),
                ..ListQuery::default()
            };
            let err = store.list_services(&query).expect_err("refused");
            assert!(err.message.starts_with("\"limit\""), "{}", err.message);
        }
    }
}
