//! What a pass writes: the `PUT` of a definition (its `tags` merged with the ones set elsewhere,
//! [`super::tags`]) and the answer recorded, and the record made from a read when the service
//! already has the desired definition (no `PUT` at all).
//!
//! A `PUT` carries `tags` only when the agent's own tags changed (the service keeps a field it
//! is not sent); then the service's tags are needed, as read this pass or read now, since the
//! service replaces `tags` whole. A `PUT` answered 404 means the check is gone:
//! [`SyncOutcome::Missing`], naming the job and check. The answer's ping URL and token are
//! recorded with the definition sent, so the token never rotates and the job pings the learned
//! URL.

use std::time::Duration;

use super::desired::{Change, Definition};
use super::drift::{self, Seen};
use super::reconcile::Pass;
use super::report::SyncOutcome;
use super::state;
use super::tags;
use crate::api::model::{HeartbeatCheck, HeartbeatCheckUpdate};
use crate::api::{ApiClient, ApiError};

/// How the service answered a PUT, as far as pacing is concerned.
#[derive(Debug, Clone, Copy)]
pub(super) enum PutAnswer {
    /// 429, with the service's `Retry-After` if it sent one.
    RateLimited(Option<Duration>),
    /// No answer at all (connection refused, unreachable, timed out) after the retries.
    Unanswered,
    /// Anything else (accepted, another error, no answer): it counted against the limit.
    Other,
}

impl Pass<'_> {
    /// Records `remote` (read from the service, equal to the desired definition) as what the
    /// service accepted, with the check's ping URL and token, for a job without a record: so no
    /// `PUT` goes out for a check that already has the config's definition (a lost state
    /// directory, a check found by its tag), and the job learns where to ping.
    pub(super) fn adopt(
        &self,
        job: &str,
        check_id: &str,
        remote: &Definition,
        check: &HeartbeatCheck,
        held: &[Change],
    ) -> SyncOutcome {
        let mut accepted = remote.clone();
        if let Some(spec) = accepted.body.heartbeat.as_mut() {
            spec.ping_token.clone_from(&check.heartbeat.ping_token);
        }
        let saved = state::learn(
            self.state_dir,
            self.client.metrics().persist_failures(),
            job,
            check_id,
            &check.heartbeat,
            self.learned,
            |s| s.accepted = Some(accepted),
        );
        match saved {
            Ok(_) if held.is_empty() => SyncOutcome::InSync,
            Ok(_) => SyncOutcome::Held,
            Err(err) => SyncOutcome::Failed(format!(
                "job \"{job}\": check {check_id}: read and in sync, but {err}"
            )),
        }
    }

    /// Sends `definition` (its tags merged, [`tags_to_send`]; `accepted` the last accepted
    /// definition, `remote` the service's tags when this pass read them) and records what the
    /// service accepted.
    pub(super) async fn put(
        &self,
        job: &str,
        check_id: &str,
        definition: Definition,
        accepted: Option<&Definition>,
        remote: Option<&[String]>,
    ) -> (SyncOutcome, PutAnswer) {
        match tags_to_send(self.client, check_id, &definition, accepted, remote).await {
            Ok(tags) => self.put_with(job, check_id, definition, tags).await,
            Err((message, answer)) => (
                SyncOutcome::Failed(format!("job \"{job}\": check {check_id}: {message}")),
                answer,
            ),
        }
    }

    /// Sends the definition with `tags` as its tags and records what the service accepted.
    async fn put_with(
        &self,
        job: &str,
        check_id: &str,
        mut definition: Definition,
        tags: Option<Vec<String>>,
    ) -> (SyncOutcome, PutAnswer) {
        let client = self.client;
        // The record keeps the agent's own tags; the service gets them merged with the others.
        let body = HeartbeatCheckUpdate {
            tags,
            ..definition.body.clone()
        };
        let answer = client
            .update_heartbeat_check(check_id, &body, Some(definition.auto_assign_alerts))
            .await;
        let answer = match answer {
            Ok(answer) => answer,
            Err(err) if err.is_not_found() => {
                tracing::error!(
                    job,
                    check = check_id,
                    "the service has no such check: it was deleted or check_id is wrong"
                );
                return (
                    SyncOutcome::Missing(format!(
                        "job \"{job}\": check {check_id}: the service has no such check (404): \
                         it was deleted, or check_id is wrong; recreate the check and set the \
                         job's check_id to its id (not retried until the next re-assertion or \
                         reload)"
                    )),
                    PutAnswer::Other,
                );
            }
            Err(err) => {
                tracing::warn!(job, check = check_id, error = %err, "check update failed");
                let (answer, message) = match &err {
                    ApiError::RateLimited { retry_after, .. } => {
                        (PutAnswer::RateLimited(*retry_after), err.to_string())
                    }
                    ApiError::Transport { .. } => (
                        PutAnswer::Unanswered,
                        format!("the API at {} did not answer: {err}", client.host()),
                    ),
                    _ => (PutAnswer::Other, err.to_string()),
                };
                return (
                    SyncOutcome::Failed(format!("job \"{job}\": check {check_id}: {message}")),
                    answer,
                );
            }
        };
        if let (Some(spec), Some(token)) = (
            definition.body.heartbeat.as_mut(),
            &answer.heartbeat.ping_token,
        ) {
            spec.ping_token = Some(token.clone());
        }
        let now = self.opts.now;
        let saved = state::learn(
            self.state_dir,
            self.client.metrics().persist_failures(),
            job,
            check_id,
            &answer.heartbeat,
            self.learned,
            |s| {
                s.accepted = Some(definition);
                s.accepted_at = Some(now);
            },
        );
        let outcome = match saved {
            Ok(_) => {
                tracing::info!(job, check = check_id, "check definition updated");
                SyncOutcome::Updated
            }
            Err(err) => SyncOutcome::Failed(format!(
                "job \"{job}\": check {check_id}: accepted, but {err}"
            )),
        };
        (outcome, PutAnswer::Other)
    }
}

/// The `tags` a `PUT` of `definition` carries ([`super::tags`]): none when it sets no tags or
/// its tags are the ones last accepted (the service keeps what it has, tags set elsewhere
/// included); else the service's tags merged with the desired ones, the service's as read this
/// pass (`remote`) or read now. A service that cannot be read that way (405, 404) gets the
/// desired tags alone; a read that fails fails the `PUT` (tags are sent whole: sending them
/// unread would drop the ones set elsewhere).
async fn tags_to_send(
    client: &ApiClient,
    check_id: &str,
    definition: &Definition,
    accepted: Option<&Definition>,
    remote: Option<&[String]>,
) -> Result<Option<Vec<String>>, (String, PutAnswer)> {
    let Some(desired) = definition.body.tags.as_deref() else {
        return Ok(None);
    };
    let before = accepted.and_then(|a| a.body.tags.as_deref());
    if let Some(remote) = remote {
        return Ok(Some(tags::merged(remote, desired, before)));
    }
    if before.is_some_and(|before| tags::same(before, desired)) {
        return Ok(None);
    }
    match drift::read(client, check_id).await {
        Seen::Read(check) => Ok(Some(tags::merged(&check.tags, desired, before))),
        Seen::NotServed | Seen::NotFound => Ok(Some(desired.to_vec())),
        Seen::RateLimited(retry_after, message) => {
            Err((message, PutAnswer::RateLimited(retry_after)))
        }
        Seen::Failed(message) => Err((
            format!(
                "{message}; its tags are read before they are sent (the service replaces them \
                 whole, and tags set elsewhere are kept): tried again at the next pass"
            ),
            PutAnswer::Other,
        )),
    }
}
