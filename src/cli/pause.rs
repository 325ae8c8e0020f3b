//! `heartbeat-agent pause` and `resume`: pausing jobs for maintenance (docs/daemon.md,
//! "Pausing for maintenance"; the model and why a pause deactivates the check:
//! [`crate::pause`]).
//!
//! Both first check the request against the config (a bad one exits 2 and changes nothing;
//! a job's check is its `check_id`, or the one sync recorded for `create = true`:
//! [`crate::sync::created::bound_check`]),
//! then ask the running daemon through its status endpoint (`POST /pause`, `POST /resume` with
//! the `[status]` token, as `trigger`), which records the pause, deactivates or re-activates the
//! checks at once through its sync and ends the pause at its deadline. When no daemon answers,
//! the command does it itself: it records the pause in `<state_dir>/pause.json` and sends the
//! change through the API with the config's key (one sync pass per job). Nothing then runs at
//! the deadline: the next `run --job`, `sync` or daemon start after it ends the pause, and
//! `pause` says so. With `--url` and no config file, the request goes to that daemon alone
//! (its token from `--token-file`), which checks it against its own config.

use std::path::{Path, PathBuf};

use chrono::{SecondsFormat, Utc};
use clap::Args;
use serde_json::Value;

use super::{context, print_error, GlobalArgs};
use crate::config::Config;
use crate::exit;
use crate::pause::{PauseRequest, ResumeRequest};
use crate::redact::Secret;
use crate::status::client::{ClientError, StatusAnswer};
use crate::sync::created::bound_check;
use crate::sync::{sync_all, CadenceCache, SyncOptions, SyncOutcome};

/// Pause jobs for maintenance: deactivate their checks so they do not alarm.
///
/// The checks are deactivated through the API (re-activation at the end restarts their timer,
/// so the first run after the maintenance gets a whole period). Through the running daemon when
/// its status endpoint answers (needs its token: `[status] token` of the config, or
/// --token-file), else directly with the config's API key. With --url and no config file, the
/// request goes to that daemon alone, which checks it. Without a daemon nothing runs at the
/// deadline, and the next `run --job`, `sync` or daemon start after it ends the pause. A job with `create = true` is paused once sync found
/// or created its check; before that, like a job with only a `ping_url`, it can be paused with
/// --stop-jobs only. Exit status: 0 paused, 1 the pause could not be sent or recorded, 2 bad
/// arguments (nothing changed).
#[derive(Debug, Args)]
pub struct PauseArgs {
    /// The jobs, or --all: every job bound to a check (with --stop-jobs, every job)
    #[command(flatten)]
    pub jobs: Jobs,
    /// End the pause after this long ("30m", "2h")
    #[arg(long = "for", value_name = "DURATION", conflicts_with = "until")]
    pub for_: Option<String>,
    /// End the pause at this time (RFC 3339: 2026-11-25T18:00:00Z)
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Why (shown in status)
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// The daemon does not run the paused jobs either (skipped fires are logged and counted)
    #[arg(long)]
    pub stop_jobs: bool,
    /// The daemon's endpoint (http://127.0.0.1:9465 or a unix socket path) [default: `[status]
    /// listen` of the config]
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Read the endpoint's token from FILE (one line) instead of the config's `[status] token`
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

/// End the pause of jobs: re-activate their checks (their timer restarts now).
///
/// Through the running daemon when its status endpoint answers (its token: `[status] token`
/// of the config, or --token-file), else directly with the config's API key; with --url and no
/// config file, through that daemon alone. Exit status: 0 resumed, 1 the re-activation could
/// not be sent (the pause is ended locally and the next sync sends it), 2 bad arguments
/// (nothing changed).
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The jobs, or --all: every paused job
    #[command(flatten)]
    pub jobs: Jobs,
    /// The daemon's endpoint [default: `[status] listen` of the config]
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Read the endpoint's token from FILE (one line) instead of the config's `[status] token`
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

/// `JOB...` or `--all`: one of them.
#[derive(Debug, Args)]
pub struct Jobs {
    /// The jobs
    #[arg(
        value_name = "JOB",
        required_unless_present = "all",
        conflicts_with = "all"
    )]
    pub names: Vec<String>,
    /// Every job (pause: every job bound to a check, with --stop-jobs every job; resume: every
    /// paused job)
    #[arg(long)]
    pub all: bool,
}

