//! What the daemon withstood and went on: log lines it could not write (the log's pipe
//! closed) and failed token attempts at the status endpoint.

use super::Text;

/// `heartbeat_agent_log_lines_dropped_total` and `heartbeat_agent_status_auth_failures_total`.
pub(super) fn families(out: &mut Text, auth_failures: u64) {
    out.family(
        "heartbeat_agent_log_lines_dropped_total",
        "counter",
        "Log lines dropped since start because the log's output could not take them (its pipe closed).",
    );
    out.sample(
        "heartbeat_agent_log_lines_dropped_total",
        &[],
        crate::logging::dropped_lines() as f64,
    );
    out.family(
        "heartbeat_agent_status_auth_failures_total",
        "counter",
        "Requests to the status endpoint refused since start for a missing or wrong token.",
    );
    out.sample(
        "heartbeat_agent_status_auth_failures_total",
        &[],
        auth_failures as f64,
    );
}
