//! `heartbeat-agent api ...`: every operation of the monitoring API from the shell.

use clap::Subcommand;

use super::GlobalArgs;

/// API operations.
#[derive(Debug, Subcommand)]
pub enum ApiCommand {
    /// List all check statuses
    CheckStatuses,
}

/// Runs an `api` subcommand.
pub fn run(_cmd: ApiCommand, _global: &GlobalArgs) -> u8 {
    super::exit::OK
}
