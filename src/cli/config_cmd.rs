//! `heartbeat-agent config check`: validate the configuration file.

use clap::Subcommand;

use super::GlobalArgs;

/// Configuration commands.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the configuration; print each job's next fire times and ping target
    Check,
}

/// Runs a `config` subcommand.
pub fn run(_cmd: ConfigCommand, _global: &GlobalArgs) -> u8 {
    super::exit::OK
}
