//! The configuration: a TOML file read in two stages, a serde `Raw*` schema close to the input
//! (unknown keys are errors) and the validated model below, which every other module uses.
//!
//! Loading collects every problem instead of stopping at the first; each is reported as
//! `path:line:col: job "backup": what is wrong` with a hint, and commands that need a valid
//! config exit 78 (`EX_CONFIG`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::schedule::Zone;

use crate::schedule::Schedule;

mod alerting;
mod check;
pub(crate) mod cluster;
pub(crate) mod defaults;
mod fail;
mod job_settings;
mod jobs;
mod limits;
mod load;
mod parse;
pub(crate) mod problem;
mod raw;
mod retries;
pub(crate) mod secrets;
pub(crate) mod size;
pub(crate) mod status;
mod tags;
mod url;
mod validate;
mod values;
mod watch;

pub(crate) use check::{CheckDuration, CheckSettings};
pub use cluster::{ClusterSettings, OnUnavailable};
pub(crate) use load::read_bytes;
pub use load::{LoadError, Loaded, CONFIG_FILE_MAX};
pub(crate) use secrets::read_api_key;
pub(crate) use status::{Listen, StatusSettings};
pub(crate) use tags::{owner_tag, OWNER_TAG_PREFIX};
pub(crate) use url::UrlProblem;
pub use url::{FailUrl, PingUrl};

/// A validated configuration file.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it was read from (shown in status and messages).
    pub path: PathBuf,
    /// `[agent]`: agent-wide settings.
    pub agent: AgentSettings,
    /// `[api]`: where the monitoring API and the ping host are, and the credentials.
    pub api: ApiSettings,
    /// `[[jobs]]`, in file order; names are unique. Shared: the daemon's job tasks hold the
    /// same `Arc`s, so 10,000 jobs are kept in memory once, not once per holder.
    pub jobs: Vec<Arc<Job>>,
    /// `[status]`: the local status endpoint.
    pub status: StatusSettings,
    /// `[cluster]`: the etcd cluster this agent shares its jobs with; `None`: it runs alone.
    pub cluster: Option<ClusterSettings>,
}

/// `[agent]`.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    /// `state_dir`: where the outbox, learned ping URLs and locks live; `None` means the
    /// default for the user (see [`crate::paths::default_state_dir`]).
    pub state_dir: Option<PathBuf>,
    /// `timezone`: the default time zone of job schedules (IANA name; default UTC).
    pub timezone: Zone,
    /// `shutdown_timeout`: how long running jobs get after SIGTERM before SIGKILL (default 30s).
    pub shutdown_timeout: Duration,
    /// `outbox_max_entries`: the outbox keeps at most this many pending pings, dropping the
    /// oldest (counted) beyond it (default [`defaults::OUTBOX_MAX_ENTRIES`]).
    pub outbox_max_entries: usize,
    /// `outbox_max_age`: a pending success older than this is dropped; `None` means the job's
    /// period where its schedule is known, else 1 h (see [`defaults::outbox_max_age`]).
    pub outbox_max_age: Option<Duration>,
    /// `resync_interval`: how often the daemon reconciles bound checks even when nothing
    /// changed, to repair drift made outside the agent (default 6h).
    pub resync_interval: Duration,
    /// `sync_jitter`: upper bound of the random delay before the daemon's first sync, so a
    /// fleet restarted together does not stampede the API (default 30s).
    pub sync_jitter: Duration,
    /// `reassert_interval`: how often the daemon sends each bound check's definition even when
    /// its local record says the service has it, so an edit in the web UI or a deleted check
    /// comes to light (the API has no `GET` for a heartbeat check); default 1 day.
    pub reassert_interval: Duration,
    /// `history`: how many runs of each job the run history keeps (0: none), unless the job
    /// says otherwise (default [`defaults::HISTORY`]).
    pub history: usize,
    /// `history_keep_removed`: the history of a job no longer in the configuration is removed
    /// at the first start this long after its last run (default 7 days).
    pub history_keep_removed: Duration,
}

