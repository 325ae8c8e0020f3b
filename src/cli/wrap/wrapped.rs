//! What `run` gives the run pipeline ([`crate::run::Runner`]): each attempt runs the planned
//! command (with the run's id in `HEARTBEAT_AGENT_RUN_ID`) in the foreground under the run's
//! limits (`--timeout` applies to each), with the
//! signals the wrapper receives forwarded to the command's process group. A SIGTERM, SIGINT,
//! SIGHUP or SIGQUIT, whether it came during an attempt (it was forwarded to the command) or
//! during a wait between attempts, ends the run with the last attempt's status and starts no
//! further attempt, and one during the final ping or the after-ping work cuts it short (the
//! ping stays in the outbox). The
//! notices go to stderr through the log, like `run`'s other notices: stdout and the exit
//! status stay the command's. An accepted ping is said only when asked (`-v`, `--log-level
//! info`): see [`crate::logging::PINGED_TARGET`].

use std::sync::Arc;

use chrono::Utc;
use nix::sys::signal::Signal;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::after_ping::sync_after_accepted_ping;
use super::{report, supervise, Plan, Signals};
use crate::cli::print_error;
use crate::duration::human_duration;
use crate::ping::outbox::{self, Outbox};
use crate::ping::Ping;
use crate::process::children::Children;
use crate::run::{AttemptEnd, Notice, PingRecord, Report, RunAttempt, RunRecord, Runner};
use crate::run_end::RunEnd;

/// `run`'s command as the pipeline runs it.
pub(super) struct Wrapped<'a> {
    pub plan: &'a Plan,
    pub children: &'a Children,
    pub outbox: &'a Outbox,
    pub signals: Signals,
    /// The PID 1 reaper of orphans, while the command runs.
    pub reaper: Option<(CancellationToken, JoinHandle<()>)>,
    /// The stop signal last received while no command ran.
    pub stop: Option<Signal>,
    /// The number the run was recorded as in the job's history while its pings were on
    /// their way (their outcome is recorded after them).
    pub recorded: Option<u64>,
}

