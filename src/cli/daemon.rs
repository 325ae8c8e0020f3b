//! `heartbeat-agent daemon`: load and validate the config (exit 78 with every problem on
//! stderr), then run the daemon until SIGTERM/SIGINT (exit 0).

use clap::Args;
use tracing::warn;

use super::{exit, print_error, GlobalArgs};
use crate::config::Config;
use crate::daemon::{self, Options, Plugins};

/// Run and watch the config's jobs on their cron schedules and ping each job's check on success.
///
/// Reloads the config on SIGHUP (an invalid one is logged and the running one kept); stops on
/// SIGTERM or SIGINT, giving running jobs `shutdown_timeout` before SIGKILL. Under systemd use
/// `Type=notify`. Exit status: 0 after an orderly stop, 78 when the config is invalid, 1 when
/// the daemon cannot start.
#[derive(Debug, Args)]
pub struct DaemonArgs {}

/// Runs the daemon; returns the exit code.
pub fn run(_args: DaemonArgs, global: &GlobalArgs) -> u8 {
    daemon::raise_open_files_limit();
    let path = crate::paths::config_file(global.config.as_ref());
    let loaded = match Config::load(&path) {
        Ok(loaded) => loaded,
        Err(err) => {
            for problem in &err.problems {
                eprintln!("{problem}");
            }
            let count = err.problems.len();
            let noun = if count == 1 { "problem" } else { "problems" };
            print_error(format!(
                "configuration {} is invalid: {count} {noun}; the daemon did not start",
                path.display()
            ));
            return exit::CONFIG;
        }
    };
    for warning in &loaded.warnings {
        warn!("{warning}");
    }
    let options = Options {
        state_dir: loaded.config.state_dir(global.state_dir.as_deref()),
        config_path: path,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            print_error(format!("cannot start the async runtime: {err}"));
            return exit::FAILURE;
        }
    };
    // Sync (check definitions) and the outbox drainer plug in here once they exist.
    let plugins = Plugins::default();
    let result = runtime.block_on(daemon::run(options, loaded.config, plugins));
    // A probe stuck on a hung file system must not hold the exit.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(()) => exit::OK,
        Err(err) => {
            print_error(err);
            exit::FAILURE
        }
    }
}
