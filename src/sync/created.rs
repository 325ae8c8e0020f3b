//! The check sync finds or creates for a job with `[jobs.check] create = true` and no
//! `check_id` (docs/sync.md, "Checks the agent creates").
//!
//! The job's check carries its scope tag (`heartbeat-agent:<cluster>/<job>`, or
//! `heartbeat-agent:<host>@<scope id>/<job>` outside a cluster,
//! [`crate::config::tags::scope_tag`]), which makes creating idempotent without any state:
//!
//! 1. A check id recorded for the job under the same tag (`<state_dir>/sync/<job>.json`,
//!    `createdTag`) is the job's check.
//! 2. Else the service is asked for heartbeat checks carrying the tag (`GET /v1/checks?tag=..
//!    &checkType=HEARTBEAT`, every page): the oldest one found is the job's check. So a lost
//!    state directory, or an agent killed between the `POST` and recording its answer, never
//!    makes a second check.
//!    One owned by another agent is not the job's ([`super::owner::claim`]); without one, a
//!    check older agents made under the host-named tag is adopted ([`super::owner::adopt`]).
//! 3. Else the definition sync would `PUT` (period, grace, name, tags with the scope tag,
//!    alerting) is `POST`ed to `/v1/checks/heartbeat`, never retried once sent (a retry could
//!    make a second check; the next pass looks the check up instead).
//! 4. Then the service is asked again: two agents of one scope that created at once see both
//!    checks, keep the oldest (`created_at`, then the smallest id: every agent picks the same)
//!    and each deletes its own younger one (`DELETE /v1/checks/{id}`), so they converge on one.
//!
//! The id found or created is recorded with the check's ping URL and token; a check this agent
//! created is recorded with the definition it sent as accepted, so no `PUT` follows. With
//! `--dry-run` nothing is sent beyond the lookup, and the report shows the `POST` body.
//!
//! [`created_counts`] counts the checks created, by job and reason (`new`: the job had none;
//! `deleted`: the job's check was deleted on the service), for the status endpoint's metrics.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use chrono::{DateTime, Utc};

use super::desired::Definition;
use super::state::{self, LearnedUrls};
use crate::api::model::{CheckType, HeartbeatCheck, HeartbeatCheckCreate, ListChecks};
use crate::api::ApiClient;
use crate::config::Job;

/// Checks created, by (job, reason).
static CREATED: Mutex<BTreeMap<(String, &'static str), u64>> = Mutex::new(BTreeMap::new());

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

/// Every (job, reason) counted so far, with its count
/// (`heartbeat_agent_checks_created_total{job,reason}`).
pub fn created_counts() -> Vec<(String, &'static str, u64)> {
    let counts = CREATED.lock().unwrap_or_else(|e| e.into_inner());
    counts
        .iter()
        .map(|((job, reason), n)| (job.clone(), *reason, *n))
        .collect()
}

/// The job's check as this pass found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// The check's id (recorded, found by its tag, or created now).
    Known(String),
    /// `--dry-run`: no check carries the tag; this `POST` would be sent.
    WouldCreate,
    /// The lookup or the creation failed; the message names the job, the tag and what to do.
    Failed(String),
}

