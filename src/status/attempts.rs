//! Failed token attempts at the status endpoint (an answer 401, or the dashboard's login form
//! refusing the token typed), in the endpoint's [`Attempts`]: counted ([`Attempts::failures`], served as
//! `heartbeat_agent_status_auth_failures_total`), logged without the token given (the first
//! at once, then at most one line per [`LOG_EVERY`] saying how many came meanwhile), and slowed
//! down per client.
//!
//! The slowdown: a client (one IP address; a unix socket's clients are this machine's users,
//! already let in by the socket's mode, and are not slowed) that failed `n` times, each within
//! [`FORGET_AFTER`] of the one before, waits `min(100 ms x 2^(n-1), 2 s)` before each of its
//! requests is looked at. A guesser gets one answer per 2 s per connection instead of
//! thousands a second; a person who mistyped the token once waits 100 ms. `/healthz` and
//! `/readyz`, which take no token, are never slowed. At most
//! [`MAX_CLIENTS`] clients are remembered (the oldest failure is forgotten first), so a flood
//! of addresses cannot grow the daemon.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use tracing::warn;

/// The wait after the first failure; it doubles with each further one.
const FIRST_DELAY: Duration = Duration::from_millis(100);
/// The longest wait.
const MAX_DELAY: Duration = Duration::from_secs(2);
/// A client with no failure for this long starts afresh.
const FORGET_AFTER: Duration = Duration::from_secs(60);
/// Clients remembered at most.
const MAX_CLIENTS: usize = 4096;
/// At most one log line about failed attempts per this interval.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// The address of the client of a request, put in its extensions by the connection it came on:
/// `None` on a unix socket.
#[derive(Debug, Clone, Copy)]
pub(super) struct Peer(pub(super) Option<IpAddr>);

/// One endpoint's failed token attempts: how many since it started, and the clients that
/// failed recently (made with the endpoint, handed to its [`slow_down`] middleware).
#[derive(Debug, Default)]
pub(crate) struct Attempts {
    failures: AtomicU64,
    book: Mutex<Book>,
}