/// `[api]`.
#[derive(Debug, Clone)]
pub struct ApiSettings {
    /// `base_url`: the monitoring API (`{base_url}` in the spec).
    pub base_url: Option<String>,
    /// `ping_base_url`: the ping host (`{ping_url}` in the spec).
    pub ping_base_url: Option<String>,
    /// `account_id`: sent as `x-service-account`.
    pub account_id: Option<String>,
    /// Where the API key comes from.
    pub api_key: ApiKeySource,
    /// `ca_file`: extra CA certificates (PEM) for every TLS connection.
    pub ca_file: Option<PathBuf>,
    /// `proxy`: a proxy for every request, or none; unset: the environment decides.
    pub proxy: Option<crate::net::ProxySetting>,
}

impl ApiSettings {
    /// What these settings say about outgoing connections (`run --ca-file` wins over
    /// `ca_file`).
    pub fn net(&self, ca_file: Option<PathBuf>) -> crate::net::NetSettings {
        crate::net::NetSettings {
            ca_file: ca_file.or_else(|| self.ca_file.clone()),
            proxy: self.proxy.clone(),
        }
    }
}

/// Where the API key is read from; the key itself is read only when a command needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiKeySource {
    /// `api_key_file = "PATH"`.
    File(PathBuf),
    /// `api_key_env = "VAR"`.
    Env(String),
    /// Neither: the systemd credential `api-key` under `$CREDENTIALS_DIRECTORY`, else
    /// `$HEARTBEAT_AGENT_API_KEY`.
    Default,
}

impl ApiKeySource {
    /// The variable named by `api_key_env`: the children of jobs must not see it.
    pub(crate) fn env_var(&self) -> Option<&str> {
        match self {
            ApiKeySource::Env(var) => Some(var),
            _ => None,
        }
    }
}

/// One `[[jobs]]` table, validated, with `[defaults]` applied. `PartialEq` tells a reload
/// which jobs changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// `name`: unique; the job's identity in logs, status, state files and `--job NAME`.
    pub name: String,
    /// `schedule`, parsed.
    pub schedule: Schedule,
    /// `timezone`: the job's own, else `[agent] timezone`, else UTC.
    pub timezone: Zone,
    /// What the job does.
    pub action: JobAction,
    /// `timeout`: after this long the job's process group gets SIGTERM.
    pub timeout: Option<Duration>,
    /// `kill_after`: after the timeout's SIGTERM, how long until SIGKILL (default 10s).
    pub kill_after: Duration,
    /// `success_exit_codes`: exit codes that count as success (default `[0]`).
    pub success_exit_codes: Vec<i32>,
    /// `overlap`: what happens when a run is due while the previous one still runs.
    pub overlap: Overlap,
    /// `run_on`: in a `[cluster]`, whether a fire runs on one agent or on every one (default
    /// `one` for commands, `all` for watches); without a cluster every fire runs here.
    pub run_on: RunOn,
    /// `jitter`: upper bound of a random delay, stable per host and job.
    pub jitter: Duration,
    /// `working_dir` of the command.
    pub working_dir: Option<PathBuf>,
    /// `env`: extra environment variables of the command.
    pub env: BTreeMap<String, String>,
    /// `user` to run the command as (only when the daemon runs as root).
    pub user: Option<String>,
    /// `group` to run the command as (only when the daemon runs as root).
    pub group: Option<String>,
    /// `enabled`: a disabled job is not run, and its check is deactivated.
    pub enabled: bool,
    /// `catch_up`: run once at start when a fire was missed while the daemon was down.
    pub catch_up: bool,
    /// `output_tail`: how many bytes of the last output are kept for status (default 10 KiB).
    pub output_tail: usize,
    /// `history`: how many of its runs the run history keeps (0: none); the job's own, else
    /// `[defaults]`, else `[agent] history`.
    pub history: usize,
    /// `retries`, `retry_delay`, `retry_delay_max`: a failed attempt is tried again within the
    /// same run (one fire), after a doubling wait; only the last attempt decides the ping.
    pub retries: crate::retries::Retries,
    /// Where success is reported.
    pub target: PingTarget,
    /// `[jobs.check]`: the definition sync keeps on the bound check (used with `check_id`).
    /// Shared with every job that leaves it at its default ([`shared_default`]).
    pub check: Arc<CheckSettings>,
    /// `start_url`, `fail_url`, `fail_body`: what else a run reports, besides its success.
    /// Shared with every job that leaves it at its default ([`shared_default`]).
    pub start_fail: Arc<StartFail>,
}

