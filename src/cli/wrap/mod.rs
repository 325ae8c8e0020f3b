//! `heartbeat-agent run [OPTIONS] -- CMD [ARGS...]`: wrap one command, ping on success.
//!
//! Monitoring never stops the job: a broken or missing config, an unknown `--job`, an unusable
//! state directory, an invalid `HEARTBEAT_AGENT_PING_URL`, an unusable `--ping-url-file` or a
//! failed ping are warnings, and the command's status passes through. Only argument errors exit
//! 2 without running anything.
//!
//! Stages: `plan` resolves flags, config and environment into a `Plan` (the only place that
//! can refuse to run), `run` takes the lock and a current-thread runtime, and `run_plan` hands
//! the run to the one run pipeline ([`crate::run::run_with_pings`]: the start ping while the
//! command runs, its attempts with `--retries`, the success ping or the fail ping with its exit
//! status and, for a job with `fail_body`, the output tail kept by [`crate::process::Io::Tee`]).
//! What `run` gives the pipeline is its [`crate::run::Runner`] (`wrapped`): the command in the
//! foreground with the wrapper's signals forwarded to it, notices on stderr, and the after-ping
//! work: for a job bound to a check, right after an accepted ping it records the ping and sends
//! the job's held period change (`sync::timer`, `after_ping`), then delivers what the outbox
//! holds within the ping budget.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use clap::Args;
use nix::sys::signal::Signal;
use tokio::signal::unix::SignalKind;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::context::{self, Lenient, PingOptions};
use super::{print_error, GlobalArgs};
use crate::config::{Config, FailUrl, Job};
use crate::exit;
use crate::ping::outbox::{Outbox, PingContext};
use crate::ping::{Budget, InvalidPing, Ping, PingKind, PingMethod};
use crate::process::children::{self, Children};
use crate::process::lock::{lock_key, LockError, RunLock};
use crate::process::{self, ChildOutcome, CommandSpec, Limits};
use crate::retries::Retries;
use crate::run::Pings;
use crate::run_end::RunEnd;

/// The environment variable holding a ping URL when neither `--ping-url` nor `--job` gives one.
pub(crate) const PING_URL_ENV: &str = "HEARTBEAT_AGENT_PING_URL";

/// Run one command, pass its output and exit code through, ping on success.
///
/// The command runs directly (no shell) in its own process group, with stdin, stdout and stderr
/// inherited. Exit status: the command's, 128+N when signal N killed it, 124/137 after
/// --timeout, 126 when it cannot be executed, 127 when not found, 2 on bad arguments.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Use job NAME from the config: its ping URL or check, timeout, success codes, its
    /// start_url and fail_url (with fail_body = "output_tail", the fail ping POSTs the last
    /// output_tail bytes of output; stdout and stderr are then pipes passed through), and its
    /// command when none is given
    #[arg(long, value_name = "NAME")]
    pub job: Option<String>,

    /// Where and how to ping (boxed: it is most of the size of the arguments).
    #[command(flatten)]
    pub ping: Box<PingArgs>,

    /// Stop the command after DUR (more than zero): SIGTERM to its process group, SIGKILL after
    /// --kill-after
    #[arg(long, value_parser = parse_timeout, value_name = "DUR")]
    pub timeout: Option<Duration>,

    /// Time between the timeout's SIGTERM and SIGKILL [default: the job's, else 10s]
    #[arg(long, value_parser = crate::duration::parse, value_name = "DUR")]
    pub kill_after: Option<Duration>,

    /// Exit codes that count as success, comma-separated [default: the job's, else 0]
    #[arg(long, value_delimiter = ',', value_parser = parse_code, value_name = "CODES")]
    pub success_codes: Option<Vec<i32>>,

    /// Exit at once (status 1) if another run of the same job or ping URL is still running
    #[arg(long)]
    pub lock: bool,

    /// Run a failed command again, up to N more times, within this run: --timeout applies to
    /// each attempt, --lock is held through all of them, and only the last attempt's result
    /// pings and is the exit status [default: the job's, else 0]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=i64::from(crate::retries::MAX_RETRIES)))]
    pub retries: Option<u32>,

    /// Longest wait before the first retry, doubled after each attempt (drawn between half of
    /// it and all of it) [default: the job's, else 10s]
    #[arg(long, value_parser = parse_retry_delay, value_name = "DUR")]
    pub retry_delay: Option<Duration>,

    /// Cap of the doubled wait between attempts [default: the job's, else 5m or --retry-delay]
    #[arg(long, value_parser = parse_retry_delay, value_name = "DUR")]
    pub retry_delay_max: Option<Duration>,

    /// The command and its arguments (after `--`)
    #[arg(last = true, value_name = "CMD", value_parser = clap::value_parser!(OsString))]
    pub command: Vec<OsString>,
}

