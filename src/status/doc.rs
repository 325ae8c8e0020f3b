//! The `GET /status` document: serde types shared by the endpoint (which builds it) and the
//! `status` command (which reads it back to draw the table). Field names are a contract
//! (docs/status.md); times are RFC 3339 UTC, durations are milliseconds.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::api::model::CheckStatus;
pub(crate) use crate::run::record::RunDoc;

/// The whole document.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StatusDoc {
    /// The agent's version, so a fleet can be audited.
    pub version: String,
    /// When this document was made: the reference for the ages the table shows.
    pub generated_at: DateTime<Utc>,
    /// When the daemon started.
    pub started_at: DateTime<Utc>,
    /// Seconds since the daemon started.
    pub uptime_secs: u64,
    /// The configuration in force.
    pub config: ConfigInfo,
    /// The daemon's id (32 hex digits, kept in `<state_dir>/daemon-id`, also the
    /// `Heartbeat-Agent-Daemon` header): what tells this daemon from another of the same
    /// config file (see `status::owner`). Absent from older daemons and when the state
    /// directory could not keep one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon_id: Option<String>,
    /// The agent's identity (16 hex digits, `crate::identity`): what its cluster claims and
    /// the owner tag of the checks it creates name. Absent from older daemons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// Whether `/readyz` answers 200.
    pub ready: bool,
    /// Every configured job, in config order.
    pub jobs: Vec<JobDoc>,
    /// Writes under `state_dir` that failed since the daemon started, by what was being
    /// written (`outbox_entry`, `outbox_stats`, `fire_time`, `reboot_marker`, `sync_state`, `pause`):
    /// a full or read-only disk shows here, not only in the log. Absent from older daemons.
    #[serde(default)]
    pub persist_failures: BTreeMap<String, u64>,
    /// In a cluster: this agent's node name, its role (`leader`, `follower`, `unavailable`),
    /// the leader's node name, since when the role holds and the last etcd error of the
    /// election. Absent without `[cluster]` and from older daemons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterDoc>,
    /// In a `[cluster]`: this agent's etcd connection, lease and `on_unavailable`; absent
    /// when it runs alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd: Option<EtcdDoc>,
}

/// Where this agent stands in its cluster's election.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ClusterDoc {
    /// This agent's node name (`[cluster] node`).
    pub node: String,
    /// Its role now: `leader`, `follower` or `unavailable`.
    pub role: String,
    /// The leader's node name, when known (this agent's own when it leads).
    pub leader: Option<String>,
    /// Since when the role holds.
    pub since: DateTime<Utc>,
    /// The last etcd error of the election, kept until etcd answers again.
    pub last_error: Option<String>,
}

/// This agent's etcd connection and lease.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct EtcdDoc {
    /// `[cluster] node`.
    pub node: String,
    /// The agent's identity, which decides its claims (absent from older daemons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// `[cluster] name`: the key prefix.
    pub name: String,
    /// The etcd endpoints, in the order they are tried.
    pub endpoints: Vec<String>,
    /// `skip` or `run`.
    pub on_unavailable: String,
    /// Whether the last etcd request got an answer (`null` before the first).
    pub reachable: Option<bool>,
    /// Whether this agent holds its lease (without one, fires follow `on_unavailable`).
    pub lease_held: bool,
    /// Failed etcd requests by endpoint since start.
    pub errors_by_endpoint: BTreeMap<String, u64>,
    /// The last etcd error (names the endpoint; never a password).
    pub last_error: Option<String>,
}

/// A job in a cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct JobClusterDoc {
    /// `one` or `all`.
    pub run_on: String,
    /// The node that ran the latest fire this agent saw (itself or the claim's winner).
    pub last_ran_on: Option<String>,
    /// That fire's scheduled time.
    pub last_ran_fire: Option<DateTime<Utc>>,
    /// Fires this agent claimed and ran.
    pub claims_won: u64,
    /// Fires another agent claimed.
    pub claims_lost: u64,
    /// Fires that could not be claimed (etcd unavailable; `on_unavailable` applied).
    pub claims_unavailable: u64,
}

