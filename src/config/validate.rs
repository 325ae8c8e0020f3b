//! Stage two: the `Raw*` sections to the validated model (`[agent]` and `[api]` here, the jobs
//! in `jobs.rs`, `[status]` in `status.rs`, `[cluster]` in `cluster.rs`). Every problem is collected; a model is built only
//! when there is none.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::schedule::Zone;
use toml::Spanned;

use super::defaults::{
    HISTORY, HISTORY_KEEP_REMOVED, MAX_HISTORY, OUTBOX_MAX_ENTRIES, REASSERT_INTERVAL,
    RESYNC_INTERVAL, SHUTDOWN_TIMEOUT, SYNC_JITTER,
};
use super::parse::{RawFile, Section};
use super::problem::Lines;
use super::raw::{example, RawApi, RawDuration};
use super::secrets::{key_file_error, key_file_warning};
use super::values::{At, Checker};
use super::{AgentSettings, ApiKeySource, ApiSettings, Config, Job};

/// Validates `file` (read from `path`, whose text's lines are `lines`). Returns the model when there is
/// no error, and the checker holding errors and warnings either way.
pub(crate) fn build(
    file: RawFile,
    path: &Path,
    lines: &Lines<'_>,
    is_root: bool,
    read_header_secrets: bool,
) -> (Option<Config>, Checker) {
    let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut check = Checker {
        base_dir,
        is_root,
        errors: Vec::new(),
        warnings: Vec::new(),
        read_header_secrets,
    };
    let agent = agent(&mut check, &file);
    let api = api(&mut check, &file.api);
    let defaults = super::job_settings::settings(&mut check, "[defaults]", &file.defaults.raw);
    let mut names: HashMap<String, usize> = HashMap::new();
    let jobs: Vec<Option<Job>> = file
        .jobs
        .iter()
        .map(|entry| super::jobs::job(&mut check, entry, &agent, &defaults, lines, &mut names))
        .collect();
    let status = super::status::validate(&mut check, &file.status);
    let cluster = super::cluster::validate(&mut check, file.cluster.as_ref());
    let mut jobs = jobs;
    let host = crate::host::name();
    let mut scope_id = None;
    for (entry, job) in file.jobs.iter().zip(&mut jobs) {
        // A `create` beside `check_id` or `ping_url` is refused already (`check_limits`).
        let Some(job) = job
            .as_mut()
            .filter(|job| job.check.create && job.target == super::PingTarget::None)
        else {
            continue;
        };
        super::check::create_needs_key(&mut check, entry, &api);
        let cluster = cluster.as_ref().map(|c| c.name.as_str());
        let scope_id = scope_id.get_or_insert_with(|| crate::identity::scope_id(path));
        let settings = std::sync::Arc::make_mut(&mut job.check);
        settings.scope_tag = Some(super::tags::scope_tag(cluster, &host, scope_id, &job.name));
        // A cluster's tag is what older agents gave it: nothing to adopt.
        settings.adopt_tag = cluster
            .is_none()
            .then(|| super::tags::adopt_tag(&host, &job.name));
    }
    if !check.errors.is_empty() {
        return (None, check);
    }
    warn_if_secrets_exposed(&mut check, &file, path);
    let config = Config {
        path: path.to_owned(),
        agent,
        api,
        status,
        cluster,
        jobs: jobs.into_iter().flatten().map(Arc::new).collect(),
    };
    (Some(config), check)
}

/// A warning when the config file holds secrets (a job's `ping_url`, the status `token`) and
/// others can read it (see [`super::secrets::exposed_warning`]).
fn warn_if_secrets_exposed(check: &mut Checker, file: &RawFile, path: &Path) {
    let ping_url = file.jobs.iter().find_map(|j| j.job.raw.ping_url.as_ref());
    let (span, key) = match (ping_url, &file.status.raw.token) {
        (Some(url), _) => (url.span(), "`ping_url`"),
        (None, Some(token)) => (token.span(), "[status] `token`"),
        (None, None) => return,
    };
    let fix = format!(
        "it holds secrets ({key}): chmod 600 it, or 640 with group {}",
        super::secrets::AGENT_GROUP
    );
    if let Some(warning) = super::secrets::exposed_warning("config file", path, &fix) {
        check
            .warnings
            .push(super::problem::Problem::new(Some(span), "", warning));
    }
}

