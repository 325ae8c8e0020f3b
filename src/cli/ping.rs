//! `heartbeat-agent ping (--job NAME | --ping-url URL)`: send one ping through the same path
//! as `run` (a ping that cannot be delivered is kept in the outbox).

use clap::Args;

use super::context::{self, Lenient, PingOptions};
use super::{print_error, GlobalArgs};
use crate::exit;
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

    /// Method, source and time budget of the ping.
    #[command(flatten)]
    pub options: PingOptions,
}

/// Sends the ping; returns the exit code.
pub fn run(args: PingArgs, global: &GlobalArgs) -> u8 {
    let method = PingMethod::from(args.options.ping_method);
    let source = args.options.source();
    let resolved = Lenient::resolve(global, args.job.as_deref(), args.options.ca_file.as_deref());
    let (ping, ping_context) = match target(&args, &resolved, method, &source) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let outbox = Some(resolved.outbox());
    let budget = Budget {
        total: args.options.ping_timeout,
        ..Budget::default()
    };
    let runtime = match context::runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let outcome = runtime.block_on(outbox::deliver_or_queue_for(
        &resolved.pings(),
        &ping,
        &budget,
        outbox.as_ref(),
        &ping_context,
    ));
    match outcome {
        PingOutcome::Delivered { .. } => exit::OK,
        _ => exit::FAILURE,
    }
}

/// The ping and its context, from `--ping-url` or the job; `Err` is the exit code.
fn target(
    args: &PingArgs,
    resolved: &Lenient,
    method: PingMethod,
    source: &str,
) -> Result<(Ping, PingContext), u8> {
    let config = resolved.config.as_ref();
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
    let learned = |check: &str| crate::sync::learned_ping_url(&resolved.state_dir, name, check);
    let ping =
        crate::job::ping(job, learned, method, source).map_err(|no| refuse(no.to_string()))?;
    let context = PingContext {
        job: Some(name.to_owned()),
        max_age: crate::config::defaults::outbox_max_age(configured_age, Some(job)),
    };
    Ok((ping, context))
}
