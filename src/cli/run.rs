//! `heartbeat-agent run [OPTIONS] -- CMD [ARGS...]`: wrap one command, ping on success.

use clap::Args;

use super::GlobalArgs;

/// Run one command, pass its output and exit code through, ping on success.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The command and its arguments (after `--`)
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Runs the command; returns the exit code to pass through.
pub fn run(_args: RunArgs, _global: &GlobalArgs) -> u8 {
    super::exit::OK
}