/// Runs `pause`; returns the exit code.
pub fn pause(args: PauseArgs, global: &GlobalArgs) -> u8 {
    let request = PauseRequest {
        jobs: args.jobs.names,
        all: args.jobs.all,
        for_: args.for_,
        until: args.until,
        reason: args.reason,
        stop_jobs: args.stop_jobs,
    };
    let daemon = Daemon {
        url: args.url.as_deref(),
        token_file: args.token_file.as_deref(),
    };
    if let Some(code) = daemon.alone(global, "/pause", &request) {
        return code;
    }
    let Some((config, path)) = load(global) else {
        return exit::CONFIG;
    };
    let state_dir = config.state_dir(global.state_dir.as_deref());
    let check_of = |job: &crate::config::Job| bound_check(&state_dir, job);
    let plan = match crate::pause::plan(&config, &request, Utc::now(), &check_of) {
        Ok(plan) => plan,
        Err(message) => {
            print_error(message);
            return exit::USAGE;
        }
    };
    for name in &plan.left_out {
        if config.job(name).is_some_and(|job| job.check.create) {
            crate::logging::write_err(&format!("heartbeat-agent: job \"{name}\" left out: it has no check yet (create = true: sync has not found or created it), so nothing was deactivated on the service for it (add --stop-jobs to stop the daemon running it)"));
        } else {
            crate::logging::write_err(&format!("heartbeat-agent: job \"{name}\" left out: it has no check_id (add --stop-jobs to stop the daemon running it)"));
        }
    }
    let body = serde_json::to_string(&request).unwrap_or_default();
    let where_ = match daemon.ask(global, "/pause", &body) {
        Asked::Answered(code) => return code,
        Asked::NoDaemon(where_) => where_,
    };
    if let Err(message) = crate::paths::check_state_dir(&state_dir) {
        print_error(message);
        return exit::FAILURE;
    }
    let bound = plan.bound();
    let client = match client_if(&bound, &config, &path, global) {
        Ok(client) => client,
        Err(code) => return code,
    };
    // The command's own count of failed writes: a failed write is its error (exit 1).
    let failures = crate::persist::Failures::default();
    if let Err(err) = crate::pause::apply(&state_dir, &failures, &plan) {
        print_error(err);
        return exit::FAILURE;
    }
    let until = plan
        .pause
        .until
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true));
    for (name, _) in &plan.jobs {
        let end = until.as_deref().unwrap_or("`heartbeat-agent resume`");
        crate::logging::write_err(&format!(
            "heartbeat-agent: job \"{name}\" paused until {end}"
        ));
    }
    let code = send(&config, &state_dir, client.as_ref(), &bound, "deactivated");
    match until {
        Some(until) => crate::logging::write_err(&format!(
            "heartbeat-agent: no daemon answered at {where_}: nothing runs at {until}; the next \
             `run --job`, `sync` or daemon start after it ends the pause (or run \
             `heartbeat-agent resume`)"
        )),
        None => crate::logging::write_err(&format!(
            "heartbeat-agent: no daemon answered at {where_}: the pause is recorded in the state \
             directory, where a daemon started later finds it"
        )),
    }
    code
}

