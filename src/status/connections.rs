//! Serving the endpoint's connections: HTTP/1.1 through hyper, with two limits so that another
//! local user cannot starve the daemon of file descriptors (a slow-client flood):
//!
//! - at most [`MAX_CONNECTIONS`] connections are open at once; beyond that the endpoint stops
//!   accepting, and further connections wait in the kernel's listen queue (they cost the
//!   daemon no descriptor) until one closes;
//! - a request head (request line and headers) must arrive whole within [`HEADER_TIMEOUT`] of
//!   the moment the connection waits for one, the first request or the next on a kept-alive
//!   connection; otherwise the connection is closed. So a client that opens connections and
//!   sends nothing, or half a request, holds each slot for at most that long.
//!
//! Served by hand rather than by `axum::serve`, which sets neither limit (and whose graceful
//! shutdown waits for such connections without end). At shutdown, open connections get
//! [`SHUTDOWN_GRACE`] to finish the request they serve, then are dropped.

use std::sync::Arc;
use std::time::Duration;

use axum::serve::Listener;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::debug;

/// Connections open at once; more wait in the listen queue.
pub(crate) const MAX_CONNECTIONS: usize = 64;

/// Time allowed for a request head to arrive, from when the connection waits for it.
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// Time open connections get to finish at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// Accepts connections on `listener` and serves `router` on each, within the limits above,
/// until `cancel`.
pub(super) async fn serve<L: Listener>(mut listener: L, router: Router, cancel: CancellationToken) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let connections = TaskTracker::new();
    loop {
        let slot = tokio::select! {
            () = cancel.cancelled() => break,
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break, // never closed
            },
        };
        let io = tokio::select! {
            () = cancel.cancelled() => break,
            (io, _) = listener.accept() => io,
        };
        connections.spawn(connection(io, router.clone(), slot, cancel.clone()));
    }
    connections.close();
    connections.wait().await;
}

/// Serves one connection; its slot is given back when it ends.
async fn connection<I>(io: I, router: Router, slot: OwnedSemaphorePermit, cancel: CancellationToken)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let _slot = slot;
    let service = TowerToHyperService::new(router);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    let connection = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(err) = result {
                debug!(error = %err, "status endpoint connection ended");
            }
            return;
        }
        () = cancel.cancelled() => connection.as_mut().graceful_shutdown(),
    }
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, connection).await;
}
