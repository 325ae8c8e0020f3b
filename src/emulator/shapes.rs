//! Nested objects of the spec that requests carry: alert settings, the incident trigger, a
//! check's intent and a group's API check defaults. They are checked field by field, so the emulator never stores
//! (and echoes back) a shape the spec, and so the typed client, cannot read: counts are
//! non-negative integers, texts are strings, flags are booleans.

use serde_json::{json, Value};

use super::server::ApiError;
use super::validate::{bad, check, normalize, Field, Kind, STR};
use crate::api::model::limits;

/// A count: an integer from 0 to `u32::MAX` (the client reads counts as `u32`).
pub(crate) const COUNT: Kind = Kind::Num {
    integer: true,
    min: Some(0.0),
    max: Some(u32::MAX as f64),
};

/// Checks an `alertSettings` object: each value out of the set the service's published
/// schema gives (`crate::api::model::limits`); the deprecated `sslCertificates` object is
/// accepted (the official Go SDK still sends it) and kept.
pub(crate) fn alert_settings(name: &str, value: &Value) -> Result<Value, ApiError> {
    let table = [
        Field::optional("escalationType", Kind::OneOf(limits::ESCALATION_TYPES)),
        Field::optional("runBasedEscalation", Kind::Object),
        Field::optional("timeBasedEscalation", Kind::Object),
        Field::optional("reminders", Kind::Object),
        Field::optional("parallelRunFailureThreshold", Kind::Object),
        Field::optional("sslCertificates", Kind::Object),
    ];
    let mut out = object(name, value, &table)?;
    let nested: [(&str, Vec<Field>); 5] = [
        (
            "runBasedEscalation",
            vec![Field::optional(
                "failedRunThreshold",
                Kind::IntIn(limits::FAILED_RUN_THRESHOLDS),
            )],
        ),
        (
            "timeBasedEscalation",
            vec![Field::optional(
                "minutesFailingThreshold",
                Kind::IntIn(limits::MINUTES_FAILING_THRESHOLDS),
            )],
        ),
        (
            "reminders",
            vec![
                Field::optional("amount", Kind::IntIn(limits::REMINDER_AMOUNTS)),
                Field::optional("interval", Kind::IntIn(limits::REMINDER_INTERVALS)),
            ],
        ),
        (
            "parallelRunFailureThreshold",
            vec![
                Field::optional("enabled", Kind::Bool),
                Field::optional("percentage", Kind::IntIn(limits::FAILURE_PERCENTAGES)),
            ],
        ),
        (
            "sslCertificates",
            vec![
                Field::optional("enabled", Kind::Bool),
                Field::optional("alertThreshold", super::validate::INT),
            ],
        ),
    ];
    for (key, table) in nested {
        if let Some(inner) = out.get(key) {
            let checked = object(&format!("{name}.{key}"), inner, &table)?;
            out.insert(key.to_owned(), Value::Object(checked));
        }
    }
    Ok(Value::Object(out))
}

/// Checks a `triggerIncident` object: all five fields are required and `serviceId` is a UUID,
/// as the service's published schema says.
pub(crate) fn trigger_incident(name: &str, value: &Value) -> Result<Value, ApiError> {
    let table = [
        Field::required("serviceId", Kind::Uuid),
        Field::required("severity", Kind::OneOf(limits::SEVERITIES)),
        Field::required("name", STR),
        Field::required("description", STR),
        Field::required("notifySubscribers", Kind::Bool),
    ];
    object(name, value, &table).map(Value::Object)
}

/// Most entries in each list of a check's `intent`.
const MAX_INTENT_ITEMS: usize = 20;