/// The ping options of `run`.
#[derive(Debug, Args)]
pub struct PingArgs {
    /// Ping this URL when the command succeeds. `{run_id}` in its path or query (here and in
    /// --start-url, --fail-url) becomes the run's id, a UUID the command also gets in
    /// $HEARTBEAT_AGENT_RUN_ID. Its token is visible to every local user in the process list
    /// (`ps`): prefer --ping-url-file or $HEARTBEAT_AGENT_PING_URL
    #[arg(long, value_name = "URL")]
    pub ping_url: Option<String>,

    /// Read the ping URL from FILE (one line; a regular file of at most 16 KiB, mode 600):
    /// unlike --ping-url, it stays out of the process list. A file that cannot be used is a
    /// warning: the command runs, nothing is pinged
    #[arg(long, value_name = "FILE", conflicts_with = "ping_url")]
    pub ping_url_file: Option<PathBuf>,

    /// Ping this URL when the command fails (healthchecks-style services; off by default).
    /// `{exit_code}` in its path or query is replaced by the exit status run exits with (the
    /// code, 128+N for signal N, 124 or 137 after --timeout). Kept in the outbox when it cannot
    /// be delivered
    #[arg(long, value_name = "URL")]
    pub fail_url: Option<String>,

    /// Ping this URL when the command starts (healthchecks-style services; off by default).
    /// Sent once while the command runs, never kept in the outbox (a late start would mislead)
    #[arg(long, value_name = "URL")]
    pub start_url: Option<String>,

    /// Method, source and time budget of the pings.
    #[command(flatten)]
    pub options: PingOptions,
}

/// `--timeout`: a duration, not zero (as `timeout` in the config: zero would stop the command
/// at once).
fn parse_timeout(text: &str) -> Result<Duration, String> {
    let timeout = crate::duration::parse(text)?;
    if timeout.is_zero() {
        return Err(format!(
            "\"{text}\" is zero, which would stop the command at once; leave --timeout out for \
             no timeout, or give a positive duration such as \"5m\""
        ));
    }
    Ok(timeout)
}

fn parse_retry_delay(text: &str) -> Result<Duration, String> {
    let delay = crate::duration::parse(text)?;
    if delay > crate::retries::MAX_RETRY_DELAY {
        return Err(format!(
            "\"{text}\" is longer than a day: a wait that long belongs to the next run"
        ));
    }
    Ok(delay)
}

fn parse_code(text: &str) -> Result<i32, String> {
    text.trim()
        .parse::<u8>()
        .map(i32::from)
        .map_err(|_| format!("\"{text}\" is not an exit code (a number from 0 to 255)"))
}

/// Everything resolved before the command starts.
#[derive(Debug)]
struct Plan {
    /// The command, its environment and stdio.
    spec: CommandSpec,
    limits: Limits,
    /// `--retries` and its delays, else the job's.
    retries: Retries,
    success_codes: Vec<i32>,
    /// Pinged when the command succeeds.
    success: Option<Ping>,
    /// The start ping (`--start-url`, else the job's `start_url`), the fail ping
    /// (`--fail-url`, else the job's `fail_url`, with the job's `fail_body`: the output is
    /// then passed through by a copy that keeps its last bytes), their budget and context.
    pings: Pings,
    state_dir: PathBuf,
    /// Where this run's failed writes under `state_dir` are counted (the registry of its own
    /// connections: a run is a process of its own, which shows them nowhere but in its log).
    failures: crate::persist::Failures,
    /// `[agent] outbox_max_entries`.
    outbox_max_entries: usize,
    /// Names the lock: the job, else the ping URL's fingerprint, else the command's.
    lock_key: String,
    /// What is locked, for the message.
    lock_what: String,
    /// A job bound to a check, with API credentials: right after its accepted ping, a period
    /// change held for that ping is sent (`sync::timer`).
    sync: Option<SyncAfterPing>,
    /// With `--job`: the job's name and how many runs its history keeps (the job's
    /// `history`, else `[agent] history`).
    history: Option<(String, usize)>,
}

