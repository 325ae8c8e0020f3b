//! The first stage of loading: serde structs close to the TOML input, one per section, every
//! value wrapped in [`Spanned`] so the second stage can point at it. Unknown keys are errors
//! (`deny_unknown_fields`); every field is optional here, so "required" is checked (with a
//! better message) in the second stage.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, Visitor};
use toml::Spanned;

/// `[agent]`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAgent {
    /// Where state lives.
    pub state_dir: Option<Spanned<String>>,
    /// Default zone of schedules.
    pub timezone: Option<Spanned<String>>,
    /// Grace for running jobs at shutdown.
    pub shutdown_timeout: Option<Spanned<RawDuration>>,
    /// Bound of the outbox.
    pub outbox_max_entries: Option<Spanned<i64>>,
    /// Age limit of pending successes.
    pub outbox_max_age: Option<Spanned<RawDuration>>,
    /// How often bound checks are reconciled even when nothing changed.
    pub resync_interval: Option<Spanned<RawDuration>>,
    /// Upper bound of the random delay before the daemon's first sync.
    pub sync_jitter: Option<Spanned<RawDuration>>,
    /// How often each bound check's definition is sent even when the local record matches.
    pub reassert_interval: Option<Spanned<RawDuration>>,
    /// Runs kept per job in the run history (0: none).
    pub history: Option<Spanned<i64>>,
    /// How long the history of a job removed from the config is kept.
    pub history_keep_removed: Option<Spanned<RawDuration>>,
}

/// `[api]`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawApi {
    /// The monitoring API.
    pub base_url: Option<Spanned<String>>,
    /// The ping host.
    pub ping_base_url: Option<Spanned<String>>,
    /// The `x-service-account` header.
    pub account_id: Option<Spanned<String>>,
    /// A file holding the API key.
    pub api_key_file: Option<Spanned<String>>,
    /// An environment variable holding the API key.
    pub api_key_env: Option<Spanned<String>>,
    /// Extra CA certificates (PEM) trusted besides the system's.
    pub ca_file: Option<Spanned<String>>,
    /// A proxy URL for every request, or `none`.
    pub proxy: Option<Spanned<String>>,
}

/// The settings a `[defaults]` table gives and each job may override.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSettings {
    /// SIGTERM after this long.
    pub timeout: Option<Spanned<RawDuration>>,
    /// SIGKILL this long after SIGTERM.
    pub kill_after: Option<Spanned<RawDuration>>,
    /// Exit codes that count as success.
    pub success_exit_codes: Option<Spanned<Vec<Spanned<i64>>>>,
    /// `skip`, `queue` or `allow`.
    pub overlap: Option<Spanned<String>>,
    /// In a cluster: `one` or `all`.
    pub run_on: Option<Spanned<String>>,
    /// Upper bound of the start delay.
    pub jitter: Option<Spanned<RawDuration>>,
    /// Directory the command runs in.
    pub working_dir: Option<Spanned<String>>,
    /// Extra environment.
    pub env: Option<BTreeMap<String, Spanned<String>>>,
    /// User to run as.
    pub user: Option<Spanned<String>>,
    /// Group to run as.
    pub group: Option<Spanned<String>>,
    /// Whether the job runs.
    pub enabled: Option<bool>,
    /// Run once at start after a missed fire.
    pub catch_up: Option<bool>,
    /// Bytes of output kept for status.
    pub output_tail: Option<Spanned<RawSize>>,
    /// The shell of `shell` jobs.
    pub shell_program: Option<Spanned<String>>,
    /// How many times a failed attempt is tried again within the run.
    pub retries: Option<Spanned<i64>>,
    /// The wait before the first retry, doubled for each later one.
    pub retry_delay: Option<Spanned<RawDuration>>,
    /// The cap of that doubling.
    pub retry_delay_max: Option<Spanned<RawDuration>>,
    /// Runs kept in the job's history (0: none).
    pub history: Option<Spanned<i64>>,
}

/// The keys of one `[[jobs]]` table that are neither settings nor `watch`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawJob {
    /// Unique name.
    pub name: Option<Spanned<String>>,
    /// Cron expression.
    pub schedule: Option<Spanned<String>>,
    /// IANA zone of the schedule.
    pub timezone: Option<Spanned<String>>,
    /// argv run directly.
    pub command: Option<Spanned<Vec<String>>>,
    /// Script run by the shell.
    pub shell: Option<Spanned<String>>,
    /// Full ping URL (secret).
    pub ping_url: Option<Spanned<String>>,
    /// Heartbeat check id.
    pub check_id: Option<Spanned<String>>,
    /// Pinged when a run starts (secret).
    pub start_url: Option<Spanned<String>>,
    /// Pinged when a run fails; may hold `{exit_code}` (secret).
    pub fail_url: Option<Spanned<String>>,
    /// What a fail ping carries: `"output_tail"` or `"json"`.
    pub fail_body: Option<Spanned<String>>,
    /// The fail ping's method: `"GET"`, `"POST"` or `"PUT"`.
    pub fail_method: Option<Spanned<String>>,
    /// Headers of the fail ping, each a string, `{ file = "PATH" }` or `{ env = "VAR" }`.
    pub fail_headers: Option<BTreeMap<String, Spanned<toml::Value>>>,
}

