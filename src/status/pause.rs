//! `POST /pause` and `POST /resume`: `heartbeat-agent pause` and `resume` through a running
//! daemon, with the `[status]` token (as `trigger`). The body is a [`PauseRequest`] or a
//! [`ResumeRequest`] (JSON); it is checked against the daemon's config exactly as the command
//! checks it without a daemon ([`crate::pause::plan`], a job's check being its `check_id` or
//! the one sync recorded for `create = true`): a bad request is a 400 naming the
//! problem, and nothing is changed. A valid one is written to `<state_dir>/pause.json` and the
//! daemon's pauses in memory are refreshed from it at once (fires and scrapes read those); then
//! the daemon's sync task is asked for a pass at once (pausing and resuming are explicit acts,
//! not held for a ping) and the answer waits, up to [`CONFIRM_WAIT`], for that pass to have
//! tried each bound job's check, so the command can say whether the service took it (the
//! pauses in memory are refreshed again then: the pass forgets the pauses it ended).
//!
//! Answers: 200 with `{"paused" | "resumed": [jobs], "until", "left_out", "checks": [{"job",
//! "check_id", "state", "error"}]}` (`state` is sync's: `in_sync` once the service accepted
//! it, `pending` when the pass has not tried it yet, `failed`); 400 bad request; 401/403 token;
//! 409 when a bound job is named but the daemon runs no check sync (no API configured): it could
//! not deactivate anything, so nothing is recorded.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use tracing::info;

use super::server::{authorize, error, App};
use crate::config::Config;
use crate::pause::{PauseRequest, ResumeRequest};
use crate::sync::created::bound_check;
use crate::sync::SyncStatus;

/// How long an answer waits for the sync pass it asked for.
const CONFIRM_WAIT: Duration = Duration::from_secs(10);

/// `POST /pause`.
pub(super) async fn pause(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let config = app.config();
    if let Some(denied) = authorize(&config, &headers, "pausing jobs") {
        return denied;
    }
    let request: PauseRequest = match parse(&body) {
        Ok(request) => request,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    let state_dir = &app.context.state_dir;
    let check_of = |job: &crate::config::Job| bound_check(state_dir, job);
    let plan = match crate::pause::plan(&config, &request, Utc::now(), &check_of) {
        Ok(plan) => plan,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    let bound = plan.bound();
    let sync = match sync_for(&app, &bound) {
        Ok(sync) => sync,
        Err(message) => return error(StatusCode::CONFLICT, message),
    };
    if let Err(err) = crate::pause::apply(
        &app.context.state_dir,
        app.sources.counted.persist_failures(),
        &plan,
    ) {
        return error(StatusCode::INTERNAL_SERVER_ERROR, err.to_string());
    }
    app.context.pauses.refresh();
    let names: Vec<&str> = plan.jobs.iter().map(|(name, _)| name.as_str()).collect();
    info!(jobs = ?names, until = %plan.pause.until.map_or_else(|| "none".to_owned(), |t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)), reason = plan.pause.reason.as_deref().unwrap_or(""), stop_jobs = plan.pause.stop_jobs, "jobs paused through the status endpoint");
    let checks = confirm(sync, &config, state_dir, &bound).await;
    // The pass may have forgotten ended pauses in the file: the answer and what follows it
    // see the file as the pass left it.
    app.context.pauses.refresh();
    Json(json!({
        "paused": names,
        "until": plan.pause.until,
        "left_out": plan.left_out,
        "checks": checks,
    }))
    .into_response()
}

/// `POST /resume`.
pub(super) async fn resume(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let config = app.config();
    if let Some(denied) = authorize(&config, &headers, "resuming jobs") {
        return denied;
    }
    let request: ResumeRequest = match parse(&body) {
        Ok(request) => request,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    let state_dir = &app.context.state_dir;
    let jobs = match crate::pause::resume_plan(&crate::pause::load(state_dir), &request) {
        Ok(jobs) => jobs,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    let check_of = |job: &crate::config::Job| bound_check(state_dir, job);
    let bound = crate::pause::bound_jobs(&config, &jobs, &check_of);
    let sync = match sync_for(&app, &bound) {
        Ok(sync) => sync,
        Err(message) => return error(StatusCode::CONFLICT, message),
    };
    let is_bound = |name: &str| bound.iter().any(|b| b == name);
    if let Err(err) = crate::pause::end(
        state_dir,
        app.sources.counted.persist_failures(),
        &jobs,
        is_bound,
    ) {
        return error(StatusCode::INTERNAL_SERVER_ERROR, err.to_string());
    }
    app.context.pauses.refresh();
    info!(jobs = ?jobs, "pause ended through the status endpoint");
    let checks = confirm(sync, &config, state_dir, &bound).await;
    // The pass may have forgotten ended pauses in the file: the answer and what follows it
    // see the file as the pass left it.
    app.context.pauses.refresh();
    Json(json!({ "resumed": jobs, "checks": checks })).into_response()
}

/// The request body, or why it is not valid (a 400).
fn parse<T: DeserializeOwned>(body: &Bytes) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|err| format!("the request body is not valid: {err}"))
}

/// The sync engine that will send the change, or why there is none when `bound` jobs need
/// one (a 409).
fn sync_for(app: &App, bound: &[String]) -> Result<Option<SyncStatus>, &'static str> {
    match app.sources.sync.get() {
        Some(sync) => Ok(Some(sync.clone())),
        None if bound.is_empty() => Ok(None),
        None => Err(
            "this daemon runs no check sync ([api] has no base URL or key): it cannot change \
             checks, and nothing was changed; configure [api] and reload the daemon",
        ),
    }
}

/// Asks for a sync pass and waits (up to [`CONFIRM_WAIT`]) until it tried every `bound` job;
/// each job's sync status then.
async fn confirm(
    sync: Option<SyncStatus>,
    config: &Config,
    state_dir: &Path,
    bound: &[String],
) -> Vec<Value> {
    let Some(sync) = sync else {
        return Vec::new();
    };
    let asked: DateTime<Utc> = Utc::now();
    sync.request_pass();
    let tried = |sync: &SyncStatus| {
        bound.iter().all(|job| {
            sync.get(job)
                .and_then(|s| s.last_attempt)
                .is_some_and(|at| at >= asked)
        })
    };
    let deadline = tokio::time::Instant::now() + CONFIRM_WAIT;
    while !tried(&sync) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bound
        .iter()
        .map(|job| {
            let status = sync
                .get(job)
                .filter(|s| s.last_attempt.is_some_and(|at| at >= asked));
            let check_id = config.job(job).and_then(|j| bound_check(state_dir, j));
            json!({
                "job": job,
                "check_id": check_id,
                "state": status.as_ref().map_or("pending", |s| s.state.as_str()),
                "error": status
                    .and_then(|s| s.last_error)
                    .map(|e| crate::redact::scrub(&e)),
            })
        })
        .collect()
}
