//! `heartbeat-agent status`: the daemon's status as a table or as the endpoint's JSON
//! document. Also the endpoint lookup `health` and `trigger` share (`--url`, else
//! `[status] listen` of the config).

use std::io::{IsTerminal, Write};
use std::time::Duration;

use clap::Args;

use super::{exit, print_error, GlobalArgs};
use crate::config::{Config, StatusSettings};
use crate::redact::Secret;
use crate::status::client::Endpoint;
use crate::status::doc::StatusDoc;

/// How long a command waits for the endpoint (the remote view may take up to 10 s to fetch).
pub const TIMEOUT: Duration = Duration::from_secs(15);

/// Show what the running daemon knows: each job's next and last run, ping, sync and the
/// service's view of its check.
///
/// Reads `GET /status` of the daemon's local endpoint. Exit status: 0, or 1 when the endpoint
/// cannot be reached or the job is unknown.
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
}

/// The endpoint and the token to send: `--url` (the config's token when it loads), else the
/// config's `[status]`. Errors carry the exit code.
pub fn endpoint(
    url: Option<&str>,
    global: &GlobalArgs,
) -> Result<(Endpoint, Option<Secret>), (u8, String)> {
    let path = crate::paths::config_file(global.config.as_ref());
    let loaded = Config::load(&path).map(|l| l.config.status);
    match url {
        Some(url) => {
            let endpoint = Endpoint::parse(url).map_err(|e| (exit::USAGE, e.to_string()))?;
            Ok((endpoint, loaded.ok().and_then(|s| s.token)))
        }
        None => {
            let status: StatusSettings = loaded.map_err(|err| {
                (
                    exit::CONFIG,
                    format!("{err}\nthe endpoint is read from [status] listen of this config; fix it or pass --url"),
                )
            })?;
            Ok((Endpoint::from_listen(&status.listen), status.token))
        }
    }
}

/// Runs `status`; returns the exit code.
pub fn run(args: StatusArgs, global: &GlobalArgs) -> u8 {
    let (endpoint, token) = match endpoint(args.url.as_deref(), global) {
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
        TIMEOUT,
    ) {
        Ok(answer) if answer.status == 200 => answer,
        Ok(answer) => {
            print_error(format!(
                "the status endpoint answered HTTP {}: {}",
                answer.status,
                answer.body.trim()
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
        crate::status::table::render(&doc, color)
    };
    let _ = stdout.write_all(text.as_bytes());
    exit::OK
}

/// What the daemon's status endpoint needs from the config: the remote view's client (low
/// priority in the shared rate limiter, one attempt, short timeouts) and the API key to keep
/// out of job output. `None`s when no API is configured.
pub fn remote_client(
    config: &Config,
    global: &GlobalArgs,
) -> (Option<crate::api::ApiClient>, Option<Secret>) {
    use crate::api::{ApiClient, ApiClientConfig, Priority, RetryPolicy};
    let key = crate::config::read_api_key(&config.api.api_key)
        .ok()
        .flatten();
    let base = global
        .base_url
        .clone()
        .or_else(|| config.api.base_url.clone());
    let (Some(base), Some(key)) = (base, key) else {
        return (None, None);
    };
    let mut settings = ApiClientConfig::new(base, key.clone());
    settings.account_id.clone_from(&config.api.account_id);
    settings.connect_timeout = Duration::from_secs(3);
    settings.request_timeout = Duration::from_secs(8);
    settings.retry = RetryPolicy::none();
    settings.priority = Priority::Low;
    match ApiClient::new(settings) {
        Ok(client) => (Some(client), Some(key)),
        Err(err) => {
            tracing::warn!(error = %err, "the status endpoint's remote view is off");
            (None, Some(key))
        }
    }
}
