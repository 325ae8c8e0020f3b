//! The emulator's state: the clock tests can move forward, the resource store, the rate-limit
//! windows and the log of recorded requests. Everything sits behind [`Shared`], one per emulator.
//!
//! Locks are `std::sync::Mutex`es held only for short synchronous work, never across an await.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::faults::Faults;
use super::fixtures::Fixtures;
use crate::redact::Secret;

/// The emulator's clock: real time since start, times a scale factor, plus an offset the admin
/// API moves forward.
///
/// `now = start_wall + elapsed_real * scale + offset`: with scale 1 it follows the wall clock;
/// a scale of 60 makes a real second an emulated minute (for large simulations).
#[derive(Debug)]
pub(crate) struct Clock {
    /// Wall time when the emulator started: the origin of emulated time.
    start_wall: DateTime<Utc>,
    /// Monotonic start, so a wall clock step does not move emulated time.
    start: Instant,
    /// Emulated seconds per real second.
    scale: f64,
    /// How far tests have moved the clock forward.
    offset: Mutex<chrono::Duration>,
}

impl Clock {
    /// A clock starting at the current wall time, running `scale` times faster than real time.
    pub(crate) fn new(scale: f64) -> Self {
        Clock {
            start_wall: Utc::now(),
            start: Instant::now(),
            scale: if scale.is_finite() && scale > 0.0 {
                scale
            } else {
                1.0
            },
            offset: Mutex::new(chrono::Duration::zero()),
        }
    }

    /// The emulated current time.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        let scaled = self.start.elapsed().mul_f64(self.scale);
        let elapsed = chrono::Duration::from_std(scaled).unwrap_or(chrono::Duration::MAX);
        self.start_wall + elapsed + *lock(&self.offset)
    }

    /// Moves the clock forward by `by`; returns the new time.
    pub(crate) fn advance(&self, by: Duration) -> DateTime<Utc> {
        let by = chrono::Duration::from_std(by).unwrap_or(chrono::Duration::zero());
        *lock(&self.offset) += by;
        self.now()
    }

    /// Undoes every advance.
    pub(crate) fn reset(&self) {
        *lock(&self.offset) = chrono::Duration::zero();
    }

    /// The scale factor (emulated seconds per real second).
    pub(crate) fn scale(&self) -> f64 {
        self.scale
    }
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it (the emulator's state
/// stays usable: every update is a single assignment or push).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A date-time in the service's format: RFC 3339, milliseconds, `Z`.
pub(crate) fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A calendar date `YYYY-MM-DD`.
pub(crate) fn date(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d").to_string()
}

/// A random version-4 UUID, for ids and ping tokens the emulator hands out.
pub(crate) fn uuid() -> String {
    let b: [u8; 16] = rand::random();
    format!(
        "{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-4{:01x}{:02x}-{:01x}{:01x}{:02x}-{}",
        b[0],
        b[1],
        b[2],
        b[3],
        b[4],
        b[5],
        b[6] & 0x0f,
        b[7],
        8 | (b[8] & 0x03),
        b[8] >> 4,
        b[9],
        b[10..16]
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<String>()
    )
}

/// A recorded heartbeat event.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    /// The id clients fetch statistics with.
    pub id: String,
    /// `EARLY`, `RECEIVED`, `GRACE`, `LATE` or `FAILING`; any other text when injected through
    /// the admin API (clients must keep states they do not know).
    pub state: String,
    /// When it happened, by the emulator's clock.
    pub at: DateTime<Utc>,
    /// The ping's `Origin` (else `Referer`), empty when neither was sent.
    pub source: String,
    /// The ping's `User-Agent`.
    pub user_agent: String,
}

impl Event {
    /// The event object of the spec.
    pub(crate) fn to_json(&self) -> Value {
        serde_json::json!({
            "id": self.id,
            "state": self.state,
            "timestamp": timestamp(self.at),
            "source": self.source,
            "userAgent": self.user_agent,
        })
    }
}

/// A heartbeat check: its definition as answered by the API, and its timer.
#[derive(Debug, Clone)]
pub(crate) struct HeartbeatCheck {
    /// The check object without `heartbeat.pingUrl` (added on output from the ping base).
    pub object: Map<String, Value>,
    /// When the timer last (re)started: the last ping, failing mark, re-activation or period
    /// change; `None` until the first ping arms it (see `checks.rs` for each rule's source).
    pub timer_start: Option<DateTime<Utc>>,
    /// Whether the check was marked failing since its last ping (a `FAILING` event was
    /// recorded); shown as `hasFailures`.
    pub failing: bool,
    /// Every event, oldest first.
    pub events: Vec<Event>,
    /// The failing mark this check is filed under in [`Store::due`]; `None` while it is not
    /// filed (never pinged, or deactivated). Only `Store::schedule` writes it.
    pub mark: Option<DateTime<Utc>>,
}

impl HeartbeatCheck {
    /// The check's id.
    pub(crate) fn id(&self) -> &str {
        self.object.get("id").and_then(Value::as_str).unwrap_or("")
    }

