//! What the service has now, for the fields sync owns: a check read with `GET /v1/checks/{id}`
//! (published by the service; the Go SDK's `GetHeartbeatMonitor` and the Terraform provider's
//! read use it) and laid over the desired definition, so a pass compares the config with the
//! service instead of with the local record of the last accepted `PUT`. A field edited
//! elsewhere (the web UI, another client) is *drift*: its value on the service differs from the
//! one the service last accepted from this agent.
//!
//! Without a local record (nothing accepted from this agent yet) every field the definition
//! sends is laid over, so the pass shows the real differences and sends nothing when there are
//! none; drift needs a record. Tags are compared as [`super::tags`] sees them: only the agent's
//! own.
//!
//! The read is optional: a service without the route answers 404 or 405. A 405 means the route
//! is missing; a 404 means the route is missing or the check is gone, which only a `PUT` of the
//! same check can tell (answered 404 too: gone). Either way the pass falls back to comparing with
//! the local record and re-asserting by `PUT`.
//!
//! Only the fields the desired definition sends are compared (what sync owns); the ping token
//! and `autoAssignAlerts` cannot be read and keep their local values. A period or grace in other
//! units of the same length (`24 hours` for `1 days`) is no difference.

use std::time::Duration;

use serde_json::Value;

use super::desired::{diff, Change, Definition};
use super::tags;
use crate::api::model::{HeartbeatCheck, HeartbeatCheckUpdate};
use crate::api::{ApiClient, ApiError};

/// What reading a check from the service gave.
#[derive(Debug, Clone)]
pub enum Seen {
    /// The check as the service has it.
    Read(Box<HeartbeatCheck>),
    /// 405: the service does not serve the read; compare with the local record.
    NotServed,
    /// 404: the check is gone, or the service does not serve the read; a `PUT` tells which.
    NotFound,
    /// 429 after the client's retries, with the service's `Retry-After`: the pass sends no more
    /// (429 answers count against the limit).
    RateLimited(Option<Duration>, String),
    /// Any other failure (the message names the check); compare with the local record.
    Failed(String),
}

/// Reads `check_id` from the service.
pub async fn read(client: &ApiClient, check_id: &str) -> Seen {
    match client.get_check(check_id).await {
        Ok(check) => Seen::Read(Box::new(check)),
        Err(err) if err.is_not_found() => Seen::NotFound,
        Err(ApiError::Api { status: 405, .. }) => Seen::NotServed,
        Err(err @ ApiError::RateLimited { retry_after, .. }) => Seen::RateLimited(
            retry_after,
            format!("check {check_id}: cannot read it: {err}"),
        ),
        Err(err) => Seen::Failed(format!("check {check_id}: cannot read it: {err}")),
    }
}

/// What a pass learned of a check on the service before comparing.
#[derive(Debug, Default)]
pub(super) struct Service {
    /// The service's definition (read now), compared instead of the local record.
    pub definition: Option<Definition>,
    /// The check as read: its tags (kept by a `PUT`, [`super::tags`]), ping URL and token.
    pub check: Option<Box<HeartbeatCheck>>,
    /// The fields edited on the service since it accepted this agent's definition.
    pub drift: Vec<String>,
    /// The read was answered 404: only a `PUT` tells a deleted check from a service without the
    /// route, so one is sent whatever the comparison says.
    pub must_put: bool,
    /// Why the check could not be read, when the pass tried.
    pub unread: Option<String>,
    /// The read was answered 429 (with the service's `Retry-After`): the pass sends no more.
    pub limited: Option<Option<Duration>>,
    /// A read was sent (it counts in the daemon's pacing when no `PUT` follows it).
    pub requested: bool,
}

/// Reads `check_id` and lays it over `desired` ([`remote_definition`]), with `accepted` the
/// definition the service last accepted from this agent (`None` without a record: then no
/// drift can be told, only differences). `dry_run`: a 404 is only reported, not settled by a
/// `PUT`.
pub(super) async fn service(
    client: &ApiClient,
    check_id: &str,
    accepted: Option<&Definition>,
    desired: &Definition,
    dry_run: bool,
) -> Service {
    let service = match read(client, check_id).await {
        Seen::Read(check) => match remote_definition(desired, accepted, &check) {
            Some(remote) => Service {
                drift: accepted.map(|a| drifted(a, &remote)).unwrap_or_default(),
                definition: Some(remote),
                check: Some(check),
                ..Service::default()
            },
            None => Service {
                unread: Some(format!(
                    "check {check_id}: the service's answer does not fit a heartbeat check"
                )),
                ..Service::default()
            },
        },
        Seen::NotServed => Service {
            unread: Some(
                "the service does not serve GET /v1/checks/{id} (405): compared with the last \
                 accepted definition"
                    .to_owned(),
            ),
            ..Service::default()
        },
        Seen::NotFound => Service {
            must_put: !dry_run,
            unread: Some(format!(
                "GET /v1/checks/{check_id} answered 404: the check was deleted, or the service \
                 does not serve that route{}",
                if dry_run {
                    " (a sync without --dry-run tells which, by its PUT)"
                } else {
                    ""
                }
            )),
            ..Service::default()
        },
        Seen::RateLimited(retry_after, message) => Service {
            unread: Some(message),
            limited: Some(retry_after),
            ..Service::default()
        },
        Seen::Failed(message) => Service {
            unread: Some(message),
            ..Service::default()
        },
    };
    Service {
        requested: true,
        ..service
    }
}