/// Runs the command; returns the exit code to pass through.
pub(crate) fn run(args: RunArgs, global: &GlobalArgs) -> u8 {
    let want_lock = args.lock;
    let plan = match plan(args, global) {
        Ok(plan) => plan,
        Err(code) => return code,
    };
    let _lock = if want_lock {
        match take_lock(&plan) {
            Ok(lock) => lock,
            Err(code) => return code,
        }
    } else {
        None
    };
    match context::runtime() {
        Ok(runtime) => runtime.block_on(run_plan(plan)),
        Err(code) => code,
    }
}

/// The run lock: `Err` with the exit code when another run holds it; `Ok(None)` (a warning)
/// when the state directory is unusable, since monitoring never stops the job.
fn take_lock(plan: &Plan) -> Result<Option<RunLock>, u8> {
    match RunLock::try_acquire(&plan.state_dir, &plan.lock_key) {
        Ok(lock) => Ok(Some(lock)),
        Err(LockError::Busy { path }) => {
            print_error(format!(
                "{} is still running (lock {}); not starting it again",
                plan.lock_what,
                path.display()
            ));
            Err(exit::FAILURE)
        }
        Err(err) => {
            warn!(error = %err, "running without --lock: the state directory is unusable");
            Ok(None)
        }
    }
}

fn usage(message: impl std::fmt::Display) -> u8 {
    print_error(message);
    exit::USAGE
}

/// Resolves flags, config and environment; `Err` carries the exit code of an argument error.
fn plan(args: RunArgs, global: &GlobalArgs) -> Result<Plan, u8> {
    let method = PingMethod::from(args.ping.options.ping_method);
    let source = args.ping.options.source();
    let (ping_url, fail, start) = check_arguments(&args, method, &source)?;
    let resolved = Lenient::resolve(
        global,
        args.job.as_deref(),
        args.ping.options.ca_file.as_deref(),
    );
    let outbox_max_entries = resolved.outbox_max_entries();
    let sender = resolved.pings();
    let Lenient {
        config,
        state_dir,
        net,
    } = resolved;
    let failures = net.metrics().persist_failures().clone();
    let job = args
        .job
        .as_deref()
        .and_then(|name| find_job(config.as_ref(), name));
    let mut spec = command_spec(&args, config.as_ref(), job)?;
    let start = start.or_else(|| job.and_then(|j| job_start_ping(j, method, &source)));
    let fail = fail.or_else(|| job.and_then(|j| j.start_fail.fail_url.clone()));
    let fail_body = job
        .and_then(crate::job::fail_body_bytes)
        .filter(|_| fail.is_some());
    if let Some(tail_bytes) = fail_body {
        spec.io = crate::process::Io::Tee { tail_bytes };
    }
    let success = match (ping_url, &args.ping.ping_url_file) {
        (Some(ping), _) => Some(ping),
        (None, Some(file)) => file_ping(file, method, &source),
        (None, None) => job
            .and_then(|j| job_ping(j, method, &source, &state_dir))
            .or_else(|| env_ping(method, &source)),
    };
    if success.is_none() {
        debug!("no ping URL (--ping-url, --ping-url-file, --job or {PING_URL_ENV}): nothing will be pinged");
    }
    let (lock_key, lock_what) = lock_identity(args.job.as_deref(), success.as_ref(), &spec);
    let sync = job.and_then(|job| sync_after_ping(job, config.as_ref()?, global, net));
    if let (Some(config), Some(_)) = (&config, fail_body) {
        // The output a fail ping carries is scrubbed of the API key too.
        crate::run::pings::learn_api_key(&config.api.api_key);
    }
    let history = args.job.clone().map(|name| {
        let limit = match (job, &config) {
            (Some(job), _) => job.history,
            (None, Some(config)) => config.agent.history,
            (None, None) => crate::config::defaults::HISTORY,
        };
        (name, limit)
    });
    Ok(Plan {
        sync,
        history,
        retries: retries(&args, job),
        limits: Limits {
            timeout: args.timeout.or(job.and_then(|j| j.timeout)),
            kill_after: args
                .kill_after
                .or(job.map(|j| j.kill_after))
                .unwrap_or(crate::config::defaults::KILL_AFTER),
        },
        failures,
        success_codes: args
            .success_codes
            .clone()
            .or(job.map(|j| j.success_exit_codes.clone()))
            .unwrap_or_else(|| vec![0]),
        spec,
        success,
        pings: Pings {
            start,
            fail,
            fail_body,
            fail_send: job
                .map(|job| crate::job::fail_send(job, args.ping.fail_url.is_none()))
                .unwrap_or_default(),
            method,
            source,
            budget: Budget {
                total: args.ping.options.ping_timeout,
                ..Budget::default()
            },
            sender,
            context: PingContext {
                job: args.job.clone(),
                max_age: crate::config::defaults::outbox_max_age(
                    config.as_ref().and_then(|c| c.agent.outbox_max_age),
                    job,
                ),
            },
            job_span: false,
        },
        state_dir,
        outbox_max_entries,
        lock_key,
        lock_what,
    })
}

