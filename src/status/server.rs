//! The endpoint: axum on a TCP address or a unix socket. The socket is bound by
//! [`bind`] before the daemon starts (so `READY=1` means "listener bound"); [`task`] serves
//! it as a daemon background task until shutdown.
//!
//! Routes: the dashboard's HTML pages (`GET /`, `GET /jobs/{name}`, `POST /login`,
//! `POST /logout`: [`super::dashboard`]), `GET /status` (JSON, `?refresh=1` asks for a fresh remote view, rate-limited
//! without the token), `GET /jobs/{name}/runs` and `GET /jobs/{name}/runs/{seq}` (the job's run history:
//! [`super::runs`]), `GET /metrics`, `GET /healthz`, `GET /readyz`, `POST /jobs/{name}/run`,
//! `POST /pause` and `POST /resume` ([`super::pause`]); the last three always need the bearer
//! token. On a bind that is not loopback, `/status` and `/metrics`
//! need the token too. On a loopback TCP bind every request must name the loopback in `Host`
//! (`127.0.0.1`, `localhost` or `[::1]`, with the port), so a web page whose host name was
//! rebound to 127.0.0.1 (DNS rebinding) cannot read job output through a browser.
//! Connections are served by [`super::connections`] (a connection cap, a header timeout);
//! every request passes [`super::attempts`] first, which slows down a client that failed the
//! token and counts each answer that refused one.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::extract::{Path as UrlPath, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::build;
use super::cluster::ClusterView;
use super::connections;
use super::metrics::RunMetrics;
use super::remote::{Refresh, RemoteView};
use crate::config::{Config, JobAction, Listen, Overlap};
use crate::daemon::{Context, Task};
use crate::metrics_registry::MetricsRegistry;
use crate::sync::SyncStatus;

/// A bound listener, not yet served.
#[derive(Debug)]
pub(crate) enum Bound {
    /// A TCP listener.
    Tcp(std::net::TcpListener),
    /// A unix socket listener and its path (removed at shutdown).
    Unix(std::os::unix::net::UnixListener, PathBuf),
}

/// Why the listener could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {listen} ([status] listen): {source}; free it or set another address")]
pub(crate) struct BindError {
    /// The address or path.
    pub listen: String,
    /// The OS error.
    pub source: std::io::Error,
}

/// Binds `listen` now (a stale unix socket file is replaced; the socket gets mode 0660).
pub(crate) fn bind(listen: &Listen) -> Result<Bound, BindError> {
    let err = |source| BindError {
        listen: listen.to_string(),
        source,
    };
    match listen {
        Listen::Tcp(addr) => {
            let listener = std::net::TcpListener::bind(addr).map_err(err)?;
            listener.set_nonblocking(true).map_err(err)?;
            deepen_listen_queue(&listener).map_err(err)?;
            Ok(Bound::Tcp(listener))
        }
        Listen::Unix(path) => {
            remove_stale_socket(path);
            let listener = std::os::unix::net::UnixListener::bind(path).map_err(err)?;
            listener.set_nonblocking(true).map_err(err)?;
            deepen_listen_queue(&listener).map_err(err)?;
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::Permissions::from_mode(0o660);
            std::fs::set_permissions(path, mode).map_err(err)?;
            Ok(Bound::Unix(listener, path.clone()))
        }
    }
}

/// Connections the kernel may hold for the endpoint before it accepts them (capped by
/// `net.core.somaxconn`, 4096 by default). std listens with 128: a flood of a few hundred
/// clients that come back at once would fill that queue, and the kernel would then drop the
/// connection attempt of a health probe (retried only after a second). Queued connections cost
/// the daemon no file descriptor.
const LISTEN_BACKLOG: libc::c_int = 4096;