/// `desired` with every field it sends replaced by the service's value (`remote`): what the
/// service has, in the shape of a definition. With a record (`accepted`, the definition the
/// service last accepted from this agent) only the fields the agent sent before are laid over
/// (a field it never sent stays new, `(none) -> value`), and the ping token and
/// `autoAssignAlerts` (which cannot be read) are kept from it; without one every field is laid
/// over, and the token and the flag are the desired ones. Tags are seen as
/// [`super::tags::seen`] does: only the agent's own. `None` when the service's check does not fit
/// the definition's shape (then the local record is compared).
pub fn remote_definition(
    desired: &Definition,
    accepted: Option<&Definition>,
    remote: &HeartbeatCheck,
) -> Option<Definition> {
    let mut body = serde_json::to_value(&desired.body).ok()?;
    let have = serde_json::to_value(remote).ok()?;
    let sent_before = accepted
        .map(|a| serde_json::to_value(&a.body))
        .transpose()
        .ok()?;
    let fields = body.as_object_mut()?;
    // A field the agent never sent is shown as new (`(none) -> value`), as without a read.
    if let Some(sent_before) = &sent_before {
        fields.retain(|key, _| sent_before.get(key).is_some());
    }
    for (key, value) in fields.iter_mut() {
        if key == "heartbeat" {
            lay_heartbeat(value, &have["heartbeat"]);
        } else if key == "tags" {
            let desired_tags = desired.body.tags.as_deref().unwrap_or_default();
            let accepted_tags = accepted.and_then(|a| a.body.tags.as_deref());
            *value =
                serde_json::to_value(tags::seen(&remote.tags, desired_tags, accepted_tags)).ok()?;
        } else {
            *value = have.get(key).cloned().unwrap_or(Value::Null);
        }
    }
    let body: HeartbeatCheckUpdate = serde_json::from_value(body).ok()?;
    let mut seen = Definition {
        body,
        auto_assign_alerts: accepted.map_or(desired.auto_assign_alerts, |a| a.auto_assign_alerts),
    };
    let token = match accepted {
        Some(accepted) => accepted
            .body
            .heartbeat
            .as_ref()
            .and_then(|h| h.ping_token.clone()),
        None => desired
            .body
            .heartbeat
            .as_ref()
            .and_then(|h| h.ping_token.clone()),
    };
    if let (Some(spec), Some(token)) = (seen.body.heartbeat.as_mut(), token) {
        spec.ping_token = Some(token);
    }
    Some(seen)
}

/// The remote period and grace laid over the desired `heartbeat` object, unless they are the
/// same length in other units (then the desired units stay: no difference to show).
fn lay_heartbeat(desired: &mut Value, remote: &Value) {
    for (amount, unit) in [("period", "periodUnit"), ("grace", "graceUnit")] {
        let seconds = |v: &Value| {
            let n = v[amount].as_u64()?;
            let unit: crate::api::model::TimeUnit = serde_json::from_value(v[unit].clone()).ok()?;
            unit.seconds().map(|s| s * n)
        };
        if seconds(desired) == seconds(remote) && seconds(remote).is_some() {
            continue;
        }
        desired[amount] = remote[amount].clone();
        desired[unit] = remote[unit].clone();
    }
}

/// The fields whose value on the service (`remote`) differs from the one it last accepted from
/// this agent (`accepted`): edited elsewhere. A field the agent never sent (the config sets it
/// now for the first time) is a change, not drift.
pub fn drifted(accepted: &Definition, remote: &Definition) -> Vec<String> {
    diff(Some(accepted), remote)
        .into_iter()
        .filter(|change: &Change| change.old.is_some())
        .map(|change: Change| change.field)
        .filter(|field| field != "autoAssignAlerts" && field != "heartbeat.pingToken")
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::model::{HeartbeatSpec, TimeUnit};

    fn definition(period: u64, unit: TimeUnit, name: &str) -> Definition {
        Definition {
            body: HeartbeatCheckUpdate {
                name: Some(name.into()),
                activated: Some(true),
                heartbeat: Some(HeartbeatSpec {
                    period,
                    period_unit: unit,
                    grace: 1,
                    grace_unit: TimeUnit::Hours,
                    ping_token: Some("tok".into()),
                }),
                ..HeartbeatCheckUpdate::default()
            },
            auto_assign_alerts: true,
        }
    }

    fn check(json: serde_json::Value) -> HeartbeatCheck {
        serde_json::from_value(json).expect("a check")
    }

    #[test]
    fn an_edited_period_is_drift_the_same_length_in_other_units_is_not() {
        let desired = definition(1, TimeUnit::Days, "backup");
        let edited = check(
            serde_json::json!({"id": "c", "name": "backup", "activated": true,
            "muted": true, "heartbeat": {"period": 2, "periodUnit": "days", "grace": 60,
            "graceUnit": "minutes", "pingToken": "tok"}}),
        );
        let seen = remote_definition(&desired, Some(&desired), &edited).expect("fits");
        assert_eq!(drifted(&desired, &seen), ["heartbeat.period"]);
        let changes = diff(Some(&seen), &desired);
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(
            (changes[0].old.as_deref(), changes[0].new.as_deref()),
            (Some("2"), Some("1")),
            "the service's value is the old one"
        );
        let same = check(
            serde_json::json!({"id": "c", "name": "backup", "heartbeat": {
            "period": 24, "periodUnit": "hours", "grace": 1, "graceUnit": "hours"}}),
        );
        let seen = remote_definition(&desired, Some(&desired), &same).expect("fits");
        assert!(drifted(&desired, &seen).is_empty());
        assert_eq!(
            seen, desired,
            "the token and the flag are kept, muted is not sync's"
        );
    }
}
