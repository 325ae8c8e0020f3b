//! The run counters of `/metrics`: [`RunMetrics`], an after-run hook of the daemon, counts runs
//! by job and outcome, their attempts, durations and pings; and the per-job families written
//! from it and from the daemon's view of each job (runs, running, pauses, last success,
//! attempts, the duration histogram, pings), every label set of an alerted family present from
//! the first scrape.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use chrono::{DateTime, Utc};

use super::{Scrape, Text};
use crate::config::Job;
use crate::daemon::{DaemonView, JobView};
use crate::run::AfterRun;
use crate::run::RunRecord;
use crate::run_end::RunOutcome;

/// Upper bounds (seconds) of the run duration histogram's buckets.
pub(crate) const DURATION_BUCKETS: [f64; 12] = [
    0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 10800.0,
];

/// The `result` labels of `heartbeat_agent_pings_total`: accepted, then failed.
const PING_RESULTS: [&str; 2] = ["accepted", "failed"];

/// Per-job counters since the daemon started: fixed-size, so a job's counters are one block in
/// the map (a map per label would allocate a node of about 280 bytes per job at its first run).
#[derive(Debug, Default, Clone)]
struct JobCounters {
    /// Runs by outcome, in the order of [`RunOutcome::ALL`].
    outcomes: [u64; RunOutcome::ALL.len()],
    /// Pings by result, in the order of [`PING_RESULTS`].
    pings: [u64; PING_RESULTS.len()],
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
        counters.outcomes[outcome_index(run.outcome)] += 1;
        if run.success() {
            counters.last_success = Some(run.ended);
        }
        if let Some(accepted) = ping {
            counters.pings[usize::from(!accepted)] += 1;
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

/// Where `outcome` counts in [`JobCounters::outcomes`].
fn outcome_index(outcome: RunOutcome) -> usize {
    RunOutcome::ALL
        .iter()
        .position(|o| *o == outcome)
        .unwrap_or_default()
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

/// Every per-job family: runs by outcome, running, pauses, last success, attempts, the duration
/// histogram and pings.
pub(super) fn run_families(out: &mut Text, runs: &RunMetrics, scrape: &Scrape<'_>) {
    let counters = &runs.counters();
    out.family("heartbeat_agent_runs_total", "counter", "Finished runs by job and outcome (and fires skipped because a run was still going) since start.");
    let jobs = scrape.jobs;
    let none = JobCounters::default();
    for (name, job) in jobs {
        let c = counters.get(name).unwrap_or(&none);
        for (outcome, n) in RunOutcome::ALL.into_iter().zip(c.outcomes) {
            out.sample(
                "heartbeat_agent_runs_total",
                &[("job", name), ("outcome", outcome.as_str())],
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
        for (result, n) in PING_RESULTS.into_iter().zip(c.pings) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(c.outcomes[outcome_index(RunOutcome::Success)], 2);
        assert_eq!(c.outcomes.iter().sum::<u64>(), 2);
        assert_eq!(c.pings, [2, 0]);
    }
}
