//! `[jobs.check]`: the definition of the heartbeat check a job with `check_id` is bound to (or,
//! with `create = true` and no `check_id`, the check sync creates for it), which sync keeps
//! true to the config and the schedule; and its validation (`create` against `check_id`,
//! `ping_url` and the API key, description length, period and grace values, whether the
//! schedule fits the service's limits, and, in `alerting`, the alert settings and incident
//! trigger values).

use std::time::Duration;

use toml::Spanned;

use super::parse::{RawJobEntry, Section};
use super::raw::{example, RawCheck, RawDuration};
use super::tags::{reserved_prefix, OWNER_TAG_PREFIX, SCOPE_TAG_PREFIX};
use super::values::{At, Checker};
use super::{Job, PingTarget};
use crate::api::model::{AlertChannelSubscription, AlertSettings, TriggerIncident};

/// The longest check description the service accepts.
pub(crate) const MAX_DESCRIPTION: usize = 500;

/// `period` or `grace`: derived from the schedule, or fixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CheckDuration {
    /// `"auto"` (default): derived by sync (see docs/sync.md).
    #[default]
    Auto,
    /// A duration given in the config.
    Fixed(Duration),
}

/// `[jobs.check]`, validated, with defaults. Fields not set are not sent by sync (so the
/// service keeps what the check has: a mute or alert channel set in the web UI stays) unless
/// the field says otherwise; a field that was set and is removed is cleared once (docs/sync.md,
/// "Who owns which field").
#[derive(Debug, Clone, PartialEq)]
pub struct CheckSettings {
    /// `create`: sync finds or creates the job's check when the job has no `check_id`
    /// (default false).
    pub create: bool,
    /// The tag that names a created check's job and scope ([`super::tags::scope_tag`]); set for a job
    /// with `create`, which sync finds its check by and always
    /// sends among the check's tags.
    pub scope_tag: Option<String>,
    /// The tag older agents gave this job's check outside a cluster
    /// (`heartbeat-agent:<host>/<job>`, [`super::tags::adopt_tag`]): a check carrying it and no owner tag
    /// is adopted when none carries `scope_tag` (docs/sync.md, "Upgrading").
    pub adopt_tag: Option<String>,
    /// The tag naming the agent that owns the created check
    /// (`heartbeat-agent-owner:<identity>`, [`super::tags::owner_tag`]); never from the config: sync sets
    /// it outside a cluster (in a cluster the check is the cluster's, and has none).
    pub owner_tag: Option<String>,
    /// `name`: the check's name; `None` means the job's name (always sent).
    pub name: Option<String>,
    /// `activated` (default true; always sent, false when the job is disabled).
    pub activated: bool,
    /// `muted`.
    pub muted: Option<bool>,
    /// `tags`.
    pub tags: Option<Vec<String>>,
    /// `description`, at most 500 characters.
    pub description: Option<String>,
    /// `alert_settings`: the check's own alerting.
    pub alert_settings: Option<AlertSettings>,
    /// `use_global_alert_settings`.
    pub use_global_alert_settings: Option<bool>,
    /// `alert_channel_subscriptions`.
    pub alert_channel_subscriptions: Option<Vec<AlertChannelSubscription>>,
    /// `trigger_incident`: status page automation.
    pub trigger_incident: Option<TriggerIncident>,
    /// `auto_assign_alerts`: the query flag of the PUT (default true).
    pub auto_assign_alerts: bool,
    /// `period` (default auto).
    pub period: CheckDuration,
    /// `grace` (default auto).
    pub grace: CheckDuration,
}

impl Default for CheckSettings {
    fn default() -> Self {
        CheckSettings {
            create: false,
            scope_tag: None,
            adopt_tag: None,
            owner_tag: None,
            name: None,
            activated: true,
            muted: None,
            tags: None,
            description: None,
            alert_settings: None,
            use_global_alert_settings: None,
            alert_channel_subscriptions: None,
            trigger_incident: None,
            auto_assign_alerts: true,
            period: CheckDuration::Auto,
            grace: CheckDuration::Auto,
        }
    }
}