/// `[agent] timezone` when unset: the zone `TZ` names (as for cron), else UTC. A `TZ` that names
/// no zone is a warning, and UTC is used.
fn default_timezone(check: &mut Checker, at: At<'_>) -> Zone {
    let tz = std::env::var(crate::schedule::TZ_ENV).ok();
    crate::schedule::zone_from_tz(tz.as_deref()).unwrap_or_else(|message| {
        let hint = "set [agent] timezone, or fix or unset TZ; UTC is used meanwhile".to_owned();
        check.warn(None, at, message, Some(hint));
        Zone::UTC
    })
}

fn agent(check: &mut Checker, file: &RawFile) -> AgentSettings {
    let raw = &file.agent.raw;
    let at = |key| At {
        context: "[agent]",
        key,
    };
    AgentSettings {
        state_dir: check.path(at("state_dir"), &raw.state_dir),
        timezone: match &raw.timezone {
            Some(_) => check
                .timezone(at("timezone"), &raw.timezone)
                .unwrap_or(Zone::UTC),
            None => default_timezone(check, at("timezone")),
        },
        shutdown_timeout: check
            .duration(at("shutdown_timeout"), &raw.shutdown_timeout)
            .unwrap_or(SHUTDOWN_TIMEOUT),
        outbox_max_entries: positive_count(check, at("outbox_max_entries"), &raw.outbox_max_entries)
            .unwrap_or(OUTBOX_MAX_ENTRIES),
        outbox_max_age: check
            .duration(at("outbox_max_age"), &raw.outbox_max_age)
            .filter(|age| {
                let zero = age.is_zero();
                if zero {
                    let span = raw.outbox_max_age.as_ref().map(Spanned::span);
                    let hint = "leave it out to use the job's period, for example: outbox_max_age = \"1h\"";
                    check.error(span, at("outbox_max_age"), "must be longer than 0s: every pending success would be dropped", Some(hint.to_owned()));
                }
                !zero
            }),
        resync_interval: positive_interval(
            check,
            at("resync_interval"),
            &raw.resync_interval,
            RESYNC_INTERVAL,
        ),
        reassert_interval: positive_interval(
            check,
            at("reassert_interval"),
            &raw.reassert_interval,
            REASSERT_INTERVAL,
        ),
        sync_jitter: check
            .duration(at("sync_jitter"), &raw.sync_jitter)
            .unwrap_or(SYNC_JITTER),
        history: history_count(check, at("history"), &raw.history).unwrap_or(HISTORY),
        history_keep_removed: check
            .duration(at("history_keep_removed"), &raw.history_keep_removed)
            .unwrap_or(HISTORY_KEEP_REMOVED),
    }
}

/// `history`: a number of runs from 0 (no history) to [`MAX_HISTORY`].
pub(super) fn history_count(
    check: &mut Checker,
    at: At<'_>,
    raw: &Option<Spanned<i64>>,
) -> Option<usize> {
    let raw = raw.as_ref()?;
    match usize::try_from(*raw.get_ref()) {
        Ok(n) if n <= MAX_HISTORY => Some(n),
        _ => {
            check.error(
                Some(raw.span()),
                at,
                format!(
                    "{} runs: the history keeps 0 (none) to {MAX_HISTORY} runs per job",
                    raw.get_ref()
                ),
                Some("for example: history = 100".to_owned()),
            );
            None
        }
    }
}

