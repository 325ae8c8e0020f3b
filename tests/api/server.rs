//! A real HTTP server for the `api` tests: axum on 127.0.0.1:0 in its own thread, answering
//! from a script and handing every request to the test through a channel (before answering
//! it, so once the client has its answer the test holds the request without waiting).

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::util::Inbox;

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    pub headers: HeaderMap,
    pub body: String,
}

impl Seen {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

/// What the server answers: status, headers, body, and a delay before answering.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
    pub delay: Duration,
}

pub fn reply(status: u16, body: Value) -> Reply {
    Reply {
        status,
        headers: vec![("content-type", "application/json".into())],
        body: body.to_string(),
        delay: Duration::ZERO,
    }
}

pub fn error_reply(status: u16, error: &str, message: &str, attributes: Option<Value>) -> Reply {
    let mut body = json!({"statusCode": status, "error": error, "message": message});
    if let Some(attributes) = attributes {
        body["attributes"] = attributes;
    }
    reply(status, body)
}

type Script = dyn Fn(&Seen, usize) -> Reply + Send + Sync;

/// The server's state: where requests go (with how many went before, counted under the same
/// lock so the count matches the order on the channel), and how to answer.
#[derive(Clone)]
struct ServerState {
    requests: Arc<Mutex<(usize, Sender<Seen>)>>,
    script: Arc<Script>,
}

/// A running test server; stops when dropped.
pub struct Server {
    pub base_url: String,
    inbox: Inbox<Seen>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Server {
    /// Serves `script(request, how many requests came before it)`.
    pub fn start(script: impl Fn(&Seen, usize) -> Reply + Send + Sync + 'static) -> Server {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        let (requests, channel) = mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = ServerState {
            requests: Arc::new(Mutex::new((0, requests))),
            script: Arc::new(script),
        };
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app = axum::Router::new().fallback(answer).with_state(state);
                axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap();
            });
        });
        Server {
            base_url,
            inbox: Inbox::new(channel),
            _stop: stop,
        }
    }

    /// Every request received so far, in arrival order, without waiting.
    pub fn seen(&self) -> Vec<Seen> {
        self.inbox.all()
    }

    /// How many requests were received so far.
    pub fn count(&self) -> usize {
        self.seen().len()
    }
}

async fn answer(
    axum::extract::State(state): axum::extract::State<ServerState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = Seen {
        method: method.to_string(),
        path: uri.path().to_owned(),
        query: uri.query().unwrap_or("").to_owned(),
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    let before = {
        let mut requests = state.requests.lock().unwrap();
        let before = requests.0;
        requests.0 += 1;
        // The test may have dropped the server already: then nobody waits for the request.
        let _ = requests.1.send(request.clone());
        before
    };
    let reply = (state.script)(&request, before);
    tokio::time::sleep(reply.delay).await;
    let mut response = (StatusCode::from_u16(reply.status).unwrap(), reply.body).into_response();
    for (name, value) in reply.headers {
        response.headers_mut().insert(name, value.parse().unwrap());
    }
    response
}