/// The flags' retries over the job's: a job's cap shorter than `--retry-delay` gives way to it.
fn retries(args: &RunArgs, job: Option<&Job>) -> Retries {
    let of_job = job.map(|j| j.retries).unwrap_or_default();
    let delay = args.retry_delay.unwrap_or(of_job.delay);
    let job_max = job.map(|j| j.retries.delay_max).filter(|max| *max >= delay);
    Retries::new(
        args.retries.unwrap_or(of_job.retries),
        Some(delay),
        args.retry_delay_max.or(job_max),
    )
}

/// The explicit `--ping-url`, `--fail-url` and `--start-url` (a start ping), validated.
type Explicit = (Option<Ping>, Option<FailUrl>, Option<Ping>);

/// The checks that make `run` refuse to start (exit 2); returns the explicit URLs.
fn check_arguments(args: &RunArgs, method: PingMethod, source: &str) -> Result<Explicit, u8> {
    let explicit = |flag: &str, url: &Option<String>| -> Result<Option<Ping>, u8> {
        url.as_deref()
            .map(|u| Ping::template(u, method, source))
            .transpose()
            .map_err(|err| usage(format!("invalid {flag}: {err}")))
    };
    let fail = args
        .ping
        .fail_url
        .as_deref()
        .map(|u| FailUrl::parse(u).map_err(|problem| InvalidPing::of(u, problem)))
        .transpose()
        .map_err(|err| usage(format!("invalid --fail-url: {err}")))?;
    let pings = (
        explicit("--ping-url", &args.ping.ping_url)?,
        fail,
        explicit("--start-url", &args.ping.start_url)?.map(|p| p.of_kind(PingKind::Start)),
    );
    if let (Some(delay), Some(max)) = (args.retry_delay, args.retry_delay_max) {
        if delay > max {
            return Err(usage(format!(
                "--retry-delay {} is longer than --retry-delay-max {}: give a cap at least as long",
                crate::duration::human_duration(delay),
                crate::duration::human_duration(max)
            )));
        }
    }
    if args.command.is_empty() && args.job.is_none() {
        return Err(usage(
            "no command given: use `heartbeat-agent run [OPTIONS] -- CMD [ARGS...]`",
        ));
    }
    Ok(pings)
}

/// What `--lock` locks, as a file-name-safe key and as words for the message: the job, else
/// the ping URL (by fingerprint: the URL is a secret), else the command line.
fn lock_identity(job: Option<&str>, ping: Option<&Ping>, spec: &CommandSpec) -> (String, String) {
    match (job, ping) {
        (Some(name), _) => (lock_key("job", name), format!("job \"{name}\"")),
        (None, Some(ping)) => (
            format!("url-{}", crate::redact::fingerprint(ping.url())),
            format!("the job pinging {}", ping.redacted()),
        ),
        (None, None) => {
            let argv = format!("{:?} {:?}", spec.program, spec.args);
            (
                format!("cmd-{}", crate::redact::fingerprint(&argv)),
                "this command".to_owned(),
            )
        }
    }
}

