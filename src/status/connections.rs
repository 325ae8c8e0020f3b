//! Serving the endpoint's connections: HTTP/1.1 through hyper, with limits so that another
//! local user can neither starve the daemon of file descriptors nor keep liveness and readiness
//! probes out (a slow-client flood):
//!
//! - the endpoint keeps accepting while fewer than [`MAX_TASKS`] connections are open; each
//!   accept brings the connections back to [`MAX_CONNECTIONS`] by closing the oldest ones that
//!   were read, serve no request and gave no whole request head within [`MAKE_ROOM_AFTER`]
//!   (idle, sending half a head, or kept alive between requests). A connection not read yet is
//!   never closed: a probe (`/healthz`, `/readyz`) sends its request with its connection, so its
//!   first read finds it whole and it is served. So slow clients can make a probe wait neither
//!   in the kernel's listen queue nor for a slot: the accept loop does not wait for anything
//!   they hold. Only while [`MAX_TASKS`] are open (every one serving, not read yet, or read
//!   less than [`MAKE_ROOM_AFTER`] ago: room is made again at that pace while all are taken)
//!   do new connections wait in the listen queue (they cost no descriptor there);
//! - a request head (request line and headers) must arrive whole within [`HEADER_TIMEOUT`] of
//!   the moment the connection waits for one, the first request or the next on a kept-alive
//!   connection; otherwise the connection is closed;
//! - a write to the client that makes no progress for [`WRITE_STALL`] closes the connection (a
//!   reader that stopped reading gives back the answer's turn, `super::turns`), and hyper
//!   buffers at most [`WRITE_BUFFER`] of an answer: the rest waits in its turn.
//!
//! Served by hand rather than by `axum::serve`, which sets no limit (and whose graceful
//! shutdown waits for such connections without end). At shutdown, open connections get
//! [`SHUTDOWN_GRACE`] to finish the request they serve, then are dropped.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::http::Request;
use axum::serve::Listener;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;
use tracing::debug;

use super::attempts::Peer;

/// Connections open at once, beyond those accepted but not yet read (see [`MAX_TASKS`]).
pub(crate) const MAX_CONNECTIONS: usize = 64;

/// Connections open at once, all counted: [`MAX_CONNECTIONS`] plus as many just accepted whose
/// first bytes the endpoint has not read yet (those are never closed to make room). Beyond
/// this, new connections wait in the listen queue.
pub(crate) const MAX_TASKS: usize = 2 * MAX_CONNECTIONS;

/// How long a connection must have been read without giving a whole request head before it
/// may be closed to make room (a probe's head arrives with its connection: it is read at the
/// first read).
const MAKE_ROOM_AFTER: Duration = Duration::from_millis(5);

/// Time allowed for a request head to arrive, from when the connection waits for it.
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a write to the client may make no progress before the connection is closed.
pub(crate) const WRITE_STALL: Duration = Duration::from_secs(10);

/// The most of an answer (and of a request head) hyper buffers for one connection.
const WRITE_BUFFER: usize = 64 * 1024;

/// Time open connections get to finish at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// What the accept loop knows of one open connection, shared with its task.
#[derive(Default)]
struct State {
    /// True while it serves a request (then it is never closed to make room).
    busy: AtomicBool,
    /// When its task first ran (its first read): before that it is never closed to make room.
    started: OnceLock<Instant>,
}

/// One open connection, as the accept loop sees it.
struct Open {
    state: Arc<State>,
    /// Closes it.
    close: CancellationToken,
}

/// The connections open and not asked to close, by arrival (a sequence number): the first one
/// that may make room is the one that has waited longest.
#[derive(Default)]
struct Table {
    open: Mutex<BTreeMap<u64, Open>>,
}

impl Table {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Open>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Over [`MAX_CONNECTIONS`]: closes the oldest connections that were read, serve no request
    /// and gave no whole head within [`MAKE_ROOM_AFTER`], until the count is back or none is
    /// left to close.
    fn make_room(&self) {
        let mut open = self.lock();
        while open.len() > MAX_CONNECTIONS {
            let idle = open.iter().find_map(|(id, c)| {
                let waited = c.state.started.get().map(Instant::elapsed);
                let idle = !c.state.busy.load(Ordering::Acquire)
                    && waited.is_some_and(|w| w >= MAKE_ROOM_AFTER);
                idle.then_some(*id)
            });
            let Some(id) = idle else {
                return;
            };
            if let Some(connection) = open.remove(&id) {
                connection.close.cancel();
            }
        }
    }
}

