//! `heartbeat-agent health`: exit 0 when the daemon's `/healthz` answers 200, else 1. For exec
//! probes in images without a shell or curl.

use clap::Args;

use super::{context, exit, print_error, GlobalArgs};

/// Check that the running daemon is alive (its scheduler loop makes progress).
///
/// Asks `GET /healthz` of the local endpoint; never the monitoring API. Exit status: 0 when
/// healthy, 1 otherwise (unreachable, unhealthy, bad config, or the endpoint belongs to a
/// daemon of another config).
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
        Ok(answer) if answer.status == 200 => exit::OK,
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
