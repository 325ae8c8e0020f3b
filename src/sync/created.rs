//! The check sync finds or creates for a job with `[jobs.check] create = true` and no
//! `check_id` (docs/sync.md, "Checks the agent creates").
//!
//! The job's check carries its scope tag (`heartbeat-agent:<cluster>/<job>`, or
//! `heartbeat-agent:<host>@<scope id>/<job>` outside a cluster,
//! [`crate::config::tags::scope_tag`]), which makes creating idempotent without any state, and
//! lets agents that raced converge on one check:
//!
//! 1. An id recorded for the job under the same tag (`<state_dir>/sync/<job>.json`,
//!    `createdTag`) is the job's check. It is only recorded once a lookup by the tag confirmed
//!    it; the lookup is repeated at every pass of `heartbeat-agent sync`, at each of the
//!    daemon's re-assertions of the job, and at every pass while the last lookup left other
//!    checks carrying the tag (`duplicatesLeft`).
//! 2. The lookup asks for the heartbeat checks carrying the tag (`GET /v1/checks?tag=..
//!    &checkType=HEARTBEAT`, every page). The oldest (`created_at`, then the smallest id: every
//!    agent picks the same) is the job's check; the younger ones carrying the tag are duplicates
//!    made by agents of the same scope, and are deleted (`DELETE /v1/checks/{id}`, never a check
//!    without the tag). So a lost state directory, an agent killed between its `POST` and its
//!    lookup, or two agents that created at once, end with one check. An oldest check owned by
//!    another agent is not the job's ([`super::owner::claim`]): nothing is deleted or recorded.
//!    No check carries the tag: a check older agents made under the host-named tag is adopted
//!    ([`super::owner::adopt`]).
//! 3. No check carries the tag: the definition sync would `PUT` (period, grace, name, tags with
//!    the scope tag, alerting) is `POST`ed to `/v1/checks/heartbeat`, never repeated once it
//!    may have reached the service (a repeat could make a second check).
//! 4. Then the lookup again, and step 2: the pass that created a check deletes only that one
//!    when it is not the oldest (the other creators do the same with theirs). When that lookup
//!    fails, nothing is recorded: the job has no check yet, and the next pass's lookup decides.
//!
//! Every lookup and deletion goes through the API client's retry loop with its default policy
//! ([`crate::net::retry`]: 429 and 5xx repeated with backoff, `Retry-After` honoured), also in
//! the daemon, whose other requests are sent once: a lookup that fails is what leaves two
//! checks. A check this agent created is recorded with the definition it sent as accepted, so
//! no `PUT` follows. With `--dry-run` nothing is sent beyond the lookup (no `POST`, no
//! deletion), and the report shows the `POST` body.
//!
//! [`created_counts`] counts the checks created, by job and reason (`new`: the job had none;
//! `deleted`: the job's check was deleted on the service), for the status endpoint's metrics.

use std::path::Path;

use chrono::{DateTime, Utc};

use super::desired::Definition;
use super::state::{self, LearnedUrls};
use crate::api::model::{CheckType, HeartbeatCheck, HeartbeatCheckCreate, ListChecks};
use crate::api::ApiClient;
use crate::config::Job;
use crate::net::RetryPolicy;

/// Why a check was created: `new` (the job had none) or `deleted` (its check was deleted on
/// the service and `create = true` recreates it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// No check carried the job's tag.
    New,
    /// The job's check was answered 404.
    Deleted,
}

impl Reason {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::New => "new",
            Reason::Deleted => "deleted",
        }
    }
}

/// The job's check as this pass found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// The check's id (recorded, found by its tag, or created now).
    Known {
        /// The id.
        id: String,
        /// This pass created it (the `POST` was accepted and it is the oldest).
        created: bool,
    },
    /// `--dry-run`: no check carries the tag; this `POST` would be sent.
    WouldCreate,
    /// The lookup or the creation failed; the message names the job, the tag and what to do.
    Failed(String),
}