/// Validates a job's `[jobs.check]` (defaults when absent).
pub(super) fn check_settings(check: &mut Checker, entry: &RawJobEntry) -> Option<CheckSettings> {
    let Some(section) = &entry.check else {
        return Some(CheckSettings::default());
    };
    let context = entry.context.as_str();
    let at = |key| At { context, key };
    let raw: &RawCheck = &section.raw;
    let mut ok = true;
    let name = match &raw.name {
        Some(_) => {
            let name = check.non_empty(at("check.name"), &raw.name);
            ok &= name.is_some();
            name
        }
        None => None,
    };
    let description = raw.description.as_ref().map(|d| d.get_ref().clone());
    if let (Some(text), Some(value)) = (&description, &raw.description) {
        let chars = text.chars().count();
        if chars > MAX_DESCRIPTION {
            ok = false;
            check.error(
                Some(value.span()),
                at("check.description"),
                format!("the description is {chars} characters long; the service accepts at most {MAX_DESCRIPTION}"),
                Some("shorten it".to_owned()),
            );
        }
    }
    let mut tags = raw.tags.as_ref().map(|_| Vec::new());
    for tag in raw.tags.iter().flat_map(|t| t.get_ref()) {
        if tag.get_ref().trim().is_empty() {
            ok = false;
            let hint = example("tags").map(|e| format!("for example: {e}"));
            check.error(
                Some(tag.span()),
                at("check.tags"),
                "a tag must not be empty",
                hint,
            );
        } else if let Some(prefix) = reserved_prefix(tag.get_ref().trim()) {
            // The agent finds the check it created by its scope tag, and tells whose it is by
            // its owner tag: one written by hand on another job would make sync take that
            // job's check for this one's, or another agent's for its own.
            ok = false;
            check.error(
                Some(tag.span()),
                at("check.tags"),
                format!("tags starting with \"{prefix}\" are the agent's own: it tags the checks it creates with \"{SCOPE_TAG_PREFIX}<scope>/<job>\" and \"{OWNER_TAG_PREFIX}<identity>\" and finds them by them"),
                Some("remove it (with `create = true` the agent adds the job's own)".to_owned()),
            );
        } else if let Some(tags) = tags.as_mut() {
            tags.push(tag.get_ref().trim().to_owned());
        }
    }
    let period = check_duration(check, at("check.period"), &raw.period);
    let grace = check_duration(check, at("check.grace"), &raw.grace);
    if let (Some(CheckDuration::Fixed(value)), Some(raw_grace)) = (grace, &raw.grace) {
        if value > crate::api::model::limits::MAX_GRACE {
            ok = false;
            check.error(
                Some(raw_grace.span()),
                at("check.grace"),
                "grace is longer than the service's limit of 365 days",
                example("grace").map(|e| format!("for example: {e}")),
            );
        }
    }
    // `Some(None)`: set, but with a value the service would refuse (reported).
    let alert_settings =
        (raw.alert_settings.as_ref()).map(|r| super::alerting::alert_settings(check, context, r));
    let trigger_incident = (raw.trigger_incident.as_ref())
        .map(|r| super::alerting::trigger_incident(check, context, r));
    ok &= !matches!(alert_settings, Some(None)) && !matches!(trigger_incident, Some(None));
    let settings = CheckSettings {
        create: raw.create.as_ref().is_some_and(|c| *c.get_ref()),
        scope_tag: None,
        adopt_tag: None,
        owner_tag: None,
        name,
        activated: raw.activated.unwrap_or(true),
        muted: raw.muted,
        tags,
        description,
        alert_settings: alert_settings.flatten(),
        use_global_alert_settings: raw.use_global_alert_settings,
        alert_channel_subscriptions: raw.alert_channel_subscriptions.as_ref().map(|subs| {
            subs.iter()
                .map(|s| AlertChannelSubscription {
                    alert_channel_id: s.alert_channel_id,
                    activated: s.activated.unwrap_or(true),
                })
                .collect()
        }),
        trigger_incident: trigger_incident.flatten(),
        auto_assign_alerts: raw.auto_assign_alerts.unwrap_or(true),
        period: period?,
        grace: grace?,
    };
    ok.then_some(settings)
}

