//! Validation of request bodies and fixtures against the spec: required fields, types, enums and
//! bounds, with the first problem reported as a 400 whose message names the field
//! (`"description" length must be less than or equal to 500 characters long`).
//!
//! Resources are described as tables of [`Field`]s; [`normalize`] checks a body against a table
//! and returns the full object with every field not sent set to its default (creation, fixtures,
//! the check group PUT); [`sent`] checks only the fields a body carries and ignores keys the
//! table does not know (the heartbeat check PUT, which merges: see `checks`);
//! [`without_read_only`] drops the read-only fields of an answer that clients send back on
//! update (the check group `PUT`, the maintenance `PATCH`).

use serde_json::{json, Map, Value};

use super::server::ApiError;

/// The locations of the spec's `Location values` enumeration.
pub(crate) const LOCATIONS: &[&str] = &[
    "us-east-1",
    "us-east-2",
    "us-west-1",
    "us-west-2",
    "ca-central-1",
    "sa-east-1",
    "eu-west-1",
    "eu-central-1",
    "eu-west-2",
    "eu-west-3",
    "eu-north-1",
    "eu-south-1",
    "me-south-1",
    "ap-southeast-1",
    "ap-northeast-1",
    "ap-east-1",
    "ap-southeast-2",
    "ap-southeast-3",
    "ap-northeast-2",
    "ap-northeast-3",
    "ap-south-1",
    "af-south-1",
];

/// The runtimes of the spec's `Runtime values` enumeration.
pub(crate) const RUNTIMES: &[&str] = &[
    "2026.04", "2025.04", "2024.09", "2024.02", "2023.09", "2023.02", "2022.10",
];

/// Heartbeat period and grace units, with their length in seconds.
pub(crate) const UNITS: &[(&str, f64)] = &[
    ("seconds", 1.0),
    ("minutes", 60.0),
    ("hours", 3600.0),
    ("days", 86400.0),
];

/// Longest heartbeat period or grace: 365 days, in seconds.
pub(crate) const MAX_HEARTBEAT_SECONDS: f64 = 365.0 * 86400.0;
/// Shortest heartbeat period, in seconds.
pub(crate) const MIN_PERIOD_SECONDS: f64 = 30.0;
/// Most environment variables in one array.
pub(crate) const MAX_ENV_VARS: usize = 100;

/// What a field may hold.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// `true` or `false`.
    Bool,
    /// A string of at most `max_len` characters (when given), not empty when `non_empty`.
    Str {
        /// Upper bound on the length in characters.
        max_len: Option<usize>,
        /// Whether the empty string is refused.
        non_empty: bool,
    },
    /// A number within bounds, an integer when `integer`.
    Num {
        /// Whether fractions are refused.
        integer: bool,
        /// Inclusive lower bound.
        min: Option<f64>,
        /// Inclusive upper bound.
        max: Option<f64>,
    },
    /// An array of strings.
    Strings,
    /// An array of location enum values.
    Locations,
    /// A runtime enum value.
    Runtime,
    /// An array of environment variables (at most 100).
    EnvVars,
    /// A check's environment variables: as [`Kind::EnvVars`], with a `value` that may be
    /// `null` (the published schema's heartbeat check `PUT`).
    CheckEnvVars,
    /// An array of alert channel subscriptions.
    Subscriptions,
    /// Any JSON object.
    Object,
    /// Any JSON array.
    Array,
    /// A calendar date `YYYY-MM-DD`.
    Date,
    /// An RFC 3339 timestamp.
    DateTime,
    /// A retry strategy object or the literal `"FALLBACK"`.
    RetryStrategy,
    /// The heartbeat object of a check (period, grace, units, token).
    Heartbeat,
    /// An `alertSettings` object.
    AlertSettings,
    /// A `triggerIncident` object.
    TriggerIncident,
    /// A check's `intent` object.
    Intent,
    /// A string out of a fixed set.
    OneOf(&'static [&'static str]),
    /// An integer out of a fixed set.
    IntIn(&'static [u32]),
    /// A UUID string (canonical 8-4-4-4-12 hex form).
    Uuid,
    /// A check group's `apiCheckDefaults` object.
    ApiCheckDefaults,
    /// An `alertChannels` object (response-only; fixtures set it).
    AlertChannels,
    /// A list of fixture-only objects.
    List(super::shapes::List),
    /// Any JSON value (shapes the spec does not show).
    Any,
}

