//! Builds the `/status` document and the `/metrics` text from what the daemon publishes (its
//! [`crate::daemon::DaemonView`]; its pauses too, from memory, never the pause file), the
//! outbox, sync and the remote view; each job's check state is decided by the one state model
//! ([`super::state`]) from all of them, for the document and the metrics alike. Every
//! text the agent did not write itself (job output, a run's reason, a ping's detail, sync's last
//! error, the remote view's reason) goes through [`crate::redact::scrub`], which knows the API
//! key, the status token, every job's ping URL and its token.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use chrono::Utc;

use super::doc::{
    ConfigInfo, JobClusterDoc, JobDoc, MissingDoc, PausedDoc, PingDoc, ReloadErrorDoc, Remote,
    RunDoc, StatusDoc, SyncDoc,
};
use super::metrics::{self, Scrape};
use super::remote::Refresh;
use super::server::App;
use super::state::{self, CheckFacts, CheckState, MissingBy};
use crate::config::{Config, Job, JobAction};
use crate::ping::outbox::Outbox;

/// The check ids of `config`'s jobs: each `check_id`, and the id sync recorded for each job
/// with `create = true` ([`crate::sync::created::bound_check`]).
pub(crate) fn check_ids(app: &App, config: &Config) -> BTreeSet<String> {
    config
        .jobs
        .iter()
        .filter_map(|job| crate::sync::created::bound_check(&app.context.state_dir, job))
        .collect()
}

fn outbox(app: &App, config: &Config) -> Outbox {
    let failures = app.sources.counted.persist_failures();
    Outbox::new(
        &app.context.state_dir,
        config.agent.outbox_max_entries,
        failures,
    )
}

/// The document, with the remote view as fresh as `refresh` asks.
pub(crate) async fn document(app: &App, refresh: Refresh) -> StatusDoc {
    let config = app.config();
    let now = Utc::now();
    let remote = app
        .sources
        .remote
        .get(&check_ids(app, &config), refresh)
        .await;
    let mut pending: BTreeMap<String, usize> = BTreeMap::new();
    for entry in outbox(app, &config).list().unwrap_or_default() {
        if let Some(job) = entry.job {
            *pending.entry(job).or_default() += 1;
        }
    }
    let sync = sync_snapshot(app);
    let pauses = app.context.pauses.current();
    let gone = app.sources.remote.gone();
    let jobs = config
        .jobs
        .iter()
        .map(|job| {
            let mut doc = job_doc(app, job);
            doc.paused = pauses.jobs.get(&job.name).map(|p| PausedDoc::of(p, now));
            doc.outbox_pending = pending.get(&job.name).copied().unwrap_or(0);
            doc.sync = sync.get(&job.name).cloned().map(sync_doc);
            settle_check(&app.context.state_dir, job, &mut doc, &gone);
            // The job's check: its `check_id`, or the one sync created (`job_doc`).
            let unavailable = |reason: &str| Remote::Unavailable {
                reason: reason.to_owned(),
            };
            doc.remote = match &doc.check_id {
                Some(id) => remote
                    .get(id)
                    .cloned()
                    .map_or_else(|| unavailable("not fetched"), scrub_remote),
                None if job.check.create => unavailable(
                    "the job's check does not exist yet (create = true: sync has not found or \
                     created it)",
                ),
                None => unavailable("the job is not bound to a check (check_id)"),
            };
            doc
        })
        .collect();
    let loaded = *app.loaded.lock().unwrap_or_else(|e| e.into_inner());
    StatusDoc {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        generated_at: now,
        started_at: app.started,
        uptime_secs: u64::try_from((now - app.started).num_seconds()).unwrap_or(0),
        config: ConfigInfo {
            path: config.path.display().to_string(),
            canonical_path: Some(super::owner::identity(&config.path).display().to_string()),
            loaded_at: loaded,
            last_reload_error: app
                .context
                .view
                .last_reload_error()
                .map(|failed| ReloadErrorDoc {
                    at: failed.at,
                    problems: failed
                        .problems
                        .iter()
                        .map(|p| crate::redact::scrub(p))
                        .collect(),
                }),
        },
        daemon_id: app
            .sources
            .daemon_id
            .as_ref()
            .map(|id| id.as_str().to_owned()),
        identity: app.sources.identity.as_ref().map(|id| id.to_string()),
        ready: app.ready(),
        jobs,
        persist_failures: app
            .sources
            .counted
            .persist_failures()
            .snapshot()
            .into_iter()
            .map(|(what, n)| (what.to_owned(), n))
            .collect(),
        cluster: app.sources.cluster.as_ref().map(|c| c.standing()),
        etcd: app.sources.cluster.as_ref().map(|cluster| {
            let mut etcd = cluster.etcd();
            etcd.last_error = etcd.last_error.as_deref().map(crate::redact::scrub);
            etcd
        }),
    }
}