/// Which configuration the daemon runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ConfigInfo {
    /// The file (re-read on SIGHUP).
    pub path: String,
    /// The same file, canonical (links resolved): what the endpoint's clients compare with
    /// their own config to tell this daemon from another (see `status::owner`). Absent from
    /// daemons older than the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canonical_path: Option<String>,
    /// When it was last loaded successfully (start, or the last good reload).
    pub loaded_at: DateTime<Utc>,
    /// Why the last reload failed (the file is invalid or cannot be read, so the daemon runs
    /// the configuration loaded at `loaded_at`); `null` when no reload failed since the last
    /// good one.
    #[serde(default)]
    pub last_reload_error: Option<ReloadErrorDoc>,
}

/// A failed reload: when, and every problem found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ReloadErrorDoc {
    /// When the reload failed.
    pub at: DateTime<Utc>,
    /// Every problem, one line each (`path:line:col: ...` with a hint), scrubbed of secrets.
    pub problems: Vec<String>,
}

/// One job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct JobDoc {
    /// The job's name.
    pub name: String,
    /// `command`, `shell`, `watch` or `external` (run elsewhere, only shown).
    pub kind: String,
    /// Whether the daemon schedules it.
    pub enabled: bool,
    /// The cron schedule as written.
    pub schedule: String,
    /// The schedule's time zone (IANA name).
    pub timezone: String,
    /// `skip`, `queue` or `allow`: what a fire (or a trigger) does while a run is going.
    pub overlap: String,
    /// The bound check: a job's `check_id`, or for a job with `create = true` the id of the
    /// check sync found or created for it, once known.
    pub check_id: Option<String>,
    /// When the next run starts: the next fire time plus the job's stable `jitter` (none for
    /// `@reboot`, external and disabled jobs).
    pub next_run: Option<DateTime<Utc>>,
    /// Runs in progress.
    pub running: usize,
    /// Runs finished since the daemon started.
    pub runs: u64,
    /// Fires skipped because a run was still going (or the job was paused with
    /// `--stop-jobs`), since the daemon started.
    pub skipped: u64,
    /// When a fire was last skipped.
    pub last_skipped: Option<DateTime<Utc>>,
    /// The most recent run.
    pub last_run: Option<RunDoc>,
    /// The outcomes of the last runs (at most 20, oldest first; from the run history at the
    /// daemon's start, then its own): the strip of `status` and the dashboard. Absent from
    /// older daemons.
    #[serde(default)]
    pub recent: Vec<String>,
    /// The most recent ping.
    pub last_ping: Option<PingDoc>,
    /// Pings of this job waiting in the outbox.
    pub outbox_pending: usize,
    /// The job's pause for maintenance (`pause`), if any.
    #[serde(default)]
    pub paused: Option<PausedDoc>,
    /// Check sync (for bound jobs while sync runs).
    pub sync: Option<SyncDoc>,
    /// What the service thinks of the check.
    pub remote: Remote,
    /// The service does not know the check (deleted, or a wrong `check_id`; a check sync
    /// created alike): set at the first 404 for it, from a ping, sync's `PUT` or read, or the
    /// remote view; absent otherwise (and from older daemons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<MissingDoc>,
    /// The identity of another agent that the job's check records as its owner: this agent
    /// does not ping it, and its state is `owned_by_other` (`super::state`). Absent when the
    /// check is this agent's or records no owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owned_by: Option<String>,
    /// In a `[cluster]`: where the job last ran and its claims; absent when the agent runs
    /// alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<JobClusterDoc>,
}

/// Why a job's check counts as missing.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct MissingDoc {
    /// Which answer said so: `ping` (the ping host answered 404 to the job's last ping), `sync`
    /// (a `PUT` answered 404) or `remote` (the remote view's read answered 404).
    pub by: String,
    /// What to do, naming the check.
    pub reason: String,
}

