//! `heartbeat-agent history [JOB]`: what the jobs' last runs did, newest first, as a table (one
//! timeline across jobs) or as JSON (docs/history.md). It reads the history files under the
//! state directory, so it works with no daemon running; with `--url`, or when the files cannot
//! be read by this user (the daemon's state directory is private to it), it asks the daemon's
//! status endpoint (`GET /jobs/{name}/runs`) instead. In a `[cluster]` it reads the runs the
//! other nodes copied into etcd too and merges them in ([`share_cluster`]); when etcd does not
//! answer, it shows this node's runs and says so on stderr (exit 0). A run's RESULT is said in the words of
//! every view ([`crate::status::state::run_phrase`]).

use std::io::Write;
use std::time::Duration;

use chrono::{DateTime, Local, NaiveDate, TimeZone, Utc};
use clap::Args;

use super::context;
use super::{print_error, GlobalArgs};
use crate::config::{ClusterSettings, Config};
use crate::duration::human_duration;
use crate::exit;
use crate::history::{ascii_wanted, glyph, History, JobRuns, Run};
use crate::redact::Secret;
use crate::status::client::Endpoint;

/// Show the last runs of the jobs (newest first): when they ran, how they ended, their ping.
///
/// Reads the run history under the state directory (no daemon needed); with --url, or when the
/// files are not readable by this user, asks the daemon's status endpoint. Exit status: 0, 1
/// when the history cannot be read or the job is unknown, 2 for a bad option, 78 when the
/// config does not load.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Only this job
    #[arg(value_name = "JOB")]
    pub job: Option<String>,
    /// At most this many runs per job
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub limit: usize,
    /// Only runs that started at or after this time: an RFC 3339 time
    /// (2026-11-26T03:00:00Z), a date (2026-11-26, local midnight) or a duration ago (12h)
    #[arg(long, value_name = "TIME", value_parser = parse_since)]
    pub since: Option<DateTime<Utc>>,
    /// Only runs that did not succeed
    #[arg(long)]
    pub failed: bool,
    /// Print JSON: {"job", "runs"} for one job, {"jobs": [...]} for all
    #[arg(long)]
    pub json: bool,
    /// Ask this status endpoint (http://HOST:PORT or a unix socket path) instead of reading
    /// the files
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Draw outcomes with ASCII (+ x -) instead of ✓ ✗ · [default: when the locale is not
    /// UTF-8]
    #[arg(long)]
    pub ascii: bool,
}

/// `--since`: a time, a date or a duration ago.
fn parse_since(text: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&Utc));
    }
    if let Ok(day) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        let midnight = day.and_hms_opt(0, 0, 0).unwrap_or_default();
        if let Some(at) = Local.from_local_datetime(&midnight).earliest() {
            return Ok(at.with_timezone(&Utc));
        }
    }
    match crate::duration::parse(text) {
        Ok(ago) => Ok(Utc::now() - chrono::TimeDelta::from_std(ago).unwrap_or_default()),
        Err(_) => Err(format!(
            "{text:?} is not a time: give an RFC 3339 time (2026-11-26T03:00:00Z), a date \
             (2026-11-26) or a duration ago (12h)"
        )),
    }
}

/// Runs `history`; returns the exit code.
pub(crate) fn run(args: HistoryArgs, global: &GlobalArgs) -> u8 {
    let jobs = match &args.url {
        Some(url) => from_endpoint(url, &args, global),
        None => {
            let config = match config(global) {
                Ok(config) => config,
                Err(code) => return code,
            };
            from_files(&args, global, config.as_ref())
        }
    };
    let mut jobs = match jobs {
        Ok(jobs) => jobs,
        Err((code, message)) => {
            print_error(message);
            return code;
        }
    };
    // Said once, whether the files or an endpoint told it.
    if let Some(missing) = jobs.iter().find_map(|j| j.cluster_unavailable.as_ref()) {
        print_error(format!(
            "{missing}; only this node's runs are shown (ask again once etcd answers)"
        ));
    }
    for job in &mut jobs {
        job.runs.retain(|run| {
            args.since.map_or(true, |since| run.run.started >= since)
                && !(args.failed && run.success())
        });
        job.runs.truncate(args.limit);
    }
    let text = if args.json {
        let json = match (&args.job, jobs.as_slice()) {
            (Some(_), [one]) => serde_json::to_string_pretty(one),
            _ => serde_json::to_string_pretty(&serde_json::json!({ "jobs": jobs })),
        };
        format!("{}\n", json.unwrap_or_default())
    } else {
        table(&jobs, args.job.is_none(), ascii_wanted(args.ascii))
    };
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    exit::OK
}

/// The config, which names the jobs and the state directory: none when none is named and none
/// is at the default place (the default state directory is read), else it must load, as for
/// every command that reads it (exit 78 with its problems). Its warnings are not this
/// command's business (`config check` says them).
fn config(global: &GlobalArgs) -> Result<Option<Config>, u8> {
    let path = crate::paths::config_file(global.config.as_ref());
    if !context::config_wanted(global, &path) {
        return Ok(None);
    }
    match Config::load_for_reading(&path) {
        Ok(loaded) => Ok(Some(loaded.config)),
        Err(err) => Err(context::invalid_config(
            &path,
            &err,
            ": no history was read",
        )),
    }
}

