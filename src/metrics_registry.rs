//! The counters of `/metrics` that are counted below the status endpoint, in one value: made
//! with the process's connections ([`crate::net::Net`], one per command or daemon, which every
//! client it makes is handed), counted by those clients, and read by `status/metrics/` through
//! the same `Net` (the daemon hands its `Net`'s registry to the endpoint when it is assembled).
//! Cheap to clone: clones count into the same figures.
//!
//! - API request attempts by operation and answer (`heartbeat_agent_api_requests_total`):
//!   every attempt (retries included) counts once; a request that got no answer counts as
//!   `error`;
//! - refused server certificates by host (`heartbeat_agent_tls_errors_total`);
//! - checks sync created for jobs with `create = true`, by job and reason
//!   (`heartbeat_agent_checks_created_total`);
//! - lookups of a job's created check that found another agent's
//!   (`heartbeat_agent_check_owner_conflicts_total`), and the conflict the latest lookup of
//!   each job found, which `/status` shows as the job's `owned_by`;
//! - the writes under the state directory that failed, by kind
//!   (`heartbeat_agent_persist_failures_total`, `/status`'s `persist_failures`): a
//!   [`crate::persist::Failures`] that every writer of the state directory is handed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// The counters of one process's clients.
#[derive(Debug, Clone, Default)]
pub struct MetricsRegistry {
    inner: Arc<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    /// API request attempts by (operation name, status or `error`).
    api_requests: Mutex<BTreeMap<(&'static str, String), u64>>,
    /// Refused certificates by host.
    tls_errors: Mutex<BTreeMap<String, u64>>,
    /// Checks created by (job, reason).
    created: Mutex<BTreeMap<(String, &'static str), u64>>,
    /// Owner conflicts: the latest lookup's of each job (removed when a lookup found the job's
    /// own check since), and how many lookups found one, by job.
    owners: Mutex<Owners>,
    /// Failed writes under the state directory, by kind.
    persist_failures: crate::persist::Failures,
}

#[derive(Debug, Default)]
struct Owners {
    latest: BTreeMap<String, OwnerConflict>,
    counts: BTreeMap<String, u64>,
}

/// A check found under a job's scope tag that another agent owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerConflict {
    /// The check's id.
    pub check_id: String,
    /// The identity its owner tag names.
    pub owner: String,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl MetricsRegistry {
    /// Counts one API request attempt of `operation` answered with `status` (`None`: no answer).
    pub(crate) fn api_request(&self, operation: &'static str, status: Option<u16>) {
        let status = status.map_or_else(|| "error".to_owned(), |s| s.to_string());
        *lock(&self.inner.api_requests)
            .entry((operation, status))
            .or_default() += 1;
    }

    /// Every (operation name, status) pair counted so far, with its count.
    pub fn api_requests(&self) -> Vec<(&'static str, String, u64)> {
        lock(&self.inner.api_requests)
            .iter()
            .map(|((op, status), n)| (*op, status.clone(), *n))
            .collect()
    }

    /// Counts a refused certificate of `host`; true the first time (log it in full then).
    pub(crate) fn tls_error(&self, host: &str) -> bool {
        let mut errors = lock(&self.inner.tls_errors);
        let count = errors.entry(host.to_owned()).or_insert(0);
        *count += 1;
        *count == 1
    }

    /// Counts a check created for `job` for `reason` (`new`, `deleted`).
    pub(crate) fn check_created(&self, job: &str, reason: &'static str) {
        *lock(&self.inner.created)
            .entry((job.to_owned(), reason))
            .or_default() += 1;
    }

    /// Every (job, reason) counted so far, with its count.
    pub fn checks_created(&self) -> Vec<(String, &'static str, u64)> {
        lock(&self.inner.created)
            .iter()
            .map(|((job, reason), n)| (job.clone(), *reason, *n))
            .collect()
    }

    /// A lookup of `job`'s check found another agent's (`Some`, counted), or the job's own
    /// (`None`: an earlier conflict is over).
    pub(crate) fn owner_lookup(&self, job: &str, conflict: Option<OwnerConflict>) {
        let mut owners = lock(&self.inner.owners);
        match conflict {
            Some(conflict) => {
                owners.latest.insert(job.to_owned(), conflict);
                *owners.counts.entry(job.to_owned()).or_default() += 1;
            }
            None => {
                owners.latest.remove(job);
            }
        }
    }

    /// Each job whose check, found by its scope tag, is owned by another agent now.
    pub fn owner_conflicts(&self) -> BTreeMap<String, OwnerConflict> {
        lock(&self.inner.owners).latest.clone()
    }

    /// How many lookups found another agent's check, by job.
    pub fn owner_conflict_counts(&self) -> Vec<(String, u64)> {
        let owners = lock(&self.inner.owners);
        owners
            .counts
            .iter()
            .map(|(job, n)| (job.clone(), *n))
            .collect()
    }

    /// The failed writes under the state directory: hand it to each writer of it.
    pub fn persist_failures(&self) -> &crate::persist::Failures {
        &self.inner.persist_failures
    }

    /// Refused certificates by host, in host order.
    pub fn tls_errors(&self) -> Vec<(String, u64)> {
        lock(&self.inner.tls_errors)
            .iter()
            .map(|(host, n)| (host.clone(), *n))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::MetricsRegistry;

    #[test]
    fn clones_count_into_the_same_figures_and_a_new_registry_starts_at_zero() {
        let registry = MetricsRegistry::default();
        let clone = registry.clone();
        registry.api_request("get_check", Some(200));
        clone.api_request("get_check", Some(200));
        clone.api_request("get_check", None);
        assert_eq!(
            registry.api_requests(),
            vec![
                ("get_check", "200".to_owned(), 2),
                ("get_check", "error".to_owned(), 1)
            ]
        );
        assert!(clone.tls_error("b.example"));
        assert!(!registry.tls_error("b.example"));
        assert!(registry.tls_error("a.example"));
        assert_eq!(
            clone.tls_errors(),
            vec![("a.example".to_owned(), 1), ("b.example".to_owned(), 2)]
        );
        assert!(MetricsRegistry::default().api_requests().is_empty());
    }
}