/// Runs `resume`; returns the exit code.
pub fn resume(args: ResumeArgs, global: &GlobalArgs) -> u8 {
    let request = ResumeRequest {
        jobs: args.jobs.names,
        all: args.jobs.all,
    };
    let daemon = Daemon {
        url: args.url.as_deref(),
        token_file: args.token_file.as_deref(),
    };
    if let Some(code) = daemon.alone(global, "/resume", &request) {
        return code;
    }
    let Some((config, path)) = load(global) else {
        return exit::CONFIG;
    };
    let state_dir = config.state_dir(global.state_dir.as_deref());
    let jobs = match crate::pause::resume_plan(&crate::pause::load(&state_dir), &request) {
        Ok(jobs) => jobs,
        Err(message) => {
            print_error(message);
            return exit::USAGE;
        }
    };
    let body = serde_json::to_string(&request).unwrap_or_default();
    if let Asked::Answered(code) = daemon.ask(global, "/resume", &body) {
        return code;
    }
    if let Err(message) = crate::paths::check_state_dir(&state_dir) {
        print_error(message);
        return exit::FAILURE;
    }
    let check_of = |job: &crate::config::Job| bound_check(&state_dir, job);
    let bound = crate::pause::bound_jobs(&config, &jobs, &check_of);
    let client = match client_if(&bound, &config, &path, global) {
        Ok(client) => client,
        Err(code) => return code,
    };
    // The command's own count of failed writes: a failed write is its error (exit 1).
    let failures = crate::persist::Failures::default();
    let is_bound = |name: &str| bound.iter().any(|b| b == name);
    if let Err(err) = crate::pause::end(&state_dir, &failures, &jobs, is_bound) {
        print_error(err);
        return exit::FAILURE;
    }
    for name in &jobs {
        crate::logging::write_err(&format!("heartbeat-agent: job \"{name}\" resumed"));
    }
    send(&config, &state_dir, client.as_ref(), &bound, "re-activated")
}

/// The config, or `None` after its problems were printed.
fn load(global: &GlobalArgs) -> Option<(Config, std::path::PathBuf)> {
    let path = crate::paths::config_file(global.config.as_ref());
    match Config::load_for_reading(&path) {
        Ok(loaded) => Some((loaded.config, path)),
        Err(err) => {
            context::invalid_config(&path, &err, ": nothing was changed");
            None
        }
    }
}

/// The API client when some job has a check to change.
fn client_if(
    bound: &[String],
    config: &Config,
    path: &std::path::Path,
    global: &GlobalArgs,
) -> Result<Option<crate::api::ApiClient>, u8> {
    if bound.is_empty() {
        return Ok(None);
    }
    let net = crate::net::Net::new(config.api.net(None));
    context::config_client(config.api.clone(), path, global, net)
        .map(Some)
        .map_err(|(code, message)| {
            print_error(format!(
                "{message}\nno daemon answered, so the check must be changed here: nothing was changed"
            ));
            code
        })
}

/// One sync pass per bound job (the pause file decides what is sent); exit 0 when the service
/// took every change.
fn send(
    config: &Config,
    state_dir: &std::path::Path,
    client: Option<&crate::api::ApiClient>,
    bound: &[String],
    done: &str,
) -> u8 {
    let Some(client) = client else {
        return exit::OK;
    };
    let runtime = match context::runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let mut code = exit::OK;
    let mut cache = CadenceCache::default();
    for job in bound {
        let opts = SyncOptions {
            job: Some(job.clone()),
            ..SyncOptions::at(Utc::now())
        };
        let report = runtime.block_on(sync_all(config, client, state_dir, &opts, &mut cache));
        for entry in &report.jobs {
            match &entry.outcome {
                SyncOutcome::Updated | SyncOutcome::Created | SyncOutcome::InSync => {
                    crate::logging::write_err(&format!(
                        "heartbeat-agent: job \"{}\": check {} {done}",
                        entry.job, entry.check_id
                    ))
                }
                SyncOutcome::Failed(message)
                | SyncOutcome::Deferred(message)
                | SyncOutcome::Missing(message) => {
                    print_error(format!(
                        "{message}\nthe pause file says what the check should be: the next \
                         `heartbeat-agent sync` (or the daemon) sends it"
                    ));
                    code = exit::FAILURE;
                }
                SyncOutcome::Held | SyncOutcome::WouldUpdate | SyncOutcome::WouldCreate => {}
            }
        }
    }
    code
}

/// What asking the daemon gave.
enum Asked {
    /// It answered: the command's exit code (its messages are printed).
    Answered(u8),
    /// Nothing answers at this endpoint: the command does the work itself.
    NoDaemon(String),
}

/// Where the daemon is asked: `--url` and `--token-file`.
struct Daemon<'a> {
    url: Option<&'a str>,
    token_file: Option<&'a Path>,
}