fn kind(job: &Job) -> &'static str {
    match job.action {
        JobAction::Command(_) => "command",
        JobAction::Shell { .. } => "shell",
        JobAction::Watch(_) => "watch",
        JobAction::External => "external",
    }
}

fn job_doc(app: &App, job: &Job) -> JobDoc {
    let state = app.context.view.job(&job.name).unwrap_or_default();
    let overlap = job.overlap.as_str();
    JobDoc {
        name: job.name.clone(),
        kind: kind(job).to_owned(),
        enabled: job.enabled,
        schedule: job.schedule.to_string(),
        timezone: job.timezone.name().to_owned(),
        overlap: overlap.to_owned(),
        // A job with `create = true` shows the id sync found or created once it is known.
        check_id: crate::sync::created::bound_check(&app.context.state_dir, job),
        next_run: state.next_fire,
        running: state.running,
        runs: state.runs,
        skipped: state.skipped,
        last_skipped: state.last_skipped,
        last_run: state.last_run.as_deref().map(RunDoc::of),
        // In a cluster, every node's runs (this one's a moment after they end); else this node's.
        recent: app
            .history()
            .cluster_outcomes(&job.name, crate::daemon::view::RECENT)
            .unwrap_or_else(|| state.recent.iter().map(|o| o.as_str().to_owned()).collect()),
        last_ping: state.last_ping.map(|p| PingDoc {
            at: p.at,
            result: if p.accepted {
                state::PING_ACCEPTED
            } else {
                state::PING_FAILED
            }
            .to_owned(),
            detail: crate::redact::scrub(&p.detail),
            status: p.status,
        }),
        outbox_pending: 0,
        paused: None,
        sync: None,
        remote: Remote::Unavailable {
            reason: String::new(),
        },
        missing: None,
        // A created check found under the job's scope tag but owned by another agent.
        owned_by: app
            .sources
            .counted
            .owner_conflicts()
            .remove(&job.name)
            .map(|conflict| conflict.owner),
        cluster: app.sources.cluster.as_ref().map(|cluster| {
            let claims = cluster.claims().remove(&job.name).unwrap_or_default();
            let (last_ran_on, last_ran_fire) = claims.last_ran_on.unzip();
            JobClusterDoc {
                run_on: job.run_on.as_str().to_owned(),
                last_ran_on,
                last_ran_fire,
                claims_won: claims.won,
                claims_lost: claims.lost,
                claims_unavailable: claims.unavailable,
            }
        }),
    }
}

/// Settles the state of `job`'s check in `doc` by the one state model ([`CheckFacts`]):
/// `missing` when the service answered 404 for it (the job's last ping, sync's `PUT` or read,
/// or the remote view's read: the first such answer counts, none waits for the remote view's
/// cache), for a check named by `check_id` and one sync created alike; and `sync.state` says
/// the same state, so it is never `in_sync` for a missing check.
fn settle_check(state_dir: &Path, job: &Job, doc: &mut JobDoc, gone: &BTreeSet<String>) {
    let facts = facts(state_dir, doc, gone);
    let state = facts.state();
    doc.missing = facts
        .missing
        .zip(doc.check_id.as_deref())
        .map(|(by, id)| MissingDoc {
            by: by.as_str().to_owned(),
            reason: missing_reason(job, id),
        });
    if let (Some(sync), Some(state)) = (doc.sync.as_mut(), state) {
        sync.state = state.as_str().to_owned();
    }
}