/// Checks a check's `intent` as the service's published schema has it: a `goal` of 1 to 2,000
/// characters, at most 20 `requiredOutcomes` and `mustPreserve` entries of 1 to 1,000
/// characters each, and nothing else.
pub(crate) fn intent(name: &str, value: &Value) -> Result<Value, ApiError> {
    let text = |max| Kind::Str {
        max_len: Some(max),
        non_empty: true,
    };
    let table = [
        Field::required("goal", text(2000)),
        Field::optional("requiredOutcomes", Kind::Array),
        Field::optional("mustPreserve", Kind::Array),
    ];
    let out = object(name, value, &table)?;
    for key in ["requiredOutcomes", "mustPreserve"] {
        let items = out.get(key).and_then(Value::as_array).into_iter().flatten();
        for (i, item) in items.enumerate() {
            if i == MAX_INTENT_ITEMS {
                return Err(bad(
                    &format!("{name}.{key}"),
                    format!("must contain less than or equal to {MAX_INTENT_ITEMS} items"),
                ));
            }
            check(&format!("{name}.{key}[{i}]"), text(1000), item)?;
        }
    }
    Ok(Value::Object(out))
}

/// `apiCheckDefaults.assertions[].source`, from the service's published schema
/// (`AssertionSource`).
const ASSERTION_SOURCES: &[&str] = &[
    "STATUS_CODE",
    "JSON_BODY",
    "HEADERS",
    "TEXT_BODY",
    "RESPONSE_TIME",
];

/// `apiCheckDefaults.assertions[].comparison`, from the service's published schema
/// (`AssertionComparison`).
const ASSERTION_COMPARISONS: &[&str] = &[
    "EQUALS",
    "NOT_EQUALS",
    "HAS_KEY",
    "NOT_HAS_KEY",
    "HAS_VALUE",
    "NOT_HAS_VALUE",
    "IS_EMPTY",
    "NOT_EMPTY",
    "GREATER_THAN",
    "LESS_THAN",
    "CONTAINS",
    "NOT_CONTAINS",
    "IS_NULL",
    "NOT_NULL",
];

/// Checks a check group's `apiCheckDefaults`; lists not sent become `[]`. As the service's
/// published schema has it: `url` and `basicAuth` may be `null`, a header or query parameter may
/// carry `locked`, and an assertion's `source` and `comparison` come from fixed sets (an
/// assertion may also carry `property` and a nullable `regex`).
pub(crate) fn api_check_defaults(name: &str, value: &Value) -> Result<Value, ApiError> {
    let table = [
        Field {
            nullable: true,
            ..Field::optional("url", STR)
        },
        Field::new("headers", Kind::Array, json!([])),
        Field::new("queryParameters", Kind::Array, json!([])),
        Field::new("assertions", Kind::Array, json!([])),
        Field {
            nullable: true,
            ..Field::optional("basicAuth", Kind::Object)
        },
    ];
    let mut out = object(name, value, &table)?;
    let pair = [
        Field::new("key", STR, json!("")),
        Field::new("value", STR, json!("")),
        Field::optional("locked", Kind::Bool),
    ];
    let assertion = [
        Field::optional("source", Kind::OneOf(ASSERTION_SOURCES)),
        Field::optional("comparison", Kind::OneOf(ASSERTION_COMPARISONS)),
        Field::optional("property", STR),
        Field::new("target", STR, json!("")),
        Field {
            nullable: true,
            ..Field::optional("regex", STR)
        },
    ];
    let lists: [(&str, &[Field]); 3] = [
        ("headers", &pair),
        ("queryParameters", &pair),
        ("assertions", &assertion),
    ];
    for (key, table) in lists {
        let checked = each(&format!("{name}.{key}"), &out[key], table)?;
        out.insert(key.to_owned(), checked);
    }
    if let Some(auth) = out.get("basicAuth").filter(|auth| !auth.is_null()) {
        let table = [
            Field::new("username", STR, json!("")),
            Field::new("password", STR, json!("")),
        ];
        let checked = object(&format!("{name}.basicAuth"), auth, &table)?;
        out.insert("basicAuth".into(), Value::Object(checked));
    }
    Ok(Value::Object(out))
}

