//! `heartbeat-agent`: a heartbeat ping agent and edge daemon.
//!
//! The binary (`src/main.rs`) only parses arguments, sets up logging and maps results to exit
//! codes; everything else lives here, one module per domain (README.md, "Layout";
//! docs/dev/architecture.md for how they work together):
//!
//! - [`cli`]: clap definitions, one file per subcommand, and the assembly of a daemon.
//! - [`run`]: the one run pipeline of `heartbeat-agent run` and of the daemon's job task:
//!   admission, attempts, start, success and fail pings, after-run hooks, the run record.
//! - [`daemon`]: the long-running supervisor.
//! - [`cluster`]: cluster mode on etcd: the claim of each fire, leader election, sync's relay.
//! - [`sync`]: keeping heartbeat checks in sync with the config.
//! - [`status`]: the local status endpoint.
//! - [`pause`]: pauses for maintenance (`pause`, `resume`), kept under the state directory.
//! - [`job`]: a configured job made runnable: its command and its pings.
//! - [`retries`]: a job's retries and the waits between its attempts.
//! - [`process`]: spawning and supervising child processes.
//! - [`watch`]: condition probes.
//! - [`run_end`]: how a run ended, from the process or probe to status, metrics and exit code.
//! - [`ping`]: building and sending pings, and the durable outbox.
//! - [`net`]: outgoing connections: the trusted CAs and the proxy rule of every request.
//! - [`api`]: the typed client of the monitoring API.
//! - [`emulator`]: a local emulator of the monitoring API and its ping host.
//! - [`config`]: the TOML schema and the validated model, errors with file:line:col.
//! - [`schedule`]: crontab(5) parsing and fire times in a time zone.
//! - `duration`: durations with units (`90s`, `1h30m`) read and written back, for the config,
//!   the command line and `@every` schedules.
//! - [`import`]: translating crontabs into `[[jobs]]` tables.
//! - [`persist`]: files under the state directory written safely (atomic writes, locks).
//! - [`backoff`]: how long to wait before a retry (full-jitter backoff, `Retry-After`).
//! - [`response_head`]: reading an HTTP/1.1 response head (ping's fast path, the status client).
//! - `bearer`: the `Authorization: Bearer` credential of a request (status endpoint, emulator).
//! - `dir_watch`: a directory watched with inotify for changes to one file (config, pauses).
//! - [`paths`]: where the configuration file and the state directory are.
//! - [`host`]: this machine's name, as pings send it.
//! - [`redact`]: secrets (the API key, ping URLs) kept out of everything shown.
//! - [`exit`]: the exit codes of the command-line contract.
//! - [`logging`]: the log subscriber: terminal text, JSON or journald.
#![warn(missing_docs)]
#![warn(clippy::unwrap_used)]
// `println!` and `eprintln!` panic when their output is closed: text for the terminal goes
// through `logging::write_out` and `logging::write_err`, which drop it instead.
#![cfg_attr(not(test), warn(clippy::print_stdout, clippy::print_stderr))]

pub mod api;
pub mod backoff;
mod bearer;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod daemon;
mod dir_watch;
mod duration;
pub mod emulator;
pub mod exit;
pub mod history;
pub mod host;
pub mod identity;
pub mod import;
pub mod job;
pub mod logging;
pub mod metrics_registry;
pub mod net;
pub mod paths;
pub mod pause;
pub mod persist;
pub mod ping;
pub mod process;
pub mod redact;
pub mod response_head;
pub mod retries;
pub mod run;
pub mod run_end;
pub mod schedule;
pub mod status;
pub mod sync;
pub mod watch;

/// The agent's version, as sent in `User-Agent: heartbeat-agent/<version>`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The `User-Agent` header value of every request the agent makes.
pub fn user_agent() -> String {
    format!("heartbeat-agent/{VERSION}")
}