impl Daemon<'_> {
    /// With --url and no config file (none named, none at the default place), the request goes
    /// to that daemon alone, which checks it (there is nothing to check it against here, nor
    /// to fall back to): its exit code. `None` when the config is to be used.
    fn alone(
        &self,
        global: &GlobalArgs,
        path: &str,
        request: &impl serde::Serialize,
    ) -> Option<u8> {
        let config = crate::paths::config_file(global.config.as_ref());
        if self.url.is_none() || context::config_wanted(global, &config) {
            return None;
        }
        let body = serde_json::to_string(request).unwrap_or_default();
        Some(match self.ask(global, path, &body) {
            Asked::Answered(code) => code,
            Asked::NoDaemon(endpoint) => {
                print_error(format!("no daemon answered at {endpoint}"));
                exit::FAILURE
            }
        })
    }

    /// Sends `body` to `path` of the daemon's endpoint and prints what it answered.
    fn ask(&self, global: &GlobalArgs, path: &str, body: &str) -> Asked {
        let url = self.url;
        let found = context::endpoint_with_token(url, self.token_file, global);
        let (endpoint, token, expected) = match found {
            Ok(found) => found,
            Err((code, message)) => {
                print_error(message);
                return Asked::Answered(code);
            }
        };
        if let Err(refused) = expected.probe(&endpoint) {
            print_error(refused);
            return Asked::Answered(exit::FAILURE);
        }
        let token = token.as_ref().map(Secret::expose);
        match endpoint.post_json(path, token, body, context::TIMEOUT) {
            Ok(answer) => Asked::Answered(answered(&answer, token.is_some())),
            Err(ClientError::Io { endpoint, .. }) if url.is_none() => Asked::NoDaemon(endpoint),
            Err(err) => {
                print_error(err);
                Asked::Answered(exit::FAILURE)
            }
        }
    }
}

/// Prints the daemon's answer; its exit code.
fn answered(answer: &StatusAnswer, had_token: bool) -> u8 {
    let doc: Value = serde_json::from_str(&answer.body).unwrap_or(Value::Null);
    let message = doc["error"]
        .as_str()
        .map_or_else(|| answer.body.trim().to_owned(), str::to_owned);
    match answer.status {
        200 => {}
        400 => {
            print_error(message);
            return exit::USAGE;
        }
        401 if !had_token => {
            print_error(format!(
                "{message}\nno token: set [status] token_file in the config, or pass --token-file"
            ));
            return exit::FAILURE;
        }
        status => {
            print_error(format!("the daemon answered HTTP {status}: {message}"));
            return exit::FAILURE;
        }
    }
    let (what, done) = if doc.get("paused").is_some() {
        ("paused", "deactivated")
    } else {
        ("resumed", "re-activated")
    };
    let until = doc["until"].as_str().unwrap_or("`heartbeat-agent resume`");
    for job in doc[what].as_array().into_iter().flatten() {
        let job = job.as_str().unwrap_or_default();
        match what {
            "paused" => crate::logging::write_err(&format!(
                "heartbeat-agent: job \"{job}\" paused until {until} (by the daemon)"
            )),
            _ => crate::logging::write_err(&format!(
                "heartbeat-agent: job \"{job}\" resumed (by the daemon)"
            )),
        }
    }
    let mut code = exit::OK;
    for check in doc["checks"].as_array().into_iter().flatten() {
        let job = check["job"].as_str().unwrap_or_default();
        let id = check["check_id"].as_str().unwrap_or_default();
        match check["state"].as_str() {
            Some("in_sync") => crate::logging::write_err(&format!(
                "heartbeat-agent: job \"{job}\": check {id} {done}"
            )),
            Some("pending") => {
                print_error(format!(
                    "job \"{job}\": check {id} not {done} yet: the daemon's sync has not \
                     confirmed it{}; it keeps trying (`heartbeat-agent status` shows it)",
                    check["error"]
                        .as_str()
                        .map(|e| format!(" ({e})"))
                        .unwrap_or_default()
                ));
                code = exit::FAILURE;
            }
            _ => {
                print_error(format!(
                    "job \"{job}\": check {id} not {done}: {}; the daemon retries it",
                    check["error"].as_str().unwrap_or("sync failed")
                ));
                code = exit::FAILURE;
            }
        }
    }
    code
}