/// A job with `create = true`: creating a check needs the API key, so a config whose
/// configured key source (`api_key_file`, `api_key_env`) fails is refused at `check.create`.
/// With no source configured and no key found, the key is expected from the systemd
/// credential `api-key`, which only the service sees: a command run outside it (`config
/// check`, `status`, `pause`) must still load the config, so that is no error here, and
/// `config check` warns naming the job (as for a job bound by `check_id`).
pub(super) fn create_needs_key(check: &mut Checker, entry: &RawJobEntry, api: &super::ApiSettings) {
    let why = match super::read_api_key(&api.api_key) {
        Ok(_) => return,
        Err(err) => err.to_string(),
    };
    let span = (entry.check.as_ref())
        .and_then(|c| c.raw.create.as_ref())
        .map(Spanned::span);
    check.error(
        span,
        At {
            context: entry.context.as_str(),
            key: "check.create",
        },
        format!("`create = true` needs the API key to create the check, but {why}"),
        Some(
            "set [api] api_key_file (or api_key_env, or the systemd credential `api-key`), \
             or bind the job to an existing check with `check_id`"
                .to_owned(),
        ),
    );
}

/// `"auto"` or a duration.
fn check_duration(
    check: &mut Checker,
    at: At<'_>,
    value: &Option<Spanned<RawDuration>>,
) -> Option<CheckDuration> {
    match value.as_ref().map(Spanned::get_ref) {
        None => Some(CheckDuration::Auto),
        Some(RawDuration::Text(text)) if text.trim() == "auto" => Some(CheckDuration::Auto),
        Some(_) => check.duration(at, value).map(CheckDuration::Fixed),
    }
}

