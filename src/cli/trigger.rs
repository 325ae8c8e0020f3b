//! `heartbeat-agent trigger NAME`: ask the running daemon to run a job now, through
//! `POST /jobs/{name}/run` with the `[status] token`.

use std::path::PathBuf;

use clap::Args;

use super::{context, print_error, GlobalArgs};
use crate::exit;
use crate::redact::Secret;

/// Run a job of the running daemon now, outside its schedule (same overlap rule).
///
/// Needs the endpoint's token: `[status] token` (or `token_file`) of the config, or
/// --token-file (with --url, no config is needed). It is sent as the bearer token.
/// Exit status: 0 when the run was started or queued, 1 otherwise (running with overlap
/// "skip", unknown job, token refused, daemon unreachable, or the endpoint belongs to another
/// daemon: of another config, or of this one with another id).
#[derive(Debug, Args)]
pub struct TriggerArgs {
    /// The job's name
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The endpoint's base URL (http://127.0.0.1:9465) or unix socket path [default: `[status]
    /// listen` of the config]
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Read the endpoint's token from FILE (one line) instead of the config's `[status] token`
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

/// Runs `trigger`; returns the exit code.
pub fn run(args: TriggerArgs, global: &GlobalArgs) -> u8 {
    let found =
        context::endpoint_with_token(args.url.as_deref(), args.token_file.as_deref(), global);
    let (endpoint, token, expected) = match found {
        Ok(found) => found,
        Err((code, message)) => {
            print_error(message);
            return code;
        }
    };
    if let Err(refused) = expected.probe(&endpoint) {
        print_error(refused);
        return exit::FAILURE;
    }
    let path = format!("/jobs/{}/run", encode(&args.name));
    let answer = match endpoint.request(
        "POST",
        &path,
        token.as_ref().map(Secret::expose),
        context::TIMEOUT,
    ) {
        Ok(answer) => answer,
        Err(err) => {
            print_error(err);
            return exit::FAILURE;
        }
    };
    let message = serde_json::from_str::<serde_json::Value>(&answer.body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
        .unwrap_or_else(|| answer.body.trim().to_owned());
    let message = crate::logging::printable(&message);
    match answer.status {
        202 => {
            let queued = answer.body.contains("\"queued\":true");
            let what = if queued {
                "queued (a run is going)"
            } else {
                "started"
            };
            crate::logging::write_err(&format!(
                "heartbeat-agent: run of job \"{}\" {what}",
                args.name
            ));
            exit::OK
        }
        401 if token.is_none() => {
            print_error(format!(
                "{message}\nno token: set [status] token_file in the config, or pass --token-file"
            ));
            exit::FAILURE
        }
        status => {
            print_error(format!("HTTP {status}: {message}"));
            exit::FAILURE
        }
    }
}

/// Percent-encodes a job name for the URL path.
fn encode(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
