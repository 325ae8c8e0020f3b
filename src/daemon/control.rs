//! What the daemon obeys besides its config: requests to stop or to reload, from whatever
//! source the caller wires up. `cli/` turns SIGTERM, SIGINT and SIGHUP into requests; `demo`
//! stops the daemon it embeds by sending one; tests can drive a daemon in-process the same way.
//! The daemon itself knows no signals.

/// A request to the running daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Shut down in order; `by` names what asked (`SIGTERM`, `SIGINT`, `demo`), for the log.
    Stop {
        /// What asked.
        by: &'static str,
    },
    /// Reload the configuration file.
    Reload,
    /// Stop at once: every job's process group gets SIGKILL and the daemon returns
    /// [`super::DaemonEnd::Killed`] without waiting (a second Ctrl-C).
    Kill,
}

/// The sending side: cheap to clone, one per source.
pub(crate) type Controller = tokio::sync::mpsc::UnboundedSender<Request>;

/// The receiving side, handed to [`super::run()`]. When every [`Controller`] is gone, the daemon
/// stops as if asked to: nothing could stop it any more.
pub(crate) type ControlReceiver = tokio::sync::mpsc::UnboundedReceiver<Request>;

/// A new control channel.
pub(crate) fn channel() -> (Controller, ControlReceiver) {
    tokio::sync::mpsc::unbounded_channel()
}

/// The next request; a closed channel is a stop.
pub(super) async fn next(control: &mut ControlReceiver) -> Request {
    control.recv().await.unwrap_or(Request::Stop {
        by: "closed control",
    })
}