/// `[jobs.watch]`: every key of every kind; which apply is checked against `kind` later.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWatch {
    /// `process`, `file`, `disk`, `memory`, `load`, `tcp` or `http`.
    pub kind: Option<Spanned<String>>,
    /// process: the name or command-line substring.
    pub pattern: Option<Spanned<String>>,
    /// file, disk: the path.
    pub path: Option<Spanned<String>>,
    /// file: the oldest healthy modification time.
    pub max_age: Option<Spanned<RawDuration>>,
    /// disk: least free space, bytes or percent.
    pub min_free: Option<Spanned<RawSize>>,
    /// memory: the most healthy usage in percent.
    pub max_used_percent: Option<Spanned<f64>>,
    /// load: the highest healthy 1-minute load.
    pub max_load1: Option<Spanned<f64>>,
    /// tcp: `host:port`.
    pub address: Option<Spanned<String>>,
    /// tcp, http: probe timeout.
    pub timeout: Option<Spanned<RawDuration>>,
    /// http: the URL.
    pub url: Option<Spanned<String>>,
    /// http: the healthy status.
    pub expect_status: Option<Spanned<i64>>,
}

/// `[jobs.check]`: the definition of the heartbeat check a job is bound to (all optional).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCheck {
    /// Check name; default the job's name.
    pub name: Option<Spanned<String>>,
    /// Whether the check is active.
    pub activated: Option<bool>,
    /// Whether its notifications are suppressed.
    pub muted: Option<bool>,
    /// Tags.
    pub tags: Option<Spanned<Vec<Spanned<String>>>>,
    /// At most 500 characters.
    pub description: Option<Spanned<String>>,
    /// The check's own alert settings.
    pub alert_settings: Option<RawAlertSettings>,
    /// Whether the account's alert settings apply instead.
    pub use_global_alert_settings: Option<bool>,
    /// Alert channels the check notifies.
    pub alert_channel_subscriptions: Option<Vec<RawSubscription>>,
    /// Status page automation.
    pub trigger_incident: Option<Spanned<RawTriggerIncident>>,
    /// The `autoAssignAlerts` query flag.
    pub auto_assign_alerts: Option<bool>,
    /// `"auto"` or a duration.
    pub period: Option<Spanned<RawDuration>>,
    /// `"auto"` or a duration.
    pub grace: Option<Spanned<RawDuration>>,
    /// Whether sync creates the check (a job without `check_id`).
    pub create: Option<Spanned<bool>>,
}

/// `[jobs.check.alert_settings]`, the API's `alertSettings` in snake case.
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAlertSettings {
    /// `RUN_BASED` or `TIME_BASED`.
    pub escalation_type: Option<Spanned<String>>,
    /// `{ failed_run_threshold = N }`.
    pub run_based_escalation: Option<RawRunBased>,
    /// `{ minutes_failing_threshold = N }`.
    pub time_based_escalation: Option<RawTimeBased>,
    /// `{ amount = N, interval = MINUTES }`.
    pub reminders: Option<RawReminders>,
    /// `{ enabled = true, percentage = 10.0 }`.
    pub parallel_run_failure_threshold: Option<RawParallelThreshold>,
}

/// `run_based_escalation`.
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRunBased {
    /// Failed runs in a row before an alert.
    pub failed_run_threshold: Option<Spanned<u32>>,
}

/// `time_based_escalation`.
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTimeBased {
    /// Minutes failing before an alert.
    pub minutes_failing_threshold: Option<Spanned<u32>>,
}

/// `reminders`.
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawReminders {
    /// How many reminders.
    pub amount: Option<Spanned<u32>>,
    /// Minutes between reminders.
    pub interval: Option<Spanned<u32>>,
}

/// `parallel_run_failure_threshold`.
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawParallelThreshold {
    /// Whether it applies.
    pub enabled: Option<bool>,
    /// Percentage of failing locations.
    pub percentage: Option<Spanned<f64>>,
}