/// `value` behind an `Arc`, the one of `default` when it equals the default. Most jobs leave
/// `[jobs.check]` and the start and fail pings unset, and those two are 488 of a job's 1,016
/// bytes: a daemon with thousands of jobs keeps one copy of each default instead of one per
/// job (measured in BENCHMARKS.md, the 1,000-job row).
pub(crate) fn shared_default<T: Default + PartialEq>(
    value: T,
    default: &'static std::sync::OnceLock<Arc<T>>,
) -> Arc<T> {
    let default = default.get_or_init(|| Arc::new(T::default()));
    if value == **default {
        Arc::clone(default)
    } else {
        Arc::new(value)
    }
}

/// The pings a job sends besides its success, to a service that has such endpoints
/// (healthchecks-style `/start` and `/fail` URLs). The seed service's own check is never sent
/// either: its ping URL only ever receives successes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StartFail {
    /// `start_url`: pinged when a run starts (a secret, like a ping URL).
    pub start_url: Option<PingUrl>,
    /// `fail_url`: pinged when a run fails, its `{exit_code}` filled in (a secret).
    pub fail_url: Option<FailUrl>,
    /// `fail_body`: what the fail ping carries.
    pub fail_body: FailBody,
    /// `fail_method`: the fail ping's method (default `POST` with a body, else `GET`).
    pub fail_method: Option<FailMethod>,
    /// `fail_headers`: headers the fail ping carries (values are secrets).
    pub fail_headers: Vec<FailHeader>,
}

/// `fail_method`: the HTTP method of a fail ping, for endpoints that need one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailMethod {
    /// `GET` (no body).
    Get,
    /// `POST`.
    Post,
    /// `PUT`.
    Put,
}

/// One of `fail_headers`: a header of the fail ping whose value, from the config, a file or an
/// environment variable, is a secret (never printed, scrubbed from every output).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailHeader {
    /// The header's name, as written.
    pub name: String,
    /// Its value.
    pub value: crate::redact::Secret,
    /// The environment variable it was read from, which the job's children must not see.
    pub env: Option<String>,
}

/// `fail_body`: what a fail ping carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailBody {
    /// Nothing (default): the fail ping is sent with the job's method and no body.
    #[default]
    Empty,
    /// `"output_tail"`: a `POST` whose body is the run's last output, the last `output_tail`
    /// bytes (at most [`defaults::FAIL_BODY_MAX`]), scrubbed of the agent's secrets.
    OutputTail,
    /// `"json"`: a `POST` (`application/json`) of the run's summary for a chat or generic
    /// webhook: `text`, `job`, `host`, `run_id`, `exit_code`, `signal`, `outcome`,
    /// `duration_seconds` and `output_tail` (as [`FailBody::OutputTail`] bounds and scrubs it).
    Json,
}

/// What a job does: exactly one of `command`, `shell`, `watch`, or nothing (external).
#[derive(Debug, Clone, PartialEq)]
pub enum JobAction {
    /// `command = ["argv", ...]`, run directly.
    Command(Vec<String>),
    /// `shell = "..."`, run as `shell_program -c script`.
    Shell {
        /// `shell_program` (default `/bin/sh`).
        program: PathBuf,
        /// The script text.
        script: String,
    },
    /// `[jobs.watch]`: a condition probed on the schedule.
    Watch(WatchSpec),
    /// Neither: run elsewhere (by cron through `heartbeat-agent run --job NAME`).
    External,
}

/// `overlap`: what happens when a run is due while the previous one of the same job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overlap {
    /// Skip the new run and record it as skipped (default).
    #[default]
    Skip,
    /// Start the new run when the running one ends (at most one waits).
    Queue,
    /// Run both.
    Allow,
}

impl Overlap {
    /// The name as the config writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::Queue => "queue",
            Overlap::Allow => "allow",
        }
    }
}

/// `run_on`: where a fire runs in a `[cluster]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOn {
    /// On the one agent that claims it in etcd.
    One,
    /// On every agent.
    All,
}

impl RunOn {
    /// The config value.
    pub fn as_str(self) -> &'static str {
        match self {
            RunOn::One => "one",
            RunOn::All => "all",
        }
    }
}

