//! `heartbeat-agent api ...`: every operation of the monitoring API from the shell.
//!
//! JSON answers go to stdout (pretty on a terminal, one line otherwise); errors go to stderr as
//! `heartbeat-agent: api error 404 Not Found: Not Found (GET /v1/...)`. Exit 0 on success, 1 on
//! an API or transport error or missing credentials, 2 on usage errors (a bad `--body` too),
//! 78 when the config file is invalid.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use clap::Subcommand;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{context, print_error, GlobalArgs};
use crate::api::model::{
    CheckGroupUpdate, CheckType, CreateStatusPageService, HeartbeatCheckCreate,
    HeartbeatCheckUpdate, ListChecks, ListStatusPageServices, MaintenanceDates,
    StatusPageServicePage,
};
use crate::api::{ApiClient, ApiError};
use crate::exit;

/// API operations.
#[derive(Debug, Subcommand)]
pub enum ApiCommand {
    /// List all check statuses
    CheckStatuses,
    /// Create or list status page services
    #[command(subcommand)]
    StatusPageServices(ServicesCommand),
    /// Read a maintenance or change its dates
    #[command(subcommand)]
    Maintenance(MaintenanceCommand),
    /// Create, read or update a heartbeat check, read one of its events, or list them
    #[command(subcommand)]
    Heartbeat(HeartbeatCommand),
    /// List checks (every type, filtered by tag and type) or delete one (outside the seed
    /// spec; published by the service)
    #[command(subcommand)]
    Checks(ChecksCommand),
    /// Read or update a check group
    #[command(subcommand)]
    CheckGroup(CheckGroupCommand),
    /// List the test session error groups of a project
    ErrorGroups {
        /// Project id (uuid)
        project: String,
    },
    /// Delete a snippet
    #[command(subcommand)]
    Snippet(SnippetCommand),
}

/// `api status-page-services ...`.
#[derive(Debug, Subcommand)]
pub enum ServicesCommand {
    /// List services (one page, or every page with --all)
    List {
        /// Services per page, 1 to 100 [service default: 20]
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
        limit: Option<u32>,
        /// Follow `nextId` through every page and print them as one page
        #[arg(long)]
        all: bool,
    },
    /// Create a service
    Create {
        /// Name of the service
        #[arg(long, value_name = "N")]
        name: String,
    },
}

/// `api maintenance ...`.
#[derive(Debug, Subcommand)]
pub enum MaintenanceCommand {
    /// Show a maintenance
    Get {
        /// Maintenance window id (integer)
        window: i64,
        /// Maintenance id
        maintenance: String,
    },
    /// Change a maintenance's dates
    SetDates {
        /// Maintenance window id (integer)
        window: i64,
        /// Maintenance id
        maintenance: String,
        /// New first day (YYYY-MM-DD)
        #[arg(long, value_name = "DATE")]
        starts_at: NaiveDate,
        /// New last day (YYYY-MM-DD)
        #[arg(long, value_name = "DATE")]
        ends_at: NaiveDate,
    },
}

/// `api heartbeat ...`.
#[derive(Debug, Subcommand)]
pub enum HeartbeatCommand {
    /// Show a check as the service has it now (GET /v1/checks/{id}; outside the seed spec)
    Get {
        /// Check id
        id: String,
        /// Print the answer's pingToken and pingUrl as they are (redacted by default)
        #[arg(long)]
        show_secrets: bool,
    },
    /// Create a heartbeat check (POST /v1/checks/heartbeat; outside the seed spec) from a JSON
    /// body with at least `name` and `heartbeat`; prints the new check (exit 1 on a 402: the
    /// account's plan has no room for another check)
    Create {
        /// The body and how the answer is shown.
        #[command(flatten)]
        args: CheckBodyArgs,
    },
    /// Replace a heartbeat check's definition (PUT) with a JSON body
    Update {
        /// Check id
        id: String,
        /// The body and how the answer is shown.
        #[command(flatten)]
        args: CheckBodyArgs,
    },
    /// Show a heartbeat event with the check's statistics
    Event {
        /// Check id
        check: String,
        /// Event id
        event: String,
    },
    /// List a check's events, newest first (outside the seed spec; how to learn event ids).
    /// The service answers at most 10, of the last 24 hours unless a window is given
    Events {
        /// Check id
        check: String,
        /// At most this many events (1 to 10; the service's default is 10)
        #[arg(long)]
        limit: Option<u32>,
        /// Events from this time on (RFC 3339, e.g. 2026-11-20T00:00:00Z)
        #[arg(long, value_parser = parse_time)]
        start_time: Option<chrono::DateTime<chrono::Utc>>,
        /// Events up to this time (RFC 3339)
        #[arg(long, value_parser = parse_time)]
        end_time: Option<chrono::DateTime<chrono::Utc>>,
    },
}

