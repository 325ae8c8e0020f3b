//! Check groups: the v1 answer (`GET /v1/check-groups/{id}`) and the v2 update request
//! (`PUT /v2/check-groups/{id}`), whose `retryStrategy` is an object or the string `FALLBACK`.

use chrono::{DateTime, FixedOffset, NaiveDate};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{
    default_true, AlertChannelSubscription, AlertSettings, EnvironmentVariable, KeyValue, Location,
    RuntimeId,
};

/// `retryStrategy`: a strategy object, or `"FALLBACK"` (the account's default).
#[derive(Debug, Clone, PartialEq)]
pub enum RetryStrategySetting {
    /// The literal string `FALLBACK`.
    Fallback,
    /// An explicit strategy.
    Strategy(RetryStrategy),
}

impl Serialize for RetryStrategySetting {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RetryStrategySetting::Fallback => s.serialize_str("FALLBACK"),
            RetryStrategySetting::Strategy(strategy) => strategy.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for RetryStrategySetting {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Wire {
            Text(String),
            Object(RetryStrategy),
        }
        match Wire::deserialize(d).map_err(|_| {
            serde::de::Error::custom("retryStrategy must be an object or the string \"FALLBACK\"")
        })? {
            Wire::Text(text) if text == "FALLBACK" => Ok(RetryStrategySetting::Fallback),
            Wire::Text(text) => Err(serde::de::Error::custom(format!(
                "retryStrategy must be an object or the string \"FALLBACK\", got {text:?}"
            ))),
            Wire::Object(strategy) => Ok(RetryStrategySetting::Strategy(strategy)),
        }
    }
}

/// A retry strategy object.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryStrategy {
    /// Strategy kind (`FIXED`, `LINEAR`, ...; not in the spec, kept when sent).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Base backoff between retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_backoff_seconds: Option<f64>,
    /// Retry in the same region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_region: Option<bool>,
    /// How many retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// Upper bound of all retries together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration_seconds: Option<f64>,
    /// Retry only on these failures (`NETWORK_ERROR` is the value the spec gives).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only_on: Option<Vec<String>>,
}

/// `apiCheckDefaults` of a group.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiCheckDefaults {
    /// Base URL of the group's API checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Headers.
    #[serde(default)]
    pub headers: Vec<KeyValue>,
    /// Query parameters.
    #[serde(default)]
    pub query_parameters: Vec<KeyValue>,
    /// Assertions.
    #[serde(default)]
    pub assertions: Vec<Assertion>,
    /// HTTP basic authentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basic_auth: Option<BasicAuth>,
}

/// An assertion of API check defaults.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Assertion {
    /// What is checked.
    #[serde(default)]
    pub source: String,
    /// How.
    #[serde(default)]
    pub comparison: String,
    /// Against what.
    #[serde(default)]
    pub target: String,
}

/// Basic authentication of API check defaults.
#[derive(Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BasicAuth {
    /// User name.
    #[serde(default)]
    pub username: String,
    /// Password (hidden from `Debug`).
    #[serde(default)]
    pub password: String,
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BasicAuth")
            .field("username", &self.username)
            .field("password", &"[redacted]")
            .finish()
    }
}