/// What is known of the check of `doc`'s job: sync's state, the first 404 for it (the job's
/// last ping, unless the service accepted the check since: [`state::ping_says_gone`]; `gone`:
/// the ids the remote view found gone), the owner it records.
fn facts<'a>(state_dir: &Path, doc: &'a JobDoc, gone: &BTreeSet<String>) -> CheckFacts<'a> {
    let sync = doc.sync.as_ref().and_then(|s| CheckState::named(&s.state));
    let missing = doc.check_id.as_ref().and_then(|id| {
        let ping_404 = doc.last_ping.as_ref().is_some_and(|p| {
            let accepted = p.result == state::PING_ACCEPTED;
            state::ping_says_gone(state_dir, &doc.name, id, (p.at, accepted, p.status))
        });
        MissingBy::first(ping_404, sync, gone.contains(id))
    });
    CheckFacts {
        sync,
        missing,
        owned_by: doc.owned_by.as_deref(),
    }
}

/// What to do about `job`'s missing check `id`.
fn missing_reason(job: &Job, id: &str) -> String {
    if job.check.create {
        format!(
            "the service has no check {id} (deleted on the service): job \"{}\" has create = \
             true, so sync makes its check again at its next re-assertion (reassert_interval)",
            job.name
        )
    } else {
        format!(
            "the service has no check {id} (deleted, or check_id is wrong): recreate it and set \
             job \"{}\"'s check_id to its id",
            job.name
        )
    }
}

/// Every job's sync status (none when sync does not run).
fn sync_snapshot(app: &App) -> BTreeMap<String, crate::sync::JobSyncStatus> {
    app.sources
        .sync
        .get()
        .map(|s| s.snapshot())
        .unwrap_or_default()
}

/// Every job's check state by the one model (as `/status` tells it, without asking the
/// service): the jobs' checks by state, for the metrics.
fn check_states(app: &App, config: &Config) -> BTreeMap<CheckState, u64> {
    let gone = app.sources.remote.gone();
    let sync = sync_snapshot(app);
    let mut states = BTreeMap::new();
    for job in &config.jobs {
        let mut doc = job_doc(app, job);
        doc.sync = sync.get(&job.name).cloned().map(sync_doc);
        if let Some(state) = facts(&app.context.state_dir, &doc, &gone).state() {
            *states.entry(state).or_default() += 1;
        }
    }
    states
}

/// A job's sync status, its last error scrubbed (it may quote an API answer).
fn sync_doc(status: crate::sync::JobSyncStatus) -> SyncDoc {
    let mut doc = SyncDoc::from(status);
    doc.last_error = doc.last_error.as_deref().map(crate::redact::scrub);
    doc
}

/// The remote view of a check, the reason it is unavailable scrubbed (it may quote an API
/// answer).
fn scrub_remote(remote: Remote) -> Remote {
    match remote {
        Remote::Unavailable { reason } => Remote::Unavailable {
            reason: crate::redact::scrub(&reason),
        },
        other => other,
    }
}

/// How long the oldest ping in `outbox` has waited: its entries are read only when the
/// directory lists one (an empty outbox costs a listing).
fn oldest_waiting(outbox: &Outbox) -> std::time::Duration {
    if outbox.depth().unwrap_or(0) == 0 {
        return std::time::Duration::ZERO;
    }
    let listed = outbox.list().unwrap_or_default();
    let oldest = listed.iter().map(|e| e.age_secs).max().unwrap_or(0);
    std::time::Duration::from_secs(oldest)
}

/// The metrics text.
pub(crate) fn metrics(app: &App) -> String {
    let config = app.config();
    let outbox = outbox(app, &config);
    let jobs = app.context.view.jobs();
    let states = check_states(app, &config);
    let scrape = Scrape {
        jobs: &jobs,
        reloads: app.context.view.reloads(),
        start_time: app.started.timestamp_millis() as f64 / 1000.0,
        outbox_depth: outbox.depth().unwrap_or(0),
        outbox_oldest_age: oldest_waiting(&outbox),
        outbox: outbox.stats(),
        sync: app
            .sources
            .sync
            .get()
            .map(|_| states.iter().map(|(s, n)| (s.as_str(), *n)).collect()),
        sync_drift: app.sync_drift(),
        checks_missing: states.get(&CheckState::Missing).copied().unwrap_or(0),
        paused: {
            let now = Utc::now();
            app.context
                .pauses
                .current()
                .jobs
                .iter()
                .filter(|(_, p)| p.in_force(now))
                .map(|(job, p)| (job.clone(), p.until))
                .collect()
        },
        cluster: app.sources.cluster.as_deref(),
        counted: &app.sources.counted,
        auth_failures: app.attempts.failures(),
    };
    metrics::render(&app.sources.metrics, &scrape)
}