/// Listens again on `listener` with [`LISTEN_BACKLOG`] (Linux applies a second `listen(2)` to
/// a listening socket: only the queue's length changes).
fn deepen_listen_queue(listener: &impl std::os::fd::AsRawFd) -> std::io::Result<()> {
    // SAFETY: `listen(2)` on a socket descriptor we own, borrowed for the call; no memory is
    // passed.
    let rc = unsafe { libc::listen(listener.as_raw_fd(), LISTEN_BACKLOG) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn remove_stale_socket(path: &Path) {
    use std::os::unix::fs::FileTypeExt;
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
        let _ = std::fs::remove_file(path);
    }
}

/// What the endpoint reads besides the daemon's context.
#[derive(Debug, Clone)]
pub(crate) struct Sources {
    /// Sync status, once the sync engine runs: set at start, or by the reload that binds the
    /// first job to a check (the daemon's `DeferredSync`).
    pub sync: Arc<OnceLock<SyncStatus>>,
    /// The remote view (its client, if any, at low priority).
    pub remote: RemoteView,
    /// Run counters (also registered as an after-run hook).
    pub metrics: Arc<RunMetrics>,
    /// What the daemon's clients count (API requests, refused certificates) and its failed
    /// writes: the registry of the daemon's connections ([`crate::net::Net::metrics`]).
    pub counted: MetricsRegistry,
    /// In a cluster (`[cluster]`): this agent's role, the leader, its etcd connection, lease
    /// and claims, as the cluster offers them.
    pub cluster: Option<Arc<dyn ClusterView>>,
    /// In a cluster, the cluster's copy of the runs, merged into every history read here.
    pub history: Option<Arc<dyn crate::history::Shared>>,
    /// The daemon's id (`<state_dir>/daemon-id`), told in every answer so clients can tell
    /// this daemon from another of the same config file (`super::owner`); `None` when it
    /// could not be read or made (clients then compare the config path alone).
    pub daemon_id: Option<super::owner::DaemonId>,
    /// The agent's identity (`crate::identity`), shown in `/status`.
    pub identity: Option<crate::identity::Identity>,
}

/// The endpoint's shared state.
pub(super) struct App {
    pub context: Context,
    pub sources: Sources,
    /// The failed token attempts at this endpoint (counted, and the clients slowed down).
    pub attempts: Arc<super::attempts::Attempts>,
    /// The turns of the answers that hold runs' output (`super::turns`), made with the endpoint.
    pub turns: super::turns::Turns,
    pub started: DateTime<Utc>,
    pub loaded: Mutex<DateTime<Utc>>,
}

impl App {
    pub(crate) fn config(&self) -> Arc<Config> {
        Arc::clone(&self.context.config.borrow())
    }

    /// Ready once the first sync pass was attempted (or when nothing is synced, or, in a
    /// cluster, while another agent syncs).
    pub(crate) fn ready(&self) -> bool {
        let Some(sync) = self.sources.sync.get() else {
            return true;
        };
        if self.sources.cluster.as_ref().is_some_and(|c| !c.leading()) {
            return true;
        }
        let jobs = sync.snapshot();
        jobs.is_empty() || jobs.values().any(|j| j.last_attempt.is_some())
    }

    /// Passes that found drift, by job, when sync runs.
    pub(crate) fn sync_drift(&self) -> Option<BTreeMap<String, u64>> {
        let sync = self.sources.sync.get()?;
        Some(
            sync.snapshot()
                .into_iter()
                .map(|(job, status)| (job, status.drift_found))
                .collect(),
        )
    }
}

/// The endpoint as a daemon background task, serving `bound` until shutdown.
pub(crate) fn task(bound: Bound, sources: Sources) -> Task {
    Box::new(move |context: Context, cancel: CancellationToken| {
        sources.metrics.attach(context.view.clone());
        let now = Utc::now();
        let app = Arc::new(App {
            context,
            sources,
            attempts: Arc::default(),
            turns: super::turns::Turns::default(),
            started: now,
            loaded: Mutex::new(now),
        });
        Box::pin(serve(bound, app, cancel))
    })
}

/// Serves `bound` until `cancel`, beside the endpoint's two helpers (the reload times and the
/// remote view's refresh): all three end with `cancel`, and this returns once they have, so
/// the daemon's shutdown, which awaits its background tasks, awaits them too.
async fn serve(bound: Bound, app: Arc<App>, cancel: CancellationToken) {
    let reloads = track_reloads(Arc::clone(&app), cancel.clone());
    let refresh = app
        .config()
        .status
        .remote_refresh
        .map(|every| refresh_remote(Arc::clone(&app), every, cancel.clone()));
    let refresh = async move {
        if let Some(refresh) = refresh {
            refresh.await;
        }
    };
    tokio::join!(reloads, refresh, listen(bound, app, cancel));
    info!("status endpoint closed");
}

/// Accepts and serves connections on `bound` until `cancel`; a unix socket's file is removed
/// then.
async fn listen(bound: Bound, app: Arc<App>, cancel: CancellationToken) {
    let result = match bound {
        Bound::Tcp(listener) => match tokio::net::TcpListener::from_std(listener)
            .and_then(|l| l.local_addr().map(|addr| (l, addr)))
        {
            Ok((listener, addr)) => {
                info!(listen = %addr, "status endpoint listening");
                let loopback = addr.ip().is_loopback().then_some(addr.port());
                connections::serve(listener, router(app, loopback), cancel).await;
                Ok(())
            }
            Err(err) => Err(err),
        },
        Bound::Unix(listener, path) => {
            let served = match tokio::net::UnixListener::from_std(listener) {
                Ok(listener) => {
                    info!(listen = %path.display(), "status endpoint listening");
                    connections::serve(listener, router(app, None), cancel).await;
                    Ok(())
                }
                Err(err) => Err(err),
            };
            let _ = std::fs::remove_file(&path);
            served
        }
    };
    if let Err(err) = result {
        warn!(error = %err, "the status endpoint stopped");
    }
}

/// Notes the time of every successful reload (shown as the config's load time).
async fn track_reloads(app: Arc<App>, cancel: CancellationToken) {
    let mut config = app.context.config.clone();
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            changed = config.changed() => {
                if changed.is_err() {
                    return;
                }
                *app.loaded.lock().unwrap_or_else(|e| e.into_inner()) = Utc::now();
            }
        }
    }
}