/// A webhook alert channel's `method`, from the service's published schema
/// (`ChecksV1AlertWebhook`).
const WEBHOOK_METHODS: &[&str] = &["GET", "POST", "PUT", "HEAD", "DELETE", "PATCH"];

/// Checks an `alertChannels` object (fixtures only; the API answers it, never takes it).
pub(crate) fn alert_channels(name: &str, value: &Value) -> Result<Value, ApiError> {
    let lists = [
        Field::new("email", Kind::Array, json!([])),
        Field::new("webhook", Kind::Array, json!([])),
        Field::new("slack", Kind::Array, json!([])),
        Field::new("sms", Kind::Array, json!([])),
    ];
    let mut out = object(name, value, &lists)?;
    let tables: [(&str, Vec<Field>); 4] = [
        ("email", vec![Field::new("address", STR, json!(""))]),
        (
            "webhook",
            vec![
                Field::new("url", STR, json!("")),
                Field::optional("name", STR),
                Field {
                    nullable: true,
                    ..Field::optional("method", Kind::OneOf(WEBHOOK_METHODS))
                },
                Field::new("headers", Kind::Array, json!([])),
                Field::new("queryParameters", Kind::Array, json!([])),
            ],
        ),
        ("slack", vec![Field::new("url", STR, json!(""))]),
        (
            "sms",
            vec![
                Field::new("number", STR, json!("")),
                Field::new("name", STR, json!("")),
            ],
        ),
    ];
    for (key, table) in tables {
        let checked = each(&format!("{name}.{key}"), &out[key], &table)?;
        out.insert(key.to_owned(), checked);
    }
    let locked = [
        Field::new("key", STR, json!("")),
        Field::new("value", STR, json!("")),
        Field::new("locked", Kind::Bool, json!(false)),
    ];
    if let Some(Value::Array(webhooks)) = out.get_mut("webhook") {
        for (i, webhook) in webhooks.iter_mut().enumerate() {
            for list in ["headers", "queryParameters"] {
                let at = format!("{name}.webhook[{i}].{list}");
                let checked = each(&at, &webhook[list], &locked)?;
                webhook[list] = checked;
            }
        }
    }
    Ok(Value::Object(out))
}

/// Checks an extra item of the check statuses list (fixtures): `null`, or a check status
/// object with `name` and the spec's types.
pub(crate) fn check_status(name: &str, value: &Value) -> Result<Value, ApiError> {
    if value.is_null() {
        return Ok(Value::Null);
    }
    let number = Kind::Num {
        integer: false,
        min: None,
        max: None,
    };
    let table = [
        Field::required("name", STR),
        Field::optional("checkId", STR),
        Field::new("hasFailures", Kind::Bool, json!(false)),
        Field::new("hasErrors", Kind::Bool, json!(false)),
        Field::new("isDegraded", Kind::Bool, json!(false)),
        Field::nullable("longestRun", number, Value::Null),
        Field::nullable("shortestRun", number, Value::Null),
        Field::nullable("lastRunLocation", STR, Value::Null),
        Field::nullable("lastCheckRunId", STR, Value::Null),
        Field::nullable("sslDaysRemaining", super::validate::INT, Value::Null),
        Field::optional("created_at", Kind::Date),
        Field::nullable("updated_at", Kind::DateTime, Value::Null),
    ];
    object(name, value, &table).map(Value::Object)
}

/// Which list of fixture-only objects [`objects`] checks.
#[derive(Debug, Clone, Copy)]
pub(crate) enum List {
    /// An error group's `pwtMetadata`.
    PwtMetadata,
    /// An error group's `rootCauseAnalyses`.
    RootCauseAnalyses,
    /// A maintenance's `updates`.
    MaintenanceUpdates,
}

