//! Where `run`'s pings come from besides its flags: the job's ping URL or learned check URL,
//! `--ping-url-file`, the environment (`HEARTBEAT_AGENT_PING_URL`) and the job's start ping
//! (the fail ping is made by the run pipeline, [`crate::run::pings`]). Each that cannot be used is a warning naming where it came from, never
//! its URL, and nothing is pinged for it.

use tracing::warn;

use super::PING_URL_ENV;
use crate::config::Job;
use crate::job::NoPing;
use crate::ping::{Ping, PingMethod};

/// The job's ping; a job that has none (or whose check's URL is not learned yet) is a warning.
pub(super) fn job_ping(
    job: &Job,
    method: PingMethod,
    source: &str,
    state_dir: &std::path::Path,
) -> Option<Ping> {
    let learned = |check: &str| crate::sync::learned_ping_url(state_dir, &job.name, check);
    match crate::job::ping(job, learned, method, source) {
        Ok(ping) => Some(ping),
        Err(NoPing::NoTarget { .. }) => None,
        Err(NoPing::NotLearned { check, .. }) => {
            warn!(job = %job.name, check = %check, "no ping URL learned for the job's check yet; run `heartbeat-agent sync` (no ping this time)");
            None
        }
        Err(NoPing::Invalid { error, .. }) => {
            warn!(job = %job.name, "job's ping_url not used: {error}");
            None
        }
    }
}

/// The ping of `--ping-url-file`; a file that cannot be used, or holds no valid URL, is a
/// warning naming the file (never its content), and nothing is pinged.
pub(super) fn file_ping(path: &std::path::Path, method: PingMethod, source: &str) -> Option<Ping> {
    let shown = path.display();
    let url = crate::config::secrets::read_secret_line(path)
        .inspect_err(|err| warn!("--ping-url-file {shown} not used: {err}; nothing will be pinged"))
        .ok()?;
    let fix = "chmod 600 it: it holds the check's ping token";
    if let Some(warning) = crate::config::secrets::exposed_warning("ping URL file", path, fix) {
        warn!("{warning}");
    }
    Ping::template(&url, method, source)
        .inspect_err(|err| warn!("--ping-url-file {shown} not used: {err}; nothing will be pinged"))
        .ok()
}

/// The job's start ping; one that cannot be used is a warning.
pub(super) fn job_start_ping(job: &Job, method: PingMethod, source: &str) -> Option<Ping> {
    crate::job::start_ping(job, method, source)?
        .inspect_err(|err| warn!(job = %job.name, "job's start_url not used: {err}"))
        .ok()
}

pub(super) fn env_ping(method: PingMethod, source: &str) -> Option<Ping> {
    let url = std::env::var(PING_URL_ENV).ok().filter(|u| !u.is_empty())?;
    Ping::template(&url, method, source)
        .inspect_err(|err| warn!("{PING_URL_ENV} not used: {err}"))
        .ok()
}