/// One entry of `alert_channel_subscriptions`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSubscription {
    /// The alert channel's id.
    pub alert_channel_id: i64,
    /// Whether alerts go to it (default true).
    pub activated: Option<bool>,
}

/// `trigger_incident`.
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTriggerIncident {
    /// The status page service (a UUID).
    pub service_id: Option<Spanned<String>>,
    /// `CRITICAL`, `MAJOR`, `MEDIUM` or `MINOR`.
    pub severity: Option<Spanned<String>>,
    /// Incident name.
    pub name: Option<Spanned<String>>,
    /// Incident description.
    pub description: Option<String>,
    /// Whether subscribers are told.
    pub notify_subscribers: Option<bool>,
}

/// A duration as written: a string with a unit, or a bare number (which is an error with a
/// suggestion, so it is accepted here to give that message).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RawDuration {
    /// `"30s"`.
    Text(String),
    /// `30`: missing its unit.
    Number(String),
}

impl<'de> Deserialize<'de> for RawDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DurationVisitor;
        impl Visitor<'_> for DurationVisitor {
            type Value = RawDuration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration string with a unit, such as \"30s\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawDuration, E> {
                Ok(RawDuration::Text(v.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawDuration, E> {
                Ok(RawDuration::Number(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawDuration, E> {
                Ok(RawDuration::Number(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<RawDuration, E> {
                Ok(RawDuration::Number(v.to_string()))
            }
        }
        deserializer.deserialize_any(DurationVisitor)
    }
}

/// A size as written: a string (`"10KiB"`, `"15%"`) or a number of bytes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RawSize {
    /// `"10KiB"`, `"15%"`.
    Text(String),
    /// A bare number of bytes (possibly negative, which validation rejects).
    Bytes(i64),
}

impl<'de> Deserialize<'de> for RawSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SizeVisitor;
        impl Visitor<'_> for SizeVisitor {
            type Value = RawSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as \"10KiB\" or a number of bytes")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawSize, E> {
                Ok(RawSize::Text(v.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawSize, E> {
                Ok(RawSize::Bytes(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawSize, E> {
                i64::try_from(v)
                    .map(RawSize::Bytes)
                    .map_err(|_| E::custom("size is too large"))
            }
        }
        deserializer.deserialize_any(SizeVisitor)
    }
}

/// A correct line for `key`, shown as the hint of a type error.
pub(crate) fn example(key: &str) -> Option<&'static str> {
    Some(match key {
        "state_dir" => "state_dir = \"/var/lib/heartbeat-agent\"",
        "timezone" => "timezone = \"Europe/Berlin\"",
        "shutdown_timeout" => "shutdown_timeout = \"30s\"",
        "outbox_max_entries" => "outbox_max_entries = 1000",
        "outbox_max_age" => "outbox_max_age = \"1h\"",
        "resync_interval" => "resync_interval = \"6h\"",
        "sync_jitter" => "sync_jitter = \"30s\"",
        "reassert_interval" => "reassert_interval = \"1d\"",
        "history" => "history = 100",
        "history_keep_removed" => "history_keep_removed = \"7d\"",
        "listen" => "listen = \"127.0.0.1:9465\"",
        "token_file" => "token_file = \"/etc/heartbeat-agent/status-token\"",
        "remote_refresh" => "remote_refresh = \"5m\"",
        "activated" | "muted" | "use_global_alert_settings" | "auto_assign_alerts" => {
            "activated = true"
        }
        "tags" => "tags = [\"backup\", \"prod\"]",
        "description" => "description = \"nightly database backup\"",
        "alert_settings" => "alert_settings = { escalation_type = \"RUN_BASED\" }",
        "alert_channel_subscriptions" => {
            "alert_channel_subscriptions = [{ alert_channel_id = 1, activated = true }]"
        }
        "trigger_incident" => {
            "trigger_incident = { service_id = \"<a UUID>\", name = \"backup down\", severity = \"MAJOR\" }"
        }
        "period" => "period = \"auto\" (or a duration such as \"1d\")",
        "grace" => "grace = \"auto\" (or a duration such as \"30m\")",
        "base_url" => "base_url = \"https://api.example.com\"",
        "ping_base_url" => "ping_base_url = \"https://ping.example.com\"",
        "account_id" => "account_id = \"acc_123\"",
        "api_key_file" => "api_key_file = \"/etc/heartbeat-agent/api-key\"",
        "api_key_env" => "api_key_env = \"MONITORING_API_KEY\"",
        "ca_file" => "ca_file = \"/etc/heartbeat-agent/company-ca.pem\"",
        "proxy" => "proxy = \"http://proxy.example:3128\" (or \"none\")",
        "timeout" => "timeout = \"5m\"",
        "kill_after" => "kill_after = \"10s\"",
        "success_exit_codes" => "success_exit_codes = [0, 3]",
        "overlap" => "overlap = \"skip\" (or \"queue\", \"allow\")",
        "jitter" => "jitter = \"30s\"",
        "working_dir" => "working_dir = \"/srv/app\"",
        "env" => "env = { PATH = \"/usr/bin:/bin\" }",
        "user" => "user = \"backup\"",
        "group" => "group = \"backup\"",
        "enabled" => "enabled = false",
        "catch_up" => "catch_up = true",
        "output_tail" => "output_tail = \"10KiB\"",
        "shell_program" => "shell_program = \"/bin/bash\"",
        "retries" => "retries = 3",
        "retry_delay" => "retry_delay = \"10s\"",
        "retry_delay_max" => "retry_delay_max = \"5m\"",
        "name" => "name = \"backup\"",
        "schedule" => "schedule = \"0 3 * * *\"",
        "command" => "command = [\"/usr/local/bin/backup\", \"--full\"]",
        "shell" => "shell = \"pg_dump app | gzip > /backup/app.sql.gz\"",
        "ping_url" => "ping_url = \"https://ping.example.com/TOKEN\"",
        "check_id" => "check_id = \"chk_123\"",
        "start_url" => "start_url = \"https://hc-ping.com/UUID/start\"",
        "fail_url" => "fail_url = \"https://hc-ping.com/UUID/{exit_code}\"",
        "fail_body" => "fail_body = \"output_tail\" (or \"json\")",
        "fail_method" => "fail_method = \"POST\" (or \"GET\", \"PUT\")",
        "fail_headers" => "fail_headers = { Authorization = { env = \"HOOK_TOKEN\" } }",
        "kind" => "kind = \"process\"",
        "pattern" => "pattern = \"nginx\"",
        "path" => "path = \"/var/backups/latest.tar\"",
        "max_age" => "max_age = \"26h\"",
        "min_free" => "min_free = \"10GiB\" (or \"15%\")",
        "max_used_percent" => "max_used_percent = 90",
        "max_load1" => "max_load1 = 8.0",
        "address" => "address = \"127.0.0.1:5432\"",
        "url" => "url = \"http://127.0.0.1:8080/health\"",
        "expect_status" => "expect_status = 200",
        "endpoints" => "endpoints = [\"http://10.0.0.1:2379\", \"http://10.0.0.2:2379\"]",
        "node" => "node = \"web-1\"",
        "lease" => "lease = \"10s\"",
        "cert_file" => "cert_file = \"/etc/heartbeat-agent/etcd-client.pem\"",
        "key_file" => "key_file = \"/etc/heartbeat-agent/etcd-client-key.pem\"",
        "password_file" => "password_file = \"/etc/heartbeat-agent/etcd-password\"",
        "password_env" => "password_env = \"ETCD_PASSWORD\"",
        "on_unavailable" => "on_unavailable = \"skip\" (or \"run\")",
        "run_on" => "run_on = \"one\" (or \"all\")",
        _ => return None,
    })
}

/// The keys a `Raw*` struct accepts, as serde's derive declares them: the single source of
/// truth for unknown-key checks and suggestions.
pub(crate) fn keys_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    match T::deserialize(KeyProbe) {
        Err(ProbeResult(fields)) => fields,
        Ok(_) => &[],
    }
}

/// A deserializer that only records the field names a struct asks for.
struct KeyProbe;

/// The field names a struct declared (empty when the type is not a struct).
#[derive(Debug)]
struct ProbeResult(&'static [&'static str]);

impl fmt::Display for ProbeResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("key probe")
    }
}

impl std::error::Error for ProbeResult {}

impl de::Error for ProbeResult {
    fn custom<M: fmt::Display>(_msg: M) -> Self {
        ProbeResult(&[])
    }
}

impl<'de> Deserializer<'de> for KeyProbe {
    type Error = ProbeResult;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, ProbeResult> {
        Err(ProbeResult(&[]))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, ProbeResult> {
        Err(ProbeResult(fields))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_from_the_struct() {
        assert_eq!(
            keys_of::<RawAgent>(),
            [
                "state_dir",
                "timezone",
                "shutdown_timeout",
                "outbox_max_entries",
                "outbox_max_age",
                "resync_interval",
                "sync_jitter",
                "reassert_interval",
                "history",
                "history_keep_removed"
            ]
        );
        assert!(keys_of::<RawWatch>().contains(&"expect_status"));
        assert!(keys_of::<RawDuration>().is_empty());
    }
}
