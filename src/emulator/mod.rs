//! A local emulator of the monitoring API and its ping host, for tests, the demo and users who
//! want to try a config without an account.
//!
//! Two listeners: the API (every operation of the spec, `/openapi.json`, and the admin API under
//! `/_emulator/`) and the ping host (`GET`/`POST /{pingToken}`). Start it in-process with
//! [`Emulator::start`] (port 0 works; the handle gives the URLs back and drives the clock,
//! fixtures and faults), or mini-redis style with [`run`] on listeners bound by the caller.
//! `docs/emulator.md` is the user documentation.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

mod admin;
mod checks;
mod faults;
mod fixtures;
mod openapi;
mod pings;
mod resources;
mod routes;
mod selfcheck;
mod server;
mod shapes;
mod state;
mod validate;

pub use faults::{Fault, FaultKind};
pub use fixtures::{FixtureError, Fixtures};
pub(crate) use server::ApiError;
pub use state::{Listener, RecordedRequest};

use state::{lock, Clock, Config, RateLimiter, Shared, Store};

/// Default `--listen` of the command: the API.
pub(crate) const DEFAULT_LISTEN: &str = "127.0.0.1:8465";
/// Default `--ping-listen` of the command: the ping host.
pub(crate) const DEFAULT_PING_LISTEN: &str = "127.0.0.1:8466";
/// Default API key (`--api-key`): any client must send `Authorization: Bearer <it>`.
pub(crate) const DEFAULT_API_KEY: &str = "emulator-api-key";
/// Default account id (`--account`), the value `x-service-account` must carry.
pub const DEFAULT_ACCOUNT: &str = "00000000-0000-4000-8000-000000000001";

/// The API rate limit: `requests` per `window` per key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests allowed in any window.
    pub requests: u32,
    /// The sliding window.
    pub window: Duration,
}

impl Default for RateLimit {
    /// The spec's limit: 600 requests per 60 seconds.
    fn default() -> Self {
        RateLimit {
            requests: 600,
            window: Duration::from_secs(60),
        }
    }
}

impl FromStr for RateLimit {
    type Err = String;

    /// Parses `N/SECS`, e.g. `600/60`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let usage = || format!("invalid rate limit {text:?}: expected N/SECS such as 600/60");
        let (requests, secs) = text.split_once('/').ok_or_else(usage)?;
        let requests: u32 = requests.trim().parse().map_err(|_| usage())?;
        let secs: u64 = secs.trim().parse().map_err(|_| usage())?;
        if requests == 0 || secs == 0 {
            return Err(format!(
                "invalid rate limit {text:?}: both numbers must be at least 1"
            ));
        }
        Ok(RateLimit {
            requests,
            window: Duration::from_secs(secs),
        })
    }
}

/// How to start an emulator.
#[derive(Debug, Clone)]
pub struct EmulatorOptions {
    /// Address of the API listener (port 0 picks a free port).
    pub api_addr: SocketAddr,
    /// Address of the ping host listener.
    pub ping_addr: SocketAddr,
    /// The bearer token the API accepts.
    pub api_key: String,
    /// The account id `x-service-account` must name.
    pub account: String,
    /// Resources to start with (and to return to on reset).
    pub fixtures: Fixtures,
    /// The API rate limit per key.
    pub rate_limit: RateLimit,
    /// Emulated seconds per real second (1 = real time), for large simulations.
    pub clock_scale: f64,
    /// How many checks the account may hold (`None`: no limit); `POST /v1/checks/heartbeat`
    /// beyond it is answered 402, as the service answers a plan without room.
    pub max_checks: Option<usize>,
}

impl Default for EmulatorOptions {
    /// Both listeners on 127.0.0.1 port 0, the default key and account, no fixtures.
    fn default() -> Self {
        let loopback = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
        EmulatorOptions {
            api_addr: loopback,
            ping_addr: loopback,
            api_key: DEFAULT_API_KEY.to_owned(),
            account: DEFAULT_ACCOUNT.to_owned(),
            fixtures: Fixtures::default(),
            rate_limit: RateLimit::default(),
            clock_scale: 1.0,
            max_checks: None,
        }
    }
}