/// One field of a resource table.
#[derive(Debug, Clone)]
pub(crate) struct Field {
    /// The JSON key.
    pub name: &'static str,
    /// What it may hold.
    pub kind: Kind,
    /// Whether `null` is accepted.
    pub nullable: bool,
    /// Whether the body must carry it.
    pub required: bool,
    /// The value a field not sent takes; `None` leaves it out of the object.
    pub default: Option<Value>,
}

impl Field {
    /// An optional, non-nullable field with a default.
    pub(crate) fn new(name: &'static str, kind: Kind, default: Value) -> Self {
        Field {
            name,
            kind,
            nullable: false,
            required: false,
            default: Some(default),
        }
    }

    /// A field the body must carry.
    pub(crate) fn required(name: &'static str, kind: Kind) -> Self {
        Field {
            name,
            kind,
            nullable: false,
            required: true,
            default: None,
        }
    }

    /// An optional field that may be `null`, defaulting to `default`.
    pub(crate) fn nullable(name: &'static str, kind: Kind, default: Value) -> Self {
        Field {
            nullable: true,
            ..Field::new(name, kind, default)
        }
    }

    /// An optional field left out of the object when not sent.
    pub(crate) fn optional(name: &'static str, kind: Kind) -> Self {
        Field {
            default: None,
            ..Field::new(name, kind, Value::Null)
        }
    }
}

/// A string field without bounds.
pub(crate) const STR: Kind = Kind::Str {
    max_len: None,
    non_empty: false,
};
/// A string field that must not be empty.
pub(crate) const NON_EMPTY: Kind = Kind::Str {
    max_len: None,
    non_empty: true,
};
/// An integer field.
/// Bounded to JavaScript's safe integers, as a Node.js service (and a client reading `i64`)
/// can hold them exactly.
pub(crate) const INT: Kind = Kind::Num {
    integer: true,
    min: Some(-MAX_SAFE_INTEGER),
    max: Some(MAX_SAFE_INTEGER),
};
/// `Number.MAX_SAFE_INTEGER`: 2^53 - 1.
pub(crate) const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// A 400 naming `field`: `"field" <what>`.
pub(crate) fn bad(field: &str, what: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("\"{field}\" {what}"))
}

/// Parses a request body as a JSON object, or the 400 a malformed body gets.
pub(crate) fn parse_object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("\"value\" must be of type object"));
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| ApiError::bad_request("Invalid request payload JSON format"))?;
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(ApiError::bad_request("\"value\" must be of type object")),
    }
}

/// What a body's keys outside the table become.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unknown {
    /// A 400 naming the key.
    Refuse,
    /// Kept as sent.
    Keep,
    /// Dropped without a word (read-only and unmodelled fields of a PUT the service ignores).
    Ignore,
}

