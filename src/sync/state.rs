//! What the service last accepted for each bound check, persisted in
//! `<state_dir>/sync/<job>.json` (one file per job; job names are a safe file-name charset):
//! the accepted definition, the answer's ping URL and token, and the latest fire whose ping
//! was accepted (and when). Written crash-safely ([`crate::persist::file::write_atomic`]) and private
//! (mode 0600, the directory created 0700: the ping URL is a secret).
//!
//! [`update`] reads, changes and writes a job's file under one process-wide lock, a static on
//! purpose: it guards the files against this process's own threads (the sync task and the job
//! tasks recording accepted pings), which reach them by different paths; each would have to be
//! handed the same lock, which is what a static is. It is not a setting.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::desired::Definition;
use crate::persist::Failures;

/// Serializes read-modify-write of state files within the process (the sync task and the job
/// tasks recording accepted pings).
// One per process: it guards the process's state files, whoever in it writes them.
static STATE_LOCK: Mutex<()> = Mutex::new(());

/// The persisted sync state of one job.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckRecord {
    /// The check this state is about (a changed `check_id` starts afresh).
    pub check_id: String,
    /// The definition the service last accepted, `None` before the first accepted PUT.
    #[serde(default)]
    pub accepted: Option<Definition>,
    /// When it was accepted.
    #[serde(default)]
    pub accepted_at: Option<DateTime<Utc>>,
    /// `heartbeat.pingUrl` of the last answer: what the job pings (a secret).
    #[serde(default)]
    pub ping_url: Option<String>,
    /// `heartbeat.pingToken` of the last answer, sent back so the token never rotates.
    #[serde(default)]
    pub ping_token: Option<String>,
    /// The latest fire time whose ping the service accepted: a shorter period is sent only
    /// after the ping that starts the shorter gap.
    #[serde(default)]
    pub acked_fire: Option<DateTime<Utc>>,
    /// When that ping was accepted: a period change may follow it only if no `PUT` did yet
    /// (`super::timer`).
    #[serde(default)]
    pub acked_at: Option<DateTime<Utc>>,
    /// For a job with `create = true`: the scope tag its check was found or created by
    /// (`super::created`). A record without it, or with another tag (the host or cluster was
    /// renamed), does not name the job's check: sync looks it up again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_tag: Option<String>,
    /// For a job with `create = true`: the last lookup by the scope tag found other checks
    /// carrying it that could not all be deleted (or did not list this one), so every pass
    /// looks again until the job's check is the only one (`super::created`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub duplicates_left: bool,
}

impl std::fmt::Debug for CheckRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckRecord")
            .field("check_id", &self.check_id)
            .field("accepted", &self.accepted.is_some())
            .field("accepted_at", &self.accepted_at)
            .field(
                "ping_url",
                &self.ping_url.as_deref().map(crate::redact::url),
            )
            .field("acked_fire", &self.acked_fire)
            .field("acked_at", &self.acked_at)
            .finish()
    }
}

/// Why a state file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("sync state {}: {what}: {source}", path.display())]
pub struct StateError {
    /// The file or directory.
    pub path: PathBuf,
    /// What was being done.
    pub what: &'static str,
    /// The underlying error.
    #[source]
    pub source: std::io::Error,
}

/// The largest sync record read: a record is a few hundred bytes.
const MAX_BYTES: u64 = 1024 * 1024;

/// `<state_dir>/sync`.
pub fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("sync")
}

/// The state file of `job`.
pub fn path(state_dir: &Path, job: &str) -> PathBuf {
    dir(state_dir).join(format!("{job}.json"))
}

/// The state of `job`, `None` when there is none (or it is unreadable: then sync starts
/// afresh, which costs one PUT).
pub fn load(state_dir: &Path, job: &str) -> Option<CheckRecord> {
    let text = crate::persist::file::read_state(&path(state_dir, job), MAX_BYTES).ok()??;
    match serde_json::from_slice::<CheckRecord>(&text) {
        Ok(state) => {
            remember_secrets(&state);
            Some(state)
        }
        Err(err) => {
            tracing::warn!(job, error = %err, "sync state file is not valid; it will be rewritten");
            None
        }
    }
}

/// Makes the ping URL and token of `state` secrets that [`crate::redact::scrub`] removes.
fn remember_secrets(state: &CheckRecord) {
    if let Some(url) = &state.ping_url {
        crate::redact::remember_url(url);
    }
    if let Some(token) = &state.ping_token {
        crate::redact::remember(token);
    }
}