/// `remote_refresh`: keeps the remote view's cache warm.
async fn refresh_remote(app: Arc<App>, every: Duration, cancel: CancellationToken) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        let ids = build::check_ids(&app, &app.config());
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = app.sources.remote.get(&ids, Refresh::Now) => {}
        }
    }
}

/// The routes; on a loopback TCP bind (`loopback_port`), behind the `Host` check.
fn router(app: Arc<App>, loopback_port: Option<u16>) -> Router {
    let router = Router::new()
        .route("/status", get(status))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/jobs/{name}/run", post(trigger))
        .route("/jobs/{name}/runs", get(super::runs::job_runs))
        .route("/jobs/{name}/runs/{seq}", get(super::runs::job_run))
        .route("/pause", post(super::pause::pause))
        .route("/resume", post(super::pause::resume))
        .with_state(Arc::clone(&app))
        .merge(super::dashboard::routes(Arc::clone(&app)));
    let router = match loopback_port {
        Some(port) => router.layer(axum::middleware::from_fn(move |request, next| {
            loopback_host(port, request, next)
        })),
        None => router,
    };
    // Every answer says whose it is (`super::owner`): the config, resolved at each answer as
    // the clients resolve theirs (a config reached through a link that was switched since, as a
    // mounted Kubernetes ConfigMap is, still matches), and the daemon's id. A path that cannot
    // be a header value (a control character in it) is left out, and clients then refuse the
    // answer.
    let daemon = app
        .sources
        .daemon_id
        .as_ref()
        .and_then(|id| header::HeaderValue::from_str(id.as_str()).ok());
    // Outermost: a client that failed the token waits before anything else looks at it.
    let attempts = Arc::clone(&app.attempts);
    let router = router.layer(axum::middleware::from_fn_with_state(
        attempts,
        super::attempts::slow_down,
    ));
    router.layer(axum::middleware::from_fn(
        move |request: Request, next: Next| {
            let path = app.config().path.clone();
            let daemon = daemon.clone();
            async move {
                let mut response = next.run(request).await;
                let owner = super::owner::identity(&path);
                let bytes = owner.as_os_str().as_encoded_bytes();
                let headers = response.headers_mut();
                if let Ok(owner) = header::HeaderValue::from_bytes(bytes) {
                    headers.insert(super::owner::CONFIG_HEADER, owner);
                }
                if let Some(daemon) = daemon {
                    headers.insert(super::owner::DAEMON_HEADER, daemon);
                }
                response
            }
        },
    ))
}