/// The runs from the files under the state directory; when this user may not read them, from
/// the configured endpoint.
fn from_files(
    args: &HistoryArgs,
    global: &GlobalArgs,
    config: Option<&Config>,
) -> Result<Vec<JobRuns>, (u8, String)> {
    let state_dir = match config {
        Some(config) => config.state_dir(global.state_dir.as_deref()),
        None => crate::paths::state_dir(global.state_dir.as_deref(), None),
    };
    let cluster = config
        .and_then(|c| c.cluster.as_ref().map(|s| (c, s)))
        .and_then(|settings| cluster_runs(settings, args.job.as_deref()));
    // A reader: it writes nothing, so its count of failed writes stays unread.
    let failures = crate::persist::Failures::default();
    let history = History::with_cluster(&state_dir, cluster, &failures);
    // The ping URLs and tokens sync learned are secrets too: a run may have printed one before
    // they were learned, and its record is scrubbed as it is read.
    for job in crate::sync::state::jobs(&state_dir) {
        let _ = crate::sync::state::load(&state_dir, &job);
    }
    let names = names(args.job.as_deref(), config, &history)?;
    let mut jobs = Vec::new();
    for name in names {
        let limit = config
            .and_then(|c| c.job(&name))
            .map_or(crate::config::defaults::MAX_HISTORY, |j| j.history);
        match history.runs(&name, limit) {
            Ok(runs) => jobs.push(JobRuns {
                job: name,
                runs,
                cluster_unavailable: history.cluster_unavailable(),
            }),
            Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => {
                return from_endpoint_of_config(args, global).map_err(|(code, message)| {
                    (
                        code,
                        format!(
                            "cannot read the history in {}: permission denied, and the daemon's \
                             endpoint did not answer either ({message}); run as a member of \
                             group heartbeat-agent or with sudo",
                            history.dir().display()
                        ),
                    )
                });
            }
            Err(err) => {
                return Err((
                    exit::FAILURE,
                    format!("cannot read the history of job \"{name}\": {err}"),
                ))
            }
        }
    }
    Ok(jobs)
}

/// In a `[cluster]`, reads the runs of `job` (of every job when `None`) that the cluster's
/// nodes copied into etcd, once, for the history to merge in (docs/history.md, "In a
/// cluster"). When etcd does not answer within [`CLUSTER_READ`], the history says so
/// ([`History::cluster_unavailable`]) and shows this node's runs; `None` (said on stderr) when
/// etcd cannot even be asked.
fn cluster_runs(
    (config, settings): (&Config, &ClusterSettings),
    job: Option<&str>,
) -> Option<std::sync::Arc<dyn crate::history::Shared>> {
    let net = crate::net::Net::new(config.api.net(None));
    let keys = crate::cluster::Keys::new(&settings.name);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let shared = match (crate::cluster::Etcd::new(settings, &net), runtime) {
        (Ok(etcd), Ok(runtime)) => runtime.block_on(crate::cluster::runs::read_once(
            etcd,
            keys,
            job,
            CLUSTER_READ,
        )),
        (Err(err), _) => {
            print_error(format!(
                "the runs of the cluster's other nodes cannot be read: {err}; only this node's \
                 runs are shown"
            ));
            return None;
        }
        (_, Err(err)) => {
            print_error(format!(
                "the runs of the cluster's other nodes cannot be read: cannot start the async \
                 runtime: {err}; only this node's runs are shown"
            ));
            return None;
        }
    };
    Some(std::sync::Arc::new(shared))
}

/// How long `history` waits for etcd's answer in a cluster.
const CLUSTER_READ: Duration = Duration::from_secs(3);

