//! A configured job made runnable: what runs (its command, the child's environment, the user
//! it runs as) and what pings (its target turned into a [`Ping`], and the start and fail pings
//! of `start_url` and `fail_url`, the latter with the run's exit status and output tail).
//!
//! `run --job`, `ping --job` and the daemon all go through here, so a job means the same
//! thing to each of them. Nothing here prints: every function returns what it found or why it
//! could not, and the caller decides whether that is a warning (`run`, which never lets
//! monitoring stop the job), a refusal (`ping`, exit 78) or a run recorded as not started
//! (the daemon).

use std::ffi::{CString, OsString};

use crate::config::{FailBody, FailMethod, FailUrl, Job, PingTarget};
use crate::ping::{InvalidPing, Ping, PingKind, PingMethod};
use crate::process::{self, CommandSpec, RunAs};

/// Why a job's command cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CommandError {
    /// The job runs nothing here (a watch, or an external job run by cron), or its command is
    /// empty.
    #[error("the command is empty")]
    NoCommand,
    /// `user` or `group` cannot be resolved (the message names which and why).
    #[error("{0}")]
    RunAs(String),
}

/// Why a job has no ping to send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoPing {
    /// Neither `ping_url` nor `check_id`: nothing is pinged.
    #[error("job \"{job}\" has no ping_url or check_id: nothing to ping")]
    NoTarget {
        /// The job.
        job: String,
    },
    /// Bound by `check_id`, and sync has not learned the check's ping URL yet.
    #[error(
        "job \"{job}\": no ping URL learned for check {check} yet; run `heartbeat-agent sync`"
    )]
    NotLearned {
        /// The job.
        job: String,
        /// Its check.
        check: String,
    },
    /// The URL (configured or learned) or the source cannot be used.
    #[error("job \"{job}\": its ping URL is not usable: {error}")]
    Invalid {
        /// The job.
        job: String,
        /// What is wrong (never the URL itself).
        error: InvalidPing,
    },
}

/// The command `job` runs: its argv (`shell` as `shell_program -c script`), working directory
/// and `env` table. The child's identity and secrets are added by [`hygiene`].
pub(crate) fn command(job: &Job) -> Result<CommandSpec, CommandError> {
    let argv = job.argv().unwrap_or_default();
    let mut spec = CommandSpec::from_argv(&argv).ok_or(CommandError::NoCommand)?;
    spec.working_dir.clone_from(&job.working_dir);
    spec.env_set
        .extend(job.env.iter().map(|(k, v)| (k.into(), v.into())));
    Ok(spec)
}

/// What every child of a job gains and loses: `HEARTBEAT_AGENT_JOB` (named `name`, which may be
/// a `--job` the config does not know), `HEARTBEAT_AGENT_CHECK_ID` when the job is bound to a
/// check, and never the variables in `secret_vars` (the config's `api_key_env` and `[cluster]
/// password_env`, from `Config::secret_env_vars`; the secrets of [`process::SECRET_ENV`] are
/// removed from every child anyway).
pub(crate) fn hygiene(
    spec: &mut CommandSpec,
    name: Option<&str>,
    job: Option<&Job>,
    secret_vars: &[String],
) {
    if let Some(name) = name {
        spec.env_set.push((process::JOB_ENV.into(), name.into()));
    }
    if let Some(id) = job.and_then(Job::check_id) {
        spec.env_set.push((process::CHECK_ENV.into(), id.into()));
    }
    spec.env_remove
        .extend(secret_vars.iter().map(OsString::from));
}

/// The ids `job` runs as, from its `user` and `group`, when this process is root; `None`
/// otherwise (loading the config already warned that they are ignored then).
pub(crate) fn run_as(job: &Job) -> Result<Option<RunAs>, CommandError> {
    use nix::unistd::{getgrouplist, Gid, Group, User};
    let (user, group) = (job.user.as_deref(), job.group.as_deref());
    if (user.is_none() && group.is_none()) || !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    let fail = CommandError::RunAs;
    let found = match user {
        Some(name) => Some(
            User::from_name(name)
                .map_err(|err| fail(format!("cannot look up user \"{name}\": {err}")))?
                .ok_or_else(|| fail(format!("unknown user \"{name}\"; create it or fix `user`")))?,
        ),
        None => None,
    };
    let mut gid = found.as_ref().map_or_else(nix::unistd::getgid, |u| u.gid);
    if let Some(name) = group {
        gid = Group::from_name(name)
            .map_err(|err| fail(format!("cannot look up group \"{name}\": {err}")))?
            .ok_or_else(|| {
                fail(format!(
                    "unknown group \"{name}\"; create it or fix `group`"
                ))
            })?
            .gid;
    }
    let groups: Vec<Gid> = match &found {
        Some(user) => {
            let name = CString::new(user.name.as_str())
                .map_err(|_| fail(format!("user name \"{}\" contains a NUL byte", user.name)))?;
            getgrouplist(&name, gid).map_err(|err| {
                fail(format!(
                    "cannot list the groups of \"{}\": {err}",
                    user.name
                ))
            })?
        }
        None => vec![gid],
    };
    Ok(Some(RunAs {
        uid: found.map_or_else(nix::unistd::getuid, |u| u.uid).as_raw(),
        gid: gid.as_raw(),
        groups: groups.into_iter().map(Gid::as_raw).collect(),
    }))
}

