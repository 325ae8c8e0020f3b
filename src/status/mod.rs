//! The local status endpoint: JSON status, Prometheus metrics, liveness and readiness, and
//! triggered runs, pauses for maintenance (docs/status.md).
//!
//! - [`server`]: binding (TCP or unix socket) and the routes, as a daemon background task;
//! - `connections`: serving connections, with a cap on open ones (the longest-waiting idle one
//!   makes room for a new one) and a header timeout;
//! - [`attempts`]: failed token attempts, counted, logged at a bounded pace and slowed down
//!   per client;
//! - [`cluster`]: what it reads of the cluster, a view the cluster offers and the daemon's
//!   assembly hands over (status/ names no type of `cluster/`);
//! - [`doc`]: the `/status` document; `build`: making it (and the metrics text) from the
//!   daemon's view ([`crate::daemon::DaemonView`]), the outbox, sync and the remote view;
//! - `dashboard`: the HTML pages for a browser (`GET /`, `GET /jobs/{name}`), their login
//!   and their rendering;
//! - `pause`: `POST /pause` and `POST /resume`, through the daemon's sync;
//! - `turns`: how many answers that hold runs' output are in memory at once, from their read
//!   until they are sent (a slow reader keeps its turn, for a bounded time);
//! - `runs`: the history's JSON routes, `GET /jobs/{name}/runs` and `GET /jobs/{name}/runs/{seq}`;
//! - [`metrics`]: run counters (an after-run hook) and the exposition format;
//! - [`remote`]: the service's view of each check, cached, at low priority;
//! - [`state`]: the one state model of a job and its check, and its words, which every view
//!   (`/status`, the metrics, the dashboard, the table, `history`, the demo) tells alike;
//! - [`table`]: the human table of `heartbeat-agent status`;
//! - [`client`]: the small HTTP client of the `status`, `health` and `trigger` commands;
//! - [`owner`]: whose endpoint it is (the config the daemon runs and the daemon's id, kept in
//!   the state directory), told in every answer and checked by those commands.

pub(crate) mod attempts;
mod build;
pub mod client;
pub(crate) mod cluster;
mod connections;
mod dashboard;
pub(crate) mod doc;
pub(crate) mod metrics;
pub(crate) mod owner;
mod pause;
pub(crate) mod remote;
mod runs;
pub(crate) mod server;
pub(crate) mod state;
pub(crate) mod table;
mod turns;

pub(crate) use server::{bind, task, Sources};
