//! The signals the daemon obeys: SIGTERM and SIGINT stop it, SIGHUP reloads the config.
//! Installed before `READY=1`, so none is lost (or kills the daemon) once systemd thinks it runs.

use std::io;
use std::task::Poll;

use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, SignalKind};

/// What a received signal asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// SIGTERM or SIGINT: shut down (the signal is kept: a second SIGINT forces the exit).
    Stop(Signal),
    /// SIGHUP: reload the configuration.
    Reload,
}

/// The installed signal streams.
#[derive(Debug)]
pub struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers; failing to do so is fatal for the daemon.
    pub fn install() -> io::Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The next request.
    pub async fn recv(&mut self) -> Request {
        std::future::poll_fn(|cx| {
            if let Poll::Ready(Some(())) = self.term.poll_recv(cx) {
                return Poll::Ready(Request::Stop(Signal::SIGTERM));
            }
            if let Poll::Ready(Some(())) = self.int.poll_recv(cx) {
                return Poll::Ready(Request::Stop(Signal::SIGINT));
            }
            if let Poll::Ready(Some(())) = self.hup.poll_recv(cx) {
                return Poll::Ready(Request::Reload);
            }
            Poll::Pending
        })
        .await
    }
}
