//! `run --job` for a job bound to a check: right after its accepted ping it records the ping
//! and sends the job's check definition when it differs, so a period change that sync held
//! (`sync::timer`: such changes go out only right after an accepted ping) or the end of a
//! pause whose deadline passed (`crate::pause`) goes out now. Without API credentials only the
//! ping is recorded: the daemon or `sync` sends the change later. A failure is a warning,
//! never the run's status.

use std::time::Duration;

use tracing::{debug, warn};

use super::context;
use crate::cli::GlobalArgs;
use crate::config::{Config, Job};

/// What `run --job` needs to send its job's held period change right after its ping.
#[derive(Debug)]
pub(super) struct SyncAfterPing {
    pub config: Config,
    pub client: Option<crate::api::ApiClient>,
    pub job: String,
    pub check_id: String,
    /// The fire this run belongs to (the latest at or before its start).
    pub fire: chrono::DateTime<chrono::Utc>,
}

/// A job bound to a check gets its held period change sent after its ping; without API
/// credentials only the ping is recorded (the daemon or `sync` sends the change later). The
/// client goes through `net`, the run's connections.
pub(super) fn sync_after_ping(
    job: &Job,
    config: &Config,
    global: &GlobalArgs,
    net: crate::net::Net,
) -> Option<SyncAfterPing> {
    let state_dir = context::state_dir(global, Some(config));
    let check_id = crate::sync::created::bound_check(&state_dir, job)?;
    let path = crate::paths::config_file(global.config.as_ref());
    let client = context::config_client(config.api.clone(), &path, global, net)
        .inspect_err(
            |(_, message)| debug!(job = %job.name, "no check update after the ping: {message}"),
        )
        .ok();
    Some(SyncAfterPing {
        config: config.clone(),
        client,
        job: job.name.clone(),
        check_id,
        fire: crate::sync::timer::fire_of_run(job, chrono::Utc::now()),
    })
}

/// How long `run --job` waits for its check update after the ping before it exits anyway.
const SYNC_AFTER_PING_LIMIT: Duration = Duration::from_secs(30);

/// Records the accepted ping (if `accepted`; a failed write counted in `failures`) and sends the job's check definition if it
/// differs (a held period change may go now, an ended pause re-activates the check); a failure
/// is a warning, never the run's status.
pub(super) async fn sync_after_accepted_ping(
    sync: &SyncAfterPing,
    state_dir: &std::path::Path,
    failures: &crate::persist::Failures,
    accepted: bool,
) {
    let now = chrono::Utc::now();
    if accepted {
        let (job, check_id) = (&sync.job, &sync.check_id);
        let recorded =
            crate::sync::timer::record_ping(state_dir, failures, job, check_id, sync.fire, now);
        if let Err(err) = recorded {
            warn!(job = %sync.job, error = %err, "cannot record the accepted ping for sync");
            return;
        }
    }
    let Some(client) = &sync.client else {
        return;
    };
    let opts = crate::sync::SyncOptions {
        job: Some(sync.job.clone()),
        ..crate::sync::SyncOptions::at(chrono::Utc::now())
    };
    let mut cache = crate::sync::CadenceCache::default();
    let pass = crate::sync::sync_all(&sync.config, client, state_dir, &opts, &mut cache);
    let Ok(report) = tokio::time::timeout(SYNC_AFTER_PING_LIMIT, pass).await else {
        warn!(job = %sync.job, "check update after the ping not done: no answer within {}s", SYNC_AFTER_PING_LIMIT.as_secs());
        return;
    };
    for entry in &report.jobs {
        if let crate::sync::SyncOutcome::Failed(message)
        | crate::sync::SyncOutcome::Deferred(message) = &entry.outcome
        {
            warn!(job = %sync.job, "check update after the ping not done: {message}");
        }
    }
}