/// `body` without the `read_only` keys. Clients send back on update the fields an answer gave
/// them that the request has no field for (the official Go SDK's `GroupV2` and
/// `HeartbeatMonitor` carry `id`, `createdAt` and `updatedAt` into every `PUT`), and the service
/// ignores them; any other key outside the request's table is still refused.
pub(crate) fn without_read_only(
    body: &Map<String, Value>,
    read_only: &[&str],
) -> Map<String, Value> {
    body.iter()
        .filter(|(key, _)| !read_only.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

/// Checks `body` against `table` and returns the complete object: every field of the table,
/// sent or defaulted. Keys outside the table are refused unless `allow_unknown` (kept as sent).
pub(crate) fn normalize(
    body: &Map<String, Value>,
    table: &[Field],
    prefix: &str,
    allow_unknown: bool,
) -> Result<Map<String, Value>, ApiError> {
    let unknown = if allow_unknown {
        Unknown::Keep
    } else {
        Unknown::Refuse
    };
    let mut out = sent(body, table, prefix, unknown)?;
    for field in table {
        if out.contains_key(field.name) {
            continue;
        }
        if field.required {
            return Err(bad(&path(prefix, field.name), "is required"));
        }
        if let Some(default) = &field.default {
            out.insert(field.name.to_owned(), default.clone());
        }
    }
    Ok(out)
}

/// Checks the fields `body` carries against `table` and returns them checked (`null` kept for a
/// nullable field); nothing is defaulted and required fields are not asked for.
pub(crate) fn sent(
    body: &Map<String, Value>,
    table: &[Field],
    prefix: &str,
    unknown: Unknown,
) -> Result<Map<String, Value>, ApiError> {
    let mut out = Map::new();
    for (key, value) in body {
        let Some(field) = table.iter().find(|f| f.name == key) else {
            match unknown {
                Unknown::Keep => {
                    out.insert(key.clone(), value.clone());
                }
                Unknown::Ignore => {}
                Unknown::Refuse => return Err(bad(&path(prefix, key), "is not allowed")),
            }
            continue;
        };
        let name = path(prefix, key);
        if value.is_null() {
            if field.nullable {
                out.insert(key.clone(), Value::Null);
                continue;
            }
            return Err(bad(&name, "must not be null"));
        }
        out.insert(key.clone(), check(&name, field.kind, value)?);
    }
    Ok(out)
}

fn path(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Checks one value of the given kind; returns it normalized (the heartbeat object gains its
/// defaults, everything else is returned as sent).
pub(crate) fn check(name: &str, kind: Kind, value: &Value) -> Result<Value, ApiError> {
    match kind {
        Kind::Bool if !value.is_boolean() => Err(bad(name, "must be a boolean")),
        Kind::Str { max_len, non_empty } => {
            let text = value
                .as_str()
                .ok_or_else(|| bad(name, "must be a string"))?;
            if non_empty && text.is_empty() {
                return Err(bad(name, "is not allowed to be empty"));
            }
            match max_len {
                Some(max) if text.chars().count() > max => Err(bad(
                    name,
                    format!("length must be less than or equal to {max} characters long"),
                )),
                _ => Ok(value.clone()),
            }
        }
        Kind::Num { integer, min, max } => check_number(name, value, integer, min, max),
        Kind::Strings => {
            for (i, item) in array(name, value)?.iter().enumerate() {
                if !item.is_string() {
                    return Err(bad(&format!("{name}[{i}]"), "must be a string"));
                }
            }
            Ok(value.clone())
        }
        Kind::Locations => {
            for (i, item) in array(name, value)?.iter().enumerate() {
                one_of(&format!("{name}[{i}]"), item, LOCATIONS)?;
            }
            Ok(value.clone())
        }
        Kind::Runtime => one_of(name, value, RUNTIMES).map(|()| value.clone()),
        Kind::EnvVars => check_env_vars(name, value, false),
        Kind::CheckEnvVars => check_env_vars(name, value, true),
        Kind::Subscriptions => check_subscriptions(name, value),
        Kind::Object if !value.is_object() => Err(bad(name, "must be of type object")),
        Kind::Array => array(name, value).map(|_| value.clone()),
        Kind::Date => {
            let text = value.as_str().unwrap_or_default();
            chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
                .map(|_| value.clone())
                .map_err(|_| bad(name, "must be a date in YYYY-MM-DD format"))
        }
        Kind::DateTime => {
            let text = value.as_str().unwrap_or_default();
            chrono::DateTime::parse_from_rfc3339(text)
                .map(|_| value.clone())
                .map_err(|_| bad(name, "must be a valid ISO 8601 date-time"))
        }
        Kind::RetryStrategy => check_retry_strategy(name, value),
        Kind::Heartbeat => check_heartbeat(name, value),
        Kind::AlertSettings => super::shapes::alert_settings(name, value),
        Kind::TriggerIncident => super::shapes::trigger_incident(name, value),
        Kind::Intent => super::shapes::intent(name, value),
        Kind::ApiCheckDefaults => super::shapes::api_check_defaults(name, value),
        Kind::AlertChannels => super::shapes::alert_channels(name, value),
        Kind::List(list) => super::shapes::objects(name, value, list),
        Kind::OneOf(allowed) => one_of(name, value, allowed).map(|()| value.clone()),
        Kind::IntIn(allowed) => {
            let number = check_number(name, value, true, None, None)?;
            match number.as_u64() {
                Some(n) if allowed.iter().any(|a| u64::from(*a) == n) => Ok(number),
                _ => Err(bad(
                    name,
                    format!(
                        "must be one of {}",
                        crate::api::model::limits::list(allowed)
                    ),
                )),
            }
        }
        Kind::Uuid => match value.as_str() {
            Some(text) if is_uuid(text) => Ok(value.clone()),
            Some(_) => Err(bad(name, "must be a valid GUID")),
            None => Err(bad(name, "must be a string")),
        },
        _ => Ok(value.clone()),
    }
}

fn check_number(
    name: &str,
    value: &Value,
    integer: bool,
    min: Option<f64>,
    max: Option<f64>,
) -> Result<Value, ApiError> {
    let number = value
        .as_f64()
        .ok_or_else(|| bad(name, "must be a number"))?;
    if integer && number.fract() != 0.0 {
        return Err(bad(name, "must be an integer"));
    }
    if let Some(min) = min.filter(|m| number < *m) {
        return Err(bad(name, format!("must be greater than or equal to {min}")));
    }
    if let Some(max) = max.filter(|m| number > *m) {
        return Err(bad(name, format!("must be less than or equal to {max}")));
    }
    Ok(js_number(value, number))
}

/// The number as a JavaScript service would echo it: a whole number is written without a
/// fraction (`2.0` comes back as `2`), so a client reading an integer type can read it.
fn js_number(value: &Value, number: f64) -> Value {
    if value.is_f64() && number.fract() == 0.0 && number.abs() <= MAX_SAFE_INTEGER {
        json!(number as i64)
    } else {
        value.clone()
    }
}

fn array<'a>(name: &str, value: &'a Value) -> Result<&'a Vec<Value>, ApiError> {
    value
        .as_array()
        .ok_or_else(|| bad(name, "must be an array"))
}

fn one_of(name: &str, value: &Value, allowed: &[&str]) -> Result<(), ApiError> {
    match value.as_str() {
        Some(text) if allowed.contains(&text) => Ok(()),
        _ => Err(bad(
            name,
            format!("must be one of [{}]", allowed.join(", ")),
        )),
    }
}

fn check_env_vars(name: &str, value: &Value, value_nullable: bool) -> Result<Value, ApiError> {
    let items = array(name, value)?;
    if items.len() > MAX_ENV_VARS {
        return Err(bad(
            name,
            format!("must contain less than or equal to {MAX_ENV_VARS} items"),
        ));
    }
    let table = [
        Field::required("key", NON_EMPTY),
        Field {
            nullable: value_nullable,
            ..Field::required("value", STR)
        },
        Field::new("locked", Kind::Bool, json!(false)),
        Field::new("secret", Kind::Bool, json!(false)),
    ];
    objects(name, items, &table)
}

fn check_subscriptions(name: &str, value: &Value) -> Result<Value, ApiError> {
    let table = [
        Field::required("alertChannelId", INT),
        Field::new("activated", Kind::Bool, json!(true)),
    ];
    objects(name, array(name, value)?, &table)
}

fn objects(name: &str, items: &[Value], table: &[Field]) -> Result<Value, ApiError> {
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let item_name = format!("{name}[{i}]");
        let object = item
            .as_object()
            .ok_or_else(|| bad(&item_name, "must be of type object"))?;
        out.push(Value::Object(normalize(object, table, &item_name, false)?));
    }
    Ok(Value::Array(out))
}

fn check_retry_strategy(name: &str, value: &Value) -> Result<Value, ApiError> {
    if value.as_str() == Some("FALLBACK") {
        return Ok(value.clone());
    }
    let object = value
        .as_object()
        .ok_or_else(|| bad(name, "must be an object or \"FALLBACK\""))?;
    let non_negative = Kind::Num {
        integer: false,
        min: Some(0.0),
        max: None,
    };
    let table = [
        Field::optional("type", NON_EMPTY),
        Field::optional("baseBackoffSeconds", non_negative),
        Field::optional("sameRegion", Kind::Bool),
        Field::optional("maxRetries", super::shapes::COUNT),
        Field::optional("maxDurationSeconds", non_negative),
        Field::optional("onlyOn", Kind::Strings),
    ];
    normalize(object, &table, name, false).map(Value::Object)
}

/// The heartbeat object a check gets when the body carries none: period 1 day, grace 1 hour.
pub(crate) fn default_heartbeat() -> Value {
    json!({"period": 1, "periodUnit": "days", "grace": 1, "graceUnit": "hours"})
}

fn check_heartbeat(name: &str, value: &Value) -> Result<Value, ApiError> {
    let object = value
        .as_object()
        .ok_or_else(|| bad(name, "must be of type object"))?;
    let units: Vec<&str> = UNITS.iter().map(|(unit, _)| *unit).collect();
    let table = [
        Field::required("period", INT),
        Field::required("periodUnit", STR),
        Field::required("grace", INT),
        Field::required("graceUnit", STR),
        Field::nullable("pingToken", STR, Value::Null),
        Field::optional("pingUrl", STR),
    ];
    let mut out = normalize(object, &table, name, false)?;
    // `null`, absent and `""` all keep the check's token (the official clients send `""`
    // before they know the token); any other value must be a UUID, as the published schema
    // says (`x-format: guid`).
    match out.get("pingToken").and_then(Value::as_str) {
        None | Some("") => {
            out.remove("pingToken");
        }
        Some(token) if !is_uuid(token) => {
            return Err(bad(&path(name, "pingToken"), "must be a valid GUID"));
        }
        Some(_) => {}
    }
    for key in ["periodUnit", "graceUnit"] {
        one_of(&path(name, key), &out[key], &units)?;
    }
    let period = seconds(&out, "period", "periodUnit");
    if !(MIN_PERIOD_SECONDS..=MAX_HEARTBEAT_SECONDS).contains(&period) {
        return Err(bad(
            &path(name, "period"),
            "must be between 30 seconds and 365 days",
        ));
    }
    let grace = seconds(&out, "grace", "graceUnit");
    if !(0.0..=MAX_HEARTBEAT_SECONDS).contains(&grace) {
        return Err(bad(
            &path(name, "grace"),
            "must be between 0 seconds and 365 days",
        ));
    }
    // The URL is the service's to hand out: a sent one is ignored.
    out.remove("pingUrl");
    Ok(Value::Object(out))
}

/// The length in seconds of a validated heartbeat `amount` + `unit` pair.
pub(crate) fn seconds(heartbeat: &Map<String, Value>, amount: &str, unit: &str) -> f64 {
    let amount = heartbeat.get(amount).and_then(Value::as_f64).unwrap_or(0.0);
    let unit = heartbeat.get(unit).and_then(Value::as_str).unwrap_or("");
    let factor = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map_or(1.0, |(_, secs)| *secs);
    amount * factor
}

pub(crate) use crate::api::model::limits::is_uuid;

#[cfg(test)]
mod tests;
