//! Logging set-up: human text on a terminal, JSON on request, journald-friendly fields when
//! stderr is the journal. Logs always go to stderr; stdout belongs to the command's output.

use tracing_subscriber::EnvFilter;

use crate::cli::{GlobalArgs, LogFormat};

/// The environment variable holding a log filter when `--log-level` is not given.
pub const LOG_ENV: &str = "HEARTBEAT_AGENT_LOG";

/// Installs the global tracing subscriber. Safe to call once per process.
pub fn init(global: &GlobalArgs) {
    let filter = global
        .log_level
        .clone()
        .or_else(|| std::env::var(LOG_ENV).ok())
        .unwrap_or_else(|| "info".to_owned());
    let filter = EnvFilter::try_new(&filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let format = global.log_format.unwrap_or(LogFormat::Auto);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    let stderr_is_journal = std::env::var_os("JOURNAL_STREAM").is_some();
    let result = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        // The journal adds its own time stamp and priority; plain text without colour reads
        // best there. Structured journald fields come with the daemon issue.
        LogFormat::Auto if stderr_is_journal => builder.without_time().with_ansi(false).try_init(),
        LogFormat::Auto | LogFormat::Text => builder
            .with_ansi(
                std::io::IsTerminal::is_terminal(&std::io::stderr())
                    && std::env::var_os("NO_COLOR").is_none(),
            )
            .try_init(),
    };
    // A subscriber already installed (tests) is fine.
    let _ = result;
}
