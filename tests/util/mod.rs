//! Helpers shared by the integration tests.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// The `heartbeat-agent` binary built for these tests.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heartbeat-agent"))
}

/// A `Command` for the agent binary with a clean, predictable environment: no inherited config,
/// API key or ping URL from the developer's shell, and HOME/XDG dirs under `home`.
pub fn agent(home: &std::path::Path) -> Command {
    let mut cmd = Command::new(bin());
    for var in [
        "HEARTBEAT_AGENT_CONFIG",
        "HEARTBEAT_AGENT_API_KEY",
        "HEARTBEAT_AGENT_ACCOUNT",
        "HEARTBEAT_AGENT_PING_URL",
        "HEARTBEAT_AGENT_LOG",
        "CREDENTIALS_DIRECTORY",
        "NOTIFY_SOCKET",
        "JOURNAL_STREAM",
        "XDG_CONFIG_HOME",
        "XDG_STATE_HOME",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("HOME", home);
    // The default state directory is /var/lib/heartbeat-agent for root: without this, tests run
    // as root would share one outbox and deliver each other's pending pings.
    cmd.env("STATE_DIRECTORY", home.join(".state"));
    cmd
}
pub mod emulator;
pub mod http;
pub mod outbox;
