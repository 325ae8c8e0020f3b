//! `GET /metrics`: the Prometheus text exposition format (version 0.0.4), written by hand.
//!
//! Run counters, the attempts of runs (with `retries`) and the duration histogram are kept by
//! [`RunMetrics`], an after-run hook of the daemon; everything else is read at scrape time (the
//! daemon's view of its jobs and reloads, outbox, sync status, API request counters, the rate
//! limiter, the process's own resources, the log lines dropped and the failed token attempts). Label values are escaped (`\\`, `\"`, `\n`).
//!
//! Every label set an alert rule of docs/status.md selects exists from the first scrape: each
//! configured job has `heartbeat_agent_runs_total` for every outcome and
//! `heartbeat_agent_pings_total` for both results (zero until counted), and
//! `heartbeat_agent_last_success_timestamp_seconds` (the daemon's start until its first
//! success), so a job that has failed ever since a restart still trips "no success for N
//! hours" instead of having no series at all.
//!
//! The standard `process_*` metrics of Prometheus clients are read from the kernel at scrape
//! time: CPU time from `getrusage`, resident and virtual size from `/proc/self/status`, open
//! descriptors from `/proc/self/fd`, the limit from `RLIMIT_NOFILE`; the start time is the
//! daemon's. A value that cannot be read is left out (its family stays, empty).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};

use chrono::{DateTime, Utc};

use super::cluster::ClusterView;
use crate::config::Job;
use crate::daemon::{DaemonView, JobView};
use crate::ping::outbox::Stats;
use crate::run::AfterRun;
use crate::run::RunRecord;
use crate::run_end::RunOutcome;

mod cluster;
mod process;
mod withstood;

/// Upper bounds (seconds) of the run duration histogram's buckets.
pub(crate) const DURATION_BUCKETS: [f64; 12] = [
    0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 10800.0,
];

/// Per-job counters since the daemon started.
#[derive(Debug, Default, Clone)]
struct JobCounters {
    outcomes: BTreeMap<&'static str, u64>,
    pings: BTreeMap<&'static str, u64>,
    last_success: Option<DateTime<Utc>>,
    buckets: [u64; DURATION_BUCKETS.len()],
    duration_sum: f64,
    duration_count: u64,
    /// Attempts of every run counted (retries included).
    attempts: u64,
    /// Attempts of the last run counted.
    last_attempts: u32,
}

/// Counts runs by job and outcome, their durations and pings: told about every run by the
/// daemon ([`AfterRun`]), reading the run's record from the daemon's view.
#[derive(Debug, Default)]
pub(crate) struct RunMetrics {
    daemon: OnceLock<DaemonView>,
    jobs: Mutex<BTreeMap<String, JobCounters>>,
}

impl RunMetrics {
    /// Where the runs' records are read (set when the status task starts, before any run ends).
    pub(crate) fn attach(&self, daemon: DaemonView) {
        let _ = self.daemon.set(daemon);
    }

    fn counters(&self) -> BTreeMap<String, JobCounters> {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn record(&self, job: &str, run: &RunRecord, ping: Option<bool>) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        // The job's counters exist after its first run: no new key (an allocation) per run.
        if !jobs.contains_key(job) {
            jobs.insert(job.to_owned(), JobCounters::default());
        }
        let Some(counters) = jobs.get_mut(job) else {
            return;
        };
        *counters.outcomes.entry(run.outcome.as_str()).or_default() += 1;
        if run.success() {
            counters.last_success = Some(run.ended);
        }
        if let Some(accepted) = ping {
            let result = if accepted { "accepted" } else { "failed" };
            *counters.pings.entry(result).or_default() += 1;
        }
        let secs = run.duration.as_secs_f64();
        for (bucket, bound) in counters.buckets.iter_mut().zip(DURATION_BUCKETS) {
            if secs <= bound {
                *bucket += 1;
            }
        }
        counters.duration_sum += secs;
        counters.duration_count += 1;
        counters.attempts += u64::from(run.attempts);
        counters.last_attempts = run.attempts;
    }
}

