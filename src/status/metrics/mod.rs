//! `GET /metrics`: every family of one scrape, in the Prometheus text exposition format
//! (`text`).
//!
//! Run counters, the attempts of runs (with `retries`) and the duration histogram are kept by
//! [`RunMetrics`] (`runs`), an after-run hook of the daemon; everything else is read at scrape
//! time (the daemon's view of its jobs and reloads, outbox, sync status, API request counters,
//! the rate limiter, in a cluster its view (`cluster`), the process's own resources
//! (`process`), the log lines dropped and the failed token attempts (`withstood`)).
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

use chrono::{DateTime, Utc};

use super::cluster::ClusterView;
use crate::daemon::JobView;
use crate::metrics_registry::MetricsRegistry;
use crate::ping::outbox::Stats;

mod cluster;
mod outbox_age;
mod process;
mod runs;
mod text;
mod withstood;

pub(crate) use runs::RunMetrics;
use text::Text;

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
    /// How long the oldest of them has waited (zero when none waits).
    pub outbox_oldest_age: std::time::Duration,
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
    /// What the daemon's clients counted (API requests, refused certificates), and its failed
    /// writes under the state directory.
    pub counted: &'a MetricsRegistry,
    /// Requests to the endpoint refused for a missing or wrong token since it started.
    pub auth_failures: u64,
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
    runs::run_families(&mut out, runs, scrape);
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
    api_families(&mut out, scrape.counted);
    tls_families(&mut out, scrape.counted);
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
    withstood::families(&mut out, scrape.auth_failures);
    out.family(
        "heartbeat_agent_persist_failures_total",
        "counter",
        "Writes under the state directory that failed (full or read-only disk), by what was written.",
    );
    for (what, n) in scrape.counted.persist_failures().snapshot() {
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
    for (job, reason, n) in scrape.counted.checks_created() {
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
    for (job, n) in scrape.counted.owner_conflict_counts() {
        out.sample(
            "heartbeat_agent_check_owner_conflicts_total",
            &[("job", job.as_str())],
            n as f64,
        );
    }
    out.0
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
    outbox_age::families(out, scrape.outbox_oldest_age);
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

fn tls_families(out: &mut Text, counted: &MetricsRegistry) {
    out.family(
        "heartbeat_agent_tls_errors_total",
        "counter",
        "Connections refused because the server's certificate is not trusted, by host.",
    );
    for (host, n) in counted.tls_errors() {
        out.sample(
            "heartbeat_agent_tls_errors_total",
            &[("host", &host)],
            n as f64,
        );
    }
}

fn api_families(out: &mut Text, counted: &MetricsRegistry) {
    out.family(
        "heartbeat_agent_api_requests_total",
        "counter",
        "API request attempts by operation and HTTP status (error: no answer).",
    );
    for (op, status, n) in counted.api_requests() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_check_is_a_sync_state_of_its_own() {
        let scrape = Scrape {
            jobs: &[],
            reloads: [("ok", 0), ("invalid", 0)],
            start_time: 0.0,
            outbox_depth: 0,
            outbox_oldest_age: std::time::Duration::ZERO,
            outbox: Stats::default(),
            sync: Some(BTreeMap::from([("in_sync", 2), ("missing", 1)])),
            sync_drift: Some(BTreeMap::from([("backup".to_owned(), 3)])),
            checks_missing: 1,
            paused: BTreeMap::new(),
            cluster: None,
            counted: &MetricsRegistry::default(),
            auth_failures: 0,
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
}