/// A job's pause (`<state_dir>/pause.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PausedDoc {
    /// `paused`, or `resuming`: the pause ended and the check's re-activation is not accepted
    /// yet (the next sync pass sends it).
    pub state: String,
    /// When it was asked for.
    pub since: DateTime<Utc>,
    /// When it ends by itself (`null`: at `resume`).
    pub until: Option<DateTime<Utc>>,
    /// `--reason`.
    pub reason: Option<String>,
    /// `--stop-jobs`: the daemon skips the job's fires.
    pub stop_jobs: bool,
}

impl PausedDoc {
    /// The document of `pause` at `now`.
    pub(crate) fn of(pause: &crate::pause::Pause, now: DateTime<Utc>) -> PausedDoc {
        PausedDoc {
            state: if pause.in_force(now) {
                "paused"
            } else {
                "resuming"
            }
            .to_owned(),
            since: pause.since,
            until: pause.until,
            reason: pause.reason.as_deref().map(crate::redact::scrub),
            stop_jobs: pause.stop_jobs,
        }
    }
}

/// One ping.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PingDoc {
    /// When it was sent.
    pub at: DateTime<Utc>,
    /// `accepted` or `failed` (a failed ping may wait in the outbox).
    pub result: String,
    /// The answer (`HTTP 200`) or the error; never the URL.
    pub detail: String,
    /// The ping host's HTTP status, when it answered (404: the service has no such check).
    /// Absent without an answer and from older daemons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

/// The service's view of a job's check.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub(crate) enum Remote {
    /// Fetched (possibly from the 60 s cache).
    Available {
        /// When it was fetched.
        fetched_at: DateTime<Utc>,
        /// The check's entry of `GET /v1/check-statuses` as the service sent it (`hasFailures`,
        /// `hasErrors`, ...); `null` when the list does not hold the check.
        check_status: Option<Box<CheckStatus>>,
        /// The heartbeat statistics.
        heartbeat: Heartbeat,
    },
    /// Not known now; not an error of the agent.
    Unavailable {
        /// Why (no API configured, the job is not bound to a check, the API is down, ...).
        reason: String,
    },
}

/// Heartbeat statistics of a check.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub(crate) enum Heartbeat {
    /// From the check's latest event.
    Available {
        /// Success ratio of the last 24 hours in percent (0 to 100, as the service sends it;
        /// `null` without data).
        success_ratio_24h: Option<f64>,
        /// Success ratio of the last 7 days, in percent.
        success_ratio_7d: Option<f64>,
        /// The latest event (of the last 24 hours, else of the last 365 days).
        latest_event: EventDoc,
    },
    /// No event in the last `searched_days` days: the check was never pinged (or not for
    /// longer than any heartbeat period).
    NeverPinged {
        /// How far back the service was asked.
        searched_days: u32,
    },
    /// No event recorded yet, or the events could not be read.
    Unavailable {
        /// Why.
        reason: String,
    },
}

/// A heartbeat event.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct EventDoc {
    /// The event id.
    pub id: String,
    /// The event's state as the service names it (`null` when the answer had none).
    pub state: Option<String>,
    /// When it was recorded (`null` when the answer had no timestamp).
    pub time: Option<DateTime<Utc>>,
}

/// Check sync of one job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SyncDoc {
    /// The check id.
    pub check_id: String,
    /// The check's state ([`super::state::CheckState`]): `in_sync`, `pending`, `failed`,
    /// `missing` (the service has no such check, whatever sync last recorded) or
    /// `owned_by_other`.
    pub state: String,
    /// The last failure's message (kept until a pass succeeds).
    pub last_error: Option<String>,
    /// When the job was last reconciled.
    pub last_attempt: Option<DateTime<Utc>>,
    /// When the service last had the desired definition.
    pub last_success: Option<DateTime<Utc>>,
    /// The fields edited on the service (drift) not repaired yet; empty when none (absent from
    /// older daemons).
    #[serde(default)]
    pub drift: Vec<String>,
}

impl From<crate::sync::JobSyncStatus> for SyncDoc {
    fn from(s: crate::sync::JobSyncStatus) -> SyncDoc {
        SyncDoc {
            check_id: s.check_id,
            state: s.state.as_str().to_owned(),
            last_error: s.last_error,
            last_attempt: s.last_attempt,
            last_success: s.last_success,
            drift: s.drift,
        }
    }
}