/// The ping of `job`'s success: its `ping_url`, or for a job bound by `check_id` the URL sync
/// learned, which `learned` looks up by check id (from the state directory in `run` and `ping`,
/// from memory in the daemon); for a job with `[jobs.check] create = true`, `learned` is asked
/// for [`crate::sync::CREATED_CHECK`]: the URL of the check sync found or created for it.
pub(crate) fn ping(
    job: &Job,
    learned: impl FnOnce(&str) -> Option<String>,
    method: PingMethod,
    source: &str,
) -> Result<Ping, NoPing> {
    let invalid = |error| NoPing::Invalid {
        job: job.name.clone(),
        error,
    };
    match &job.target {
        PingTarget::Url(url) => Ping::to(url, method, source).map_err(invalid),
        PingTarget::Check(check) => match learned(check) {
            Some(url) => Ping::new(&url, method, source).map_err(invalid),
            None => Err(NoPing::NotLearned {
                job: job.name.clone(),
                check: check.clone(),
            }),
        },
        PingTarget::None if job.check.create => match learned(crate::sync::CREATED_CHECK) {
            Some(url) => Ping::new(&url, method, source).map_err(invalid),
            None => Err(NoPing::NotLearned {
                job: job.name.clone(),
                check: "(created by sync)".to_owned(),
            }),
        },
        PingTarget::None => Err(NoPing::NoTarget {
            job: job.name.clone(),
        }),
    }
}

/// The start ping of `job` (`start_url`), if it has one.
pub(crate) fn start_ping(
    job: &Job,
    method: PingMethod,
    source: &str,
) -> Option<Result<Ping, InvalidPing>> {
    let url = job.start_fail.start_url.as_ref()?;
    Some(Ping::to(url, method, source).map(|p| p.of_kind(PingKind::Start)))
}

/// How many bytes of output `job`'s fail ping carries: its `output_tail` with
/// `fail_body = "output_tail"` or `"json"`, else none.
pub(crate) fn fail_body_bytes(job: &Job) -> Option<usize> {
    (job.start_fail.fail_body != FailBody::Empty).then_some(job.output_tail)
}

/// How a fail ping is sent besides its URL and what its body holds: as JSON
/// (`fail_body = "json"`), with `fail_method` and with `fail_headers`.
#[derive(Debug, Clone, Default)]
pub(crate) struct FailSend {
    /// The body is the run's JSON summary, not its output.
    pub json: bool,
    /// `fail_method`, when set.
    pub method: Option<PingMethod>,
    /// `fail_headers` (values are secrets).
    pub headers: Vec<(String, crate::redact::Secret)>,
}

/// How `job`'s fail ping is sent. `own_url`: the fail URL is the job's own `fail_url` (not
/// `run --fail-url`); only then do its method and headers go with it, so a header's secret
/// never reaches a URL it was not written for.
pub(crate) fn fail_send(job: &Job, own_url: bool) -> FailSend {
    let fail = &job.start_fail;
    let method = fail.fail_method.map(|method| match method {
        FailMethod::Get => PingMethod::Get,
        FailMethod::Post => PingMethod::Post,
        FailMethod::Put => PingMethod::Put,
    });
    let headers = fail
        .fail_headers
        .iter()
        .map(|header| (header.name.clone(), header.value.clone()))
        .collect();
    FailSend {
        json: fail.fail_body == FailBody::Json,
        method: method.filter(|_| own_url),
        headers: if own_url { headers } else { Vec::new() },
    }
}

