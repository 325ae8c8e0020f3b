//! Fixtures: the resources an emulator starts with (`--fixtures FILE`) or that the admin API
//! adds, shaped like the API's own resource objects. Missing optional fields take the spec's
//! defaults; a bad item is refused with its place (`heartbeatChecks[1] "nightly": ...`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::state::Store;

/// A fixtures document.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Fixtures {
    /// Heartbeat check objects (`id`, `name`, `heartbeat: {period, periodUnit, grace,
    /// graceUnit, pingToken}`, ...).
    pub heartbeat_checks: Vec<Value>,
    /// Check group objects (`id` required).
    pub check_groups: Vec<Value>,
    /// Maintenance objects with their `maintenanceWindowId`.
    pub maintenances: Vec<Value>,
    /// Snippet objects (`id` required).
    pub snippets: Vec<Value>,
    /// Test session error groups by project id (an empty list makes the project known).
    pub error_groups: BTreeMap<String, Vec<Value>>,
    /// Status page service objects, in list order.
    pub status_page_services: Vec<Value>,
    /// Extra items appended to `GET /v1/check-statuses` (`null` allowed), for clients that must
    /// cope with the spec's nullable items; objects need `name` and the spec's field types.
    pub check_statuses: Vec<Value>,
}

/// A fixtures document that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    /// The file could not be read.
    #[error("cannot read fixtures file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The document is not JSON of the fixtures shape.
    #[error("fixtures {origin}: {message}")]
    Parse {
        /// The file, or "document" for in-memory JSON.
        origin: String,
        /// serde's message, with line and column.
        message: String,
    },
    /// One item is invalid.
    #[error("fixtures: {item}: {message}")]
    Item {
        /// Where: `heartbeatChecks[2] "nightly"`.
        item: String,
        /// What is wrong, naming the field.
        message: String,
    },
}

impl Fixtures {
    /// Reads a fixtures file.
    pub fn from_file(path: &Path) -> Result<Self, FixtureError> {
        let text = std::fs::read_to_string(path).map_err(|source| FixtureError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses a fixtures document; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, FixtureError> {
        serde_json::from_str(text).map_err(|err| FixtureError::Parse {
            origin: origin.to_owned(),
            message: err.to_string(),
        })
    }

    /// Loads every item into `store`. Stops at the first bad item; the store may then hold the
    /// items before it, so callers load into a scratch store first when that matters.
    pub(crate) fn load(
        &self,
        store: &mut Store,
        account: &str,
        now: DateTime<Utc>,
    ) -> Result<(), FixtureError> {
        load_each("heartbeatChecks", &self.heartbeat_checks, |body| {
            store.add_check(body, now).map(drop)
        })?;
        load_each("checkGroups", &self.check_groups, |body| {
            store.add_group(body, now).map(drop)
        })?;
        load_each("maintenances", &self.maintenances, |body| {
            store.add_maintenance(body, now).map(drop)
        })?;
        load_each("snippets", &self.snippets, |body| {
            store.add_snippet(body).map(drop)
        })?;
        load_each("statusPageServices", &self.status_page_services, |body| {
            store.add_service(body, account, now).map(drop)
        })?;
        for (project, items) in &self.error_groups {
            store
                .add_error_groups(project, items)
                .map_err(|err| FixtureError::Item {
                    item: format!("errorGroups {project:?}"),
                    message: err.message,
                })?;
        }
        for (i, item) in self.check_statuses.iter().enumerate() {
            let status =
                super::shapes::check_status("value", item).map_err(|err| FixtureError::Item {
                    item: format!("checkStatuses[{i}]"),
                    message: err.message,
                })?;
            store.extra_statuses.push(status);
        }
        Ok(())
    }
}

fn load_each(
    kind: &str,
    items: &[Value],
    mut add: impl FnMut(&Map<String, Value>) -> Result<(), super::server::ApiError>,
) -> Result<(), FixtureError> {
    for (i, item) in items.iter().enumerate() {
        let label = match item.get("id").or_else(|| item.get("name")) {
            Some(Value::String(s)) => format!("{kind}[{i}] {s:?}"),
            Some(other) => format!("{kind}[{i}] {other}"),
            None => format!("{kind}[{i}]"),
        };
        let result = match item.as_object() {
            Some(body) => add(body).map_err(|err| err.message),
            None => Err("must be a JSON object".to_owned()),
        };
        result.map_err(|message| FixtureError::Item {
            item: label,
            message,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_items_are_named() {
        let doc = r#"{"heartbeatChecks": [
            {"id": "a", "name": "ok", "heartbeat": {"period": 1, "periodUnit": "hours", "grace": 0, "graceUnit": "minutes"}},
            {"id": "nightly", "name": "x", "heartbeat": {"period": 10, "periodUnit": "seconds", "grace": 0, "graceUnit": "minutes"}}
        ]}"#;
        let fixtures = Fixtures::parse(doc, "test").expect("valid shape");
        let err = fixtures
            .load(&mut Store::default(), "acc", Utc::now())
            .expect_err("period too short");
        let text = err.to_string();
        assert!(
            text.starts_with("fixtures: heartbeatChecks[1] \"nightly\": \"heartbeat.period\""),
            "{text}"
        );
    }

    #[test]
    fn check_status_extras_are_null_or_named() {
        let doc = r#"{"checkStatuses": [null, {"checkId": "c"}]}"#;
        let err = Fixtures::parse(doc, "t")
            .expect("valid shape")
            .load(&mut Store::default(), "acc", Utc::now())
            .expect_err("no name");
        assert_eq!(
            err.to_string(),
            "fixtures: checkStatuses[1]: \"value.name\" is required"
        );
    }

    #[test]
    fn unknown_sections_are_refused() {
        let err = Fixtures::parse(r#"{"checks": []}"#, "f.json").expect_err("unknown key");
        assert!(err.to_string().contains("unknown field `checks`"), "{err}");
    }

    #[test]
    fn missing_optional_fields_take_defaults() {
        let doc = r#"{"heartbeatChecks": [{"id": "a", "name": "n"}]}"#;
        let mut store = Store::default();
        Fixtures::parse(doc, "t")
            .expect("valid")
            .load(&mut store, "acc", Utc::now())
            .expect("loads");
        let check = &store.checks["a"].object;
        assert_eq!(check["activated"], true);
        assert_eq!(check["heartbeat"]["periodUnit"], "days");
        assert_eq!(check["degradedResponseTime"], 10000);
    }
}
