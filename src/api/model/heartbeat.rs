//! Heartbeat checks: the update request (`PUT /v1/checks/heartbeat/{id}`), the check it answers,
//! a heartbeat event with statistics (`GET /v1/checks/heartbeats/{checkId}/events/{id}`), and,
//! outside the spec but published by the service (`checkly/docs` `api-reference/openapi.json`),
//! the events list, the create request (`POST /v1/checks/heartbeat`, schema
//! `ChecksV1HeartbeatCheckCreate`) and the query of the checks list (`GET /v1/checks`).
//!
//! The ping token and ping URL are secrets (a ping URL's path carries the token): `Debug` never
//! shows them.

use chrono::{DateTime, FixedOffset};
use serde::{Deserialize, Serialize};

use super::{
    default_true, AlertChannelSubscription, AlertChannels, AlertSettings, CheckType,
    EnvironmentVariable, EventState, Location, RuntimeId, TimeUnit, TriggerIncident,
};

/// The `heartbeat` object of an update request: period and grace with their units, and
/// optionally the ping token to keep (the spec does not show its fields; the real service's
/// published schema does: docs/api.md, "The contract").
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatSpec {
    /// Expected time between pings, in `period_unit` (30 s to 365 days).
    pub period: u64,
    /// Unit of `period`.
    pub period_unit: TimeUnit,
    /// Extra time after the period before the check fails, in `grace_unit` (0 to 365 days).
    pub grace: u64,
    /// Unit of `grace`.
    pub grace_unit: TimeUnit,
    /// Sent to keep the check's token (and so its ping URL) stable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ping_token: Option<String>,
}

impl std::fmt::Debug for HeartbeatSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeartbeatSpec")
            .field("period", &self.period)
            .field("period_unit", &self.period_unit)
            .field("grace", &self.grace)
            .field("grace_unit", &self.grace_unit)
            .field(
                "ping_token",
                &self.ping_token.as_ref().map(|_| "[redacted]"),
            )
            .finish()
    }
}

/// The `heartbeat` object of a heartbeat check as the service answers it.
#[derive(Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatInfo {
    /// Expected time between pings.
    #[serde(default)]
    pub period: Option<u64>,
    /// Unit of `period` (not in the spec's response table; the real service sends it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_unit: Option<TimeUnit>,
    /// Grace time after the period.
    #[serde(default)]
    pub grace: Option<u64>,
    /// Unit of `grace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_unit: Option<TimeUnit>,
    /// The token in the ping URL's path (secret).
    #[serde(default)]
    pub ping_token: Option<String>,
    /// The full ping URL on the ping host (secret).
    #[serde(default)]
    pub ping_url: Option<String>,
}

impl std::fmt::Debug for HeartbeatInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeartbeatInfo")
            .field("period", &self.period)
            .field("period_unit", &self.period_unit)
            .field("grace", &self.grace)
            .field("grace_unit", &self.grace_unit)
            .field(
                "ping_token",
                &self.ping_token.as_ref().map(|_| "[redacted]"),
            )
            .field(
                "ping_url",
                &self.ping_url.as_deref().map(crate::redact::url),
            )
            .finish()
    }
}

/// A heartbeat check (the answer of the update).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatCheck {
    /// The check's id.
    #[serde(default)]
    pub id: String,
    /// Name of the check.
    pub name: String,
    /// Whether the check runs.
    #[serde(default = "default_true")]
    pub activated: bool,
    /// Whether notifications are suppressed.
    #[serde(default)]
    pub muted: bool,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// The check's own alert settings.
    #[serde(default)]
    pub alert_settings: Option<AlertSettings>,
    /// When true the account's alert settings apply instead of the check's.
    #[serde(default = "default_true")]
    pub use_global_alert_settings: bool,
    /// Alert channels the check notifies.
    #[serde(default)]
    pub alert_channel_subscriptions: Vec<AlertChannelSubscription>,
    /// Status page automation.
    #[serde(default)]
    pub trigger_incident: Option<TriggerIncident>,
    /// Run in parallel in all locations.
    #[serde(default)]
    pub run_parallel: bool,
    /// Description (at most 500 characters).
    #[serde(default)]
    pub description: Option<String>,
    /// Always `HEARTBEAT` here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_type: Option<CheckType>,
    /// Period, grace, token and ping URL.
    #[serde(default)]
    pub heartbeat: HeartbeatInfo,
    /// The alert channels themselves.
    #[serde(default)]
    pub alert_channels: Option<AlertChannels>,
    /// When the check was created: a date-time in the published schema (`ChecksV1Check`); a
    /// bare date (the seed spec's type) reads as its midnight UTC. Sync keeps the oldest of two
    /// checks made for one job by it.
    #[serde(rename = "created_at", default, with = "super::opt_date_time")]
    pub created_at: Option<DateTime<FixedOffset>>,
    /// Last change.
    #[serde(rename = "updated_at", default)]
    pub updated_at: Option<DateTime<FixedOffset>>,
}