/// The fail ping of run `run_id` that ended with `status` (as `run` exits:
/// [`crate::run_end::RunEnd::exit_status`]) to `url`, `{exit_code}` and `{run_id}` filled in;
/// with `body` (the run's last output, already scrubbed and cut, or its JSON summary as
/// `send` says) a `POST` carrying it; sent with `send`'s method and headers.
pub(crate) fn fail_ping(
    url: &FailUrl,
    status: u8,
    run_id: &str,
    body: Option<String>,
    method: PingMethod,
    source: &str,
    send: &FailSend,
) -> Result<Ping, InvalidPing> {
    let filled = url
        .with_exit_code(status, run_id)
        .map_err(|problem| InvalidPing::of(url.as_str(), problem))?;
    let ping = Ping::to(&filled, method, source)?.of_kind(PingKind::Fail);
    let ping = match body {
        Some(body) if send.json => ping.with_json_body(body),
        Some(body) => ping.with_body(body),
        None => ping,
    };
    let ping = match send.method {
        Some(method) => ping.with_method(method),
        None => ping,
    };
    Ok(ping.with_headers(send.headers.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_status_fills_the_placeholder() {
        let url = FailUrl::parse(
            "http://127.0.0.1:9/fail-test-token-1/{exit_code}?x={exit_code}&rid={run_id}",
        )
        .unwrap();
        let run = "5f0c3a9e-8f7b-4d2a-9c1e-2b7d9e4f6a10";
        let send = FailSend::default();
        let ping = fail_ping(
            &url,
            137,
            run,
            Some("out".into()),
            PingMethod::Get,
            "h",
            &send,
        )
        .unwrap();
        assert_eq!(
            ping.url(),
            format!("http://127.0.0.1:9/fail-test-token-1/137?x=137&rid={run}")
        );
        assert_eq!(
            (ping.method, ping.kind, ping.body()),
            (PingMethod::Post, PingKind::Fail, Some("out"))
        );
        assert!(
            matches!(FailUrl::parse("http://h/{code}"), Err(crate::config::UrlProblem::Placeholder(p)) if p == "{code}")
        );
        assert!(
            matches!(FailUrl::parse("http://h/x{"), Err(crate::config::UrlProblem::Placeholder(p)) if p == "{")
        );
    }

    #[test]
    fn the_placeholder_is_only_allowed_in_the_path_and_query() {
        use crate::config::PingUrl;
        use crate::config::UrlProblem::{Placeholder, PlaceholderPart};
        for placeholder in [FailUrl::PLACEHOLDER, PingUrl::RUN_ID] {
            for (url, part) in [
                ("http://127.0.0.1:1846{}/t", "host or port"),
                ("http://{}.example/t", "host or port"),
                ("http://u:{}@h/t", "host or port"),
                ("http://h:1{}", "host or port"),
                ("http://h/t#{}", "fragment"),
                ("{}://h/t", "scheme"),
            ] {
                let url = url.replace("{}", placeholder);
                let refused = Err(PlaceholderPart(placeholder, part));
                assert_eq!(FailUrl::parse(&url).map(|_| ()), refused, "{url}");
                if placeholder == PingUrl::RUN_ID {
                    assert_eq!(PingUrl::template(&url).map(|_| ()), refused, "{url}");
                }
            }
            for url in [
                "http://h:18466/t/{}",
                "http://h/t?code={}#x",
                "http://h?code={}",
            ] {
                let url = url.replace("{}", placeholder);
                assert!(FailUrl::parse(&url).is_ok(), "{url}");
            }
        }
        let unknown = Err(Placeholder("{exit_code}".to_owned()));
        assert_eq!(
            PingUrl::template("http://h/t/{exit_code}").map(|_| ()),
            unknown
        );
    }

    #[test]
    fn the_run_id_fills_a_ping_url_in_its_path_and_query_and_keeps_its_target() {
        use crate::config::PingUrl;
        let run = "5f0c3a9e-8f7b-4d2a-9c1e-2b7d9e4f6a10";
        for (url, filled) in [
            (
                "http://127.0.0.1:9/tok-run-id-1/{run_id}",
                format!("http://127.0.0.1:9/tok-run-id-1/{run}"),
            ),
            (
                "http://127.0.0.1:9/tok-run-id-1?rid={run_id}",
                format!("http://127.0.0.1:9/tok-run-id-1?rid={run}"),
            ),
        ] {
            let ping = Ping::to(&PingUrl::template(url).unwrap(), PingMethod::Get, "h").unwrap();
            let target = ping.url().to_owned();
            let ping = ping.for_run(run);
            assert_eq!(ping.url(), filled);
            assert_eq!(ping.target(), target);
        }
        let plain = Ping::new("http://127.0.0.1:9/tok-run-id-2", PingMethod::Get, "h").unwrap();
        assert_eq!(plain.clone().for_run(run), plain);
    }
}