/// The names of the jobs that have a state file.
pub fn jobs(state_dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir(state_dir)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|name| name.strip_suffix(".json").map(str::to_owned))
        .collect();
    names.sort();
    names
}

/// Changes the state of `job` (for `check_id`; another check's state is replaced) under the
/// process-wide lock, and writes it crash-safely; a failed write is counted in `failures`.
pub fn update(
    state_dir: &Path,
    failures: &Failures,
    job: &str,
    check_id: &str,
    change: impl FnOnce(&mut CheckRecord),
) -> Result<CheckRecord, StateError> {
    let _guard = STATE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut state = load(state_dir, job)
        .filter(|s| s.check_id == check_id)
        .unwrap_or_else(|| CheckRecord {
            check_id: check_id.to_owned(),
            ..CheckRecord::default()
        });
    change(&mut state);
    remember_secrets(&state);
    write(state_dir, job, &state)
        .inspect_err(|_| failures.failed(crate::persist::What::SyncState))?;
    Ok(state)
}

/// Records `check_id` as `job`'s with what an answer of the service says of it (`heartbeat`:
/// the ping URL and token, each kept when the answer lacks it) and `change`, under the lock of
/// [`update`]; then tells `learned` (the daemon's URLs in memory) the ping URL.
pub(crate) fn learn(
    state_dir: &Path,
    failures: &Failures,
    job: &str,
    check_id: &str,
    heartbeat: &crate::api::model::HeartbeatInfo,
    learned: Option<&LearnedUrls>,
    change: impl FnOnce(&mut CheckRecord),
) -> Result<CheckRecord, StateError> {
    let saved = update(state_dir, failures, job, check_id, |s| {
        if heartbeat.ping_url.is_some() {
            s.ping_url.clone_from(&heartbeat.ping_url);
        }
        if heartbeat.ping_token.is_some() {
            s.ping_token.clone_from(&heartbeat.ping_token);
        }
        change(s);
    })?;
    if let (Some(learned), Some(url)) = (learned, &saved.ping_url) {
        learned.record(job, check_id, url);
    }
    Ok(saved)
}

/// Writes `state` crash-safely and privately, the directory created (0700) when missing.
fn write(state_dir: &Path, job: &str, state: &CheckRecord) -> Result<(), StateError> {
    let dir = dir(state_dir);
    let err = |path: &Path, what| {
        let path = path.to_owned();
        move |source| StateError { path, what, source }
    };
    crate::persist::file::private_dir(&dir).map_err(err(&dir, "cannot create the directory"))?;
    let target = path(state_dir, job);
    serde_json::to_vec_pretty(state)
        .map_err(std::io::Error::from)
        .and_then(|text| crate::persist::file::write_atomic(&target, &text))
        .map_err(err(&target, "cannot write"))
}

/// The ping URL the service handed out for `job`'s check `check_id`, as learned by sync: what
/// `run --job`, `ping --job` and the daemon ping for a job bound by `check_id`. `None` before the
/// first successful sync, and when the state is about another check (the job's `check_id`
/// changed and sync has not run since: the old check's URL must not be pinged).
///
/// `check_id` [`CREATED_CHECK`] asks for the check sync found or created for a job with
/// `create = true`, whatever its id: the record must carry the tag it was found by.
pub fn learned_ping_url(state_dir: &Path, job: &str, check_id: &str) -> Option<String> {
    let state = load(state_dir, job)?;
    let matches = if check_id == CREATED_CHECK {
        state.created_tag.is_some()
    } else {
        state.check_id == check_id
    };
    if !matches {
        return None;
    }
    state.ping_url
}

/// The check id that stands for "the check sync found or created for this job" (a job with
/// `create = true` names none) in [`learned_ping_url`] and [`LearnedUrls::get`]; no real id is
/// empty.
pub const CREATED_CHECK: &str = "";

/// The ping URLs sync learned, held in memory by a long-running process (the daemon), so a
/// job's run finds its URL without reading the state file. A URL not in memory yet is read
/// from the state file once (it may have been learned by `heartbeat-agent sync` before the
/// daemon started); the daemon's own sync records every URL it learns. Cheap to clone: every
/// clone shares the same map.
#[derive(Debug, Clone)]
pub struct LearnedUrls {
    state_dir: PathBuf,
    /// Job name -> (check id, ping URL).
    known: std::sync::Arc<std::sync::RwLock<std::collections::HashMap<String, (String, String)>>>,
}

