//! `heartbeat-agent status`: the daemon's status as a table or as the endpoint's JSON
//! document (the endpoint is found as for `health` and `trigger`: `context::endpoint`).

use std::io::{IsTerminal, Write};

use clap::Args;

use super::{context, print_error, GlobalArgs};
use crate::exit;
use crate::redact::Secret;
use crate::status::client::{Endpoint, StatusAnswer};
use crate::status::doc::StatusDoc;
use crate::status::owner::Expected;

/// Show what the running daemon knows: each job's next and last run, ping, sync and the
/// service's view of its check.
///
/// Reads `GET /status` of the daemon's local endpoint. Exit status: 0, or 1 when the endpoint
/// cannot be reached, belongs to another daemon (of another config, or of this one with
/// another id), or the job is unknown.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The endpoint's base URL (http://127.0.0.1:9465) or unix socket path [default: `[status]
    /// listen` of the config]
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Print the endpoint's JSON document instead of the table
    #[arg(long)]
    pub json: bool,
    /// Only this job
    #[arg(long, value_name = "NAME")]
    pub job: Option<String>,
    /// Draw the RECENT strip with ASCII (+ x -) instead of ✓ ✗ · [default: when the locale is
    /// not UTF-8]
    #[arg(long)]
    pub ascii: bool,
}

/// Whether `answer` comes from the daemon `expected`; else says which answered.
pub(super) fn owned(expected: &Expected, endpoint: &Endpoint, answer: &StatusAnswer) -> bool {
    match expected.check(&endpoint.shown(), answer) {
        Ok(()) => true,
        Err(refused) => {
            print_error(refused);
            false
        }
    }
}

/// Runs `status`; returns the exit code.
pub(crate) fn run(args: StatusArgs, global: &GlobalArgs) -> u8 {
    let (endpoint, token, expected) = match context::endpoint(args.url.as_deref(), global) {
        Ok(found) => found,
        Err((code, message)) => {
            print_error(message);
            return code;
        }
    };
    let answer = match endpoint.request(
        "GET",
        "/status",
        token.as_ref().map(Secret::expose),
        context::TIMEOUT,
    ) {
        Ok(answer) if !owned(&expected, &endpoint, &answer) => return exit::FAILURE,
        Ok(answer) if answer.status == 200 => answer,
        Ok(answer) => {
            print_error(format!(
                "the status endpoint answered HTTP {}: {}",
                answer.status,
                crate::logging::printable(answer.body.trim())
            ));
            return exit::FAILURE;
        }
        Err(err) => {
            print_error(err);
            return exit::FAILURE;
        }
    };
    let mut doc: StatusDoc = match serde_json::from_str(&answer.body) {
        Ok(doc) => doc,
        Err(err) => {
            print_error(format!(
                "the status endpoint sent a document this version cannot read: {err}"
            ));
            return exit::FAILURE;
        }
    };
    if let Some(name) = &args.job {
        doc.jobs.retain(|j| &j.name == name);
        if doc.jobs.is_empty() {
            print_error(format!("no job named \"{name}\" in the daemon's config"));
            return exit::FAILURE;
        }
    }
    let mut stdout = std::io::stdout().lock();
    let text = if args.json {
        let json = if stdout.is_terminal() {
            serde_json::to_string_pretty(&doc)
        } else {
            serde_json::to_string(&doc)
        };
        format!("{}\n", json.unwrap_or_default())
    } else {
        let color =
            stdout.is_terminal() && !std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        crate::status::table::render(&doc, color, crate::history::ascii_wanted(args.ascii))
    };
    let _ = stdout.write_all(text.as_bytes());
    exit::OK
}