/// `api checks ...`.
#[derive(Debug, Subcommand)]
pub enum ChecksCommand {
    /// List checks (GET /v1/checks): one page, or every page with --all; without a filter the
    /// service lists every check of the account
    List {
        /// Only checks carrying this tag (repeat for any of several)
        #[arg(long, value_name = "TAG")]
        tag: Vec<String>,
        /// Only checks of this type, e.g. HEARTBEAT
        #[arg(long, value_name = "TYPE")]
        check_type: Option<String>,
        /// Page number, from 1 [service default: 1]
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        page: Option<u32>,
        /// Checks per page, 1 to 100 [service default: 10; with --all: 100]
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
        limit: Option<u32>,
        /// Follow the pages until one is not full, and print every check as one array
        #[arg(long)]
        all: bool,
        /// Print each check's pingToken and pingUrl as they are (redacted by default)
        #[arg(long)]
        show_secrets: bool,
    },
    /// Delete a check (DELETE /v1/checks/{id}; prints nothing on success)
    Delete {
        /// Check id
        id: String,
    },
}

/// What `api heartbeat create` and `update` take besides the id.
#[derive(Debug, clap::Args)]
pub struct CheckBodyArgs {
    /// JSON request body: a file, or `-` for stdin
    #[arg(long, value_name = "FILE|-")]
    body: PathBuf,
    /// Subscribe a new check to all alert channels [service default: true]
    #[arg(long, value_name = "BOOL")]
    auto_assign_alerts: Option<bool>,
    /// Print the answer's pingToken and pingUrl as they are (redacted by default)
    #[arg(long)]
    show_secrets: bool,
}

/// `api check-group ...`.
#[derive(Debug, Subcommand)]
pub enum CheckGroupCommand {
    /// Show a check group (v1)
    Get {
        /// Group id (integer)
        id: i64,
    },
    /// Update a check group (v2 PUT) with a JSON body
    Update {
        /// Group id (integer)
        id: i64,
        /// JSON request body: a file, or `-` for stdin
        #[arg(long, value_name = "FILE|-")]
        body: PathBuf,
        /// Subscribe new checks to all alert channels [service default: true]
        #[arg(long, value_name = "BOOL")]
        auto_assign_alerts: Option<bool>,
    },
}

/// `api snippet ...`.
#[derive(Debug, Subcommand)]
pub enum SnippetCommand {
    /// Delete a snippet (prints nothing on success)
    Delete {
        /// Snippet id (integer)
        id: i64,
    },
}

/// Runs an `api` subcommand.
pub(crate) fn run(cmd: ApiCommand, global: &GlobalArgs) -> u8 {
    let call = match Call::from_command(cmd) {
        Ok(call) => call,
        Err(message) => {
            print_error(message);
            return exit::USAGE;
        }
    };
    let client = match context::credentials(global).and_then(|c| c.client()) {
        Ok(client) => client,
        Err((code, message)) => {
            print_error(message);
            return code;
        }
    };
    let runtime = match context::runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    match runtime.block_on(call.send(&client)) {
        Ok(Some(answer)) => print_json(&answer),
        Ok(None) => exit::OK,
        Err(e) => {
            print_error(e);
            exit::FAILURE
        }
    }
}

/// A command with its body read and parsed, ready to send.
enum Call {
    CheckStatuses,
    ListServices { limit: Option<u32>, all: bool },
    CreateService(CreateStatusPageService),
    GetMaintenance(i64, String),
    SetDates(i64, String, MaintenanceDates),
    GetCheck(String, bool),
    CreateHeartbeat(Box<HeartbeatCheckCreate>, Option<bool>, bool),
    ListChecks(ListChecks, bool, bool),
    DeleteCheck(String),
    UpdateHeartbeat(String, Box<HeartbeatCheckUpdate>, Option<bool>, bool),
    Event(String, String),
    Events(String, crate::api::model::EventsWindow),
    GetGroup(i64),
    UpdateGroup(i64, Box<CheckGroupUpdate>, Option<bool>),
    ErrorGroups(String),
    DeleteSnippet(i64),
}

