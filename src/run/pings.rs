//! A run's pings: the start ping (sent once, before the first attempt, in a task of its own,
//! never kept in the outbox), and at the end the one choice between the success ping and the
//! fail ping ([`finish`]: the fail URL's `{exit_code}` filled with the status `run` exits
//! with, and with `fail_body` the output tail, scrubbed of every secret the agent knows, or
//! with `fail_body = "json"` the run's JSON summary for a webhook; `fail_method` and
//! `fail_headers` applied), each with the run's id as its URL's `{run_id}`,
//! delivered through the outbox after the start ping. A failed run also drops a pending
//! success of the same job from the outbox: delivered later, it would claim the job is fine.

use std::sync::{Arc, OnceLock};

use chrono::{DateTime, Utc};
use tokio::task::JoinHandle;
use tracing::warn;

use super::AttemptEnd;
use super::{PingRecord, RunId};
use crate::config::FailUrl;
use crate::ping::outbox::{self, Outbox, PingContext};
use crate::ping::{Budget, Ping, PingKind, PingMethod, PingOutcome, Sender};

/// Where and how a run pings, besides its success ping (which the [`super::Runner`] resolves
/// at the end).
#[derive(Debug, Clone)]
pub(crate) struct Pings {
    /// Pinged when the run starts (`start_url`); never queued.
    pub start: Option<Ping>,
    /// Pinged when the run fails (`fail_url`), `{exit_code}` filled in.
    pub fail: Option<FailUrl>,
    /// With `fail`: how many bytes of the last output its fail ping carries (`fail_body`).
    pub fail_body: Option<usize>,
    /// With `fail`: whether its body is the JSON summary, its method and headers.
    pub fail_send: crate::job::FailSend,
    /// Method and source (`Origin`) of the fail ping.
    pub method: PingMethod,
    pub source: String,
    /// The time budget of each ping.
    pub budget: Budget,
    /// How the pings leave the process (its connections).
    pub sender: Sender,
    /// The job and age limit stored with a ping that goes to the outbox.
    pub context: PingContext,
    /// Whether the pings are sent in a span naming the job (the daemon's, so what the ping and
    /// outbox code log names it). Made only when a ping is sent: a span for every run would
    /// cost its set-up and a slot of the span registry per running job.
    pub job_span: bool,
}

impl Pings {
    /// The span the pings are sent in.
    fn span(&self) -> tracing::Span {
        match self.context.job.as_deref().filter(|_| self.job_span) {
            Some(job) => tracing::info_span!("run", job = %job),
            None => tracing::Span::none(),
        }
    }

    /// Sends the start ping, if any, in a task of its own so the command starts at once; its
    /// result is kept in the [`Started`] slot when it comes.
    pub(super) fn send_start(&self, run: RunId) -> Option<Started> {
        let ping = self.start.clone()?.for_run(run);
        let (budget, context, sender) = (self.budget, self.context.clone(), self.sender.clone());
        let result = Arc::new(OnceLock::new());
        let slot = Arc::clone(&result);
        let send = async move {
            let at = Utc::now();
            let outcome =
                outbox::deliver_or_queue_for(&sender, &ping, &budget, None, &context).await;
            let _ = slot.set(PingRecord::of(at, PingKind::Start, &outcome));
        };
        let task = tokio::spawn(tracing::Instrument::instrument(send, self.span()));
        Some(Started { task, result })
    }

    /// After a failed run: drops a pending success of the job (or of `success`'s target) from
    /// the outbox.
    pub(super) fn drop_pending_success(&self, outbox: &Outbox, success: Option<&Ping>) {
        let job = self.context.job.as_deref();
        let span = self.span();
        let _entered = span.enter();
        if let Err(err) = outbox.drop_after_failure(job, success) {
            warn!(error = %err, "cannot drop the pending success of this failed run");
        }
    }