/// What [`resolve`] needs of the pass.
pub(crate) struct Lookup<'a> {
    /// The API (its retry policy is replaced by the default one, see the module header).
    pub client: &'a ApiClient,
    /// Where the id is recorded.
    pub state_dir: &'a Path,
    /// Send nothing but the lookup.
    pub dry_run: bool,
    /// Look the recorded check up by its tag again (`sync`, a re-assertion).
    pub verify: bool,
    /// The pass's time (recorded as when a created check's definition was accepted).
    pub now: DateTime<Utc>,
    /// The daemon's URLs in memory.
    pub learned: Option<&'a LearnedUrls>,
}

/// The id recorded for `job`'s check under its scope tag, if any.
pub fn recorded_id(state_dir: &Path, job: &Job) -> Option<String> {
    let tag = job.check.scope_tag.as_deref()?;
    state::load(state_dir, &job.name)
        .filter(|record| record.created_tag.as_deref() == Some(tag))
        .map(|record| record.check_id)
}

/// The check `job` pings: its `check_id`, or for a job with `create = true` the id sync
/// recorded for it (`None` before sync found or created it, and for other jobs).
pub fn bound_check(state_dir: &Path, job: &Job) -> Option<String> {
    match &job.target {
        crate::config::PingTarget::Check(id) => Some(id.clone()),
        crate::config::PingTarget::None if job.check.create => recorded_id(state_dir, job),
        _ => None,
    }
}

/// Forgets the id recorded for `job` (its check was deleted on the service), so the next
/// [`resolve`] looks it up again and, finding none, creates one; a failed write is counted in
/// `failures`.
pub(crate) fn forget(state_dir: &Path, failures: &crate::persist::Failures, job: &Job) {
    if let Some(record) = state::load(state_dir, &job.name) {
        let cleared = state::update(state_dir, failures, &job.name, &record.check_id, |s| {
            s.created_tag = None;
        });
        if let Err(err) = cleared {
            tracing::warn!(job = %job.name, error = %err, "cannot forget the deleted check's id");
        }
    }
}

/// Finds or creates `job`'s check (see the module header); `definition` is what sync would
/// `PUT`, `reason` what a creation is counted as.
pub(crate) async fn resolve(
    lookup: &Lookup<'_>,
    job: &Job,
    definition: &Definition,
    reason: Reason,
) -> Resolved {
    let Some(tag) = job.check.scope_tag.as_deref() else {
        return Resolved::Failed(format!(
            "job \"{}\": `create = true` without a scope tag (a bug: the config sets it)",
            job.name
        ));
    };
    let client = lookup.client.with_retry(RetryPolicy::default());
    let recorded = state::load(lookup.state_dir, &job.name)
        .filter(|record| record.created_tag.as_deref() == Some(tag));
    if let Some(record) = &recorded {
        if !lookup.verify && !record.duplicates_left {
            return known(&record.check_id, false);
        }
    }
    let found = match tagged(&client, tag).await {
        Ok(found) => found,
        Err(message) => {
            return match recorded {
                // The recorded check stays the job's until a lookup says otherwise.
                Some(record) => {
                    tracing::warn!(job = %job.name, check = %record.check_id, tag, error = %message,
                        "cannot look the job's check up by its tag; keeping the recorded one");
                    known(&record.check_id, false)
                }
                None => Resolved::Failed(failed(job, tag, "looking it up", &message)),
            };
        }
    };
    if let Some(record) = recorded {
        if !found.iter().any(|c| c.id == record.check_id) {
            // The tag was removed from it elsewhere, or the service lists it late: it stays the
            // job's (its next `PUT` puts the tag back), and the next pass looks again.
            if !lookup.dry_run {
                let failures = lookup.client.metrics().persist_failures();
                let marked = state::update(
                    lookup.state_dir,
                    failures,
                    &job.name,
                    &record.check_id,
                    |s| {
                        s.duplicates_left = true;
                    },
                );
                if let Err(err) = marked {
                    tracing::warn!(job = %job.name, error = %err, "cannot record the lookup");
                }
            }
            return known(&record.check_id, false);
        }
    }
    if !found.is_empty() {
        return converge(lookup, &client, job, tag, &found, None).await;
    }
    match super::owner::adopt(lookup.client, job, lookup.dry_run).await {
        Ok(Some(adopted)) if lookup.dry_run => return known(&adopted.id, false),
        Ok(Some(adopted)) => {
            return match record(lookup, job, tag, &adopted, None, false) {
                Ok(id) => known(&id, false),
                Err(message) => Resolved::Failed(message),
            }
        }
        Ok(None) => {}
        Err(message) => {
            return Resolved::Failed(failed(job, tag, "adopting the older check", &message))
        }
    }
    if lookup.dry_run {
        return Resolved::WouldCreate;
    }
    create(lookup, &client, job, tag, definition, reason).await
}

