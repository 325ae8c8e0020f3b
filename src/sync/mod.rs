//! Keeping each bound heartbeat check's definition (period, grace, alerting) true to the config
//! and the job's schedule through `PUT /v1/checks/heartbeat/{id}` (docs/sync.md).
//!
//! - `period`: a check's period and grace from the job and its schedule's cadence, within the
//!   service's limits (pure functions of `now`);
//! - `desired`: the complete PUT body and the difference between two definitions;
//! - `drift`: the check as the service has it (`GET /v1/checks/{id}`), and what was edited there;
//! - `state`: what the service last accepted, persisted per job in the state directory;
//! - `timer`: when a period change or re-activation (which restarts the service's timer) may
//!   be sent: only right after an accepted ping of the check;
//! - `tags`: tags merge (the agent's own kept true, tags set elsewhere kept);
//! - `created`: the check found or created for a job with `create = true` (by its scope tag);
//! - `owner`: whose a created check is (its owner tag), and the adoption of older agents' checks;
//! - `reconcile`: one pass (diff, PUT, persist) — what `heartbeat-agent sync` runs;
//! - `report`: what a pass is asked ([`SyncOptions`]) and what it reports ([`SyncReport`]);
//! - `send`: the `PUT` of one definition (tags merged) and the record of its answer;
//! - `pace`: the daemon's fleet-friendly pacing of PUTs after a 429 ([`Pacer`]);
//! - `task`: the daemon's background task ([`Reconciler`]) and the per-job status.

pub mod created;
pub mod desired;
pub mod drift;
pub mod owner;
pub mod pace;
pub mod period;
pub mod reconcile;
mod report;
mod send;
pub mod state;
pub mod tags;
pub mod task;
pub mod timer;

pub use desired::{Change, Definition};
pub use pace::{PaceRule, Pacer};
pub use reconcile::{sync_all, sync_paced, CadenceCache};
pub use report::{Action, JobReport, SyncOptions, SyncOutcome, SyncReport};
pub use state::{learned_ping_url, LearnedUrls, CREATED_CHECK};
pub use task::{JobSyncStatus, Reconciler, SyncState, SyncStatus};