/// Where a job's success is reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PingTarget {
    /// `ping_url`: a full ping URL, validated at load (a secret: its path carries the token).
    Url(PingUrl),
    /// `check_id`: a heartbeat check; its ping URL is learned through sync.
    Check(String),
    /// Neither: nothing is pinged (`config check` warns).
    None,
}

/// `[jobs.watch]`: a condition probe. Healthy -> ping; unhealthy -> no ping, reason recorded.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchSpec {
    /// `kind = "process"`: a running process whose name or command line matches `pattern`.
    Process {
        /// Substring matched against the process name and its command line.
        pattern: String,
    },
    /// `kind = "file"`: `path` exists and was modified within `max_age`.
    File {
        /// The file.
        path: PathBuf,
        /// The oldest modification time that still counts as healthy.
        max_age: Duration,
    },
    /// `kind = "disk"`: free space on the mount holding `path` is at least `min_free`.
    Disk {
        /// A path on the mount.
        path: PathBuf,
        /// The least free space that is healthy.
        min_free: Amount,
    },
    /// `kind = "memory"`: used memory is at most `max_used_percent`.
    Memory {
        /// Percent of total memory in use, at most.
        max_used_percent: f64,
    },
    /// `kind = "load"`: the 1-minute load average is at most `max_load1`.
    Load {
        /// The highest healthy 1-minute load average.
        max_load1: f64,
    },
    /// `kind = "tcp"`: a TCP connection to `address` succeeds within `timeout`.
    Tcp {
        /// `host:port`.
        address: String,
        /// Connect timeout.
        timeout: Duration,
    },
    /// `kind = "http"`: `GET url` answers `expect_status` within `timeout`.
    Http {
        /// The URL (may be a secret; shown redacted).
        url: String,
        /// The expected status code (default 200).
        expect_status: u16,
        /// Total timeout.
        timeout: Duration,
    },
}

/// A size given in bytes or as a percentage of the total.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Amount {
    /// An absolute number of bytes.
    Bytes(u64),
    /// A percentage (0..=100) of the total.
    Percent(f64),
}

impl Job {
    /// The check the job is bound to (`check_id`), if any.
    pub(crate) fn check_id(&self) -> Option<&str> {
        match &self.target {
            PingTarget::Check(id) => Some(id),
            _ => None,
        }
    }

    /// Whether sync keeps a check for the job: one named by `check_id`, or the one it finds or
    /// creates for `[jobs.check] create = true`.
    pub(crate) fn has_synced_check(&self) -> bool {
        matches!(self.target, PingTarget::Check(_)) || self.check.create
    }

    /// The program and arguments the job runs: `command` as given, `shell` as
    /// `shell_program -c script`; `None` for watches and external jobs, which run nothing here.
    pub(crate) fn argv(&self) -> Option<Vec<std::ffi::OsString>> {
        match &self.action {
            JobAction::Command(argv) => Some(argv.iter().map(Into::into).collect()),
            JobAction::Shell { program, script } => {
                Some(vec![program.into(), "-c".into(), script.into()])
            }
            JobAction::Watch(_) | JobAction::External => None,
        }
    }
}

impl Config {
    /// The job named `name`.
    pub(crate) fn job(&self, name: &str) -> Option<&Job> {
        self.jobs.iter().find(|j| j.name == name).map(AsRef::as_ref)
    }

    /// The state directory: `--state-dir`, else `[agent] state_dir`, else the user's default.
    pub(crate) fn state_dir(&self, flag: Option<&Path>) -> PathBuf {
        crate::paths::state_dir(flag, self.agent.state_dir.as_deref())
    }

    /// The variables that hold this config's secrets (`[api] api_key_env`, `[cluster]
    /// password_env`, the jobs' `fail_headers` from `{ env = ... }`): the children of jobs
    /// must not see them.
    pub(crate) fn secret_env_vars(&self) -> Vec<String> {
        let api = self.api.api_key.env_var().map(str::to_owned);
        let etcd = self.cluster.as_ref().and_then(|c| c.password_env.clone());
        let headers = self.jobs.iter().flat_map(|job| {
            (job.start_fail.fail_headers.iter()).filter_map(|header| header.env.clone())
        });
        api.into_iter().chain(etcd).chain(headers).collect()
    }
}

#[cfg(test)]
mod tests;
