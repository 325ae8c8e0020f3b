//! The desired definition of a bound check: the body of `PUT /v1/checks/heartbeat/{id}` (and of
//! the `POST /v1/checks/heartbeat` that creates a check for a job with `create = true`, whose
//! tags always carry the job's scope tag) built
//! from the job's `[jobs.check]`, its schedule (through [`super::period`]) and the ping token
//! learned earlier; and the field-by-field difference between two definitions, as `sync` shows
//! it.
//!
//! Sync owns exactly what the config sets. The service's PUT keeps a field it is not sent
//! (`checkly/checkly-go-sdk` commit d19fe3ba: "When a property is not set, it is kept intact"),
//! so a field the config does not set is left out and whatever the check has (a mute or an
//! alert channel made in the web UI) stays. A field the config set earlier (it is in the last
//! accepted definition) and no longer sets is cleared once: `null` for `description` and
//! `triggerIncident` (the Terraform provider clears a description that way), the service's
//! default for the others (`muted: false`, `tags: []`, `alertChannelSubscriptions: []`,
//! `useGlobalAlertSettings: true`; removed `alert_settings` are switched off by
//! `useGlobalAlertSettings: true`, as the request schema does not let `alertSettings` be
//! `null`). `name`, `activated` and `heartbeat` are always sent. The table is in docs/sync.md.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::period::Timing;
use crate::api::model::limits::in_units;
use crate::api::model::{HeartbeatCheckUpdate, HeartbeatSpec};
use crate::config::Job;

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
/// learned one, so the check's ping URL never changes) and clearing what the config no longer
/// sets but `previous` (the last accepted definition) did. A disabled job's check is
/// deactivated.
pub fn desired(
    job: &Job,
    timing: Timing,
    ping_token: Option<String>,
    previous: Option<&Definition>,
) -> Definition {
    let check = &job.check;
    let before = previous.map(|p| &p.body);
    let (period, period_unit) = in_units(timing.period);
    let (grace, grace_unit) = in_units(timing.grace);
    let was = |field: fn(&HeartbeatCheckUpdate) -> bool| before.is_some_and(field);
    let dropped_alert_settings = check.alert_settings.is_none()
        && was(|b| b.alert_settings.is_some())
        && check.use_global_alert_settings.is_none();
    let body = HeartbeatCheckUpdate {
        name: Some(check.name.clone().unwrap_or_else(|| job.name.clone())),
        activated: Some(job.enabled && check.activated),
        muted: owned(check.muted, was(|b| b.muted == Some(true)), false),
        tags: owned(
            with_scope_tag(check.tags.clone(), [&check.scope_tag, &check.owner_tag]),
            was(|b| b.tags.as_ref().is_some_and(|t| !t.is_empty())),
            Vec::new(),
        ),
        alert_settings: check.alert_settings.clone(),
        use_global_alert_settings: owned(
            check.use_global_alert_settings,
            was(|b| b.use_global_alert_settings == Some(false)) || dropped_alert_settings,
            true,
        ),
        alert_channel_subscriptions: owned(
            check.alert_channel_subscriptions.clone(),
            was(|b| {
                b.alert_channel_subscriptions
                    .as_ref()
                    .is_some_and(|s| !s.is_empty())
            }),
            Vec::new(),
        ),
        trigger_incident: owned(
            check.trigger_incident.clone().map(Some),
            was(|b| matches!(b.trigger_incident, Some(Some(_)))),
            None,
        ),
        description: owned(
            check.description.clone().map(Some),
            was(|b| matches!(b.description, Some(Some(_)))),
            None,
        ),
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

/// The configured tags with the tags a created check is found and owned by (its scope and
/// owner tags: always sent for such a check, so a `PUT` never drops them).
fn with_scope_tag(tags: Option<Vec<String>>, own: [&Option<String>; 2]) -> Option<Vec<String>> {
    let own: Vec<&String> = own.into_iter().flatten().collect();
    if own.is_empty() {
        return tags;
    }
    let mut tags = tags.unwrap_or_default();
    for tag in own {
        if !tags.contains(tag) {
            tags.push(tag.clone());
        }
    }
    Some(tags)
}

/// A field sync owns: the configured value; else `cleared` when the last accepted definition
/// had a value the config set (`was_set`); else not sent.
fn owned<T>(configured: Option<T>, was_set: bool, cleared: T) -> Option<T> {
    configured.or_else(|| was_set.then_some(cleared))
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
/// stable order. A field the desired definition leaves out is not sync's (the service keeps
/// it), so it is not compared. The ping token is never shown: it is a secret.
pub fn diff(accepted: Option<&Definition>, desired: &Definition) -> Vec<Change> {
    let new = flatten(desired);
    let old: Vec<(String, String)> = accepted
        .map(flatten)
        .unwrap_or_default()
        .into_iter()
        .filter(|(field, _)| new.iter().any(|(f, _)| f == field || owned_by(field, f)))
        .collect();
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

/// Whether leaf `old` (`alertSettings.reminders.amount`) belongs to the sent field whose leaf is
/// `new` (`alertSettings.reminders.interval`): one top-level field is sent whole.
fn owned_by(old: &str, new: &str) -> bool {
    let top = |path: &str| path.split('.').next().unwrap_or(path).to_owned();
    top(old) == top(new)
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