fn find_job<'c>(config: Option<&'c Config>, name: &str) -> Option<&'c Job> {
    let config = config?;
    let job = config.job(name);
    if job.is_none() {
        warn!(
            "job \"{name}\" is not in {}; running the command without its settings (see `heartbeat-agent config check`)",
            config.path.display()
        );
    }
    job
}

/// The command line given after `--`, else the job's configured command (with its working
/// directory and `env`); then what every child of a job gains and loses.
fn command_spec(
    args: &RunArgs,
    config: Option<&Config>,
    job: Option<&Job>,
) -> Result<CommandSpec, u8> {
    let mut spec = if !args.command.is_empty() {
        CommandSpec::from_argv(&args.command)
            .ok_or_else(|| usage("empty command: the program name after `--` is empty"))?
    } else {
        let name = args.job.as_deref().unwrap_or_default();
        job.ok_or(crate::job::CommandError::NoCommand)
            .and_then(crate::job::command)
            .map_err(|_| {
                print_error(format!(
                    "no command given and job \"{name}\" has none to run (it needs `command` or `shell` in the config); give one after `--`"
                ));
                exit::CONFIG
            })?
    };
    let secret_vars = config.map(Config::secret_env_vars).unwrap_or_default();
    crate::job::hygiene(&mut spec, args.job.as_deref(), job, &secret_vars);
    Ok(spec)
}

/// Runs the planned command through the run pipeline; returns the exit status.
async fn run_plan(plan: Plan) -> u8 {
    let signals = Signals::install();
    let outbox = Outbox::new(&plan.state_dir, plan.outbox_max_entries, &plan.failures);
    // A container's entrypoint (PID 1) inherits every orphan of the command's tree: they are
    // reaped while the command runs, never its own status (see process::children).
    let reaping = children::inherits_orphans();
    let children = Arc::new(Children::new(reaping));
    let reaper = reaping.then(|| {
        let cancel = CancellationToken::new();
        let task = tokio::spawn(children::reap(Arc::clone(&children), cancel.clone()));
        (cancel, task)
    });
    let mut runner = Wrapped {
        plan: &plan,
        children: &children,
        outbox: &outbox,
        signals,
        reaper,
        stop: None,
        recorded: None,
    };
    let report = crate::run::run_with_pings(&mut runner, &plan.retries, &plan.pings, &outbox).await;
    report.ended.end.exit_status()
}

/// Supervises `running`, forwarding the signals the wrapper receives to the command's group
/// (the signals are its requests: [`Signals`]' `ChildRequests`).
async fn supervise(
    running: process::Running,
    limits: Limits,
    signals: &mut Signals,
) -> ChildOutcome {
    running.supervise(limits, signals).await
}

fn report(outcome: &ChildOutcome, plan: &Plan) {
    let timeout = plan.limits.timeout.unwrap_or_default();
    match &outcome.end {
        RunEnd::TimedOut { killed: false, .. } => {
            warn!(timeout = ?timeout, "command timed out and ended after SIGTERM; counted as a failure (exit 124)")
        }
        RunEnd::TimedOut { killed: true, .. } => warn!(
            timeout = ?timeout,
            kill_after = ?plan.limits.kill_after,
            "command timed out and was killed with SIGKILL; counted as a failure (exit 137)"
        ),
        RunEnd::Ended(end) => debug!(end = %end, elapsed = ?outcome.elapsed, "command finished"),
        _ => debug!(end = ?outcome.end, elapsed = ?outcome.elapsed, "command finished"),
    }
}

mod after_ping;
use after_ping::{sync_after_ping, SyncAfterPing};
mod pings;
use pings::{env_ping, file_ping, job_ping, job_start_ping};
mod signals;
use signals::Signals;
mod wrapped;
use wrapped::Wrapped;

#[cfg(test)]
mod tests;