/// Checks a list of objects that only fixtures carry (the API builds them itself).
pub(crate) fn objects(name: &str, value: &Value, list: List) -> Result<Value, ApiError> {
    let table = match list {
        List::PwtMetadata => vec![
            Field::optional("projectName", STR),
            Field::optional("testFile", STR),
            Field::optional("testTitle", STR),
            Field::new("suitePath", Kind::Strings, json!([])),
            Field::optional("specId", STR),
        ],
        List::RootCauseAnalyses => vec![
            Field::new("id", STR, json!("")),
            Field::optional("created_at", Kind::DateTime),
            Field::nullable("analysis", Kind::Any, Value::Null),
            Field::optional("provider", STR),
            Field::optional("model", STR),
            Field::optional(
                "durationMs",
                Kind::Num {
                    integer: false,
                    min: Some(0.0),
                    max: None,
                },
            ),
            Field::nullable("userContext", Kind::Any, Value::Null),
        ],
        // The fields the published schema requires of an update (`MaintenanceWindowMaintenance`),
        // so a fixture cannot seed an answer the service would not give.
        List::MaintenanceUpdates => vec![
            Field::required("id", STR),
            Field::required("maintenanceWindowId", super::validate::INT),
            Field::required("maintenanceId", STR),
            Field::required("status", STR),
            Field::required("description", STR),
            Field::required("notifySubscribers", Kind::Bool),
            Field::required("created_at", Kind::Date),
            Field::optional("previousStatus", STR),
            Field::optional("previousStartsAt", Kind::Date),
            Field::optional("previousEndsAt", Kind::Date),
            Field::optional("dateAdjustments", Kind::Object),
        ],
    };
    let mut checked = each(name, value, &table)?;
    let dates = [
        Field::optional("startsAt", Kind::Date),
        Field::optional("endsAt", Kind::Date),
    ];
    for (i, item) in checked.as_array_mut().into_iter().flatten().enumerate() {
        if let Some(adjustments) = item.get("dateAdjustments") {
            let at = format!("{name}[{i}].dateAdjustments");
            item["dateAdjustments"] = Value::Object(object(&at, adjustments, &dates)?);
        }
    }
    Ok(checked)
}

/// Checks every item of an array as an object of `table`; `name[i]` names a bad one.
fn each(name: &str, value: &Value, table: &[Field]) -> Result<Value, ApiError> {
    let items = value
        .as_array()
        .ok_or_else(|| bad(name, "must be an array"))?;
    let mut checked = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        checked.push(Value::Object(object(&format!("{name}[{i}]"), item, table)?));
    }
    Ok(Value::Array(checked))
}