/// What [`resolve`] needs of the pass.
pub(crate) struct Lookup<'a> {
    /// The API.
    pub client: &'a ApiClient,
    /// Where the id is recorded.
    pub state_dir: &'a Path,
    /// Send nothing but the lookup.
    pub dry_run: bool,
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
/// [`resolve`] looks it up again and, finding none, creates one.
pub(crate) fn forget(state_dir: &Path, job: &Job) {
    if let Some(record) = state::load(state_dir, &job.name) {
        let cleared = state::update(state_dir, &job.name, &record.check_id, |s| {
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
    if let Some(id) = recorded_id(lookup.state_dir, job) {
        return Resolved::Known(id);
    }
    let found = match tagged(lookup.client, tag).await {
        Ok(found) => found,
        Err(message) => return Resolved::Failed(failed(job, tag, "looking it up", &message)),
    };
    if let Some(keeper) = oldest(&found) {
        if let Err(message) = super::owner::claim(job, keeper) {
            return Resolved::Failed(message);
        }
        tracing::info!(job = %job.name, check = %keeper.id, tag, "found the job's check by its tag");
        return record(lookup, job, tag, keeper, None);
    }
    match super::owner::adopt(lookup.client, job, lookup.dry_run).await {
        Ok(Some(adopted)) if lookup.dry_run => return Resolved::Known(adopted.id),
        Ok(Some(adopted)) => return record(lookup, job, tag, &adopted, None),
        Ok(None) => {}
        Err(message) => {
            return Resolved::Failed(failed(job, tag, "adopting the older check", &message))
        }
    }
    if lookup.dry_run {
        return Resolved::WouldCreate;
    }
    let body = match HeartbeatCheckCreate::new(definition.body.clone()) {
        Ok(body) => body,
        Err(message) => return Resolved::Failed(failed(job, tag, "building it", &message)),
    };
    let created = lookup
        .client
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
    count(job, reason);
    tracing::warn!(
        job = %job.name,
        check = %created.id,
        tag,
        reason = reason.as_str(),
        "created the job's heartbeat check"
    );
    // Another agent of the same scope may have created one at the same moment.
    let mut all = tagged(lookup.client, tag).await.unwrap_or_default();
    if !all.iter().any(|c| c.id == created.id) {
        all.push(created.clone());
    }
    let keeper = oldest(&all).unwrap_or(&created).clone();
    if keeper.id == created.id {
        let mut accepted = definition.clone();
        if let (Some(spec), Some(token)) = (
            accepted.body.heartbeat.as_mut(),
            created.heartbeat.ping_token.clone(),
        ) {
            spec.ping_token = Some(token);
        }
        return record(lookup, job, tag, &created, Some(accepted));
    }
    tracing::warn!(
        job = %job.name,
        kept = %keeper.id,
        deleted = %created.id,
        "another agent of this scope created the job's check too: keeping the older one and \
         deleting the one this agent created"
    );
    match lookup.client.delete_check(&created.id).await {
        Ok(()) => {}
        Err(err) if err.is_not_found() => {}
        Err(err) => tracing::warn!(
            job = %job.name,
            check = %created.id,
            error = %err,
            "cannot delete the younger duplicate check; delete it in the web UI"
        ),
    }
    record(lookup, job, tag, &keeper, None)
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

/// Records `check` as `job`'s (with `accepted`, the definition this agent created it with).
fn record(
    lookup: &Lookup<'_>,
    job: &Job,
    tag: &str,
    check: &HeartbeatCheck,
    accepted: Option<Definition>,
) -> Resolved {
    let saved = state::update(lookup.state_dir, &job.name, &check.id, |s| {
        s.created_tag = Some(tag.to_owned());
        if check.heartbeat.ping_url.is_some() {
            s.ping_url.clone_from(&check.heartbeat.ping_url);
        }
        if check.heartbeat.ping_token.is_some() {
            s.ping_token.clone_from(&check.heartbeat.ping_token);
        }
        if let Some(accepted) = accepted {
            s.accepted = Some(accepted);
            s.accepted_at = Some(lookup.now);
        }
    });
    match saved {
        Ok(saved) => {
            if let (Some(learned), Some(url)) = (lookup.learned, &saved.ping_url) {
                learned.record(&job.name, &check.id, url);
            }
            Resolved::Known(check.id.clone())
        }
        Err(err) => Resolved::Failed(format!(
            "job \"{}\": check {}: found or created, but its id cannot be recorded: {err}",
            job.name, check.id
        )),
    }
}

fn failed(job: &Job, tag: &str, doing: &str, message: &str) -> String {
    format!(
        "job \"{}\": the check tagged \"{tag}\" (create = true): {doing} failed: {message}",
        job.name
    )
}

fn count(job: &Job, reason: Reason) {
    let mut counts = CREATED.lock().unwrap_or_else(|e| e.into_inner());
    *counts
        .entry((job.name.clone(), reason.as_str()))
        .or_default() += 1;
}