/// Refuses (421) a request whose `Host` does not name the loopback with `port`.
async fn loopback_host(port: u16, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    if host.as_deref().is_some_and(|h| names_loopback(h, port)) {
        return next.run(request).await;
    }
    let given = host.map_or_else(|| "no Host header".to_owned(), |h| format!("Host {h:?}"));
    error(
        StatusCode::MISDIRECTED_REQUEST,
        format!(
            "{given} does not name this endpoint: on a loopback address it answers only Host \
             127.0.0.1:{port}, localhost:{port} or [::1]:{port} (a guard against DNS rebinding); \
             use one of those names in the URL"
        ),
    )
}

/// Whether a `Host` value names the loopback with `port`: `localhost`, an IPv4 loopback
/// address or `[::1]`, followed by `:port` (or by nothing when the port is 80). Names are
/// compared in any case; anything else, a DNS name that resolves to 127.0.0.1 included, is not.
pub(crate) fn names_loopback(host: &str, port: u16) -> bool {
    let (name_ok, rest) = match host.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((ip, rest)) => (
                ip.parse::<Ipv6Addr>().is_ok_and(|ip| ip.is_loopback()),
                rest,
            ),
            None => return false,
        },
        None => {
            let (name, rest) = host.find(':').map_or((host, ""), |at| host.split_at(at));
            let ok = name.eq_ignore_ascii_case("localhost")
                || name.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback());
            (ok, rest)
        }
    };
    let port_ok = match rest.strip_prefix(':') {
        Some(digits) => {
            !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit())
                && digits.parse() == Ok(port)
        }
        None => rest.is_empty() && port == 80,
    };
    name_ok && port_ok
}

#[derive(Debug, serde::Deserialize)]
struct StatusQuery {
    refresh: Option<String>,
}

pub(super) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let body = Json(serde_json::json!({ "error": message.into() }));
    (status, body).into_response()
}

fn unauthorized() -> Response {
    let mut response = error(
        StatusCode::UNAUTHORIZED,
        "missing or wrong bearer token: send Authorization: Bearer <[status] token>",
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    super::attempts::refused(response)
}

/// `/status` and `/metrics` on a non-loopback bind need the token.
pub(super) fn guard(app: &App, headers: &HeaderMap) -> Option<Response> {
    let config = app.config();
    let status = &config.status;
    match &status.token {
        Some(token)
            if status.token_required_for_all() && !crate::bearer::carries(headers, token) =>
        {
            Some(unauthorized())
        }
        _ => None,
    }
}

async fn status(
    State(app): State<Arc<App>>,
    Query(query): Query<StatusQuery>,
    headers: HeaderMap,
) -> Response {
    if let Some(denied) = guard(&app, &headers) {
        return denied;
    }
    let wants_fresh = query
        .refresh
        .is_some_and(|v| matches!(v.as_str(), "1" | "true" | "yes"));
    let token = app.config().status.token.clone();
    let refresh = match token {
        _ if !wants_fresh => Refresh::Cached,
        Some(token) if crate::bearer::carries(&headers, &token) => Refresh::Now,
        _ => Refresh::Limited,
    };
    // The document holds every job's last output tail: it takes a turn until it is sent.
    let Some(turn) = app.turns.status_turn().await else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    match serde_json::to_vec(&build::document(&app, refresh).await) {
        Ok(body) => {
            let json = ([(header::CONTENT_TYPE, "application/json")], ()).into_response();
            super::turns::in_turn(json, body, turn)
        }
        Err(err) => error(StatusCode::INTERNAL_SERVER_ERROR, err.to_string()),
    }
}

async fn metrics(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if let Some(denied) = guard(&app, &headers) {
        return denied;
    }
    let text = build::metrics(&app);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// 200 while the daemon's main loop ticks (within three of its intervals); never asks the API.
async fn healthz(State(app): State<Arc<App>>) -> Response {
    let alive = match app.context.view.beat() {
        Some(beat) => {
            let limit =
                chrono::TimeDelta::from_std(beat.every * 3).unwrap_or(chrono::TimeDelta::MAX);
            Utc::now() - beat.at <= limit
        }
        None => (Utc::now() - app.started) < chrono::TimeDelta::seconds(60),
    };
    if alive {
        (StatusCode::OK, "ok\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "the scheduler loop is not making progress\n",
        )
            .into_response()
    }
}

async fn readyz(State(app): State<Arc<App>>) -> Response {
    if app.ready() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "waiting for the first check sync\n",
        )
            .into_response()
    }
}

