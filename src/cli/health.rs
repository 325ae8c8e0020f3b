//! `heartbeat-agent health`: exit 0 when the daemon's `/healthz` answers 200, else 1. For exec
//! probes in images without a shell or curl. A healthy daemon's checks that the service does not
//! know (`missing` in `/status`) are named on stderr; they never change the exit code (the
//! service's state is not the daemon's liveness).

use clap::Args;

use super::{context, print_error, GlobalArgs};
use crate::exit;

/// Check that the running daemon is alive (its scheduler loop makes progress).
///
/// Asks `GET /healthz` of the local endpoint; never the monitoring API. Exit status: 0 when
/// healthy, 1 otherwise (unreachable, unhealthy, bad config, or the endpoint belongs to
/// another daemon: of another config, or of this one with another id).
#[derive(Debug, Args)]
pub struct HealthArgs {
    /// The endpoint's base URL (http://127.0.0.1:9465) or unix socket path [default: `[status]
    /// listen` of the config]
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
}

/// Runs `health`; returns the exit code (0 or 1 only).
pub fn run(args: HealthArgs, global: &GlobalArgs) -> u8 {
    let (endpoint, _, expected) = match context::endpoint(args.url.as_deref(), global) {
        Ok(found) => found,
        Err((_, message)) => {
            print_error(message);
            return exit::FAILURE;
        }
    };
    match endpoint.request("GET", "/healthz", None, std::time::Duration::from_secs(5)) {
        Ok(answer) if !super::status::owned(&expected, &endpoint, &answer) => exit::FAILURE,
        Ok(answer) if answer.status == 200 => {
            name_missing_checks(&endpoint);
            exit::OK
        }
        Ok(answer) => {
            print_error(format!(
                "unhealthy: HTTP {}: {}",
                answer.status,
                crate::logging::printable(answer.body.trim())
            ));
            exit::FAILURE
        }
        Err(err) => {
            print_error(err);
            exit::FAILURE
        }
    }
}

/// Names on stderr every job whose check the service does not know, from the endpoint's
/// `/status` (its cached remote view: no API request is forced). Silent when the document
/// cannot be read: liveness is already answered.
fn name_missing_checks(endpoint: &crate::status::client::Endpoint) {
    let Ok(answer) = endpoint.request("GET", "/status", None, std::time::Duration::from_secs(5))
    else {
        return;
    };
    let Ok(doc) = serde_json::from_str::<crate::status::doc::StatusDoc>(&answer.body) else {
        return;
    };
    for job in doc.jobs {
        if let Some(missing) = job.missing {
            crate::logging::write_err(&format!(
                "heartbeat-agent: note: job \"{}\": {} (the daemon is healthy: exit 0)",
                crate::logging::printable(&job.name),
                crate::logging::printable(&missing.reason)
            ));
        }
    }
}