/// The body of `PUT /v1/checks/heartbeat/{id}`. Fields left `None` are not sent, so the
/// service keeps what the check has (its PUT merges); the `Option<Option<_>>` fields (see
/// [`super::clearable`]) can also be sent as `null`, which clears them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatCheckUpdate {
    /// The seed spec calls it required; the service's published schema does not, and a
    /// heartbeat check runs no script: sync leaves it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// Name of the check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activated: Option<bool>,
    /// Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub muted: Option<bool>,
    /// Deprecated (default true); `retryStrategy` replaces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub double_check: Option<bool>,
    /// Inverts what counts as failure (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub should_fail: Option<bool>,
    /// Locations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locations: Option<Vec<Location>>,
    /// Tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// Alert settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert_settings: Option<AlertSettings>,
    /// Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_global_alert_settings: Option<bool>,
    /// Check group id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<i64>,
    /// Run order inside the group (>= 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_order: Option<i64>,
    /// Runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_id: Option<RuntimeId>,
    /// Alert channel subscriptions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert_channel_subscriptions: Option<Vec<AlertChannelSubscription>>,
    /// Status page automation; `Some(None)` (`null`) removes it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::clearable::deserialize"
    )]
    pub trigger_incident: Option<Option<TriggerIncident>>,
    /// Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_parallel: Option<bool>,
    /// At most 500 characters; `Some(None)` (`null`) removes it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::clearable::deserialize"
    )]
    pub description: Option<Option<String>>,
    /// Minutes (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency: Option<u32>,
    /// >= 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_offset: Option<u32>,
    /// The spec does not show its contents: passed through as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<serde_json::Value>,
    /// Period and grace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<HeartbeatSpec>,
    /// Path of the script in the runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script_path: Option<String>,
    /// Domain whose certificate is checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssl_check_domain: Option<String>,
    /// At most 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_variables: Option<Vec<EnvironmentVariable>>,
    /// Setup snippet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_snippet_id: Option<i64>,
    /// Teardown snippet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tear_down_snippet_id: Option<i64>,
    /// Node.js setup code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_setup_script: Option<String>,
    /// Node.js teardown code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_tear_down_script: Option<String>,
    /// Milliseconds, 0..=300000 (default 10000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded_response_time: Option<u32>,
    /// Milliseconds, 0..=300000 (default 20000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_response_time: Option<u32>,
}

/// The body of `POST /v1/checks/heartbeat` (`ChecksV1HeartbeatCheckCreate`): the fields of an
/// update, of which `name` and `heartbeat` are required. Built only through
/// [`HeartbeatCheckCreate::new`] (or decoded, which applies the same rule), so a body without
/// them is never sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "HeartbeatCheckUpdate", into = "HeartbeatCheckUpdate")]
pub struct HeartbeatCheckCreate(HeartbeatCheckUpdate);

impl HeartbeatCheckCreate {
    /// The create body of `definition`; an error names the required field it lacks.
    pub fn new(definition: HeartbeatCheckUpdate) -> Result<Self, String> {
        match (&definition.name, &definition.heartbeat) {
            (None, _) => Err("a heartbeat check to create needs a \"name\"".into()),
            (Some(name), _) if name.is_empty() => {
                Err("a heartbeat check to create needs a non-empty \"name\"".into())
            }
            (_, None) => Err("a heartbeat check to create needs a \"heartbeat\" object \
                              (period, periodUnit, grace, graceUnit)"
                .into()),
            _ => Ok(HeartbeatCheckCreate(definition)),
        }
    }

    /// The fields it sends.
    pub fn definition(&self) -> &HeartbeatCheckUpdate {
        &self.0
    }
}

impl TryFrom<HeartbeatCheckUpdate> for HeartbeatCheckCreate {
    type Error = String;

    fn try_from(definition: HeartbeatCheckUpdate) -> Result<Self, String> {
        HeartbeatCheckCreate::new(definition)
    }
}

impl From<HeartbeatCheckCreate> for HeartbeatCheckUpdate {
    fn from(create: HeartbeatCheckCreate) -> Self {
        create.0
    }
}

