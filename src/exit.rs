//! The process exit codes that are part of the command-line contract: what every subcommand
//! exits with, and what `run` passes through for a command that timed out or could not start
//! (the codes of coreutils `timeout` and of POSIX shells).
//!
//! Kept outside `cli` so the code that computes a status (the run-end type, the process
//! supervisor) does not depend on the command line.

/// Success.
pub(crate) const OK: u8 = 0;
/// A runtime failure (an API error, a failed sync, an unhealthy agent).
pub(crate) const FAILURE: u8 = 1;
/// Bad command-line arguments (clap's own code for usage errors).
pub(crate) const USAGE: u8 = 2;
/// The command could be found but not executed.
pub(crate) const CANNOT_EXECUTE: u8 = 126;
/// The command was not found.
pub(crate) const NOT_FOUND: u8 = 127;
/// The command ran past `--timeout` and ended after SIGTERM (as coreutils `timeout`).
pub(crate) const TIMED_OUT: u8 = 124;
/// The command ran past `--timeout` and had to be killed with SIGKILL (128 + 9).
pub(crate) const KILLED: u8 = 137;
/// The configuration is invalid (`EX_CONFIG` from sysexits.h).
pub(crate) const CONFIG: u8 = 78;
/// The daemon was interrupted twice and killed its jobs without waiting (128 + SIGINT).
pub(crate) const INTERRUPTED: u8 = 130;
