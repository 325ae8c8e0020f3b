//! The HTTP side of the emulator: accept loops for the API and ping listeners, the front door
//! every request passes (recording, injected faults), authentication, the rate limit, the
//! hand-off to the routing of the API operations (`routes.rs`), and the spec's error bodies.
//!
//! Connections are served with hyper directly (not an axum router) so a fault can drop a
//! connection without answering: a service error makes hyper close it.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::faults::FaultKind;
use super::routes::route;
use super::state::{lock, timestamp, Listener, RecordedRequest, Shared};
use super::{admin, openapi, pings};
use crate::api::model::ErrorBody;

/// Largest request body read; larger ones get a 400.
const MAX_BODY: usize = 4 * 1024 * 1024;
/// Recorded requests kept (oldest dropped first), so a long simulation stays bounded.
const MAX_RECORDED: usize = 10_000;
/// Prefix of the admin API on the API listener.
pub(crate) const ADMIN_PREFIX: &str = "/_emulator";

/// An error answer in the spec's shape `{statusCode, error, message, attributes?}`.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// Human-readable message; names the field for a 400.
    pub message: String,
    /// Extra detail (present on 401 and 429, as in the spec).
    pub attributes: Option<Value>,
}

impl ApiError {
    /// An error of any status.
    pub(crate) fn new(status: u16, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            attributes: None,
        }
    }

    /// 400 `Bad Request`.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, message)
    }

    /// 404 `Not Found`.
    pub(crate) fn not_found() -> Self {
        Self::new(404, "Not Found")
    }

    /// 405 `Method Not Allowed`.
    pub(crate) fn method_not_allowed() -> Self {
        Self::new(405, "Method Not Allowed")
    }

    /// 401 `Unauthorized` / `Bad Token`, with (empty) attributes as the spec shows.
    pub(crate) fn unauthorized() -> Self {
        ApiError {
            attributes: Some(json!({})),
            ..Self::new(401, "Bad Token")
        }
    }

    /// 429 `Too Many Requests` with attributes describing the limit.
    pub(crate) fn too_many(limit: u32, window: Duration) -> Self {
        ApiError {
            attributes: Some(json!({"limit": limit, "windowSeconds": window.as_secs()})),
            ..Self::new(429, "Too Many Requests")
        }
    }

    /// The JSON body, built with the client's own [`ErrorBody`] so both sides share one shape.
    pub(crate) fn body(&self) -> Value {
        let reason = StatusCode::from_u16(self.status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("Error");
        let body = ErrorBody {
            status_code: self.status,
            error: reason.to_owned(),
            message: Some(self.message.clone()),
            attributes: self.attributes.clone(),
        };
        serde_json::to_value(body).unwrap_or(Value::Null)
    }
}

/// An answer before it becomes an HTTP response.
#[derive(Debug)]
pub(crate) struct Reply {
    /// HTTP status.
    pub status: u16,
    /// JSON body; `None` for 204.
    pub body: Option<Value>,
    /// Extra headers (`Allow`, `Retry-After`).
    pub headers: Vec<(header::HeaderName, String)>,
}

impl Reply {
    /// 200 with a JSON body.
    pub(crate) fn ok(body: Value) -> Self {
        Reply {
            status: 200,
            body: Some(body),
            headers: Vec::new(),
        }
    }

    /// A status with a JSON body.
    pub(crate) fn json(status: u16, body: Value) -> Self {
        Reply {
            status,
            body: Some(body),
            headers: Vec::new(),
        }
    }

    /// 204 No Content.
    pub(crate) fn no_content() -> Self {
        Reply {
            status: 204,
            body: None,
            headers: Vec::new(),
        }
    }

    fn into_response(self) -> Response<Body> {
        let mut builder = Response::builder().status(self.status);
        for (name, value) in self.headers {
            builder = builder.header(name, value);
        }
        let body = match self.body {
            Some(body) => {
                builder = builder.header(header::CONTENT_TYPE, "application/json");
                Body::from(body.to_string())
            }
            None => Body::empty(),
        };
        builder.body(body).unwrap_or_else(|_| {
            let mut fallback = Response::new(Body::empty());
            *fallback.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            fallback
        })
    }
}