impl AfterRun for RunMetrics {
    fn after_run(&self, job: &Job, _fire: DateTime<Utc>, ping_accepted: bool) {
        let Some(state) = self.daemon.get().and_then(|d| d.job(&job.name)) else {
            return;
        };
        let Some(run) = state.last_run else {
            return;
        };
        // A ping of this run happened when the job's last ping is not older than the run.
        let ping = state
            .last_ping
            .filter(|p| p.at >= run.started)
            .map(|_| ping_accepted);
        self.record(&job.name, &run, ping);
    }
}

/// What a scrape reads besides the run counters.
#[derive(Debug)]
pub(crate) struct Scrape<'a> {
    /// Every job the daemon knows, by name, as it was at the scrape.
    pub jobs: &'a [(String, JobView)],
    /// Reloads since start by result (`ok`, `invalid`).
    pub reloads: [(&'static str, u64); 2],
    /// Seconds since the Unix epoch at which the daemon started.
    pub start_time: f64,
    /// Outbox entries pending now.
    pub outbox_depth: usize,
    /// The outbox's counters.
    pub outbox: Stats,
    /// Bound jobs by their check's state (`crate::status::state::CheckState`), when sync runs.
    pub sync: Option<BTreeMap<&'static str, u64>>,
    /// Sync passes that found the check edited on the service (drift), by job, when sync runs.
    pub sync_drift: Option<BTreeMap<String, u64>>,
    /// Bound jobs whose check the service does not know (`missing` in `/status`).
    pub checks_missing: u64,
    /// The pauses in force now, by job: their deadline (`None`: until `resume`).
    pub paused: BTreeMap<String, Option<DateTime<Utc>>>,
    /// In a cluster: this agent's role, the leader, its etcd connection and its claims.
    pub cluster: Option<&'a dyn ClusterView>,
}

/// Prometheus text of one scrape.
pub(crate) fn render(runs: &RunMetrics, scrape: &Scrape<'_>) -> String {
    let mut out = Text::default();
    out.family(
        "heartbeat_agent_build_info",
        "gauge",
        "The agent's version (always 1).",
    );
    out.sample(
        "heartbeat_agent_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1.0,
    );
    out.family(
        "heartbeat_agent_start_time_seconds",
        "gauge",
        "When the daemon started, in seconds since the Unix epoch.",
    );
    out.sample("heartbeat_agent_start_time_seconds", &[], scrape.start_time);
    let counters = runs.counters();
    run_families(&mut out, &counters, scrape);
    outbox_families(&mut out, scrape);
    if let Some(sync) = &scrape.sync {
        out.family(
            "heartbeat_agent_sync_jobs",
            "gauge",
            "Bound jobs by the state of their check (in_sync, pending, failed, missing, owned_by_other), as /status tells it.",
        );
        for state in crate::status::state::CheckState::ALL.map(|s| s.as_str()) {
            let n = sync.get(state).copied().unwrap_or(0);
            out.sample("heartbeat_agent_sync_jobs", &[("state", state)], n as f64);
        }
    }
    if let Some(drift) = &scrape.sync_drift {
        out.family(
            "heartbeat_agent_sync_drift_total",
            "counter",
            "Sync passes that found the job's check edited on the service (drift).",
        );
        for (job, n) in drift {
            out.sample(
                "heartbeat_agent_sync_drift_total",
                &[("job", job.as_str())],
                *n as f64,
            );
        }
    }
    out.family(
        "heartbeat_agent_checks_missing",
        "gauge",
        "Bound jobs whose check the service does not know (a 404 to a ping, a PUT or a read).",
    );
    out.sample(
        "heartbeat_agent_checks_missing",
        &[],
        scrape.checks_missing as f64,
    );
    if let Some(view) = scrape.cluster {
        cluster::role_families(&mut out, view);
    }
    api_families(&mut out);
    tls_families(&mut out);
    if let Some(view) = scrape.cluster {
        cluster::claim_families(&mut out, view);
    }
    out.family(
        "heartbeat_agent_config_reloads_total",
        "counter",
        "Reloads of the configuration since start (SIGHUP or a change of the file), by result: ok, or invalid (the running configuration kept).",
    );
    for (result, n) in scrape.reloads {
        out.sample(
            "heartbeat_agent_config_reloads_total",
            &[("result", result)],
            n as f64,
        );
    }
    process::families(&mut out, scrape.start_time);
    withstood::families(&mut out);
    out.family(
        "heartbeat_agent_persist_failures_total",
        "counter",
        "Writes under the state directory that failed (full or read-only disk), by what was written.",
    );
    for (what, n) in crate::persist::snapshot() {
        out.sample(
            "heartbeat_agent_persist_failures_total",
            &[("what", what)],
            n as f64,
        );
    }
    out.family(
        "heartbeat_agent_checks_created_total",
        "counter",
        "Checks sync created for jobs with `create = true` since start, by job and reason: new (no check carried the job's tag), or deleted (its check was deleted on the service).",
    );
    for (job, reason, n) in crate::sync::created::created_counts() {
        out.sample(
            "heartbeat_agent_checks_created_total",
            &[("job", job.as_str()), ("reason", reason)],
            n as f64,
        );
    }
    out.family(
        "heartbeat_agent_check_owner_conflicts_total",
        "counter",
        "Lookups of a job's created check (create = true) that found it owned by another agent (its owner tag names another identity): the job does not ping it.",
    );
    for (job, n) in crate::sync::owner::conflict_counts() {
        out.sample(
            "heartbeat_agent_check_owner_conflicts_total",
            &[("job", job.as_str())],
            n as f64,
        );
    }
    out.0
}

/// Whether each job is paused (`pause`), and until when.
fn pause_families(out: &mut Text, jobs: &[(String, JobView)], scrape: &Scrape<'_>) {
    out.family(
        "heartbeat_agent_paused",
        "gauge",
        "1 while a job is paused for maintenance (its check deactivated), else 0.",
    );
    for (name, _) in jobs {
        let paused = scrape.paused.contains_key(name);
        out.sample(
            "heartbeat_agent_paused",
            &[("job", name)],
            f64::from(u8::from(paused)),
        );
    }
    out.family(
        "heartbeat_agent_paused_until_timestamp_seconds",
        "gauge",
        "When each paused job's pause ends by itself (only pauses with --for or --until).",
    );
    for (name, until) in &scrape.paused {
        if let Some(until) = until {
            out.sample(
                "heartbeat_agent_paused_until_timestamp_seconds",
                &[("job", name)],
                until.timestamp() as f64,
            );
        }
    }
}

fn run_families(out: &mut Text, counters: &BTreeMap<String, JobCounters>, scrape: &Scrape<'_>) {
    out.family("heartbeat_agent_runs_total", "counter", "Finished runs by job and outcome (and fires skipped because a run was still going) since start.");
    let jobs = scrape.jobs;
    let none = JobCounters::default();
    for (name, job) in jobs {
        let c = counters.get(name).unwrap_or(&none);
        for outcome in RunOutcome::ALL.map(RunOutcome::as_str) {
            let n = c.outcomes.get(outcome).copied().unwrap_or(0);
            out.sample(
                "heartbeat_agent_runs_total",
                &[("job", name), ("outcome", outcome)],
                n as f64,
            );
        }
        out.sample(
            "heartbeat_agent_runs_total",
            &[("job", name), ("outcome", "skipped")],
            job.skipped as f64,
        );
    }
    out.family(
        "heartbeat_agent_running",
        "gauge",
        "Runs in progress by job.",
    );
    for (name, job) in jobs {
        out.sample(
            "heartbeat_agent_running",
            &[("job", name)],
            job.running as f64,
        );
    }
    pause_families(out, jobs, scrape);
    out.family(
        "heartbeat_agent_last_success_timestamp_seconds",
        "gauge",
        "When each job's last successful run ended; the daemon's start for a job with no success since.",
    );
    for (name, _) in jobs {
        let last = counters.get(name).and_then(|c| c.last_success);
        let at = last.map_or(scrape.start_time, |t| t.timestamp_millis() as f64 / 1000.0);
        out.sample(
            "heartbeat_agent_last_success_timestamp_seconds",
            &[("job", name)],
            at,
        );
    }
    attempt_families(out, counters, jobs);
    let hist = "heartbeat_agent_run_duration_seconds";
    out.family(hist, "histogram", "Run durations by job.");
    for (name, c) in counters {
        for (bound, n) in DURATION_BUCKETS.iter().zip(c.buckets) {
            out.sample(
                &format!("{hist}_bucket"),
                &[("job", name), ("le", &bound.to_string())],
                n as f64,
            );
        }
        out.sample(
            &format!("{hist}_bucket"),
            &[("job", name), ("le", "+Inf")],
            c.duration_count as f64,
        );
        out.sample(&format!("{hist}_sum"), &[("job", name)], c.duration_sum);
        out.sample(
            &format!("{hist}_count"),
            &[("job", name)],
            c.duration_count as f64,
        );
    }
    out.family(
        "heartbeat_agent_pings_total",
        "counter",
        "Success pings sent after runs, by job and result (failed ones wait in the outbox).",
    );
    for (name, _) in jobs {
        let c = counters.get(name).unwrap_or(&none);
        for result in ["accepted", "failed"] {
            let n = c.pings.get(result).copied().unwrap_or(0);
            out.sample(
                "heartbeat_agent_pings_total",
                &[("job", name), ("result", result)],
                n as f64,
            );
        }
    }
}

/// Attempts per run: a run that needed its retries shows as more attempts than runs.
fn attempt_families(
    out: &mut Text,
    counters: &BTreeMap<String, JobCounters>,
    jobs: &[(String, JobView)],
) {
    let families = [
        (
            "heartbeat_agent_job_attempts_total",
            "counter",
            "Attempts of finished runs by job since start (a run retried twice made 3).",
        ),
        (
            "heartbeat_agent_job_last_run_attempts",
            "gauge",
            "Attempts the last finished run of each job made (only jobs that finished a run).",
        ),
    ];
    for (n, (family, kind, help)) in families.into_iter().enumerate() {
        out.family(family, kind, help);
        for (name, _) in jobs {
            let c = counters.get(name);
            let value = match (n, c) {
                (0, _) => c.map_or(0, |c| c.attempts) as f64,
                (_, Some(c)) if c.duration_count > 0 => f64::from(c.last_attempts),
                _ => continue,
            };
            out.sample(family, &[("job", name)], value);
        }
    }
}

fn outbox_families(out: &mut Text, scrape: &Scrape<'_>) {
    out.family(
        "heartbeat_agent_outbox_depth",
        "gauge",
        "Pings waiting in the outbox.",
    );
    out.sample(
        "heartbeat_agent_outbox_depth",
        &[],
        scrape.outbox_depth as f64,
    );
    let s = &scrape.outbox;
    out.family(
        "heartbeat_agent_outbox_delivered_total",
        "counter",
        "Pending pings delivered later (all processes sharing the state directory).",
    );
    out.sample(
        "heartbeat_agent_outbox_delivered_total",
        &[],
        s.delivered as f64,
    );
    out.family(
        "heartbeat_agent_outbox_recovered_total",
        "counter",
        "Requests sent again for a ping whose earlier request left unanswered (its process \
         died or stopped mid-delivery, or it timed out): each may be one duplicate at the ping \
         host.",
    );
    out.sample(
        "heartbeat_agent_outbox_recovered_total",
        &[],
        s.recovered as f64,
    );
    out.family(
        "heartbeat_agent_outbox_dropped_total",
        "counter",
        "Pending pings dropped, by reason.",
    );
    for (reason, n) in [
        ("failed_run", s.dropped_failed_run),
        ("expired", s.dropped_expired),
        ("overflow", s.dropped_overflow),
        ("permanent", s.permanent),
        ("corrupt", s.corrupt),
        ("purged", s.purged),
    ] {
        out.sample(
            "heartbeat_agent_outbox_dropped_total",
            &[("reason", reason)],
            n as f64,
        );
    }
}

fn tls_families(out: &mut Text) {
    out.family(
        "heartbeat_agent_tls_errors_total",
        "counter",
        "Connections refused because the server's certificate is not trusted, by host.",
    );
    for (host, n) in crate::net::trust::error_counts() {
        out.sample(
            "heartbeat_agent_tls_errors_total",
            &[("host", &host)],
            n as f64,
        );
    }
}

fn api_families(out: &mut Text) {
    out.family(
        "heartbeat_agent_api_requests_total",
        "counter",
        "API request attempts by operation and HTTP status (error: no answer).",
    );
    for (op, status, n) in crate::api::counters::snapshot() {
        out.sample(
            "heartbeat_agent_api_requests_total",
            &[("operation", op), ("status", &status)],
            n as f64,
        );
    }
    let limiter = crate::api::RateLimiter::shared().stats();
    out.family(
        "heartbeat_agent_rate_limit_waits_total",
        "counter",
        "API requests that waited for the shared rate limiter.",
    );
    out.sample(
        "heartbeat_agent_rate_limit_waits_total",
        &[],
        limiter.waited as f64,
    );
    out.family(
        "heartbeat_agent_rate_limit_wait_seconds_total",
        "counter",
        "Time spent waiting for the shared rate limiter.",
    );
    out.sample(
        "heartbeat_agent_rate_limit_wait_seconds_total",
        &[],
        limiter.wait_time.as_secs_f64(),
    );
}

/// The exposition text being written.
#[derive(Default)]
struct Text(String);

impl Text {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.0.push_str(name);
        if !labels.is_empty() {
            let parts: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
                .collect();
            let _ = write!(self.0, "{{{}}}", parts.join(","));
        }
        let _ = writeln!(self.0, " {value}");
    }
}