/// The jobs to show: `job` (known to the config or with a history), else every job of the
/// config, then any other job that still has a history.
fn names(
    job: Option<&str>,
    config: Option<&Config>,
    history: &History,
) -> Result<Vec<String>, (u8, String)> {
    let kept = history.jobs();
    if let Some(job) = job {
        let known = config.is_some_and(|c| c.job(job).is_some()) || kept.iter().any(|k| k == job);
        // Absolute, so the message names the place whatever the reader's directory.
        let dir = std::path::absolute(history.dir()).unwrap_or_else(|_| history.dir().to_owned());
        return if known {
            Ok(vec![job.to_owned()])
        } else {
            Err((
                exit::FAILURE,
                format!(
                    "no job named {job:?} in the config and no history of it in {}",
                    dir.display()
                ),
            ))
        };
    }
    let mut names: Vec<String> = config
        .map(|c| c.jobs.iter().map(|j| j.name.clone()).collect())
        .unwrap_or_default();
    for name in kept {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    Ok(names)
}

/// The runs from the endpoint named in the config.
fn from_endpoint_of_config(
    args: &HistoryArgs,
    global: &GlobalArgs,
) -> Result<Vec<JobRuns>, (u8, String)> {
    let (endpoint, token, expected) = context::endpoint(None, global)?;
    fetch(&endpoint, token.as_ref(), &expected, args)
}

/// The runs from the endpoint at `url`.
fn from_endpoint(
    url: &str,
    args: &HistoryArgs,
    global: &GlobalArgs,
) -> Result<Vec<JobRuns>, (u8, String)> {
    let (endpoint, token, expected) = context::endpoint(Some(url), global)?;
    fetch(&endpoint, token.as_ref(), &expected, args)
}

/// `GET /jobs/{name}/runs` for `args.job`, else for every job of `GET /status`, from the daemon
/// `expected` (another daemon is refused, as `status` refuses it).
fn fetch(
    endpoint: &Endpoint,
    token: Option<&Secret>,
    expected: &crate::status::owner::Expected,
    args: &HistoryArgs,
) -> Result<Vec<JobRuns>, (u8, String)> {
    let get = |path: &str| -> Result<String, (u8, String)> {
        match endpoint.request("GET", path, token.map(Secret::expose), context::TIMEOUT) {
            Ok(answer) if answer.status == 200 => {
                expected
                    .check(&endpoint.shown(), &answer)
                    .map_err(|refused| (exit::FAILURE, refused.to_string()))?;
                Ok(answer.body)
            }
            Ok(answer) => Err((
                exit::FAILURE,
                format!(
                    "the status endpoint answered HTTP {} to {path}: {}",
                    answer.status,
                    answer.body.trim()
                ),
            )),
            Err(err) => Err((exit::FAILURE, err.to_string())),
        }
    };
    let unreadable = |err: serde_json::Error| {
        (
            exit::FAILURE,
            format!("the status endpoint sent a document this version cannot read: {err}"),
        )
    };
    let names = match &args.job {
        Some(job) => vec![job.clone()],
        None => {
            let doc: crate::status::doc::StatusDoc =
                serde_json::from_str(&get("/status")?).map_err(unreadable)?;
            doc.jobs.into_iter().map(|j| j.name).collect()
        }
    };
    names
        .iter()
        .map(|name| {
            let body = get(&format!("/jobs/{name}/runs?limit={}", args.limit))?;
            serde_json::from_str(&body).map_err(unreadable)
        })
        .collect()
}

/// One timeline, newest first: with `job_column`, every job's runs merged by start time.
fn table(jobs: &[JobRuns], job_column: bool, ascii: bool) -> String {
    let mut runs: Vec<(&str, &Run)> = jobs
        .iter()
        .flat_map(|j| j.runs.iter().map(move |r| (j.job.as_str(), r)))
        .collect();
    runs.sort_by_key(|(_, run)| std::cmp::Reverse(run.run.started));
    if runs.is_empty() {
        return "no runs recorded\n".to_owned();
    }
    let nodes = runs.iter().any(|(_, r)| r.node.is_some());
    let mut header = vec!["STARTED", "DURATION", "RESULT", "PING"];
    if job_column {
        header.insert(0, "JOB");
    }
    if nodes {
        header.push("NODE");
    }
    header.push("OUTPUT");
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|(job, run)| {
            let mut row = vec![
                run.run
                    .started
                    .with_timezone(&Local)
                    .format("%Y-%m-%d %H:%M:%S")
                    .to_string(),
                human_duration(Duration::from_millis(run.run.duration_ms)),
                result(run, ascii),
                ping(run),
            ];
            if job_column {
                row.insert(0, (*job).to_owned());
            }
            if nodes {
                row.push(run.node.clone().unwrap_or_else(|| "-".to_owned()));
            }
            row.push(last_line(&run.run.output_tail));
            row
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(&widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}  "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The run's state in the words of every view (`crate::status::state::run_phrase`) after its
/// mark: `✓ success`, `✗ failed (exit 3)`, `✗ timed_out after 2 attempts`...
fn result(run: &Run, ascii: bool) -> String {
    let doc = &run.run;
    let phrase =
        crate::status::state::run_phrase(&doc.outcome, doc.exit_code, doc.signal, doc.attempts);
    format!("{} {phrase}", glyph(&doc.outcome, ascii))
}

/// The final ping: `HTTP 200`, `fail ping HTTP 200`, `queued: connection refused`, `pending`
/// (its outcome not recorded), `-`.
fn ping(run: &Run) -> String {
    let Some(ping) = &run.ping else {
        return if run.ping_pending { "pending" } else { "-" }.to_owned();
    };
    let kind = match ping.kind {
        crate::ping::PingKind::Success => "",
        crate::ping::PingKind::Start => "start ping ",
        crate::ping::PingKind::Fail => "fail ping ",
    };
    let queued = if ping.outbox { "queued: " } else { "" };
    crate::logging::printable(&format!("{queued}{kind}{}", ping.detail)).into_owned()
}

/// The last non-blank line of an output tail, at most 60 characters, control characters
/// escaped.
fn last_line(tail: &str) -> String {
    let line = tail
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let line = crate::logging::printable(line.trim()).into_owned();
    if line.chars().count() > 60 {
        let cut: String = line.chars().take(59).collect();
        format!("{cut}…")
    } else {
        line
    }
}
