//! Condition probes (`process`, `file`, `disk`, `memory`, `load`, `tcp`, `http`): a watch job
//! pings when its probe finds the condition healthy.
//!
//! [`Probes`] is the context a caller keeps between probes: the sysinfo process table (reused,
//! so each `process` probe only re-reads what changed) and one HTTP client, built on the
//! connections ([`crate::net::Net`]) the caller hands it. Every probe returns
//! a [`Probe`]: healthy or not, with a one-line reason that says what was measured against which
//! threshold; a watch job's run ends as that probe ([`crate::run_end::RunEnd::Probed`]). Probes
//! never fail with an error: a probe that cannot measure is unhealthy, and the reason says why.
//!
//! Blocking work: the process table refresh, `statvfs` and the file's `stat` run on tokio's
//! blocking pool ([`tokio::task::spawn_blocking`]) under [`BLOCKING_PROBE_LIMIT`], because a hung
//! network file system can block them indefinitely. `/proc/meminfo` and `/proc/loadavg` are read
//! inline: procfs is generated in memory and never waits for a device.
//!
//! One process-wide static stays: a `Once` that sets sysinfo's open-files limit to zero before
//! the first process table is made. The limit is sysinfo's own process-wide setting, not one of
//! the agent's; the `Once` only keeps the call from being repeated by every [`Probes`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::WatchSpec;
use crate::duration::human_duration;

mod net;
mod system;

/// How long a probe that runs on the blocking pool (process table, file, disk) may take before
/// it counts as unhealthy. The blocked thread itself cannot be cancelled; it finishes (or stays
/// stuck) on its own while the job carries on.
pub(crate) const BLOCKING_PROBE_LIMIT: Duration = Duration::from_secs(30);

/// The outcome of one probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// Whether the condition holds: a healthy watch job pings, an unhealthy one does not.
    pub healthy: bool,
    /// What was measured against which threshold, e.g. `disk /var: 3.1 GiB free, need at least
    /// 10 GiB`; logged and shown in status. Never contains a URL's path or query.
    pub reason: String,
}

impl Probe {
    /// A healthy outcome with its reason.
    pub(crate) fn healthy(reason: impl Into<String>) -> Self {
        Probe {
            healthy: true,
            reason: reason.into(),
        }
    }

    /// An unhealthy outcome with its reason.
    pub(crate) fn unhealthy(reason: impl Into<String>) -> Self {
        Probe {
            healthy: false,
            reason: reason.into(),
        }
    }

    /// Healthy when `ok`, with the same reason either way.
    fn check(ok: bool, reason: String) -> Self {
        Probe {
            healthy: ok,
            reason,
        }
    }
}

impl From<Probe> for crate::run_end::RunEnd {
    fn from(probe: Probe) -> Self {
        crate::run_end::RunEnd::Probed {
            healthy: probe.healthy,
            reason: probe.reason,
        }
    }
}

/// State shared by all probes of a daemon; cheap to clone (an `Arc` and a reqwest client).
#[derive(Clone)]
pub struct Probes {
    /// The process table, kept between `process` probes: sysinfo then re-reads only what changed
    /// and reuses its allocations. Behind a mutex because probes of several jobs may run at once.
    system: Arc<Mutex<sysinfo::System>>,
    /// One HTTP client for every `http` probe, so connection set-up (TLS roots) happens once.
    http: reqwest::Client,
}

impl std::fmt::Debug for Probes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probes").finish_non_exhaustive()
    }
}

impl Probes {
    /// A fresh context: an empty process table (filled at the first `process` probe) and an
    /// HTTP client that does not follow redirects (the status checked is the one the URL itself
    /// answers), going through `net`.
    pub fn new(net: &crate::net::Net) -> Self {
        // sysinfo keeps each process's `/proc/PID/stat` open by default; a daemon must not hold
        // hundreds of descriptors for that.
        // One per process: sysinfo's limit is a process-wide setting of that library.
        static FILES_LIMIT: std::sync::Once = std::sync::Once::new();
        FILES_LIMIT.call_once(|| {
            sysinfo::set_open_files_limit(0);
        });
        let http = net
            .client_builder(true)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        Probes {
            system: Arc::new(Mutex::new(sysinfo::System::new())),
            http,
        }
    }

    /// Probes `spec` once.
    pub async fn probe(&self, spec: &WatchSpec) -> Probe {
        match spec {
            WatchSpec::Process { pattern } => {
                let system = Arc::clone(&self.system);
                let pattern = pattern.clone();
                let what = format!("process {pattern:?}");
                blocking(what, move || system::process(&system, &pattern)).await
            }
            WatchSpec::File { path, max_age } => {
                let (path, max_age) = (path.clone(), *max_age);
                let what = format!("file {}", path.display());
                blocking(what, move || system::file(&path, max_age)).await
            }
            WatchSpec::Disk { path, min_free } => {
                let (path, min_free) = (path.clone(), *min_free);
                let what = format!("disk {}", path.display());
                blocking(what, move || system::disk(&path, min_free)).await
            }
            WatchSpec::Memory { max_used_percent } => system::memory(*max_used_percent),
            WatchSpec::Load { max_load1 } => system::load(*max_load1),
            WatchSpec::Tcp { address, timeout } => net::tcp(address, *timeout).await,
            WatchSpec::Http {
                url,
                expect_status,
                timeout,
            } => net::http(&self.http, url, *expect_status, *timeout).await,
        }
    }
}

/// Runs a blocking probe on the blocking pool, unhealthy if it takes longer than
/// [`BLOCKING_PROBE_LIMIT`] or panics. `what` names the probe in those reasons.
async fn blocking(what: String, work: impl FnOnce() -> Probe + Send + 'static) -> Probe {
    let task = tokio::task::spawn_blocking(work);
    match tokio::time::timeout(BLOCKING_PROBE_LIMIT, task).await {
        Ok(Ok(probe)) => probe,
        Ok(Err(err)) => Probe::unhealthy(format!("{what}: probe failed: {err}")),
        Err(_) => Probe::unhealthy(format!(
            "{what}: no answer within {} (a hung file system?)",
            human_duration(BLOCKING_PROBE_LIMIT)
        )),
    }
}

/// A byte count for people: `512 B`, `3.1 GiB` (binary units, one decimal).
pub(crate) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    let text = format!("{value:.1}");
    let text = text.strip_suffix(".0").unwrap_or(&text);
    format!("{text} {}", UNITS[unit])
}

/// A number without a pointless fraction: `4`, `0.5`, `12.25`.
pub(crate) fn human_number(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_can_run_in_spawned_tasks() {
        fn spawnable<T: Send + 'static>(_: &T) {}
        let probes = Probes::new(&crate::net::Net::default());
        let spec = WatchSpec::Load { max_load1: 1.0 };
        let future = async move { probes.probe(&spec).await };
        spawnable(&future);
    }

    #[test]
    fn bytes_read_naturally() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1024), "1 KiB");
        assert_eq!(human_bytes(10 * 1024 * 1024 * 1024), "10 GiB");
        assert_eq!(human_bytes(3_328_599_654), "3.1 GiB");
    }

    #[test]
    fn numbers_drop_trailing_zeros() {
        assert_eq!(human_number(4.0), "4");
        assert_eq!(human_number(0.5), "0.5");
        assert_eq!(human_number(12.25), "12.25");
        assert_eq!(human_number(-1.0), "-1");
    }
}
