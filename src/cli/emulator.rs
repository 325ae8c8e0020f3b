//! `heartbeat-agent emulator`: serve the local emulator until SIGTERM.

use clap::Args;

use super::GlobalArgs;

/// Serve a local emulator of the monitoring API and its ping host.
#[derive(Debug, Args)]
pub struct EmulatorArgs {}

/// Serves until SIGTERM.
pub fn run(_args: EmulatorArgs, _global: &GlobalArgs) -> u8 {
    super::exit::OK
}
