//! Serving the endpoint's connections: HTTP/1.1 through hyper, with limits so that another
//! local user can neither starve the daemon of file descriptors nor keep liveness and readiness
//! probes out (a slow-client flood):
//!
//! - at most [`MAX_CONNECTIONS`] connections are open at once;
//! - the endpoint keeps accepting: when every slot is taken, the new connection takes the slot
//!   of the connection that has waited longest for a request head (one not inside a request:
//!   idle, sending half a head, or kept alive between requests), which is closed. So slow
//!   clients cannot make a probe wait in the kernel's listen queue behind them: a client that
//!   sends its request at once, as `/healthz` and `/readyz` probes do, is read before the
//!   connections that hold their slot by sending nothing; it is closed only if
//!   [`MAX_CONNECTIONS`] newer ones arrive before its head does. Only when every slot serves
//!   a request does a new connection wait in the listen queue (it costs no descriptor there);
//! - a request head (request line and headers) must arrive whole within [`HEADER_TIMEOUT`] of
//!   the moment the connection waits for one, the first request or the next on a kept-alive
//!   connection; otherwise the connection is closed.
//!
//! Served by hand rather than by `axum::serve`, which sets no limit (and whose graceful
//! shutdown waits for such connections without end). At shutdown, open connections get
//! [`SHUTDOWN_GRACE`] to finish the request they serve, then are dropped.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::Request;
use axum::serve::Listener;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;
use tracing::debug;

/// Connections open at once.
pub(crate) const MAX_CONNECTIONS: usize = 64;

/// Time allowed for a request head to arrive, from when the connection waits for it.
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// Time open connections get to finish at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// One open connection, as the accept loop sees it.
struct Open {
    /// True while it serves a request (then it is never closed to make room).
    busy: Arc<AtomicBool>,
    /// Closes it.
    close: CancellationToken,
}

/// The open connections by arrival (a sequence number): the first one not busy is the one that
/// has waited longest.
#[derive(Default)]
struct Table {
    open: Mutex<BTreeMap<u64, Open>>,
}

impl Table {
    /// Closes the oldest connection that serves no request; false when every one does.
    fn evict_oldest_idle(&self) -> bool {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let idle = open.values().find(|c| !c.busy.load(Ordering::Acquire));
        match idle {
            Some(connection) => {
                connection.close.cancel();
                true
            }
            None => false,
        }
    }
}

/// Accepts connections on `listener` and serves `router` on each, within the limits above,
/// until `cancel`.
pub(super) async fn serve<L: Listener>(mut listener: L, router: Router, cancel: CancellationToken) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let table = Arc::new(Table::default());
    let connections = TaskTracker::new();
    let mut next_id = 0u64;
    loop {
        // A free slot at once; else the slot of the oldest idle connection, taken as soon as
        // it is closed; else (every connection serves a request) the first slot to free up.
        let slot = match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                table.evict_oldest_idle();
                tokio::select! {
                    () = cancel.cancelled() => break,
                    slot = Arc::clone(&slots).acquire_owned() => match slot {
                        Ok(slot) => slot,
                        Err(_) => break, // never closed
                    },
                }
            }
        };
        let io = tokio::select! {
            () = cancel.cancelled() => break,
            (io, _) = listener.accept() => io,
        };
        let id = next_id;
        next_id += 1;
        let open = Open {
            busy: Arc::new(AtomicBool::new(false)),
            close: cancel.child_token(),
        };
        let (busy, close) = (Arc::clone(&open.busy), open.close.clone());
        table
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, open);
        let table = Arc::clone(&table);
        let router = router.clone();
        connections.spawn(async move {
            connection(io, router, slot, busy, close).await;
            table
                .open
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
        });
    }
    connections.close();
    connections.wait().await;
}

/// Serves one connection until it ends or `close` (making room, or shutdown); `busy` is true
/// while a request is served. Its slot is given back when it ends.
async fn connection<I>(
    io: I,
    router: Router,
    slot: OwnedSemaphorePermit,
    busy: Arc<AtomicBool>,
    close: CancellationToken,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let _slot = slot;
    let flag = Arc::clone(&busy);
    let marked = tower::service_fn(move |request: Request<hyper::body::Incoming>| {
        let router = router.clone();
        let flag = Arc::clone(&flag);
        async move {
            flag.store(true, Ordering::Release);
            let response = router.oneshot(request).await;
            flag.store(false, Ordering::Release);
            response
        }
    });
    let service = TowerToHyperService::new(marked);
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
        () = close.cancelled() => {
            // Made room for a newer connection: it waited for a request head, drop it now.
            if !busy.load(Ordering::Acquire) {
                return;
            }
            connection.as_mut().graceful_shutdown();
        }
    }
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, connection).await;
}
