//! `heartbeat-agent ping (--job NAME | --ping-url URL)`: send one ping through the same path
//! as `run` (a ping that cannot be delivered is kept in the outbox).

use std::time::Duration;

use clap::Args;

use super::run::MethodArg;
use super::{exit, print_error, GlobalArgs};
use crate::config::Config;
use crate::ping::outbox::{self, PingContext};
use crate::ping::{Budget, Ping, PingMethod, PingOutcome};

/// Send one ping now; when it cannot be delivered it is kept in the outbox for later.
///
/// Exit status: 0 when delivered, 1 when not (kept in the outbox, or refused by the server),
/// 2 on bad arguments, 78 when --job cannot be used (config invalid, job unknown, no ping URL).
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("target").required(true).args(["job", "ping_url"]))]
pub struct PingArgs {
    /// Ping the URL of job NAME from the config
    #[arg(long, value_name = "NAME")]
    pub job: Option<String>,

    /// Ping this URL (a secret: only shown redacted)
    #[arg(long, value_name = "URL")]
    pub ping_url: Option<String>,

    /// HTTP method of the ping
    #[arg(long, value_enum, default_value_t = MethodArg::Get, value_name = "METHOD")]
    pub ping_method: MethodArg,

    /// Sent as the ping's Origin header, shown as the event's source [default: the host name]
    #[arg(long, value_name = "NAME")]
    pub source: Option<String>,

    /// Total time for the ping, all attempts and pauses included
    #[arg(long, value_parser = crate::config::duration::parse, default_value = "30s", value_name = "DUR")]
    pub ping_timeout: Duration,
}

/// Sends the ping; returns the exit code.
pub fn run(args: PingArgs, global: &GlobalArgs) -> u8 {
    let method = PingMethod::from(args.ping_method);
    let source = args.source.clone().unwrap_or_else(crate::host::name);
    let config = super::run::load_config(global, args.job.as_deref());
    let (ping, context) = match target(&args, global, config.as_ref(), method, &source) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let outbox = Some(super::outbox::open(global, config.as_ref()));
    let budget = Budget {
        total: args.ping_timeout,
        ..Budget::default()
    };
    let runtime = match super::current_thread_runtime() {
        Ok(runtime) => runtime,
        Err(err) => {
            print_error(format!("cannot start the async runtime: {err}"));
            return exit::FAILURE;
        }
    };
    let outcome = runtime.block_on(outbox::deliver_or_queue_for(
        &ping,
        &budget,
        outbox.as_ref(),
        &context,
    ));
    match outcome {
        PingOutcome::Delivered { .. } => exit::OK,
        _ => exit::FAILURE,
    }
}

/// The ping and its context, from `--ping-url` or the job; `Err` is the exit code.
fn target(
    args: &PingArgs,
    global: &GlobalArgs,
    config: Option<&Config>,
    method: PingMethod,
    source: &str,
) -> Result<(Ping, PingContext), u8> {
    let configured_age = config.and_then(|c| c.agent.outbox_max_age);
    if let Some(url) = &args.ping_url {
        let ping = Ping::new(url, method, source).map_err(|err| {
            print_error(format!("invalid --ping-url: {err}"));
            exit::USAGE
        })?;
        let context = PingContext {
            job: None,
            max_age: crate::config::defaults::outbox_max_age(configured_age, None),
        };
        return Ok((ping, context));
    }
    let name = args.job.as_deref().unwrap_or_default();
    let refuse = |message: String| {
        print_error(message);
        exit::CONFIG
    };
    let config = config.ok_or_else(|| {
        refuse(format!(
            "job \"{name}\" needs a valid configuration (see `heartbeat-agent config check`)"
        ))
    })?;
    let job = config.job(name).ok_or_else(|| {
        refuse(format!(
            "job \"{name}\" is not in {} (see `heartbeat-agent config check`)",
            config.path.display()
        ))
    })?;
    let state_dir = super::outbox::state_dir(global, Some(config));
    let learned = |check: &str| crate::sync::learned_ping_url(&state_dir, name, check);
    let ping =
        crate::job::ping(job, learned, method, source).map_err(|no| refuse(no.to_string()))?;
    let context = PingContext {
        job: Some(name.to_owned()),
        max_age: crate::config::defaults::outbox_max_age(configured_age, Some(job)),
    };
    Ok((ping, context))
}