/// A check group as the service answers it (v1 GET and v2 PUT).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckGroup {
    /// Group id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Whether the group's checks run.
    #[serde(default = "default_true")]
    pub activated: bool,
    /// Whether notifications are suppressed.
    #[serde(default)]
    pub muted: bool,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Locations.
    #[serde(default)]
    pub locations: Vec<Location>,
    /// Checks invoked concurrently when triggered from CI/CD or the API.
    #[serde(default = "default_concurrency")]
    pub concurrency: u32,
    /// Defaults of the group's API checks.
    #[serde(default)]
    pub api_check_defaults: ApiCheckDefaults,
    /// The spec says string; kept as whatever JSON arrives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser_check_defaults: Option<serde_json::Value>,
    /// Runtime.
    #[serde(default)]
    pub runtime_id: Option<RuntimeId>,
    /// Environment variables (at most 100).
    #[serde(default)]
    pub environment_variables: Option<Vec<EnvironmentVariable>>,
    /// Alert channel subscriptions.
    #[serde(default)]
    pub alert_channel_subscriptions: Vec<AlertChannelSubscription>,
    /// Setup snippet of the group's API checks.
    #[serde(default)]
    pub setup_snippet_id: Option<i64>,
    /// Teardown snippet of the group's API checks.
    #[serde(default)]
    pub tear_down_snippet_id: Option<i64>,
    /// Node.js setup code.
    #[serde(default)]
    pub local_setup_script: Option<String>,
    /// Node.js teardown code.
    #[serde(default)]
    pub local_tear_down_script: Option<String>,
    /// Private locations.
    #[serde(default)]
    pub private_locations: Option<Vec<String>>,
    /// Run in parallel in all locations.
    #[serde(default)]
    pub run_parallel: Option<bool>,
    /// Alert settings.
    #[serde(default)]
    pub alert_settings: Option<AlertSettings>,
    /// Retry strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_strategy: Option<RetryStrategySetting>,
    /// When true the account's alert settings are used.
    #[serde(default)]
    pub use_global_alert_settings: Option<bool>,
    /// Deprecated; `retryStrategy` replaces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub double_check: Option<bool>,
    /// Creation date.
    #[serde(rename = "created_at", default, with = "super::opt_date")]
    pub created_at: Option<NaiveDate>,
    /// Last change.
    #[serde(rename = "updated_at", default)]
    pub updated_at: Option<DateTime<FixedOffset>>,
}

fn default_concurrency() -> u32 {
    3
}

/// The body of `PUT /v2/check-groups/{id}`. `None` fields are not sent.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckGroupUpdate {
    /// Required.
    pub name: String,
    /// Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activated: Option<bool>,
    /// Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub muted: Option<bool>,
    /// Tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// Locations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locations: Option<Vec<Location>>,
    /// Default 3, at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Defaults of the group's API checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_check_defaults: Option<ApiCheckDefaults>,
    /// Browser check defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser_check_defaults: Option<serde_json::Value>,
    /// Runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_id: Option<RuntimeId>,
    /// At most 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_variables: Option<Vec<EnvironmentVariable>>,
    /// Alert channel subscriptions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert_channel_subscriptions: Option<Vec<AlertChannelSubscription>>,
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
    /// Private locations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_locations: Option<Vec<String>>,
    /// Run in parallel in all locations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_parallel: Option<bool>,
    /// Alert settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert_settings: Option<AlertSettings>,
    /// Retry strategy, or `FALLBACK`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_strategy: Option<RetryStrategySetting>,
    /// Use the account's alert settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_global_alert_settings: Option<bool>,
    /// Deprecated (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub double_check: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_strategy_is_an_object_or_fallback() {
        let fallback: CheckGroupUpdate =
            serde_json::from_str(r#"{"name":"g","retryStrategy":"FALLBACK"}"#).unwrap();
        assert_eq!(
            fallback.retry_strategy,
            Some(RetryStrategySetting::Fallback)
        );
        assert_eq!(
            serde_json::to_value(&fallback).unwrap(),
            serde_json::json!({"name": "g", "retryStrategy": "FALLBACK"})
        );
        let object: CheckGroupUpdate = serde_json::from_str(
            r#"{"name":"g","retryStrategy":{"maxRetries":2,"onlyOn":["NETWORK_ERROR"]}}"#,
        )
        .unwrap();
        let Some(RetryStrategySetting::Strategy(strategy)) = object.retry_strategy else {
            panic!("expected an object strategy");
        };
        assert_eq!(strategy.max_retries, Some(2));
        let err =
            serde_json::from_str::<CheckGroupUpdate>(r#"{"name":"g","retryStrategy":"SOMETIMES"}"#)
                .unwrap_err();
        assert!(err.to_string().contains("FALLBACK"), "{err}");
    }

    #[test]
    fn group_answer_decodes_with_unknown_location() {
        let group: CheckGroup = serde_json::from_str(
            r#"{"id":7,"name":"g","activated":true,"concurrency":3,"apiCheckDefaults":{},
               "locations":["eu-west-1","moon-1"],"runtimeId":null,"created_at":"2026-03-01",
               "updated_at":null}"#,
        )
        .unwrap();
        assert_eq!(group.locations[0], Location::EuWest1);
        assert_eq!(group.locations[1], Location::Other("moon-1".into()));
        assert_eq!(group.runtime_id, None);
    }
}