/// The client's IP address of a connection accepted with this address: `None` on a unix
/// socket.
pub(super) trait PeerIp {
    fn ip(&self) -> Option<IpAddr>;
}

impl PeerIp for SocketAddr {
    fn ip(&self) -> Option<IpAddr> {
        Some(SocketAddr::ip(self))
    }
}

impl PeerIp for tokio::net::unix::SocketAddr {
    fn ip(&self) -> Option<IpAddr> {
        None
    }
}

/// Accepts connections on `listener` and serves `router` on each, within the limits above,
/// until `cancel`.
pub(super) async fn serve<L>(mut listener: L, router: Router, cancel: CancellationToken)
where
    L: Listener,
    L::Addr: PeerIp,
{
    let tasks = Arc::new(Semaphore::new(MAX_TASKS));
    let table = Arc::new(Table::default());
    let connections = TaskTracker::new();
    let mut next_id = 0u64;
    loop {
        let Some(slot) = free_slot(&tasks, &table, &cancel).await else {
            break;
        };
        let io = tokio::select! {
            () = cancel.cancelled() => break,
            (io, addr) = listener.accept() => (io, addr.ip()),
        };
        let (io, peer) = io;
        let id = next_id;
        next_id += 1;
        let state = Arc::new(State::default());
        let close = cancel.child_token();
        let open = Open {
            state: Arc::clone(&state),
            close: close.clone(),
        };
        table.lock().insert(id, open);
        // The new connection is not read yet: it is not the one closed.
        table.make_room();
        let table = Arc::clone(&table);
        let router = router.clone();
        connections.spawn(async move {
            connection(io, peer, router, slot, state, close).await;
            table.lock().remove(&id);
        });
    }
    connections.close();
    connections.wait().await;
}

/// A slot for the next connection, `None` at shutdown. While all [`MAX_TASKS`] are taken, room
/// is made again every [`MAKE_ROOM_AFTER`]: connections accepted too recently to be closed when
/// the last one came in become closable since, and nothing else would free their slots before
/// their [`HEADER_TIMEOUT`] (a flood of slow clients would keep a probe in the listen queue for
/// that long).
async fn free_slot(
    tasks: &Arc<Semaphore>,
    table: &Table,
    cancel: &CancellationToken,
) -> Option<OwnedSemaphorePermit> {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return None,
            slot = Arc::clone(tasks).acquire_owned() => return slot.ok(), // never closed
            () = tokio::time::sleep(MAKE_ROOM_AFTER) => table.make_room(),
        }
    }
}

/// Serves one connection until it ends or `close` (making room, or shutdown); `state.busy` is
/// true while a request is served. Its slot is given back when it ends.
async fn connection<I>(
    io: I,
    peer: Option<IpAddr>,
    router: Router,
    slot: OwnedSemaphorePermit,
    state: Arc<State>,
    close: CancellationToken,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let _slot = slot;
    let flag = Arc::clone(&state);
    let marked = tower::service_fn(move |mut request: Request<hyper::body::Incoming>| {
        request.extensions_mut().insert(Peer(peer));
        let router = router.clone();
        let flag = Arc::clone(&flag);
        async move {
            flag.busy.store(true, Ordering::Release);
            let response = router.oneshot(request).await;
            flag.busy.store(false, Ordering::Release);
            response
        }
    });
    let service = TowerToHyperService::new(marked);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(WRITE_BUFFER);
    let io = Stalling { io, stalled: None };
    let connection = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let _ = state.started.set(Instant::now());
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(err) = result {
                debug!(error = %err, "status endpoint connection ended");
            }
            return;
        }
        () = close.cancelled() => {
            // Made room for a newer connection: it waited for a request head, drop it now.
            if !state.busy.load(Ordering::Acquire) {
                return;
            }
            connection.as_mut().graceful_shutdown();
        }
    }
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, connection).await;
}

/// A connection's stream whose writes fail once they made no progress for [`WRITE_STALL`].
struct Stalling<I> {
    io: I,
    /// Since the first write that could not go on, if the last one could not.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<I> Stalling<I> {
    /// `poll` as is, except a `Pending` past [`WRITE_STALL`] since the last progress, which is
    /// an error.
    fn watch<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.stalled = None;
            return poll;
        }
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(WRITE_STALL)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing of the answer for 10 s",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Stalling<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Stalling<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write(cx, buf);
        self.watch(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.watch(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.io).poll_flush(cx);
        self.watch(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
