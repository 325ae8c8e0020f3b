//! Process-wide counters of API requests by operation and answer, for the status endpoint's
//! `/metrics`. Every attempt (retries included) counts once; a request that got no answer
//! counts as `error`.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::Operation;

static REQUESTS: Mutex<BTreeMap<(&'static str, String), u64>> = Mutex::new(BTreeMap::new());

/// Counts one attempt of `operation` that was answered with `status` (`None`: no answer).
pub(crate) fn record(operation: Operation, status: Option<u16>) {
    let status = status.map_or_else(|| "error".to_owned(), |s| s.to_string());
    let mut requests = REQUESTS.lock().unwrap_or_else(|e| e.into_inner());
    *requests.entry((operation.name(), status)).or_default() += 1;
}

/// Every (operation name, status) pair counted so far, with its count.
pub fn snapshot() -> Vec<(&'static str, String, u64)> {
    let requests = REQUESTS.lock().unwrap_or_else(|e| e.into_inner());
    requests
        .iter()
        .map(|((op, status), n)| (*op, status.clone(), *n))
        .collect()
}