/// A label value with `\`, `"` and newlines escaped.
pub(crate) fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        let mut text = Text::default();
        text.sample("m", &[("job", "x\"y")], 1.5);
        assert_eq!(text.0, "m{job=\"x\\\"y\"} 1.5\n");
    }

    #[test]
    fn a_missing_check_is_a_sync_state_of_its_own() {
        let scrape = Scrape {
            jobs: &[],
            reloads: [("ok", 0), ("invalid", 0)],
            start_time: 0.0,
            outbox_depth: 0,
            outbox: Stats::default(),
            sync: Some(BTreeMap::from([("in_sync", 2), ("missing", 1)])),
            sync_drift: Some(BTreeMap::from([("backup".to_owned(), 3)])),
            checks_missing: 1,
            paused: BTreeMap::new(),
            cluster: None,
        };
        let text = render(&RunMetrics::default(), &scrape);
        for line in [
            "heartbeat_agent_sync_jobs{state=\"in_sync\"} 2",
            "heartbeat_agent_sync_drift_total{job=\"backup\"} 3",
            "heartbeat_agent_checks_missing 1",
            "heartbeat_agent_sync_jobs{state=\"failed\"} 0",
            "heartbeat_agent_sync_jobs{state=\"missing\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
    }

    #[test]
    fn durations_fill_cumulative_buckets() {
        let metrics = RunMetrics::default();
        let now = Utc::now();
        let run = RunRecord {
            scheduled: now,
            started: now,
            ended: now,
            duration: std::time::Duration::from_secs(2),
            end: crate::run_end::RunEnd::Ended(crate::run_end::ProcessEnd::Exited(0)),
            outcome: crate::run_end::RunOutcome::Success,
            output_tail: String::new(),
            attempts: 3,
            run_id: crate::run::RunId::fixed(1),
        };
        metrics.record("j", &run, Some(true));
        metrics.record("j", &RunRecord { attempts: 1, ..run }, Some(true));
        let c = &metrics.counters()["j"];
        assert_eq!((c.attempts, c.last_attempts), (4, 1));
        assert_eq!(&c.buckets[..4], &[0, 0, 0, 2]);
        assert_eq!(c.buckets[DURATION_BUCKETS.len() - 1], 2);
        assert_eq!(c.outcomes["success"], 2);
        assert_eq!(c.pings["accepted"], 2);
    }
}