    /// The ping token.
    pub(crate) fn token(&self) -> &str {
        self.object
            .get("heartbeat")
            .and_then(|h| h.get("pingToken"))
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

/// Every resource the emulated account holds.
#[derive(Debug, Clone, Default)]
pub(crate) struct Store {
    /// Heartbeat checks by id.
    pub checks: BTreeMap<String, HeartbeatCheck>,
    /// Check id by ping token, for the ping host.
    pub tokens: HashMap<String, String>,
    /// The armed, activated checks by their next failing mark, earliest first: `(mark, id)`.
    /// `Store::tick` takes only the entries whose mark passed, so a request's work does not
    /// grow with the number of checks (see `checks/mod.rs`).
    pub due: BTreeSet<(DateTime<Utc>, String)>,
    /// Check groups by id.
    pub groups: BTreeMap<u64, Value>,
    /// Maintenances by (maintenance window id, maintenance id).
    pub maintenances: BTreeMap<(u64, String), Value>,
    /// Snippets by id.
    pub snippets: BTreeMap<u64, Value>,
    /// Error groups by project id.
    pub error_groups: BTreeMap<String, Vec<Value>>,
    /// Status page services in creation order (the list order).
    pub services: Vec<Value>,
    /// Extra items appended to the check statuses list (fixtures; may be `null`).
    pub extra_statuses: Vec<Value>,
}

/// Which listener a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Listener {
    /// The monitoring API.
    Api,
    /// The ping host.
    Ping,
}

/// A request as the emulator saw it, for tests to inspect.
#[derive(Debug, Clone, Serialize)]
pub struct RecordedRequest {
    /// Position in the log, from 1.
    pub seq: u64,
    /// The listener it came in on.
    pub listener: Listener,
    /// HTTP method.
    pub method: String,
    /// Path without the query.
    pub path: String,
    /// The query string, if any.
    pub query: Option<String>,
    /// Headers, lowercase names, without `authorization` (a secret).
    pub headers: BTreeMap<String, String>,
    /// The body as text (lossy UTF-8).
    pub body: String,
    /// The status answered (`null` for a dropped or hung request).
    pub status: Option<u16>,
    /// When it arrived, by the emulator's clock.
    pub at: String,
}

/// The per-key sliding-window rate limiter of the API.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    /// Requests allowed per window.
    pub limit: u32,
    /// The window length.
    pub window: Duration,
    /// Times of the requests in the current window, per key (429 answers included).
    hits: HashMap<String, VecDeque<DateTime<Utc>>>,
}

impl RateLimiter {
    /// A limiter allowing `limit` requests per `window`.
    pub(crate) fn new(limit: u32, window: Duration) -> Self {
        RateLimiter {
            limit,
            window,
            hits: HashMap::new(),
        }
    }

    /// Counts a request of `key` at `now`; false when it is over the limit.
    pub(crate) fn admit(&mut self, key: &str, now: DateTime<Utc>) -> bool {
        let window = chrono::Duration::from_std(self.window).unwrap_or(chrono::Duration::MAX);
        let hits = self.hits.entry(key.to_owned()).or_default();
        while hits.front().is_some_and(|t| *t <= now - window) {
            hits.pop_front();
        }
        hits.push_back(now);
        hits.len() <= self.limit as usize
    }

    /// Forgets every window.
    pub(crate) fn clear(&mut self) {
        self.hits.clear();
    }
}

/// Settings fixed at start.
#[derive(Debug)]
pub(crate) struct Config {
    /// The bearer token the API accepts.
    pub api_key: Secret,
    /// The account id `x-service-account` must name.
    pub account: String,
    /// Base URL of the ping host, for `heartbeat.pingUrl`.
    pub ping_base: String,
    /// The fixtures loaded at start, reloaded by a reset.
    pub fixtures: Fixtures,
    /// How many checks the account may hold: a create beyond it is answered 402.
    pub max_checks: Option<usize>,
}

/// Everything the listeners and the handle share.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Settings fixed at start.
    pub config: Config,
    /// The emulated clock.
    pub clock: Clock,
    /// The resources.
    pub store: Mutex<Store>,
    /// Injected faults.
    pub faults: Mutex<Faults>,
    /// Rate-limit windows.
    pub limiter: Mutex<RateLimiter>,
    /// Recorded requests of both listeners, oldest first.
    pub log: Mutex<VecDeque<RecordedRequest>>,
}

impl Shared {
    /// The store, with every check timer brought up to the current time (so a check whose
    /// period + grace ran out shows its `FAILING` event before anyone reads it).
    pub(crate) fn store(&self) -> (MutexGuard<'_, Store>, DateTime<Utc>) {
        let now = self.clock.now();
        let mut store = lock(&self.store);
        store.tick(now);
        (store, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_advances_and_resets() {
        let clock = Clock::new(1.0);
        let before = clock.now();
        let after = clock.advance(Duration::from_secs(3600));
        assert!(after - before >= chrono::Duration::seconds(3600));
        clock.reset();
        assert!(clock.now() - before < chrono::Duration::seconds(60));
    }

    #[test]
    fn scaled_clock_runs_faster() {
        let clock = Clock::new(1000.0);
        let before = clock.now();
        std::thread::sleep(Duration::from_millis(20));
        assert!(clock.now() - before >= chrono::Duration::seconds(20));
        assert_eq!(
            Clock::new(-1.0).scale(),
            1.0,
            "a nonsensical scale falls back to 1"
        );
    }

    #[test]
    fn limiter_counts_refused_requests() {
        let mut limiter = RateLimiter::new(2, Duration::from_secs(60));
        let t0 = Utc::now();
        let at = |secs| t0 + chrono::Duration::seconds(secs);
        assert!(limiter.admit("k", at(0)));
        assert!(limiter.admit("k", at(50)));
        assert!(!limiter.admit("k", at(55)));
        assert!(limiter.admit("other", at(55)));
        // The first hit left the window, but the refused one at 55 s still counts.
        assert!(!limiter.admit("k", at(61)));
        assert!(limiter.admit("k", at(200)));
    }

    #[test]
    fn uuids_have_the_canonical_form() {
        let id = uuid();
        assert!(super::super::validate::is_uuid(&id), "{id}");
        assert_ne!(id, uuid());
    }
}
