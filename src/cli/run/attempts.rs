//! The attempts of `run`'s command: it runs once, and again after a failure while `--retries`
//! (or the job's `retries`) allow, each attempt under the run's limits (`--timeout` applies to
//! each). Between attempts the wrapper waits [`crate::retries::Retries::delay_before`]; a
//! SIGTERM, SIGINT, SIGHUP or SIGQUIT, whether it came during an attempt (it was forwarded to
//! the command) or during a wait, ends the run with the last attempt's status and starts no
//! further attempt. The notices go to stderr through the log, like `run`'s other notices:
//! stdout and the exit status stay the command's.

use tracing::{info, warn};

use super::{report, supervise, Plan, Signals};
use crate::cli::print_error;
use crate::config::duration::human_duration;
use crate::process::children::Children;
use crate::process::{RunEnd, Tail};

/// Runs the planned command's attempts; returns how the last one ended, with the output tail
/// it kept (a job with `fail_body`).
pub(super) async fn run(
    plan: &Plan,
    children: &Children,
    signals: &mut Signals,
) -> (RunEnd, Option<Tail>) {
    let attempts = plan.retries.attempts();
    let mut attempt = 1;
    loop {
        let (end, tail) = match children.spawn(&plan.spec) {
            Err(err) => {
                print_error(&err);
                (RunEnd::from(&err), None)
            }
            Ok(running) => {
                let pid = running.pid();
                let outcome = supervise(running, plan.limits, signals).await;
                children.ended(pid);
                report(&outcome, plan);
                (outcome.end, outcome.tail)
            }
        };
        let succeeded = end.succeeded(&plan.success_codes);
        if succeeded && attempt > 1 {
            info!(
                attempt,
                attempts, "command succeeded on attempt {attempt} of {attempts}"
            );
        }
        if succeeded || attempts == 1 {
            return (end, tail);
        }
        let status = end.exit_status();
        if attempt >= attempts {
            warn!(
                attempts,
                exit_status = status,
                "all {attempts} attempts of the command failed (exit {status})"
            );
            return (end, tail);
        }
        if signals.stop_received() {
            warn!(
                attempt,
                attempts,
                exit_status = status,
                "no further attempt: the agent was asked to stop (exit {status})"
            );
            return (end, tail);
        }
        let wait = plan.retries.delay_before(attempt - 1);
        warn!(
            attempt,
            attempts,
            exit_status = status,
            "attempt {attempt} of {attempts} failed (exit {status}); retrying in {}",
            human_duration(wait)
        );
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            signal = signals.recv_stop() => {
                warn!(signal = %signal, attempt, attempts, exit_status = status, "no further attempt: the agent was asked to stop (exit {status})");
                return (end, tail);
            }
        }
        attempt += 1;
    }
}