impl LearnedUrls {
    /// The URLs learned under `state_dir`.
    pub fn new(state_dir: &Path) -> LearnedUrls {
        LearnedUrls {
            state_dir: state_dir.to_owned(),
            known: std::sync::Arc::default(),
        }
    }

    /// The ping URL of `job`'s check `check_id`, as [`learned_ping_url`] gives it.
    pub fn get(&self, job: &str, check_id: &str) -> Option<String> {
        let known = self.known.read().unwrap_or_else(|e| e.into_inner());
        if let Some((check, url)) = known.get(job) {
            return (check == check_id || check_id == CREATED_CHECK).then(|| url.clone());
        }
        drop(known);
        let url = learned_ping_url(&self.state_dir, job, check_id)?;
        self.record(job, check_id, &url);
        Some(url)
    }

    /// Records the URL sync just learned (and wrote to the state file) for `job`.
    pub fn record(&self, job: &str, check_id: &str, url: &str) {
        crate::redact::remember_url(url);
        self.known
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(job.to_owned(), (check_id.to_owned(), url.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_is_counted_in_the_failures_it_was_given() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the directory goes.
        std::fs::write(super::dir(dir.path()), "").unwrap();
        let failures = crate::persist::Failures::default();
        let failed = update(dir.path(), &failures, "backup", "c1", |_| {});
        let err = failed.expect_err("a file stands where the directory goes");
        assert!(err.to_string().contains("sync"), "{err}");
        assert_eq!(failures.count(crate::persist::What::SyncState), 1);
        std::fs::remove_file(super::dir(dir.path())).unwrap();
        update(dir.path(), &failures, "backup", "c1", |_| {}).unwrap();
        assert_eq!(failures.count(crate::persist::What::SyncState), 1);
    }

    #[test]
    fn update_writes_privately_and_replaces_another_checks_state() {
        let dir = tempfile::tempdir().unwrap();
        update(
            dir.path(),
            &crate::persist::Failures::default(),
            "backup",
            "c1",
            |s| {
                s.ping_url = Some("http://ping/tok".into());
            },
        )
        .unwrap();
        assert_eq!(
            learned_ping_url(dir.path(), "backup", "c1").as_deref(),
            Some("http://ping/tok")
        );
        // The job now bound to another check: the old check's URL is not handed out.
        assert_eq!(learned_ping_url(dir.path(), "backup", "c9"), None);
        let mode = fs::metadata(path(dir.path(), "backup"))
            .unwrap()
            .permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
        let state = update(
            dir.path(),
            &crate::persist::Failures::default(),
            "backup",
            "c2",
            |_| {},
        )
        .unwrap();
        assert_eq!(state.ping_url, None);
        assert_eq!(jobs(dir.path()), ["backup"]);
        assert!(!format!("{state:?}").contains("tok"));
        // Nothing but the state file is left in the directory.
        assert_eq!(fs::read_dir(super::dir(dir.path())).unwrap().count(), 1);
    }

    #[test]
    fn learned_urls_are_read_once_then_kept_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let learned = LearnedUrls::new(dir.path());
        assert_eq!(learned.get("backup", "c1"), None);
        update(
            dir.path(),
            &crate::persist::Failures::default(),
            "backup",
            "c1",
            |s| {
                s.ping_url = Some("http://ping/tok".into());
            },
        )
        .unwrap();
        assert_eq!(
            learned.get("backup", "c1").as_deref(),
            Some("http://ping/tok")
        );
        // Held in memory: the file is no longer read.
        fs::remove_file(path(dir.path(), "backup")).unwrap();
        assert_eq!(
            learned.get("backup", "c1").as_deref(),
            Some("http://ping/tok")
        );
        // Another check's URL is never handed out for this one.
        assert_eq!(learned.get("backup", "c2"), None);
        learned.record("backup", "c2", "http://ping/new");
        assert_eq!(
            learned.get("backup", "c2").as_deref(),
            Some("http://ping/new")
        );
        assert_eq!(learned.get("backup", "c1"), None);
    }

    #[test]
    fn unreadable_state_counts_as_none() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(super::dir(dir.path())).unwrap();
        fs::write(path(dir.path(), "x"), "{not json").unwrap();
        assert!(load(dir.path(), "x").is_none());
        assert_eq!(learned_ping_url(dir.path(), "nothing", "c1"), None);
    }
}
