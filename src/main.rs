//! The `heartbeat-agent` binary: parse arguments, set up logging, run, map to an exit code.

use std::process::ExitCode;

use heartbeat_agent::cli::{self, Cli};

fn main() -> ExitCode {
    let cli = Cli::from_env();
    heartbeat_agent::logging::init(&cli.global.logging_options());
    cli::main(cli)
}