/// After the job is built: whether `create = true` goes with what else the job sets (it needs
/// no `check_id` and no `ping_url`), and whether its check can be given a period and grace
/// within the service's limits (a schedule firing every 10 s cannot). Errors point at
/// `check.create`, at `check.period` when it is explicit, else at `schedule`. A `[jobs.check]`
/// on a job without `check_id` or `create` is a warning: nothing would use it.
pub(super) fn check_limits(check: &mut Checker, entry: &RawJobEntry, job: &Job) {
    let context = entry.context.as_str();
    let raw_check: Option<&Section<RawCheck>> = entry.check.as_ref();
    let create_span = raw_check
        .and_then(|c| c.raw.create.as_ref())
        .map(Spanned::span);
    if job.check.create {
        let other = match &job.target {
            PingTarget::Check(id) => Some(format!("`check_id = \"{id}\"`")),
            PingTarget::Url(_) => Some("`ping_url`".to_owned()),
            PingTarget::None => None,
        };
        if let Some(other) = other {
            check.error(
                create_span,
                At {
                    context,
                    key: "check.create",
                },
                format!("`create = true` asks sync to create the job's check, but the job already names one with {other}"),
                Some("remove `create = true` to keep the check named, or remove the other key to have the agent create and own the check".to_owned()),
            );
            return;
        }
    } else if !matches!(job.target, PingTarget::Check(_)) {
        if let Some(section) = raw_check {
            check.warn(
                section.span.clone(),
                At {
                    context,
                    key: "check",
                },
                "[jobs.check] applies only to a job with `check_id` or `create = true`; it is ignored",
                Some("add check_id, set `create = true` to have the agent create the check, or remove the [jobs.check] table".to_owned()),
            );
        }
        return;
    }
    if job.schedule.is_reboot() && job.check.period == CheckDuration::Auto {
        let span = entry.job.raw.schedule.as_ref().map(Spanned::span);
        check.warn(
            span,
            At {
                context,
                key: "schedule",
            },
            "\"@reboot\" has no fire times, so sync cannot derive the check's period and \
             leaves the check as it is",
            Some("set [jobs.check] period to have sync manage the check".to_owned()),
        );
        return;
    }
    let Some(problem) = super::limits::limit_problem(job, chrono::Utc::now()) else {
        return;
    };
    let (key, span) = match (
        job.check.period,
        raw_check.and_then(|c| c.raw.period.as_ref()),
    ) {
        (CheckDuration::Fixed(_), Some(value)) => ("check.period", Some(value.span())),
        _ => (
            "schedule",
            entry.job.raw.schedule.as_ref().map(Spanned::span),
        ),
    };
    let hint = "heartbeat periods are 30 seconds to 365 days (grace up to 365 days more); \
                change the schedule or set [jobs.check] period, or use `ping_url` instead";
    check.error(span, At { context, key }, problem, Some(hint.to_owned()));
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::Config;

    const JOB: &str = "[[jobs]]\nname = \"b\"\nschedule = \"0 3 * * *\"\ncheck_id = \"c1\"\n";
    const SERVICE: &str = "123e4567-e89b-12d3-a456-426614174000";

    fn problems(text: &str) -> Vec<String> {
        match Config::from_text(Path::new("c.toml"), text) {
            Ok(loaded) => panic!("expected problems, got {:?}", loaded.config),
            Err(err) => err.problems,
        }
    }

    #[test]
    fn check_table_is_read_with_defaults() {
        let text = format!(
            "[agent]\nresync_interval = \"1h\"\nsync_jitter = \"5s\"\n{JOB}[jobs.check]\n\
             name = \"Backup\"\ntags = [\"a\"]\nperiod = \"auto\"\ngrace = \"10m\"\n\
             alert_settings = {{ escalation_type = \"RUN_BASED\", reminders = {{ amount = 2 }} }}\n\
             trigger_incident = {{ service_id = \"{SERVICE}\", name = \"down\", severity = \"MINOR\" }}\n"
        );
        let config = Config::from_text(Path::new("c.toml"), &text)
            .unwrap()
            .config;
        assert_eq!(config.agent.resync_interval, Duration::from_secs(3600));
        assert_eq!(config.agent.sync_jitter, Duration::from_secs(5));
        let check = &config.jobs[0].check;
        assert_eq!(check.name.as_deref(), Some("Backup"));
        assert_eq!(check.period, CheckDuration::Auto);
        assert_eq!(check.grace, CheckDuration::Fixed(Duration::from_secs(600)));
        assert!(check.activated && check.auto_assign_alerts);
        assert_eq!((check.muted, check.use_global_alert_settings), (None, None));
        assert_eq!(check.tags.as_deref(), Some(&["a".to_owned()][..]));
        let alerts = check.alert_settings.as_ref().unwrap();
        assert_eq!(alerts.reminders.as_ref().unwrap().amount, Some(2));
        let incident = check.trigger_incident.as_ref().unwrap();
        assert_eq!(incident.service_id.as_deref(), Some(SERVICE));
        assert_eq!(incident.severity.as_deref(), Some("MINOR"));
        assert_eq!(incident.description.as_deref(), Some(""));
        assert_eq!(incident.notify_subscribers, Some(false));
        let plain = Config::from_text(Path::new("c.toml"), JOB).unwrap().config;
        assert_eq!(*plain.jobs[0].check, CheckSettings::default());
        assert_eq!(plain.agent.resync_interval, Duration::from_secs(6 * 3600));
        assert_eq!(plain.agent.sync_jitter, Duration::from_secs(30));
        assert_eq!(plain.agent.reassert_interval, Duration::from_secs(86_400));
        let hourly = format!("[agent]\nreassert_interval = \"1h\"\n{JOB}");
        let config = Config::from_text(Path::new("c.toml"), &hourly)
            .unwrap()
            .config;
        assert_eq!(config.agent.reassert_interval, Duration::from_secs(3600));
    }

    #[test]
    fn a_tag_in_the_agents_own_form_is_refused_with_its_place() {
        let text =
            format!("{JOB}[jobs.check]\ntags = [\"prod\", \"heartbeat-agent:host-a/backup\"]\n");
        let found = problems(&text);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("c.toml:6:17: job \"b\": key `check.tags`: tags starting with \"heartbeat-agent:\" are the agent's own"),
            "{found:?}"
        );
        assert!(found[0].contains("hint: remove it"), "{found:?}");
        let owner =
            format!("{JOB}[jobs.check]\ntags = [\"heartbeat-agent-owner:0123456789abcdef\"]\n");
        let found = problems(&owner);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("c.toml:6:9: job \"b\": key `check.tags`: tags starting with \"heartbeat-agent-owner:\" are the agent's own"),
            "{found:?}"
        );
    }

    #[test]
    fn bad_check_values_are_reported_with_their_place() {
        let long = "x".repeat(501);
        let text = format!(
            "[agent]\nresync_interval = \"0s\"\nreassert_interval = \"0s\"\n{JOB}[jobs.check]\ndescription = \"{long}\"\n\
             period = \"soon\"\ngrace = \"400d\"\ncolour = 1\ntags = [\"\"]\n"
        );
        assert_eq!(
            problems(&text),
            [
                "c.toml:2:19: [agent]: key `resync_interval`: must be more than zero; hint: \
                 for example: resync_interval = \"6h\"",
                "c.toml:3:21: [agent]: key `reassert_interval`: must be more than zero; hint: \
                 for example: reassert_interval = \"1d\"",
                "c.toml:9:15: job \"b\": key `check.description`: the description is 501 \
                 characters long; the service accepts at most 500; hint: shorten it",
                "c.toml:10:10: job \"b\": key `check.period`: invalid duration \"soon\": expected \
                 a number before \"soon\"; hint: use a number with a unit (ms, s, m, h or d), \
                 for example: period = \"auto\" (or a duration such as \"1d\")",
                "c.toml:11:9: job \"b\": key `check.grace`: grace is longer than the service's \
                 limit of 365 days; hint: for example: grace = \"auto\" (or a duration such as \
                 \"30m\")",
                "c.toml:12:1: job \"b\": key `check.colour`: unknown key; hint: known keys here: \
                 name, activated, muted, tags, description, alert_settings, \
                 use_global_alert_settings, alert_channel_subscriptions, trigger_incident, \
                 auto_assign_alerts, period, grace, create",
                "c.toml:13:9: job \"b\": key `check.tags`: a tag must not be empty; hint: for \
                 example: tags = [\"backup\", \"prod\"]",
            ]
        );
    }

    #[test]
    fn alert_values_and_the_incident_trigger_are_checked_against_the_service() {
        let text = format!(
            "{JOB}[jobs.check]\n\
             alert_settings = {{ escalation_type = \"SOMETIMES\", reminders = {{ amount = 6, interval = 7 }}, run_based_escalation = {{ failed_run_threshold = 0 }}, time_based_escalation = {{ minutes_failing_threshold = 1 }}, parallel_run_failure_threshold = {{ percentage = 15 }} }}\n\
             trigger_incident = {{ service_id = \"svc_1\", name = \"down\" }}\n"
        );
        assert_eq!(
            problems(&text),
            [
                "c.toml:6:38: job \"b\": key `check.alert_settings.escalation_type`: \"SOMETIMES\" \
                 is not a value the service accepts; hint: one of RUN_BASED, TIME_BASED",
                "c.toml:6:74: job \"b\": key `check.alert_settings.reminders.amount`: 6 is not a \
                 value the service accepts; hint: one of [0, 1, 2, 3, 4, 5, 100000]",
                "c.toml:6:88: job \"b\": key `check.alert_settings.reminders.interval`: 7 is not \
                 a value the service accepts; hint: one of [1, 2, 3, 4, 5, 10, 15, 30]",
                "c.toml:6:141: job \"b\": key \
                 `check.alert_settings.run_based_escalation.failed_run_threshold`: 0 is not a \
                 value the service accepts; hint: one of [1, 2, 3, 4, 5]",
                "c.toml:6:200: job \"b\": key \
                 `check.alert_settings.time_based_escalation.minutes_failing_threshold`: 1 is not \
                 a value the service accepts; hint: one of [5, 10, 15, 30]",
                "c.toml:6:253: job \"b\": key \
                 `check.alert_settings.parallel_run_failure_threshold.percentage`: 15 is not a \
                 value the service accepts; hint: one of [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]",
                "c.toml:7:20: job \"b\": key `check.trigger_incident.severity`: missing: the \
                 service requires it for an incident trigger; hint: add severity = \"MAJOR\" (one \
                 of CRITICAL, MAJOR, MEDIUM, MINOR)",
                "c.toml:7:35: job \"b\": key `check.trigger_incident.service_id`: \"svc_1\" is \
                 not a status page service id: the service expects a UUID; hint: copy the \
                 service's id (8-4-4-4-12 hex digits) from the status page settings",
            ]
        );
        let bad_severity = format!(
            "{JOB}[jobs.check]\ntrigger_incident = {{ service_id = \"{SERVICE}\", name = \"x\", severity = \"LOW\" }}\n"
        );
        assert_eq!(
            problems(&bad_severity),
            [
                "c.toml:6:98: job \"b\": key `check.trigger_incident.severity`: \"LOW\" is not a \
              value the service accepts; hint: one of CRITICAL, MAJOR, MEDIUM, MINOR"
            ]
        );
    }

    #[test]
    fn explicit_period_outside_the_limits_points_at_it() {
        let text = format!("{JOB}[jobs.check]\nperiod = \"10s\"\n");
        assert_eq!(
            problems(&text),
            [
                "c.toml:6:10: job \"b\": key `check.period`: period 10 seconds is outside the \
              service's limits of 30 seconds to 365 days; hint: heartbeat periods are 30 \
              seconds to 365 days (grace up to 365 days more); change the schedule or set \
              [jobs.check] period, or use `ping_url` instead"
            ]
        );
        let reboot = "[[jobs]]\nname = \"r\"\nschedule = \"@reboot\"\ncheck_id = \"c\"\n";
        let loaded = Config::from_text(Path::new("c.toml"), reboot).unwrap();
        assert_eq!(
            loaded.warnings,
            [
                "c.toml:3:12: job \"r\": key `schedule`: \"@reboot\" has no fire times, so sync \
              cannot derive the check's period and leaves the check as it is; hint: set \
              [jobs.check] period to have sync manage the check"
            ]
        );
    }

    #[test]
    fn check_table_without_check_id_is_a_warning() {
        let text = "[[jobs]]\nname = \"b\"\nschedule = \"@daily\"\nping_url = \"http://p/t\"\n\
                    [jobs.check]\nmuted = true\n";
        let loaded = Config::from_text(Path::new("c.toml"), text).unwrap();
        assert_eq!(
            loaded.warnings,
            [
                "c.toml:5:1: job \"b\": key `check`: [jobs.check] applies only to a job with \
              `check_id` or `create = true`; it is ignored; hint: add check_id, set `create = \
              true` to have the agent create the check, or remove the [jobs.check] table"
            ]
        );
    }

    /// A private key file for the tests that need a key source that gives a key.
    fn key_file() -> (tempfile::TempDir, String) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "k-1\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let shown = path.display().to_string();
        (dir, shown)
    }

    #[test]
    fn create_without_check_id_is_read_and_needs_no_warning() {
        let (_dir, key) = key_file();
        let text = format!(
            "[api]\napi_key_file = \"{key}\"\n[[jobs]]\nname = \"b\"\nschedule = \"0 3 * * *\"\n\
             [jobs.check]\ncreate = true\n"
        );
        let loaded = Config::from_text(Path::new("c.toml"), &text).unwrap();
        let job = &loaded.config.jobs[0];
        assert!(job.check.create);
        assert_eq!(job.target, PingTarget::None);
        let host = crate::host::name();
        let id = crate::identity::scope_id(Path::new("c.toml"));
        let tag = format!("heartbeat-agent:{host}@{id}/b");
        assert_eq!(job.check.scope_tag.as_deref(), Some(tag.as_str()));
        let old = format!("heartbeat-agent:{host}/b");
        assert_eq!(job.check.adopt_tag.as_deref(), Some(old.as_str()));
        assert_eq!(job.check.owner_tag, None, "sync sets the owner");
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    }

    #[test]
    fn create_with_check_id_ping_url_or_without_a_key_is_refused_at_create() {
        let (_dir, key) = key_file();
        let with_id =
            format!("[api]\napi_key_file = \"{key}\"\n{JOB}[jobs.check]\ncreate = true\n");
        assert_eq!(
            problems(&with_id),
            [
                "c.toml:8:10: job \"b\": key `check.create`: `create = true` asks sync to create \
              the job's check, but the job already names one with `check_id = \"c1\"`; hint: \
              remove `create = true` to keep the check named, or remove the other key to have \
              the agent create and own the check"
            ]
        );
        let with_url = format!(
            "[api]\napi_key_file = \"{key}\"\n[[jobs]]\nname = \"b\"\nschedule = \"0 3 * * *\"\n\
             ping_url = \"https://ping.example/t\"\n[jobs.check]\ncreate = true\n"
        );
        assert!(problems(&with_url)[0].contains("already names one with `ping_url`"));
        let no_key = "[api]\napi_key_env = \"HEARTBEAT_AGENT_TEST_NEVER_SET\"\n[[jobs]]\n\
                      name = \"b\"\nschedule = \"0 3 * * *\"\n[jobs.check]\ncreate = true\n";
        let found = problems(no_key);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with(
                "c.toml:7:10: job \"b\": key `check.create`: `create = true` needs the API key"
            ),
            "{found:?}"
        );
        assert!(
            found[0].contains("HEARTBEAT_AGENT_TEST_NEVER_SET"),
            "{found:?}"
        );
    }
}