/// Why an emulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    /// A listener could not be bound.
    #[error("cannot listen on {addr} for the emulator's {what}: {source}")]
    Bind {
        /// "API" or "ping host".
        what: &'static str,
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A bound listener has no local address (should not happen for TCP).
    #[error("cannot read the address of the emulator's {what} listener: {source}")]
    LocalAddr {
        /// "API" or "ping host".
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// The fixtures are invalid.
    #[error(transparent)]
    Fixtures(#[from] FixtureError),
}

/// Starts emulators.
#[derive(Debug)]
pub struct Emulator;

impl Emulator {
    /// Binds both listeners and starts serving on the current tokio runtime.
    pub async fn start(options: EmulatorOptions) -> Result<EmulatorHandle, EmulatorError> {
        let bind = |what, addr| async move {
            TcpListener::bind(addr)
                .await
                .map_err(|source| EmulatorError::Bind { what, addr, source })
        };
        let api = bind("API", options.api_addr).await?;
        let ping = bind("ping host", options.ping_addr).await?;
        Self::start_on(api, ping, options)
    }

    /// Starts serving on listeners the caller bound (`options.*_addr` are ignored).
    pub(crate) fn start_on(
        api: TcpListener,
        ping: TcpListener,
        options: EmulatorOptions,
    ) -> Result<EmulatorHandle, EmulatorError> {
        let local = |listener: &TcpListener, what| {
            listener
                .local_addr()
                .map_err(|source| EmulatorError::LocalAddr { what, source })
        };
        let api_addr = local(&api, "API")?;
        let ping_addr = local(&ping, "ping host")?;
        let ping_url = url_of(ping_addr);
        let clock = Clock::new(options.clock_scale);
        let mut store = Store::default();
        options
            .fixtures
            .load(&mut store, &options.account, clock.now())?;
        let shared = Arc::new(Shared {
            config: Config {
                api_key: crate::redact::Secret::new(options.api_key),
                account: options.account,
                ping_base: ping_url.clone(),
                fixtures: options.fixtures,
                max_checks: options.max_checks,
            },
            clock,
            store: Mutex::new(store),
            faults: Mutex::default(),
            limiter: Mutex::new(RateLimiter::new(
                options.rate_limit.requests,
                options.rate_limit.window,
            )),
            log: Mutex::default(),
        });
        let cancel = CancellationToken::new();
        let tasks = vec![
            tokio::spawn(server::serve(
                api,
                Listener::Api,
                Arc::clone(&shared),
                cancel.clone(),
            )),
            tokio::spawn(server::serve(
                ping,
                Listener::Ping,
                Arc::clone(&shared),
                cancel.clone(),
            )),
        ];
        tracing::info!(api = %api_addr, ping = %ping_addr, "emulator listening");
        if !api_addr.ip().is_loopback() {
            tracing::warn!(
                listen = %api_addr,
                "the emulator's admin API ({}/) needs no authentication and listens on {api_addr}, \
                 not on loopback: anyone who can reach it can change its checks, faults and \
                 clock; listen on 127.0.0.1 unless other hosts must reach it",
                server::ADMIN_PREFIX
            );
        }
        Ok(EmulatorHandle {
            shared,
            base_url: url_of(api_addr),
            ping_url,
            ping_addr,
            cancel,
            tasks,
        })
    }
}

/// Serves on already-bound listeners until `shutdown` completes (mini-redis style).
pub async fn run(
    api: TcpListener,
    ping: TcpListener,
    options: EmulatorOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), EmulatorError> {
    let handle = Emulator::start_on(api, ping, options)?;
    shutdown.await;
    handle.shutdown().await;
    Ok(())
}

/// `http://addr`, with an unspecified bind address (0.0.0.0, ::) shown as loopback.
fn url_of(addr: SocketAddr) -> String {
    let mut addr = addr;
    if addr.ip().is_unspecified() {
        addr.set_ip(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    format!("http://{addr}")
}

/// A running emulator. Dropping it stops the listeners; [`EmulatorHandle::shutdown`] also
/// waits for them.
#[derive(Debug)]
pub struct EmulatorHandle {
    /// State shared with the listeners, for the admin methods.
    shared: Arc<Shared>,
    /// `http://127.0.0.1:PORT` of the API.
    base_url: String,
    /// `http://127.0.0.1:PORT` of the ping host.
    ping_url: String,
    /// Where the ping host listens.
    ping_addr: SocketAddr,
    /// Stops both accept loops and every open connection.
    cancel: CancellationToken,
    /// The accept loops, awaited by `shutdown`.
    tasks: Vec<JoinHandle<()>>,
}

impl EmulatorHandle {
    /// Base URL of the API (`[api] base_url`), without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Base URL of the ping host (`[api] ping_base_url`); a check's ping URL is this + `/token`.
    pub fn ping_url(&self) -> &str {
        &self.ping_url
    }

    /// Address of the ping listener.
    pub fn ping_addr(&self) -> SocketAddr {
        self.ping_addr
    }

    /// The API key the emulator accepts.
    pub fn api_key(&self) -> &str {
        self.shared.config.api_key.expose()
    }

    /// The account id the emulator accepts.
    pub fn account(&self) -> &str {
        &self.shared.config.account
    }

    /// The emulator's current time.
    pub fn now(&self) -> DateTime<Utc> {
        self.shared.clock.now()
    }

    /// Moves the emulator's clock forward (checks whose period + grace run out start failing).
    pub fn advance_clock(&self, by: Duration) -> DateTime<Utc> {
        self.shared.clock.advance(by)
    }

    /// Adds a heartbeat check (fixture shape: `name` required, `id` and `heartbeat.pingToken`
    /// generated when absent); returns the check object with `heartbeat.pingUrl`.
    pub fn add_heartbeat_check(&self, check: &Value) -> Result<Value, ApiError> {
        self.shared.add_heartbeat_check(check)
    }

    /// Records an event on a check without touching its timer: `{"state": "PAUSED",
    /// "timestamp"?, "source"?, "userAgent"?}` (any state text, so tests can prove clients keep
    /// states they do not know). Returns the event object.
    pub fn add_heartbeat_event(&self, check_id: &str, event: &Value) -> Result<Value, ApiError> {
        self.shared.add_heartbeat_event(check_id, event)
    }

    /// A heartbeat check as the API answers it, with `heartbeat.pingUrl`.
    pub fn heartbeat_check(&self, id: &str) -> Option<Value> {
        self.shared.heartbeat_check(id)
    }

    /// Every event of a heartbeat check, oldest first, with the timer brought up to now (no
    /// window or limit: for simulations that judge a whole year of events).
    pub fn heartbeat_events(&self, id: &str) -> Option<Vec<Value>> {
        let (store, _) = self.shared.store();
        let check = store.checks.get(id)?;
        Some(check.events.iter().map(state::Event::to_json).collect())
    }

    /// Deletes a heartbeat check, as someone could in the web UI; false when there is none.
    pub fn delete_heartbeat_check(&self, id: &str) -> bool {
        self.shared.delete_heartbeat_check(id)
    }

    /// Loads more fixtures, all or nothing; returns the heartbeat checks created.
    pub fn load_fixtures(&self, fixtures: &Fixtures) -> Result<Vec<Value>, FixtureError> {
        self.shared.load_fixtures(fixtures)
    }

    /// Every recorded request of both listeners (admin requests excluded), oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.recorded(None)
    }

    /// Recorded requests of the ping listener, oldest first.
    pub fn pings(&self) -> Vec<RecordedRequest> {
        self.shared.recorded(Some(Listener::Ping))
    }

    /// Injects a fault; returns its id.
    pub fn add_fault(&self, fault: Fault) -> u64 {
        lock(&self.shared.faults).add(fault)
    }

    /// Removes one fault; false when none has that id.
    pub fn remove_fault(&self, id: u64) -> bool {
        lock(&self.shared.faults).remove(id)
    }

    /// Removes every fault.
    pub fn clear_faults(&self) {
        lock(&self.shared.faults).clear();
    }

    /// Stops both listeners (open connections are closed) and waits for them.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
    }
}

impl Drop for EmulatorHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limits_parse() {
        assert_eq!(
            "10/2".parse::<RateLimit>(),
            Ok(RateLimit {
                requests: 10,
                window: Duration::from_secs(2)
            })
        );
        for bad in ["10", "x/2", "0/60", "5/0", "5/-1"] {
            assert!(bad.parse::<RateLimit>().is_err(), "{bad}");
        }
    }
}