    /// Delivers `ping` after the start ping ended (so the service sees them in order), through
    /// the outbox; returns when it was sent and what came of it.
    pub(super) async fn deliver_after(
        &self,
        start: Option<JoinHandle<()>>,
        ping: &Ping,
        outbox: &Outbox,
    ) -> (DateTime<Utc>, PingOutcome) {
        let send = async {
            if let Some(start) = start {
                let _ = start.await;
            }
            let at = Utc::now();
            // Boxed: a delivery's state is most of a run's future, and every running job's
            // task would hold that room from its start, pinging or not.
            let outcome = Box::pin(outbox::deliver_or_queue_for(
                &self.sender,
                ping,
                &self.budget,
                Some(outbox),
                &self.context,
            ))
            .await;
            (at, outcome)
        };
        tracing::Instrument::instrument(send, self.span()).await
    }
}

/// A start ping on its way: its task, and its result once it came (for the run's report).
pub(super) struct Started {
    /// The task sending it (the final ping waits for it).
    pub task: JoinHandle<()>,
    /// Its result, set when it came.
    pub result: Arc<OnceLock<PingRecord>>,
}

/// The run's final ping: `success` when the run succeeded, else the fail ping (if the run has
/// a fail URL). The one place that chooses between them.
pub(super) fn finish(
    pings: &Pings,
    ended: &AttemptEnd,
    success: Option<Ping>,
    run: RunId,
) -> Option<Ping> {
    if ended.success() {
        return success;
    }
    let url = pings.fail.as_ref()?;
    let body = pings.fail_body.map(|max| {
        let tail = crate::redact::job_output(&ended.output_tail, max);
        if pings.fail_send.json {
            summary(pings.context.job.as_deref(), ended, run, tail)
        } else {
            tail
        }
    });
    let status = ended.end.exit_status();
    let span = pings.span();
    let _entered = span.enter();
    let (method, source, send) = (pings.method, &pings.source, &pings.fail_send);
    crate::job::fail_ping(url, status, &run.text(), body, method, source, send)
        .inspect_err(|err| warn!("fail ping not sent: {err}"))
        .ok()
}

/// The body of `fail_body = "json"` (docs/config.md): a failed run of `job` (`null` for a
/// plain `run`) as a chat or generic webhook takes it, `text` a one-line summary (what a
/// Slack incoming webhook shows). Every text is scrubbed of the agent's secrets; `tail` already
/// is.
fn summary(job: Option<&str>, ended: &AttemptEnd, run: RunId, tail: String) -> String {
    let host = crate::host::name();
    let end = &ended.end;
    let how = match (end.process_end(), end.reason()) {
        (Some(process), _) => process.to_string(),
        (None, Some(reason)) => reason.to_owned(),
        (None, None) => ended.outcome.as_str().to_owned(),
    };
    let how = if end.timed_out() {
        format!("{how} after its timeout")
    } else {
        how
    };
    let what = match job {
        Some(job) => format!("job \"{job}\""),
        None => "a command".to_owned(),
    };
    let line = format!("heartbeat-agent: {what} failed on {host}: {how} (run {run})");
    let text: String = crate::redact::scrub(&line)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let millis = (Utc::now() - ended.started).num_milliseconds().max(0);
    let doc = serde_json::json!({
        "text": text,
        "job": job,
        "host": host,
        "run_id": run.text(),
        "exit_code": end.exit_code(),
        "signal": end.signal(),
        "outcome": ended.outcome.as_str(),
        "duration_seconds": millis as f64 / 1000.0,
        "output_tail": tail,
    });
    doc.to_string()
}

/// Reads the API key of `source` (if it can be read) so that [`crate::redact::job_output`]
/// removes it from every job output that leaves the process (a fail ping's body, the daemon's
/// log and records): a command's output may print it. Errors are for the commands that use
/// the key to say; here the key is only learned.
pub(crate) fn learn_api_key(source: &crate::config::ApiKeySource) {
    let _ = crate::config::secrets::read_api_key(source);
}