impl Runner for Wrapped<'_> {
    async fn attempt(&mut self, attempt: RunAttempt) -> AttemptEnd {
        let started = Utc::now();
        let mut spec = self.plan.spec.clone();
        spec.env_set
            .push((crate::process::RUN_ID_ENV.into(), attempt.run.text().into()));
        let (end, tail) = match self.children.spawn(&spec) {
            Err(err) => {
                print_error(&err);
                (RunEnd::from(&err), None)
            }
            Ok(running) => {
                let pid = running.pid();
                let outcome = supervise(running, self.plan.limits, &mut self.signals).await;
                self.children.ended(pid);
                report(&outcome, self.plan);
                (outcome.end, outcome.tail)
            }
        };
        AttemptEnd {
            started,
            outcome: end.outcome(&self.plan.success_codes),
            end,
            output_tail: tail.map(|t| t.text().into_bytes()).unwrap_or_default(),
        }
    }

    fn stop_asked(&self) -> bool {
        self.signals.stop_received()
    }

    async fn stopped(&mut self) {
        self.stop = Some(self.signals.recv_stop().await);
    }

    fn notice(&self, notice: Notice<'_>) {
        match notice {
            Notice::SucceededAfter { attempt } => {
                let RunAttempt { number, of, .. } = attempt;
                info!(
                    attempt = number,
                    attempts = of,
                    "command succeeded on attempt {number} of {of}"
                );
            }
            Notice::AllFailed { attempt, ended } => {
                let (of, status) = (attempt.of, ended.end.exit_status());
                warn!(
                    attempts = of,
                    exit_status = status,
                    "all {of} attempts of the command failed (exit {status})"
                );
            }
            Notice::NoFurtherAttempt { attempt, ended } => {
                let RunAttempt { number, of, .. } = attempt;
                let status = ended.end.exit_status();
                let signal = self.stop.map(|s| s.to_string());
                warn!(
                    signal,
                    attempt = number,
                    attempts = of,
                    exit_status = status,
                    "no further attempt: the agent was asked to stop (exit {status})"
                );
            }
            Notice::Retrying {
                attempt,
                ended,
                wait,
            } => {
                let RunAttempt { number, of, .. } = attempt;
                let status = ended.end.exit_status();
                warn!(
                    attempt = number,
                    attempts = of,
                    exit_status = status,
                    "attempt {number} of {of} failed (exit {status}); retrying in {}",
                    human_duration(wait)
                );
            }
            Notice::PingInterrupted { .. } => {
                let signal = self.stop.map(|s| s.to_string());
                warn!(
                    signal,
                    "ping interrupted: the agent was asked to stop (the ping stays in the outbox)"
                );
            }
        }
    }

    fn success_ping(&self) -> Option<Ping> {
        self.plan.success.clone()
    }

    /// An accepted ping is said at info level under its own target, which the default filter
    /// leaves out (a good run from crontab stays silent): `-v` or `--log-level info` shows it.
    fn pinged(&mut self, ping: &PingRecord) {
        let (true, Some(status)) = (ping.accepted, ping.status) else {
            return;
        };
        let took = (Utc::now() - ping.at).num_milliseconds().max(0);
        let what = match (&self.plan.pings.context.job, &self.plan.success) {
            (Some(job), _) => job.clone(),
            (None, Some(ping)) => ping.redacted(),
            (None, None) => return,
        };
        info!(target: crate::logging::PINGED_TARGET, status, took_ms = took, "pinged {what} (HTTP {status}, {took} ms)");
    }

    /// For a job bound to a check: right after an accepted ping (or when a pause's deadline
    /// passed and no daemon ended it, see [`crate::pause`]) the held period change goes out;
    /// then what the outbox holds is given one attempt within what is left of the ping budget
    /// and at most 2 s ([`outbox::catch_up`]). A stop signal cuts it short.
    async fn after_ping(&mut self, report: &Report) {
        if let Some((_, task)) = self.reaper.take() {
            let _ = task.await;
        }
        if let (Some((job, _)), Some(seq)) = (&self.plan.history, self.recorded.take()) {
            let update = crate::history::PingUpdate::of(seq, report);
            let plan = &self.plan;
            crate::history::History::new(&plan.state_dir, &plan.failures).pinged(job, &update);
        }
        if report.interrupted {
            return;
        }
        let plan = self.plan;
        let after = async {
            let pause_ended = plan.sync.as_ref().is_some_and(|sync| {
                crate::pause::load(&plan.state_dir).ending(&sync.job, Utc::now())
            });
            if let (true, Some(sync)) = (report.ping_accepted || pause_ended, &plan.sync) {
                let accepted = report.ping_accepted;
                sync_after_accepted_ping(sync, &plan.state_dir, &plan.failures, accepted).await;
            }
            let budget = &plan.pings.budget;
            let left = budget.total.saturating_sub(report.pings_began.elapsed());
            let (sender, stored) = (&plan.pings.sender, report.stored.clone());
            outbox::catch_up(sender, self.outbox, budget, left, stored).await;
        };
        tokio::select! {
            () = after => {}
            signal = self.signals.recv_stop() => warn!(signal = %signal, "ping interrupted: the agent was asked to stop (the ping stays in the outbox)"),
        }
    }

    fn ended(&mut self, record: &Arc<RunRecord>, pinging: bool) {
        // The command's tree has ended: no more orphans of it to reap.
        if let Some((cancel, _)) = &self.reaper {
            cancel.cancel();
        }
        // Recorded before the pings, which may wait for a slow host: a kill meanwhile keeps
        // the run.
        if let Some((job, limit)) = &self.plan.history {
            let run = crate::history::Run::ended(record, None, pinging);
            let history = crate::history::History::new(&self.plan.state_dir, &self.plan.failures);
            let seq = history.record(job, *limit, run);
            self.recorded = seq.filter(|_| pinging);
        }
    }
}