/// The query of `GET /v1/checks`: one page of checks (the service's default is page 1 of 10),
/// only those carrying at least one of `tags` and of `check_type` when given. Without filters
/// the service lists every check of the account, of every type.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListChecks {
    /// `tag`, repeated: a check matches when it carries any of them.
    pub tags: Vec<String>,
    /// `checkType` (e.g. `HEARTBEAT`).
    pub check_type: Option<super::CheckType>,
    /// `page`, from 1.
    pub page: Option<u32>,
    /// `limit`, 1 to 100 (the service's default is 10).
    pub limit: Option<u32>,
}

impl ListChecks {
    /// The query parameters.
    pub fn query(&self) -> Vec<(&'static str, String)> {
        let mut query: Vec<(&'static str, String)> =
            self.tags.iter().map(|tag| ("tag", tag.clone())).collect();
        if let Some(kind) = &self.check_type {
            query.push(("checkType", kind.as_str().to_owned()));
        }
        if let Some(page) = self.page {
            query.push(("page", page.to_string()));
        }
        if let Some(limit) = self.limit {
            query.push(("limit", limit.to_string()));
        }
        query
    }
}

/// A heartbeat event and the check's statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeartbeatEventWithStats {
    /// The event.
    pub event: HeartbeatEvent,
    /// Success ratios of the check (empty when the answer carries none).
    #[serde(default)]
    pub stats: HeartbeatStats,
}

/// The query of the events list: at most `limit` events (the service's default and maximum is
/// 10), between `start` and `end` (the service's default is the 24 hours before now). `None`
/// leaves a parameter out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EventsWindow {
    /// `limit` (1 to 10).
    pub limit: Option<u32>,
    /// `startTime`.
    pub start: Option<DateTime<chrono::Utc>>,
    /// `endTime`.
    pub end: Option<DateTime<chrono::Utc>>,
}

impl EventsWindow {
    /// The newest event between `start` and now.
    pub fn newest_since(start: DateTime<chrono::Utc>) -> Self {
        EventsWindow {
            limit: Some(1),
            start: Some(start),
            end: None,
        }
    }

    /// The query parameters, in RFC 3339 (UTC, milliseconds).
    pub fn query(&self) -> Vec<(&'static str, String)> {
        let time =
            |t: DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let mut query = Vec::new();
        if let Some(limit) = self.limit {
            query.push(("limit", limit.to_string()));
        }
        if let Some(start) = self.start {
            query.push(("startTime", time(start)));
        }
        if let Some(end) = self.end {
            query.push(("endTime", time(end)));
        }
        query
    }
}

/// An item of the events list (`GET /v1/checks/heartbeats/{checkId}/events`, outside the
/// spec): the real service answers an array of these, each holding events and statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeartbeatEventList {
    /// The events, newest first.
    #[serde(default)]
    pub events: Vec<HeartbeatEvent>,
    /// Success ratios of the check (absent in an answer that carries none).
    #[serde(default)]
    pub stats: Option<HeartbeatStats>,
}

/// One recorded heartbeat event. Only `id` is required (the service's published schema); the
/// rest may be missing or `null`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatEvent {
    /// Event id.
    pub id: String,
    /// What the event says about the check's timer (open enum).
    #[serde(default)]
    pub state: Option<EventState>,
    /// When it was recorded.
    #[serde(default)]
    pub timestamp: Option<DateTime<FixedOffset>>,
    /// From the ping's `Origin` (else `Referer`).
    #[serde(default)]
    pub source: Option<String>,
    /// From the ping's `User-Agent`.
    #[serde(default)]
    pub user_agent: Option<String>,
}

/// `stats` of a heartbeat event; either period may be `null` (published schema).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HeartbeatStats {
    /// The last 24 hours.
    #[serde(rename = "last24Hours", default)]
    pub last_24_hours: Option<PeriodStats>,
    /// The last 7 days.
    #[serde(rename = "last7Days", default)]
    pub last_7_days: Option<PeriodStats>,
}

/// Statistics over one period (nothing inside is required).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeriodStats {
    /// Success ratio, in percent (0 to 100), now and in the period before.
    #[serde(default)]
    pub success_ratio: SuccessRatio,
    /// How many events the current period holds.
    #[serde(default)]
    pub total_entities_current_period: u64,
}

