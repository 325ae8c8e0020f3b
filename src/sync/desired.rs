//! The desired definition of a bound check: the complete body of
//! `PUT /v1/checks/heartbeat/{id}` built from the job's `[jobs.check]`, its schedule (through
//! [`super::period`]) and the ping token learned earlier; and the field-by-field difference
//! between two definitions, as `sync` shows it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::period::Timing;
use crate::api::model::limits::in_units;
use crate::api::model::{HeartbeatCheckUpdate, HeartbeatSpec};
use crate::config::Job;

/// What is sent as `script`: the spec requires the field, and a heartbeat check runs no
/// script, so an empty string (the service's own default for heartbeat checks).
pub const SCRIPT: &str = "";

/// A check definition: the PUT body and its `autoAssignAlerts` query flag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Definition {
    /// The body of `PUT /v1/checks/heartbeat/{id}`.
    pub body: HeartbeatCheckUpdate,
    /// The `autoAssignAlerts` query parameter.
    pub auto_assign_alerts: bool,
}

/// The definition `job` wants for its check at the given timing, keeping `ping_token` (the
/// learned one, so the check's ping URL never changes). A disabled job's check is deactivated.
pub fn desired(job: &Job, timing: Timing, ping_token: Option<String>) -> Definition {
    let check = &job.check;
    let (period, period_unit) = in_units(timing.period);
    let (grace, grace_unit) = in_units(timing.grace);
    let body = HeartbeatCheckUpdate {
        script: SCRIPT.to_owned(),
        name: Some(check.name.clone().unwrap_or_else(|| job.name.clone())),
        activated: Some(job.enabled && check.activated),
        muted: Some(check.muted),
        tags: Some(check.tags.clone()),
        alert_settings: check.alert_settings.clone(),
        use_global_alert_settings: Some(check.use_global_alert_settings),
        alert_channel_subscriptions: check.alert_channel_subscriptions.clone(),
        trigger_incident: check.trigger_incident.clone(),
        description: check.description.clone(),
        heartbeat: Some(HeartbeatSpec {
            period,
            period_unit,
            grace,
            grace_unit,
            ping_token,
        }),
        ..HeartbeatCheckUpdate::default()
    };
    Definition {
        body,
        auto_assign_alerts: check.auto_assign_alerts,
    }
}

/// `accepted` with the check deactivated: what a check gets whose job left the config.
pub fn deactivated(accepted: &Definition) -> Definition {
    let mut definition = accepted.clone();
    definition.body.activated = Some(false);
    definition
}

/// One field that differs: `heartbeat.period: 1 -> 5`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// Dotted path of the field in the PUT body (`autoAssignAlerts` for the query flag).
    pub field: String,
    /// The value last accepted (JSON), `None` when it was not sent or nothing was accepted yet (shown `(none)`).
    pub old: Option<String>,
    /// The value desired now (JSON), `None` when it is no longer sent.
    pub new: Option<String>,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".to_owned());
        write!(
            f,
            "{}: {} -> {}",
            self.field,
            show(&self.old),
            show(&self.new)
        )
    }
}

/// The fields that differ between the last accepted definition and the desired one, in a
/// stable order. The ping token is never shown: it is a secret.
pub fn diff(accepted: Option<&Definition>, desired: &Definition) -> Vec<Change> {
    let old = accepted.map(flatten).unwrap_or_default();
    let new = flatten(desired);
    let mut fields: Vec<&String> = old.iter().chain(&new).map(|(k, _)| k).collect();
    fields.sort();
    fields.dedup();
    fields
        .into_iter()
        .filter_map(|field| {
            let get = |list: &[(String, String)]| {
                list.iter()
                    .find(|(k, _)| k == field)
                    .map(|(_, v)| v.clone())
            };
            let (old, new) = (get(&old), get(&new));
            (old != new).then(|| Change {
                field: field.clone(),
                old,
                new,
            })
        })
        .collect()
}

/// A definition as `(dotted path, JSON value)` leaves; arrays are leaves.
fn flatten(definition: &Definition) -> Vec<(String, String)> {
    let mut out = vec![(
        "autoAssignAlerts".to_owned(),
        definition.auto_assign_alerts.to_string(),
    )];
    if let Ok(body) = serde_json::to_value(&definition.body) {
        leaves("", &body, &mut out);
    }
    out
}

fn leaves(prefix: &str, value: &Value, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                leaves(&path, value, out);
            }
        }
        _ if prefix == "heartbeat.pingToken" => {
            out.push((prefix.to_owned(), "\"[redacted]\"".to_owned()));
        }
        _ => out.push((prefix.to_owned(), value.to_string())),
    }
}