impl From<ApiError> for Reply {
    fn from(err: ApiError) -> Self {
        Reply::json(err.status, err.body())
    }
}

/// The error hyper gets to close a connection without answering (a `drop` or `hang` fault).
#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by an injected fault")
    }
}

impl std::error::Error for Dropped {}

/// Accepts connections on `listener` until `cancel`; open connections are aborted then.
pub(crate) async fn serve(
    listener: TcpListener,
    kind: Listener,
    shared: Arc<Shared>,
    cancel: CancellationToken,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let shared = Arc::clone(&shared);
                    let cancel = cancel.clone();
                    connections.spawn(serve_connection(stream, kind, shared, cancel));
                }
                Err(err) => {
                    warn!(error = %err, listener = ?kind, "emulator could not accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.abort_all();
}

async fn serve_connection(
    stream: tokio::net::TcpStream,
    kind: Listener,
    shared: Arc<Shared>,
    cancel: CancellationToken,
) {
    let conn_cancel = cancel.clone();
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let shared = Arc::clone(&shared);
        let cancel = conn_cancel.clone();
        async move { front_door(&shared, kind, request, &cancel).await }
    });
    let connection =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        result = connection => {
            if let Err(err) = result {
                debug!(error = %err, "emulator connection ended");
            }
        }
        () = cancel.cancelled() => {}
    }
}

/// Every request passes here: admin requests go straight to the admin API; the others are
/// recorded, meet their injected fault if any, then reach the API or the ping host.
async fn front_door(
    shared: &Shared,
    listener: Listener,
    request: Request<Incoming>,
    cancel: &CancellationToken,
) -> Result<Response<Body>, Dropped> {
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(Body::new(body), MAX_BODY).await else {
        let err = ApiError::bad_request("request body too large or unreadable");
        return Ok(Reply::from(err).into_response());
    };
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query();
    if listener == Listener::Api
        && (path == ADMIN_PREFIX || path.starts_with(&format!("{ADMIN_PREFIX}/")))
    {
        let reply = admin::handle(shared, &parts.method, &path, query, &bytes);
        return Ok(reply.into_response());
    }
    let seq = record(shared, listener, &parts, &bytes);
    let fault = lock(&shared.faults).take(listener, parts.method.as_str(), &path);
    if let Some(fault) = fault {
        if fault.latency_ms > 0 {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(fault.latency_ms)) => {}
                () = cancel.cancelled() => return Err(Dropped),
            }
        }
        let reply = match fault.kind {
            FaultKind::Latency => None,
            FaultKind::Drop => return Err(Dropped),
            FaultKind::Hang => {
                cancel.cancelled().await;
                return Err(Dropped);
            }
            FaultKind::ApplyThenHang => {
                let reply = match listener {
                    Listener::Api => {
                        api(shared, &parts.method, &path, query, &parts.headers, &bytes)
                    }
                    Listener::Ping => pings::handle(shared, &parts.method, &path, &parts.headers),
                };
                set_status(shared, seq, reply.status);
                cancel.cancelled().await;
                return Err(Dropped);
            }
            FaultKind::Status => Some(Reply::from(ApiError::new(
                fault.status.unwrap_or(500),
                "injected fault",
            ))),
            FaultKind::RateLimit => {
                let mut reply = Reply::from(ApiError {
                    attributes: Some(json!({})),
                    ..ApiError::new(429, "Too Many Requests")
                });
                if let Some(after) = &fault.retry_after {
                    let value = after
                        .as_str()
                        .map_or_else(|| after.to_string(), str::to_owned);
                    reply.headers.push((header::RETRY_AFTER, value));
                }
                Some(reply)
            }
        };
        if let Some(reply) = reply {
            set_status(shared, seq, reply.status);
            return Ok(reply.into_response());
        }
    }
    let reply = match listener {
        Listener::Api => api(shared, &parts.method, &path, query, &parts.headers, &bytes),
        Listener::Ping => pings::handle(shared, &parts.method, &path, &parts.headers),
    };
    set_status(shared, seq, reply.status);
    Ok(reply.into_response())
}