/// The actions (`trigger`, `pause`, `resume`) always need the bearer token: 403 when none is
/// configured (`what` names the action), 401 when the request does not carry it.
pub(super) fn authorize(config: &Config, headers: &HeaderMap, what: &str) -> Option<Response> {
    let Some(token) = &config.status.token else {
        return Some(error(
            StatusCode::FORBIDDEN,
            format!("{what} is off: set [status] token (or token_file) in the config"),
        ));
    };
    (!crate::bearer::carries(headers, token)).then(unauthorized)
}

/// `POST /jobs/{name}/run`: 202 started or queued, 409 when the overlap rule refuses it (or
/// the daemon does not run the job), 404 unknown job, 401 bad token, 403 no token configured.
async fn trigger(
    State(app): State<Arc<App>>,
    UrlPath(name): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    let config = app.config();
    if let Some(denied) = authorize(&config, &headers, "triggering runs") {
        return denied;
    }
    let (Some(job), Some(state)) = (config.job(&name), app.context.view.job(&name)) else {
        return error(
            StatusCode::NOT_FOUND,
            format!("no job named \"{name}\" in the config"),
        );
    };
    if !job.enabled || job.action == JobAction::External {
        let why = if job.enabled {
            "is external (run elsewhere)"
        } else {
            "is disabled"
        };
        return error(
            StatusCode::CONFLICT,
            format!("job \"{name}\" {why}: the daemon does not run it"),
        );
    }
    let running = state.running;
    if running > 0 && job.overlap == Overlap::Skip {
        return error(
            StatusCode::CONFLICT,
            format!("job \"{name}\" is running and its overlap is \"skip\": not started"),
        );
    }
    app.context.view.request_run(&name);
    let queued = running > 0 && job.overlap == Overlap::Queue;
    info!(job = %name, queued, "run requested through the status endpoint");
    let body = serde_json::json!({ "job": name, "accepted": true, "queued": queued });
    (StatusCode::ACCEPTED, Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::names_loopback;

    #[test]
    fn only_loopback_names_with_the_port_pass() {
        for host in [
            "127.0.0.1:9465",
            "localhost:9465",
            "LocalHost:9465",
            "[::1]:9465",
            "127.0.0.2:9465",
        ] {
            assert!(names_loopback(host, 9465), "{host}");
        }
        for host in [
            "rebound.example:9465",
            "localhost.example:9465",
            "localhost.:9465",
            "127.0.0.1.nip.io:9465",
            "localhost:9466",
            "localhost",
            "127.0.0.1",
            "[::1]",
            "localhost:",
            "localhost:+9465",
            "localhost:9465:9465",
            "[::ffff:127.0.0.1]:9465",
            "[::1:9465",
            "10.0.0.1:9465",
            "",
        ] {
            assert!(!names_loopback(host, 9465), "{host}");
        }
        assert!(names_loopback("localhost", 80) && names_loopback("[::1]", 80));
    }
}