impl Call {
    /// Reads request bodies; a bad body is a usage error (message returned).
    fn from_command(cmd: ApiCommand) -> Result<Call, String> {
        Ok(match cmd {
            ApiCommand::CheckStatuses => Call::CheckStatuses,
            ApiCommand::StatusPageServices(ServicesCommand::List { limit, all }) => {
                Call::ListServices { limit, all }
            }
            ApiCommand::StatusPageServices(ServicesCommand::Create { name }) => {
                Call::CreateService(CreateStatusPageService { name })
            }
            ApiCommand::Maintenance(MaintenanceCommand::Get {
                window,
                maintenance,
            }) => Call::GetMaintenance(window, maintenance),
            ApiCommand::Maintenance(MaintenanceCommand::SetDates {
                window,
                maintenance,
                starts_at,
                ends_at,
            }) => Call::SetDates(
                window,
                maintenance,
                MaintenanceDates {
                    starts_at: Some(starts_at),
                    ends_at: Some(ends_at),
                },
            ),
            ApiCommand::Heartbeat(HeartbeatCommand::Get { id, show_secrets }) => {
                Call::GetCheck(id, show_secrets)
            }
            ApiCommand::Heartbeat(HeartbeatCommand::Create { args }) => Call::CreateHeartbeat(
                Box::new(read_body(&args.body, "heartbeat check create")?),
                args.auto_assign_alerts,
                args.show_secrets,
            ),
            ApiCommand::Checks(ChecksCommand::List {
                tag,
                check_type,
                page,
                limit,
                all,
                show_secrets,
            }) => Call::ListChecks(
                ListChecks {
                    tags: tag,
                    check_type: check_type.as_deref().map(CheckType::parse),
                    page,
                    limit,
                },
                all,
                show_secrets,
            ),
            ApiCommand::Checks(ChecksCommand::Delete { id }) => Call::DeleteCheck(id),
            ApiCommand::Heartbeat(HeartbeatCommand::Update { id, args }) => Call::UpdateHeartbeat(
                id,
                Box::new(read_body(&args.body, "heartbeat check")?),
                args.auto_assign_alerts,
                args.show_secrets,
            ),
            ApiCommand::Heartbeat(HeartbeatCommand::Event { check, event }) => {
                Call::Event(check, event)
            }
            ApiCommand::Heartbeat(HeartbeatCommand::Events {
                check,
                limit,
                start_time,
                end_time,
            }) => Call::Events(
                check,
                crate::api::model::EventsWindow {
                    limit,
                    start: start_time,
                    end: end_time,
                },
            ),
            ApiCommand::CheckGroup(CheckGroupCommand::Get { id }) => Call::GetGroup(id),
            ApiCommand::CheckGroup(CheckGroupCommand::Update {
                id,
                body,
                auto_assign_alerts,
            }) => Call::UpdateGroup(
                id,
                Box::new(read_body(&body, "check group")?),
                auto_assign_alerts,
            ),
            ApiCommand::ErrorGroups { project } => Call::ErrorGroups(project),
            ApiCommand::Snippet(SnippetCommand::Delete { id }) => Call::DeleteSnippet(id),
        })
    }