/// A count of at least 1 (`outbox_max_entries`).
fn positive_count(check: &mut Checker, at: At<'_>, raw: &Option<Spanned<i64>>) -> Option<usize> {
    let raw = raw.as_ref()?;
    match usize::try_from(*raw.get_ref()) {
        Ok(n) if n >= 1 => Some(n),
        _ => {
            let hint = example(at.key).map(|e| format!("for example: {e}"));
            check.error(
                Some(raw.span()),
                at,
                format!("{} is not a positive number of entries", raw.get_ref()),
                hint,
            );
            None
        }
    }
}

/// `resync_interval`, `reassert_interval`: a positive duration, `default` when not set.
fn positive_interval(
    check: &mut Checker,
    at: At<'_>,
    raw: &Option<Spanned<RawDuration>>,
    default: Duration,
) -> Duration {
    match (check.duration(at, raw), raw) {
        (Some(Duration::ZERO), Some(value)) => {
            let hint = example(at.key).map(|e| format!("for example: {e}"));
            check.error(Some(value.span()), at, "must be more than zero", hint);
            default
        }
        (interval, _) => interval.unwrap_or(default),
    }
}

fn api(check: &mut Checker, section: &Section<RawApi>) -> ApiSettings {
    let raw = &section.raw;
    let at = |key| At {
        context: "[api]",
        key,
    };
    let api_key = match (&raw.api_key_file, &raw.api_key_env) {
        (Some(_), Some(env)) => {
            let hint = "keep one of them; without either the systemd credential `api-key` \
                        or $HEARTBEAT_AGENT_API_KEY is used";
            check.error(
                Some(env.span()),
                at("api_key_env"),
                "set either `api_key_file` or `api_key_env`, not both",
                Some(hint.to_owned()),
            );
            ApiKeySource::Default
        }
        (Some(_), None) => match check.path(at("api_key_file"), &raw.api_key_file) {
            Some(file) => {
                let span = raw.api_key_file.as_ref().map(|value| value.span());
                if let Some(error) = key_file_error(&file) {
                    let hint = "write the API key into a file only its owner can read \
                                (chmod 600) and name that file";
                    check.error(span, at("api_key_file"), error, Some(hint.to_owned()));
                } else if let Some(warning) = key_file_warning(&file) {
                    check.warn(span, at("api_key_file"), warning, None);
                }
                ApiKeySource::File(file)
            }
            None => ApiKeySource::Default,
        },
        (None, Some(env)) => {
            let name = env.get_ref().trim();
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                let hint = example("api_key_env").map(|e| format!("for example: {e}"));
                check.error(
                    Some(env.span()),
                    at("api_key_env"),
                    format!("\"{name}\" is not an environment variable name"),
                    hint,
                );
            }
            ApiKeySource::Env(name.to_owned())
        }
        (None, None) => ApiKeySource::Default,
    };
    let ca_file = check.path(at("ca_file"), &raw.ca_file);
    if let (Some(path), Some(value)) = (&ca_file, &raw.ca_file) {
        let trust = crate::net::Trust::load(Some(path), |_| None);
        if let Some(problem) = trust.problems.iter().find(|p| p.starts_with("ca_file")) {
            let hint = "name a file of PEM certificates (-----BEGIN CERTIFICATE-----), such as \
                        the company CA that signs the API's or ping host's certificate";
            check.error(
                Some(value.span()),
                at("ca_file"),
                problem.clone(),
                Some(hint.to_owned()),
            );
        }
    }
    let proxy = raw.proxy.as_ref().and_then(|value| {
        crate::net::ProxySetting::parse(value.get_ref())
            .map_err(|problem| {
                let hint = example("proxy").map(|e| format!("for example: {e}"));
                check.error(Some(value.span()), at("proxy"), problem, hint);
            })
            .ok()
    });
    ApiSettings {
        base_url: check.http_url(at("base_url"), &raw.base_url, false),
        ping_base_url: check.http_url(at("ping_base_url"), &raw.ping_base_url, false),
        account_id: check.non_empty(at("account_id"), &raw.account_id),
        api_key,
        ca_file,
        proxy,
    }
}
