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

use crate::config::{FailBody, FailUrl, Job, PingTarget};
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
/// `fail_body = "output_tail"`, else none.
pub(crate) fn fail_body_bytes(job: &Job) -> Option<usize> {
    (job.start_fail.fail_body == FailBody::OutputTail).then_some(job.output_tail)
}

/// The fail ping of a run that ended with `status` (as `run` exits:
/// [`crate::run_end::RunEnd::exit_status`]) to `url`, `{exit_code}` filled in; with `output`
/// (the run's last output) a `POST` carrying it, made text, scrubbed of the agent's secrets
/// and cut to its last `max` bytes.
pub(crate) fn fail_ping(
    url: &FailUrl,
    status: u8,
    output: Option<(&[u8], usize)>,
    method: PingMethod,
    source: &str,
) -> Result<Ping, InvalidPing> {
    let filled = url
        .with_exit_code(status)
        .map_err(|problem| InvalidPing::of(url.as_str(), problem))?;
    let ping = Ping::to(&filled, method, source)?.of_kind(PingKind::Fail);
    Ok(match output {
        Some((bytes, max)) => ping.with_body(crate::redact::job_output(bytes, max)),
        None => ping,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_status_fills_the_placeholder() {
        let url = FailUrl::parse("http://127.0.0.1:9/fail-test-token-1/{exit_code}?x={exit_code}")
            .unwrap();
        let ping = fail_ping(&url, 137, Some((b"out", 10)), PingMethod::Get, "h").unwrap();
        assert_eq!(ping.url(), "http://127.0.0.1:9/fail-test-token-1/137?x=137");
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
        use crate::config::UrlProblem::PlaceholderPart;
        for (url, part) in [
            ("http://127.0.0.1:1846{exit_code}/t", "host or port"),
            ("http://{exit_code}.example/t", "host or port"),
            ("http://u:{exit_code}@h/t", "host or port"),
            ("http://h:1{exit_code}", "host or port"),
            ("http://h/t#{exit_code}", "fragment"),
            ("{exit_code}://h/t", "scheme"),
        ] {
            assert_eq!(FailUrl::parse(url), Err(PlaceholderPart(part)), "{url}");
        }
        for url in [
            "http://h:18466/t/{exit_code}",
            "http://h/t?code={exit_code}#x",
            "http://h?code={exit_code}",
        ] {
            assert!(FailUrl::parse(url).is_ok(), "{url}");
        }
    }
}