    /// Sends the call; the answer as JSON, `None` when the operation answers no body.
    async fn send(self, client: &ApiClient) -> Result<Option<serde_json::Value>, ApiError> {
        fn json(value: impl Serialize) -> Option<serde_json::Value> {
            serde_json::to_value(value).ok()
        }
        Ok(match self {
            Call::CheckStatuses => json(client.list_check_statuses().await?),
            Call::ListServices { limit, all: false } => {
                let query = ListStatusPageServices {
                    limit,
                    ..Default::default()
                };
                json(client.list_status_page_services(&query).await?)
            }
            Call::ListServices { limit, all: true } => {
                let entries = client.list_all_status_page_services(limit).await?;
                json(StatusPageServicePage {
                    length: entries.len() as u64,
                    entries,
                    next_id: None,
                })
            }
            Call::CreateService(body) => json(client.create_status_page_service(&body).await?),
            Call::GetMaintenance(window, id) => json(client.get_maintenance(window, &id).await?),
            Call::SetDates(window, id, dates) => {
                json(client.update_maintenance_dates(window, &id, &dates).await?)
            }
            Call::GetCheck(id, show_secrets) => {
                let answer = json(client.get_check(&id).await?);
                answer.map(|a| shown(a, show_secrets))
            }
            Call::CreateHeartbeat(body, auto, show_secrets) => {
                let answer = json(client.create_heartbeat_check(&body, auto).await?);
                answer.map(|a| shown(a, show_secrets))
            }
            Call::ListChecks(query, all, show_secrets) => {
                let checks = if all {
                    client.list_all_checks(&query).await?
                } else {
                    client.list_checks(&query).await?
                };
                let shown: Vec<serde_json::Value> = checks
                    .iter()
                    .filter_map(|check| json(check).map(|a| shown(a, show_secrets)))
                    .collect();
                Some(serde_json::Value::Array(shown))
            }
            Call::DeleteCheck(id) => {
                client.delete_check(&id).await?;
                None
            }
            Call::UpdateHeartbeat(id, body, auto, show_secrets) => {
                let answer = json(client.update_heartbeat_check(&id, &body, auto).await?);
                answer.map(|a| shown(a, show_secrets))
            }
            Call::Event(check, event) => json(client.get_heartbeat_event(&check, &event).await?),
            Call::Events(check, window) => {
                json(client.list_heartbeat_events(&check, &window).await?)
            }
            Call::GetGroup(id) => json(client.get_check_group(id).await?),
            Call::UpdateGroup(id, body, auto) => {
                json(client.update_check_group(id, &body, auto).await?)
            }
            Call::ErrorGroups(project) => json(client.list_error_groups(&project).await?),
            Call::DeleteSnippet(id) => {
                client.delete_snippet(id).await?;
                None
            }
        })
    }
}

/// Reads a JSON request body from `path` (`-` is stdin) into the typed request.
fn read_body<T: DeserializeOwned>(path: &Path, what: &str) -> Result<T, String> {
    let shown = if path == Path::new("-") {
        "<stdin>".to_owned()
    } else {
        path.display().to_string()
    };
    let mut text = String::new();
    let read = if path == Path::new("-") {
        std::io::stdin().read_to_string(&mut text).map(|_| ())
    } else {
        std::fs::read_to_string(path).map(|t| text = t)
    };
    read.map_err(|e| format!("cannot read the --body {shown}: {e}"))?;
    serde_json::from_str(&text).map_err(|e| {
        format!(
            "{shown}:{}:{}: not a valid {what} body: {e}",
            e.line(),
            e.column()
        )
    })
}

/// A check answer as printed: its ping secrets redacted unless `--show-secrets`.
fn shown(answer: serde_json::Value, show_secrets: bool) -> serde_json::Value {
    if show_secrets {
        answer
    } else {
        redact_ping_secrets(answer)
    }
}

/// The answer with `heartbeat.pingToken` shown as `[redacted]` and `heartbeat.pingUrl` as
/// [`crate::redact::url`] shows it.
fn redact_ping_secrets(mut answer: serde_json::Value) -> serde_json::Value {
    if let Some(beat) = answer.get_mut("heartbeat").and_then(|b| b.as_object_mut()) {
        if let Some(token) = beat.get_mut("pingToken").filter(|t| t.is_string()) {
            *token = "[redacted]".into();
        }
        if let Some(url) = beat.get_mut("pingUrl") {
            if let Some(raw) = url.as_str() {
                *url = crate::redact::url(raw).into();
            }
        }
    }
    answer
}

/// Prints `answer` on stdout: pretty on a terminal, one line otherwise.
fn print_json(answer: &serde_json::Value) -> u8 {
    let mut stdout = std::io::stdout().lock();
    let text = if stdout.is_terminal() {
        serde_json::to_string_pretty(answer)
    } else {
        serde_json::to_string(answer)
    };
    let written = text
        .map_err(std::io::Error::from)
        .and_then(|text| writeln!(stdout, "{text}"));
    match written {
        Ok(()) => exit::OK,
        // The reader went away (`| head`): the request itself went well.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => exit::OK,
        Err(e) => {
            print_error(format_args!("cannot write the answer: {e}"));
            exit::FAILURE
        }
    }
}

/// An RFC 3339 time, for `--start-time`/`--end-time`.
fn parse_time(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|e| format!("{e}: expected an RFC 3339 time such as 2026-11-20T00:00:00Z"))
}
