//! Shapes shared by several resources: alert settings and channels, subscriptions, incident
//! triggers, environment variables, and the error body of every failed request.

use serde::{Deserialize, Serialize};

/// The body of every error answer: `{statusCode, error, message, attributes}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    /// The HTTP status, repeated in the body.
    pub status_code: u16,
    /// The status name (`Unauthorized`, `Not Found`, ...).
    pub error: String,
    /// What went wrong, for people (`Bad Token`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Extra details; present on 401 and 429.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<serde_json::Value>,
}

/// `alertSettings`: when and how often a failing check alerts.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlertSettings {
    /// `RUN_BASED` or `TIME_BASED` (the service's published set, `limits::ESCALATION_TYPES`);
    /// others are kept as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation_type: Option<String>,
    /// How many failed runs before alerting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_based_escalation: Option<RunBasedEscalation>,
    /// How long a check fails before alerting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_based_escalation: Option<TimeBasedEscalation>,
    /// Repeated alerts while the check keeps failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reminders: Option<Reminders>,
    /// Alerting on a share of parallel runs failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_run_failure_threshold: Option<ParallelRunFailureThreshold>,
}

/// `alertSettings.runBasedEscalation`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunBasedEscalation {
    /// Failed runs in a row that trigger an alert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_run_threshold: Option<u32>,
}

/// `alertSettings.timeBasedEscalation`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimeBasedEscalation {
    /// Minutes failing before an alert (5, 10, 15 or 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minutes_failing_threshold: Option<u32>,
}

/// `alertSettings.reminders`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reminders {
    /// How many reminders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<u32>,
    /// Minutes between reminders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<u32>,
}

/// `alertSettings.parallelRunFailureThreshold`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParallelRunFailureThreshold {
    /// Whether the threshold applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Percentage of failing locations that alerts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentage: Option<f64>,
}

/// An entry of `alertChannelSubscriptions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlertChannelSubscription {
    /// The alert channel.
    pub alert_channel_id: i64,
    /// Whether alerts go to it.
    pub activated: bool,
}

/// `triggerIncident`: status page automation for a check. The service requires all five
/// fields in a request (published schema); answers are read whatever they hold.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriggerIncident {
    /// The status page service the incident is opened on (a UUID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_id: Option<String>,
    /// `CRITICAL`, `MAJOR`, `MEDIUM` or `MINOR` (`limits::SEVERITIES`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    /// Incident name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Incident description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether status page subscribers are told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify_subscribers: Option<bool>,
}

/// `alertChannels` (responses only).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlertChannels {
    /// E-mail channels.
    #[serde(default)]
    pub email: Vec<EmailChannel>,
    /// Webhook channels.
    #[serde(default)]
    pub webhook: Vec<WebhookChannel>,
    /// Slack channels.
    #[serde(default)]
    pub slack: Vec<SlackChannel>,
    /// SMS channels.
    #[serde(default)]
    pub sms: Vec<SmsChannel>,
}

/// An e-mail alert channel.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EmailChannel {
    /// The address.
    #[serde(default)]
    pub address: String,
}

/// A webhook alert channel.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookChannel {
    /// Target URL.
    #[serde(default)]
    pub url: String,
    /// Display name.
    #[serde(default)]
    pub name: Option<String>,
    /// HTTP method.
    #[serde(default)]
    pub method: Option<String>,
    /// Headers sent.
    #[serde(default)]
    pub headers: Vec<LockedKeyValue>,
    /// Query parameters sent.
    #[serde(default)]
    pub query_parameters: Vec<LockedKeyValue>,
}

/// A Slack alert channel.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SlackChannel {
    /// Incoming webhook URL.
    #[serde(default)]
    pub url: String,
}

/// An SMS alert channel.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SmsChannel {
    /// Phone number.
    #[serde(default)]
    pub number: String,
    /// Display name.
    #[serde(default)]
    pub name: Option<String>,
}

/// A header or query parameter of a webhook channel.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LockedKeyValue {
    /// Name.
    #[serde(default)]
    pub key: String,
    /// Value.
    #[serde(default)]
    pub value: String,
    /// Whether it can be changed in the UI.
    #[serde(default)]
    pub locked: bool,
}

/// A header or query parameter of API check defaults.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct KeyValue {
    /// Name.
    #[serde(default)]
    pub key: String,
    /// Value.
    #[serde(default)]
    pub value: String,
}

/// An environment variable of a check or group (at most 100 per array).
#[derive(Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EnvironmentVariable {
    /// Name.
    pub key: String,
    /// Value (hidden from `Debug` when `secret`).
    pub value: String,
    /// Whether it can be changed in the UI.
    #[serde(default)]
    pub locked: bool,
    /// Whether the value is a secret.
    #[serde(default)]
    pub secret: bool,
}

impl std::fmt::Debug for EnvironmentVariable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = if self.secret || self.locked {
            "[redacted]"
        } else {
            &self.value
        };
        f.debug_struct("EnvironmentVariable")
            .field("key", &self.key)
            .field("value", &value)
            .field("locked", &self.locked)
            .field("secret", &self.secret)
            .finish()
    }
}
