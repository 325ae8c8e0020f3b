//! `heartbeat-agent emulator`: serve the local emulator of the monitoring API and its ping host
//! until SIGTERM or SIGINT.
//!
//! Prints two machine-readable lines on stdout once both listeners are bound:
//! `base_url=http://127.0.0.1:8465` and `ping_url=http://127.0.0.1:8466`.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use tokio::signal::unix::{signal, SignalKind};

use super::{context, print_error, GlobalArgs};
use crate::emulator::{
    Emulator, EmulatorOptions, Fixtures, RateLimit, DEFAULT_ACCOUNT, DEFAULT_API_KEY,
    DEFAULT_LISTEN, DEFAULT_PING_LISTEN,
};
use crate::exit;

/// Serve a local emulator of the monitoring API and its ping host.
///
/// Prints `base_url=URL` and `ping_url=URL` on stdout, then serves until SIGTERM or SIGINT
/// (exit 0). Port 0 picks a free port. See docs/emulator.md.
#[derive(Debug, Args)]
pub struct EmulatorArgs {
    /// Address of the API listener
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,

    /// Address of the ping host listener
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_PING_LISTEN)]
    pub ping_listen: SocketAddr,

    /// API key clients must send as `Authorization: Bearer KEY`
    #[arg(long, value_name = "KEY", default_value = DEFAULT_API_KEY)]
    pub api_key: String,

    /// Account id clients must send as `x-service-account`
    #[arg(long, value_name = "ACCOUNT", default_value = DEFAULT_ACCOUNT)]
    pub account: String,

    /// JSON file of resources to start with (see config/emulator-fixtures.json)
    #[arg(long, value_name = "FILE")]
    pub fixtures: Option<PathBuf>,

    /// API rate limit per key: N requests per SECS seconds
    #[arg(long, value_name = "N/SECS", default_value = "600/60")]
    pub rate_limit: RateLimit,

    /// Emulated seconds per real second (1 = real time)
    #[arg(long, value_name = "FACTOR", default_value_t = 1.0)]
    pub clock_scale: f64,

    /// How many checks the account may hold: creating one more is answered 402 [default: no
    /// limit]
    #[arg(long, value_name = "N")]
    pub max_checks: Option<usize>,
}

/// Serves until SIGTERM or SIGINT; 0 then, 1 when the emulator cannot start.
pub fn run(args: EmulatorArgs, _global: &GlobalArgs) -> u8 {
    if !(args.clock_scale.is_finite() && args.clock_scale > 0.0) {
        print_error(format!(
            "invalid --clock-scale {}: must be a number above 0",
            args.clock_scale
        ));
        return exit::USAGE;
    }
    let fixtures = match &args.fixtures {
        Some(path) => match Fixtures::from_file(path) {
            Ok(fixtures) => fixtures,
            Err(err) => {
                print_error(err);
                return exit::FAILURE;
            }
        },
        None => Fixtures::default(),
    };
    let options = EmulatorOptions {
        api_addr: args.listen,
        ping_addr: args.ping_listen,
        api_key: args.api_key,
        account: args.account,
        fixtures,
        rate_limit: args.rate_limit,
        clock_scale: args.clock_scale,
        max_checks: args.max_checks,
    };
    let runtime = match context::runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    match runtime.block_on(serve(options)) {
        Ok(()) => exit::OK,
        Err(message) => {
            print_error(message);
            exit::FAILURE
        }
    }
}

async fn serve(options: EmulatorOptions) -> Result<(), String> {
    let mut term = signal(SignalKind::terminate())
        .map_err(|err| format!("cannot install the SIGTERM handler: {err}"))?;
    let mut int = signal(SignalKind::interrupt())
        .map_err(|err| format!("cannot install the SIGINT handler: {err}"))?;
    let handle = Emulator::start(options)
        .await
        .map_err(|err| err.to_string())?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "base_url={}", handle.base_url())
        .and_then(|()| writeln!(stdout, "ping_url={}", handle.ping_url()))
        .and_then(|()| stdout.flush())
        .map_err(|err| format!("cannot write the URLs to stdout: {err}"))?;
    drop(stdout);
    tokio::select! {
        _ = term.recv() => tracing::info!(signal = "SIGTERM", "emulator stopping"),
        _ = int.recv() => tracing::info!(signal = "SIGINT", "emulator stopping"),
    }
    handle.shutdown().await;
    Ok(())
}