fn record(
    shared: &Shared,
    listener: Listener,
    parts: &axum::http::request::Parts,
    body: &Bytes,
) -> u64 {
    let headers = parts
        .headers
        .iter()
        .filter(|(name, _)| *name != header::AUTHORIZATION)
        .map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            (name.as_str().to_owned(), value)
        })
        .collect();
    let mut log = lock(&shared.log);
    let seq = log.back().map_or(1, |r| r.seq + 1);
    if log.len() >= MAX_RECORDED {
        log.pop_front();
    }
    log.push_back(RecordedRequest {
        seq,
        listener,
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().map(str::to_owned),
        headers,
        body: String::from_utf8_lossy(body).into_owned(),
        status: None,
        at: timestamp(shared.clock.now()),
    });
    seq
}

fn set_status(shared: &Shared, seq: u64, status: u16) {
    let mut log = lock(&shared.log);
    if let Some(entry) = log.iter_mut().rev().find(|r| r.seq == seq) {
        entry.status = Some(status);
    }
}

/// The API listener: the OpenAPI document, then authentication, rate limit, account, routing.
fn api(
    shared: &Shared,
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
) -> Reply {
    if path == "/openapi.json" {
        return match *method {
            Method::GET => Reply::ok(openapi::document()),
            _ => ApiError::method_not_allowed().into(),
        };
    }
    authorize(shared, headers)
        .and_then(|()| json_body(headers, body))
        .and_then(|()| route(shared, method, path, query, body))
        .unwrap_or_else(Reply::from)
}

/// 415 for a body sent with a `Content-Type` that is not JSON (the spec: requests with a body
/// are `application/json`). A body without the header is read as JSON, as the real service
/// does by default.
fn json_body(headers: &HeaderMap, body: &[u8]) -> Result<(), ApiError> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let media = value
        .to_str()
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if body.is_empty() || media == "application/json" || media.ends_with("+json") {
        Ok(())
    } else {
        Err(ApiError::new(415, "Unsupported Media Type"))
    }
}

/// 401 for a missing or wrong bearer token (the scheme in any case), 429 over the rate limit (every authenticated request
/// counts, refused ones too), 403 for an `x-service-account` naming another account.
fn authorize(shared: &Shared, headers: &HeaderMap) -> Result<(), ApiError> {
    if !crate::bearer::carries(headers, &shared.config.api_key) {
        return Err(ApiError::unauthorized());
    }
    let key = shared.config.api_key.expose();
    let mut limiter = lock(&shared.limiter);
    if !limiter.admit(key, shared.clock.now()) {
        return Err(ApiError::too_many(limiter.limit, limiter.window));
    }
    drop(limiter);
    match headers.get("x-service-account") {
        Some(account) if account.as_bytes() != shared.config.account.as_bytes() => {
            Err(ApiError::new(403, "Forbidden"))
        }
        _ => Ok(()),
    }
}

/// The query parameters as (name, value) pairs, percent-decoded.
pub(crate) fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    let Some(query) = query else {
        return Vec::new();
    };
    reqwest::Url::parse(&format!("http://query/?{query}"))
        .map(|url| url.query_pairs().into_owned().collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_have_the_spec_shape() {
        assert_eq!(
            ApiError::unauthorized().body(),
            json!({"statusCode": 401, "error": "Unauthorized", "message": "Bad Token",
                   "attributes": {}})
        );
        assert_eq!(
            ApiError::not_found().body(),
            json!({"statusCode": 404, "error": "Not Found", "message": "Not Found"})
        );
        let body = ApiError::too_many(600, Duration::from_secs(60)).body();
        assert_eq!(body["error"], "Too Many Requests");
        assert!(body["attributes"].is_object());
    }

    #[test]
    fn query_pairs_are_decoded() {
        assert_eq!(
            query_pairs(Some("a=1&nextId=x%20y")),
            vec![("a".into(), "1".into()), ("nextId".into(), "x y".into())]
        );
    }
}