/// Creates `job`'s check (`POST`, never repeated once it may have reached the service), then
/// looks it up again and converges (see the module header).
async fn create(
    lookup: &Lookup<'_>,
    client: &ApiClient,
    job: &Job,
    tag: &str,
    definition: &Definition,
    reason: Reason,
) -> Resolved {
    let body = match HeartbeatCheckCreate::new(definition.body.clone()) {
        Ok(body) => body,
        Err(message) => return Resolved::Failed(failed(job, tag, "building it", &message)),
    };
    let created = client
        .create_heartbeat_check(&body, Some(definition.auto_assign_alerts))
        .await;
    let created = match created {
        Ok(created) => created,
        Err(err) => {
            let hint = if err.status() == Some(402) {
                "; the account's plan has no room for another check: delete one or upgrade"
            } else {
                "; the next sync looks the check up by its tag before creating again"
            };
            let message = format!("{err}{hint}");
            return Resolved::Failed(failed(job, tag, "creating it", &message));
        }
    };
    client.metrics().check_created(&job.name, reason.as_str());
    tracing::info!(
        job = %job.name,
        check = %created.id,
        tag,
        reason = reason.as_str(),
        "created the job's heartbeat check"
    );
    // Another agent of the same scope may have created one at the same moment: only a lookup
    // says which check is the job's.
    let mut found = match tagged(client, tag).await {
        Ok(found) => found,
        Err(message) => {
            let message = format!(
                "created check {}, but {message}; no check is recorded for the job until a \
                 lookup by its tag says which is the job's: the next pass looks again, keeps the \
                 oldest and deletes the others carrying the tag",
                created.id
            );
            return Resolved::Failed(failed(job, tag, "confirming it", &message));
        }
    };
    if !found.iter().any(|c| c.id == created.id) {
        found.push(created.clone());
    }
    converge(
        lookup,
        client,
        job,
        tag,
        &found,
        Some((&created, definition)),
    )
    .await
}