/// A success ratio for the current and the previous period, in percent (0 to 100; null when
/// there is no data). Percent, not a fraction: the service's reporting API documents its
/// `successRatio` as "Percentage is in decimal form" with the example `50`, and the official
/// CLI prints the value with a `%` as it is (`checkly/checkly-cli` c25a9045,
/// `formatters/analytics.ts`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SuccessRatio {
    /// The period before.
    #[serde(default)]
    pub previous_period: Option<f64>,
    /// The current period.
    #[serde(default)]
    pub current_period: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_leaves_out_absent_fields_and_uses_camel_case() {
        let body = HeartbeatCheckUpdate {
            name: Some("backup".into()),
            heartbeat: Some(HeartbeatSpec {
                period: 1,
                period_unit: TimeUnit::Days,
                grace: 30,
                grace_unit: TimeUnit::Minutes,
                ping_token: None,
            }),
            ..Default::default()
        };
        let json = serde_json::to_value(&body).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": "backup", "heartbeat":
                {"period": 1, "periodUnit": "days", "grace": 30, "graceUnit": "minutes"}})
        );
    }

    #[test]
    fn check_answer_decodes_with_defaults_and_hides_token_from_debug() {
        let check: HeartbeatCheck = serde_json::from_str(
            r#"{"id":"c1","name":"backup","checkType":"HEARTBEAT","created_at":"2026-01-02",
               "updated_at":"2026-01-02T03:04:05.000Z","somethingNew":1,
               "heartbeat":{"period":1,"periodUnit":"days","grace":1,"graceUnit":"hours",
                            "pingToken":"tok-secret-1","pingUrl":"https://ping.example/tok-secret-1"}}"#,
        )
        .unwrap();
        assert!(check.activated && check.use_global_alert_settings && !check.muted);
        assert_eq!(check.heartbeat.period_unit, Some(TimeUnit::Days));
        let midnight = DateTime::parse_from_rfc3339("2026-01-02T00:00:00Z").unwrap();
        assert_eq!(check.created_at, Some(midnight));
        assert!(!format!("{check:?}").contains("tok-secret-1"));
    }

    #[test]
    fn event_with_stats_decodes_unknown_state() {
        let event: HeartbeatEventWithStats = serde_json::from_str(
            r#"{"event":{"id":"e1","state":"PAUSED","timestamp":"2026-01-02T03:04:05+01:00",
                "source":null,"userAgent":"curl/8"},
               "stats":{"last24Hours":{"successRatio":{"previousPeriod":1,"currentPeriod":0.5},
                        "totalEntitiesCurrentPeriod":2},
                        "last7Days":{"successRatio":{"previousPeriod":null,"currentPeriod":1},
                        "totalEntitiesCurrentPeriod":9}}}"#,
        )
        .unwrap();
        assert_eq!(event.event.state, Some(EventState::Other("PAUSED".into())));
        let week = event.stats.last_7_days.expect("present");
        assert_eq!(week.total_entities_current_period, 9);
        assert_eq!(
            event
                .stats
                .last_24_hours
                .expect("present")
                .success_ratio
                .current_period,
            Some(0.5)
        );
    }

    #[test]
    fn nullable_shapes_of_the_published_schema_decode() {
        let event: HeartbeatEventWithStats = serde_json::from_str(
            r#"{"event":{"id":"e1"},"stats":{"last24Hours":null,"last7Days":{}}}"#,
        )
        .unwrap();
        assert_eq!((event.event.state, event.event.timestamp), (None, None));
        assert_eq!(event.stats.last_24_hours, None);
        assert_eq!(event.stats.last_7_days, Some(PeriodStats::default()));
        let bare: HeartbeatEventWithStats =
            serde_json::from_str(r#"{"event":{"id":"e2"}}"#).unwrap();
        assert_eq!(bare.stats, HeartbeatStats::default());
        let lists: Vec<HeartbeatEventList> = serde_json::from_str(
            r#"[{"events":[{"id":"e3","state":null,"timestamp":null,"source":null,
                           "userAgent":null}],"stats":{"last24Hours":null,"last7Days":null}}]"#,
        )
        .unwrap();
        assert_eq!(lists[0].events[0].id, "e3");
    }

    #[test]
    fn clearable_fields_tell_null_from_absent() {
        let body = HeartbeatCheckUpdate {
            description: Some(None),
            trigger_incident: Some(None),
            ..Default::default()
        };
        let json = serde_json::to_value(&body).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"description": null, "triggerIncident": null})
        );
        let back: HeartbeatCheckUpdate = serde_json::from_value(json).unwrap();
        assert_eq!(back, body);
        let absent: HeartbeatCheckUpdate = serde_json::from_str("{}").unwrap();
        assert_eq!((absent.description, absent.trigger_incident), (None, None));
    }
}