impl Attempts {
    /// Failed token attempts since the endpoint started.
    pub(crate) fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    fn with_book<T>(&self, f: impl FnOnce(&mut Book) -> T) -> T {
        f(&mut self.book.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// One client's recent failures.
#[derive(Debug, Clone, Copy)]
struct Client {
    failures: u32,
    last: Instant,
}

/// The clients that failed recently, and the log's pace.
#[derive(Debug, Default)]
struct Book {
    clients: HashMap<IpAddr, Client>,
    /// When the last line was logged, and failures since that were not.
    logged: Option<Instant>,
    unlogged: u64,
}

/// How long a client with `failures` recent failures waits.
fn delay(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let doublings = (failures - 1).min(16);
    FIRST_DELAY.saturating_mul(1 << doublings).min(MAX_DELAY)
}

impl Attempts {
    /// The wait of the client at `ip` now (zero for a client with no recent failure).
    fn wait_of(&self, ip: IpAddr, now: Instant) -> Duration {
        self.with_book(|book| match book.clients.get(&ip) {
            Some(client) if now.duration_since(client.last) < FORGET_AFTER => {
                delay(client.failures)
            }
            Some(_) => {
                book.clients.remove(&ip);
                Duration::ZERO
            }
            None => Duration::ZERO,
        })
    }

    /// Counts a failed attempt of `peer` on `path` and logs it when the pace allows.
    fn failed(&self, peer: Option<IpAddr>, path: &str) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let (client_failures, unlogged) = self.with_book(|book| {
            let failures = peer.map_or(0, |ip| remember(book, ip, now));
            let due = book
                .logged
                .map_or(true, |at| now.duration_since(at) >= LOG_EVERY);
            if !due {
                book.unlogged += 1;
                return (failures, None);
            }
            book.logged = Some(now);
            (failures, Some(std::mem::take(&mut book.unlogged)))
        });
        if let Some(unlogged) = unlogged {
            let client = peer.map_or_else(|| "the unix socket".to_owned(), |ip| ip.to_string());
            warn!(
                client = %client,
                path = %path,
                client_failures,
                more_since_last_line = unlogged,
                total = self.failures(),
                "refused a request with a missing or wrong status token (the token given is not \
                 logged); if this is not you, someone is guessing: keep the endpoint on loopback or \
                 behind a firewall"
            );
        }
    }
}

/// Adds a failure of `ip` to the book; returns its recent failures.
fn remember(book: &mut Book, ip: IpAddr, now: Instant) -> u32 {
    if book.clients.len() >= MAX_CLIENTS && !book.clients.contains_key(&ip) {
        book.clients
            .retain(|_, client| now.duration_since(client.last) < FORGET_AFTER);
        if book.clients.len() >= MAX_CLIENTS {
            let oldest = book
                .clients
                .iter()
                .min_by_key(|(_, c)| c.last)
                .map(|(ip, _)| *ip);
            if let Some(oldest) = oldest {
                book.clients.remove(&oldest);
            }
        }
    }
    let client = book.clients.entry(ip).or_insert(Client {
        failures: 0,
        last: now,
    });
    if now.duration_since(client.last) >= FORGET_AFTER {
        client.failures = 0;
    }
    client.failures = client.failures.saturating_add(1);
    client.last = now;
    client.failures
}

/// The middleware: waits as the client's failures ask, serves the request, and counts an
/// answer 401 as a failed attempt.
pub(super) async fn slow_down(
    State(attempts): State<Arc<Attempts>>,
    request: Request,
    next: Next,
) -> Response {
    let peer = request.extensions().get::<Peer>().and_then(|p| p.0);
    // The probes never take a token: a prober that shares an address with a guesser is not
    // slowed.
    let probe = matches!(request.uri().path(), "/healthz" | "/readyz");
    if let (Some(ip), false) = (peer, probe) {
        let wait = attempts.wait_of(ip, Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    if response.extensions().get::<Refused>().is_some() {
        attempts.failed(peer, &path);
    }
    response
}

/// Marks an answer that refused a missing or wrong token (a 401 of the API, the login form
/// refusing the token typed); the login page shown to a visitor who gave none is not marked.
#[derive(Debug, Clone, Copy)]
pub(super) struct Refused;

/// `response`, marked as refusing a token.
pub(super) fn refused(mut response: Response) -> Response {
    response.extensions_mut().insert(Refused);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_from_100_ms_up_to_2_s() {
        let waits: Vec<u128> = (0..8).map(|n| delay(n).as_millis()).collect();
        assert_eq!(waits, [0, 100, 200, 400, 800, 1600, 2000, 2000]);
        assert_eq!(delay(u32::MAX), MAX_DELAY);
    }

    #[test]
    fn each_endpoint_counts_and_slows_down_its_own_failures() {
        let (one, other) = (Attempts::default(), Attempts::default());
        let ip: IpAddr = "192.0.2.9".parse().expect("an address");
        one.failed(Some(ip), "/status");
        one.failed(Some(ip), "/metrics");
        assert_eq!((one.failures(), other.failures()), (2, 0));
        let now = Instant::now();
        assert_eq!(one.wait_of(ip, now), Duration::from_millis(200));
        assert_eq!(other.wait_of(ip, now), Duration::ZERO);
    }

    #[test]
    fn failures_are_forgotten_after_a_quiet_minute() {
        let mut book = Book::default();
        let ip: IpAddr = "192.0.2.7".parse().expect("an address");
        let start = Instant::now();
        assert_eq!(remember(&mut book, ip, start), 1);
        assert_eq!(remember(&mut book, ip, start + Duration::from_secs(59)), 2);
        let later = start + Duration::from_secs(59) + FORGET_AFTER;
        assert_eq!(remember(&mut book, ip, later), 1);
    }
}
