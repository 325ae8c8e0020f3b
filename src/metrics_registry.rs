//! The counters of `/metrics` that are counted below the status endpoint, in one value: made
//! with the process's connections ([`crate::net::Net`], one per command or daemon, which every
//! client it makes is handed), counted by those clients, and read by `status/metrics/` through
//! the same `Net` (the daemon hands its `Net`'s registry to the endpoint when it is assembled).
//! Cheap to clone: clones count into the same figures.
//!
//! - API request attempts by operation and answer (`heartbeat_agent_api_requests_total`):
//!   every attempt (retries included) counts once; a request that got no answer counts as
//!   `error`;
//! - refused server certificates by host (`heartbeat_agent_tls_errors_total`).

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