/// Keeps the oldest of `found` (the checks carrying `tag`) as `job`'s check and deletes the
/// others: only `created` (this pass's own creation) when it is not the oldest, else every
/// younger one. Records the kept check (with the definition it was created with, when it is
/// this pass's).
async fn converge(
    lookup: &Lookup<'_>,
    client: &ApiClient,
    job: &Job,
    tag: &str,
    found: &[HeartbeatCheck],
    created: Option<(&HeartbeatCheck, &Definition)>,
) -> Resolved {
    let Some(keeper) = oldest(found) else {
        return Resolved::Failed(failed(job, tag, "looking it up", "no check found"));
    };
    // Another agent's check is neither the job's nor this agent's to delete others for.
    if let Err(message) = super::owner::claim(job, keeper, client.metrics()) {
        return Resolved::Failed(message);
    }
    // This pass's creation leaves the other creators' younger checks to them.
    let deletable = |c: &&HeartbeatCheck| created.map_or(true, |(mine, _)| mine.id == c.id);
    // Other checks still carrying the tag after this pass: the next pass looks again.
    let mut left = false;
    for other in found.iter().filter(|c| c.id != keeper.id) {
        if lookup.dry_run || !deletable(&other) {
            left = true;
            continue;
        }
        tracing::info!(
            job = %job.name,
            kept = %keeper.id,
            deleted = %other.id,
            tag,
            "another check carries the job's tag (agents of one scope created at once): \
             keeping the oldest, deleting this one"
        );
        match client.delete_check(&other.id).await {
            Ok(()) => {}
            Err(err) if err.is_not_found() => {}
            Err(err) => {
                left = true;
                tracing::warn!(
                    job = %job.name,
                    check = %other.id,
                    error = %err,
                    "cannot delete the duplicate check yet; the next pass tries again"
                );
            }
        }
    }
    let accepted = created
        .filter(|(mine, _)| mine.id == keeper.id)
        .map(|(mine, definition)| {
            let mut accepted = definition.clone();
            if let (Some(spec), Some(token)) = (
                accepted.body.heartbeat.as_mut(),
                mine.heartbeat.ping_token.clone(),
            ) {
                spec.ping_token = Some(token);
            }
            accepted
        });
    let mine = accepted.is_some();
    match record(lookup, job, tag, keeper, accepted, left) {
        Ok(id) => known(&id, mine),
        Err(message) => Resolved::Failed(message),
    }
}

fn known(id: &str, created: bool) -> Resolved {
    Resolved::Known {
        id: id.to_owned(),
        created,
    }
}

/// The heartbeat checks carrying `tag` (every page; checks the service matched loosely are
/// left out).
pub(super) async fn tagged(client: &ApiClient, tag: &str) -> Result<Vec<HeartbeatCheck>, String> {
    let query = ListChecks {
        tags: vec![tag.to_owned()],
        check_type: Some(CheckType::Heartbeat),
        ..ListChecks::default()
    };
    let found = client
        .list_all_checks(&query)
        .await
        .map_err(|e| e.to_string())?;
    Ok(found
        .into_iter()
        .filter(|check| !check.id.is_empty() && check.tags.iter().any(|t| t == tag))
        .collect())
}

/// The check every agent keeps: the oldest (`created_at`; one without comes last), then the
/// smallest id.
pub(super) fn oldest(checks: &[HeartbeatCheck]) -> Option<&HeartbeatCheck> {
    checks
        .iter()
        .min_by_key(|c| (c.created_at.is_none(), c.created_at, c.id.clone()))
}

/// Records `check` as `job`'s (with `accepted`, the definition this agent created it with;
/// `left`: other checks still carry the tag); its id, or the message naming the job.
fn record(
    lookup: &Lookup<'_>,
    job: &Job,
    tag: &str,
    check: &HeartbeatCheck,
    accepted: Option<Definition>,
    left: bool,
) -> Result<String, String> {
    let saved = state::learn(
        lookup.state_dir,
        lookup.client.metrics().persist_failures(),
        &job.name,
        &check.id,
        &check.heartbeat,
        lookup.learned,
        |s| {
            s.created_tag = Some(tag.to_owned());
            s.duplicates_left = left;
            if let Some(accepted) = accepted {
                s.accepted = Some(accepted);
                s.accepted_at = Some(lookup.now);
            }
        },
    );
    saved.map(|_| check.id.clone()).map_err(|err| {
        format!(
            "job \"{}\": check {}: found or created, but its id cannot be recorded: {err}",
            job.name, check.id
        )
    })
}

fn failed(job: &Job, tag: &str, doing: &str, message: &str) -> String {
    format!(
        "job \"{}\": the check tagged \"{tag}\" (create = true): {doing} failed: {message}",
        job.name
    )
}
