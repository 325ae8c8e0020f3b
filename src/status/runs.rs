//! The history's JSON routes (docs/history.md), with the access rules of `/status`:
//! `GET /jobs/{name}/runs?limit=N` (the job's runs, newest first, `{"job", "runs"}`; in a
//! cluster every node's, with `cluster_unavailable` while the other nodes' cannot be read) and
//! `GET /jobs/{name}/runs/{seq}` (one run, with the whole output tail it was recorded with: what
//! the dashboard's page links to when it shows only the end of it).
//!
//! An answer is written one run at a time as the history is read (a run's JSON joins the
//! answer, then the next run is read), so a job whose runs each kept megabytes of output costs
//! its answer and one run, not every run twice; and such answers take turns with the
//! dashboard's pages, from when they are read until they are sent (`super::turns`), so readers
//! at once, however slow, cannot multiply that: one run's answer takes one of two turns, the
//! list of runs (every run's whole output) both.
//!
//! [`App::history`] is the history these routes and the dashboard's pages read.

use std::sync::Arc;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::server::{error, guard, App};

impl App {
    /// The daemon's run history, with the cluster's runs merged in (in a cluster).
    pub(crate) fn history(&self) -> crate::history::History {
        let (dir, shared) = (&self.context.state_dir, self.sources.history.clone());
        crate::history::History::with_cluster(dir, shared, self.sources.counted.persist_failures())
    }
}

#[derive(Debug, serde::Deserialize)]
pub(super) struct RunsQuery {
    limit: Option<String>,
}

/// `GET /jobs/{name}/runs?limit=N`: 404 for a job not in the config, 400 for a `limit` that
/// is not a number.
pub(super) async fn job_runs(
    State(app): State<Arc<App>>,
    UrlPath(name): UrlPath<String>,
    Query(query): Query<RunsQuery>,
    headers: HeaderMap,
) -> Response {
    if let Some(denied) = guard(&app, &headers) {
        return denied;
    }
    let Some((job, history)) = job_history(&app, &name) else {
        return no_job(&name);
    };
    let limit = match query.limit.as_deref().map(str::parse::<usize>) {
        None => history,
        Some(Ok(n)) => n.min(history),
        Some(Err(_)) => {
            return error(
                StatusCode::BAD_REQUEST,
                "limit must be a whole number of runs, such as ?limit=20",
            )
        }
    };
    let reader = app.history();
    let turn = app.turns.history_alone().await;
    read(&job, turn, move |job| {
        let mut out = b"{\"job\":".to_vec();
        serde_json::to_writer(&mut out, job).map_err(std::io::Error::other)?;
        out.extend_from_slice(b",\"runs\":[");
        let mut written = Ok(());
        reader.each_run(job, limit, |run| {
            if !out.ends_with(b"[") {
                out.push(b',');
            }
            written = serde_json::to_writer(&mut out, &run);
            written.is_ok()
        })?;
        written.map_err(std::io::Error::other)?;
        out.push(b']');
        if let Some(missing) = reader.cluster_unavailable() {
            out.extend_from_slice(b",\"cluster_unavailable\":");
            serde_json::to_writer(&mut out, &missing).map_err(std::io::Error::other)?;
        }
        out.push(b'}');
        Ok(Some(out))
    })
    .await
}

/// `GET /jobs/{name}/runs/{seq}`: the run numbered `seq` among the job's kept runs; 404 when
/// the job is not in the config or the run is not kept, 400 for a number that is not one.
pub(super) async fn job_run(
    State(app): State<Arc<App>>,
    UrlPath((name, seq)): UrlPath<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Some(denied) = guard(&app, &headers) {
        return denied;
    }
    let Some((job, history)) = job_history(&app, &name) else {
        return no_job(&name);
    };
    let Ok(seq) = seq.parse::<u64>() else {
        return error(
            StatusCode::BAD_REQUEST,
            format!("{seq:?} is not a run number: use the run's seq, such as /jobs/{job}/runs/12"),
        );
    };
    let reader = app.history();
    let turn = app.turns.history_turn().await;
    let answer = read(&job, turn, move |job| {
        let mut found = None;
        // Newest first: past the number, the run is not kept.
        reader.each_run(job, history, |run| {
            let past = run.seq <= seq;
            if run.seq == seq {
                found = Some(run);
            }
            !past
        })?;
        found
            .map(|run| serde_json::to_vec(&run).map_err(std::io::Error::other))
            .transpose()
    })
    .await;
    if answer.status() == StatusCode::NOT_FOUND {
        return error(
            StatusCode::NOT_FOUND,
            format!(
                "no run {seq} in the history of job \"{job}\" (it keeps the last {history} runs; \
                 GET /jobs/{job}/runs lists them)"
            ),
        );
    }
    answer
}

/// The configured job named `name` and how many runs it keeps.
fn job_history(app: &App, name: &str) -> Option<(String, usize)> {
    let config = app.config();
    config.job(name).map(|job| (job.name.clone(), job.history))
}

fn no_job(name: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!("no job named {name:?} in the config"),
    )
}

/// The JSON answer that `make` writes from `job`'s history, off the runtime's threads, in its
/// `turn` (`None`: the endpoint is stopping), which it keeps until it is sent; `None` from
/// `make` is a 404 (the caller words it).
async fn read(
    job: &str,
    turn: Option<super::turns::Turn>,
    make: impl FnOnce(&str) -> std::io::Result<Option<Vec<u8>>> + Send + 'static,
) -> Response {
    let Some(turn) = turn else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "the endpoint is stopping");
    };
    let name = job.to_owned();
    match tokio::task::spawn_blocking(move || make(&name)).await {
        Ok(Ok(Some(body))) => {
            let json = ([(header::CONTENT_TYPE, "application/json")], ()).into_response();
            super::turns::in_turn(json, body, turn)
        }
        Ok(Ok(None)) => StatusCode::NOT_FOUND.into_response(),
        Ok(Err(err)) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot read the history of job \"{job}\": {err}"),
        ),
        Err(err) => error(StatusCode::INTERNAL_SERVER_ERROR, err.to_string()),
    }
}
