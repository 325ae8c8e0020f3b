//! A loopback ping host for the outbox tests whose behaviour can change while it runs: drop
//! every connection (the host is "down"), answer a status, or answer 200 after a delay. A view
//! by path of [`super::http::FakeServer`], which hands each request it answered to the test through
//! a channel, in arrival order. Also the [`sender`] the outbox functions are called with.

use std::sync::Arc;
use std::time::Duration;

use super::http::FakeServer;

/// Pings through the environment's connections, as a command without a config sends them.
pub fn sender() -> heartbeat_agent::ping::Sender {
    heartbeat_agent::ping::Sender::new(heartbeat_agent::net::Net::default())
}

/// How the host answers: [`Behaviour::Drop`], [`Behaviour::Status`] or [`Behaviour::Slow`].
pub use super::http::Mode as Behaviour;

/// A running host on 127.0.0.1 (port 0); stops when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct PingHost {
    server: Arc<FakeServer>,
}

impl PingHost {
    /// Starts a host behaving as `behaviour`.
    pub fn start(behaviour: Behaviour) -> PingHost {
        PingHost {
            server: Arc::new(FakeServer::start(behaviour)),
        }
    }

    /// `http://127.0.0.1:PORT/path`.
    pub fn url(&self, path: &str) -> String {
        self.server.url(&format!("/{path}"))
    }

    /// Changes how later requests are answered.
    pub fn set(&self, behaviour: Behaviour) {
        self.server.set_mode(behaviour);
    }

    /// Paths of every request answered so far (without the leading `/`).
    pub fn paths(&self) -> Vec<String> {
        self.server.requests().iter().map(path_of).collect()
    }

    /// How many requests for `path` arrived.
    pub fn count(&self, path: &str) -> usize {
        self.paths().iter().filter(|p| *p == path).count()
    }

    /// Forgets the recorded paths.
    pub fn clear(&self) {
        self.server.clear();
    }

    /// Receives requests until `done(paths so far)` or `timeout`; returns whether it became
    /// true.
    pub fn wait_until(&self, timeout: Duration, done: impl Fn(&[String]) -> bool) -> bool {
        self.server.receive_until(timeout, |requests| {
            let paths: Vec<String> = requests.iter().map(path_of).collect();
            done(&paths)
        })
    }
}

/// A request's path without the leading `/`.
fn path_of(request: &super::http::Request) -> String {
    request.target.trim_start_matches('/').to_owned()
}