fn object(
    name: &str,
    value: &Value,
    table: &[Field],
) -> Result<serde_json::Map<String, Value>, ApiError> {
    let map = value
        .as_object()
        .ok_or_else(|| bad(name, "must be of type object"))?;
    normalize(map, table, name, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alert_settings_values_come_from_the_published_sets() {
        let refused = |body: Value| {
            alert_settings("alertSettings", &body)
                .expect_err("outside the set")
                .message
        };
        assert_eq!(
            refused(json!({"reminders": {"amount": 1.5}})),
            "\"alertSettings.reminders.amount\" must be an integer"
        );
        assert_eq!(
            refused(json!({"reminders": {"amount": 6}})),
            "\"alertSettings.reminders.amount\" must be one of [0, 1, 2, 3, 4, 5, 100000]"
        );
        assert_eq!(
            refused(json!({"reminders": {"interval": 7}})),
            "\"alertSettings.reminders.interval\" must be one of [1, 2, 3, 4, 5, 10, 15, 30]"
        );
        assert_eq!(
            refused(json!({"runBasedEscalation": {"failedRunThreshold": 0}})),
            "\"alertSettings.runBasedEscalation.failedRunThreshold\" must be one of [1, 2, 3, 4, 5]"
        );
        assert_eq!(
            refused(json!({"parallelRunFailureThreshold": {"percentage": 15}})),
            "\"alertSettings.parallelRunFailureThreshold.percentage\" must be one of [10, 20, 30, \
             40, 50, 60, 70, 80, 90, 100]"
        );
        assert_eq!(
            refused(json!({"escalationType": "SOMETIMES"})),
            "\"alertSettings.escalationType\" must be one of [RUN_BASED, TIME_BASED]"
        );
        assert_eq!(
            refused(json!({"timeBasedEscalation": {"minutesFailingThreshold": 1}})),
            "\"alertSettings.timeBasedEscalation.minutesFailingThreshold\" must be one of [5, \
             10, 15, 30]"
        );
        let ok = alert_settings(
            "alertSettings",
            &json!({"escalationType": "TIME_BASED", "runBasedEscalation": {"failedRunThreshold": 2},
                    "timeBasedEscalation": {"minutesFailingThreshold": 30},
                    "reminders": {"amount": 100000, "interval": 30},
                    "parallelRunFailureThreshold": {"enabled": true, "percentage": 100.0},
                    "sslCertificates": {"enabled": false, "alertThreshold": 30}}),
        )
        .expect("valid");
        assert_eq!(ok["runBasedEscalation"]["failedRunThreshold"], 2);
        assert_eq!(ok["parallelRunFailureThreshold"]["percentage"], 100);
        assert_eq!(ok["sslCertificates"]["alertThreshold"], 30);
    }

    #[test]
    fn trigger_incident_needs_all_five_fields_and_a_severity() {
        let full = json!({"serviceId": "123e4567-e89b-12d3-a456-426614174000",
                          "severity": "MAJOR", "name": "backup down", "description": "",
                          "notifySubscribers": false});
        assert_eq!(
            trigger_incident("triggerIncident", &full).expect("valid"),
            full
        );
        let mut no_severity = full.clone();
        no_severity
            .as_object_mut()
            .expect("object")
            .remove("severity");
        assert_eq!(
            trigger_incident("triggerIncident", &no_severity)
                .expect_err("missing")
                .message,
            "\"triggerIncident.severity\" is required"
        );
        let mut bad_severity = full.clone();
        bad_severity["severity"] = json!("LOW");
        assert_eq!(
            trigger_incident("triggerIncident", &bad_severity)
                .expect_err("outside the set")
                .message,
            "\"triggerIncident.severity\" must be one of [CRITICAL, MAJOR, MEDIUM, MINOR]"
        );
        let mut bad_service = full;
        bad_service["serviceId"] = json!("svc_1");
        assert_eq!(
            trigger_incident("triggerIncident", &bad_service)
                .expect_err("not a UUID")
                .message,
            "\"triggerIncident.serviceId\" must be a valid GUID"
        );
    }

    #[test]
    fn defaults_items_are_objects_of_strings() {
        let err = api_check_defaults("apiCheckDefaults", &json!({"headers": [{"key": 1}]}))
            .expect_err("number key");
        assert_eq!(
            err.message,
            "\"apiCheckDefaults.headers[0].key\" must be a string"
        );
        let ok = api_check_defaults("apiCheckDefaults", &json!({"url": "https://x"})).expect("ok");
        assert_eq!(ok["assertions"], json!([]));
        let err = alert_channels("alertChannels", &json!({"email": [{"address": 7}]}))
            .expect_err("number address");
        assert_eq!(
            err.message,
            "\"alertChannels.email[0].address\" must be a string"
        );
        let err = check_status("value", &json!({"checkId": "c"})).expect_err("no name");
        assert_eq!(err.message, "\"value.name\" is required");
        assert_eq!(
            check_status("value", &Value::Null).expect("null is allowed"),
            Value::Null
        );
        let updates = json!([{"id": "u", "maintenanceWindowId": 7, "maintenanceId": "m",
            "status": "scheduled", "description": "moved", "notifySubscribers": false,
            "created_at": "2026-12-01", "dateAdjustments": {"startsAt": "May"}}]);
        let err = objects("updates", &updates, List::MaintenanceUpdates).expect_err("bad date");
        assert!(
            err.message
                .starts_with("\"updates[0].dateAdjustments.startsAt\" must be a date"),
            "{}",
            err.message
        );
    }
}
