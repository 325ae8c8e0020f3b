//! Pauses for maintenance: which jobs are paused, until when and why, kept in
//! `<state_dir>/pause.json` so that a daemon restart, `sync` and `run --job` all see them. The
//! file is written crash-safely ([`crate::persist::file::write_atomic`]) under a `flock(2)` on
//! `<state_dir>/pause.lock`, so `pause` without a daemon and the daemon's endpoint never lose
//! each other's changes.
//!
//! A pause **deactivates** the job's check (`activated: false`) rather than muting it. The
//! service's documented timer rules decide it: "When a check is deactivated and activated
//! again, the timer will start when the check is saved"
//! (`checkly/docs.checklyhq.com` `site/content/docs/heartbeat-monitors/_index.md`:95), and a
//! deactivated check records no `FAILING`. A mute (`muted: true`) only silences notifications:
//! the timer keeps running, the check turns `FAILING` during the maintenance and is still
//! failing when the mute is lifted, until the next ping. Re-activation restarts the timer at
//! the resume, which is what a check needs after maintenance: a full period and grace for the
//! first run after it.
//!
//! Sync applies the file ([`crate::sync`]): a paused job's desired definition has
//! `activated: false` (so `sync`, `--force` and the daemon's re-assertion keep it
//! deactivated), and a pause that ended (its deadline passed, or `resume`) is an explicit act:
//! its re-activation goes out at once, not held for the next accepted ping as sync's own
//! re-activations are. The entry stays (as "resuming") until the service accepted the
//! re-activation, so an API that is down at the resume only delays it.
//!
//! Which check a job's pause deactivates is asked of the caller (`crate::sync::created::
//! bound_check`, which this module cannot import: sync reads the pauses): the job's `check_id`,
//! or for a job with `create = true` the id sync recorded once it found or created the check.
//! A job without such a check (`ping_url` only, or `create = true` before sync created its
//! check) has nothing the API can deactivate: it can be paused only with `stop_jobs` (the daemon
//! does not run it); a `ping_url` check's timer keeps running on the service, and a check sync
//! creates while the pause holds is deactivated by the same pass that created it.
//!
//! The daemon holds the pauses in memory ([`LivePauses`]): a fire and a `/metrics` or `/status`
//! request read memory, never the file. Its status endpoint refreshes them right after writing
//! the file, and a watch of the state directory refreshes them when anyone else (`pause`
//! without the daemon, sync forgetting an ended pause, a hand edit) replaces it. What the
//! daemon does with what it finds, decided so that a pause is never lost without a word and a
//! broken file cannot stop jobs beyond what a valid file said:
//! - no file: no pause (removing the file is how every pause is ended by hand);
//! - a valid file: exactly its pauses;
//! - an invalid or unreadable file: the pauses last read from a valid file stay in force (with
//!   their own deadlines, so a pause `--for 1h` still ends after the hour), and the daemon
//!   warns once per change of the file, naming the file, the problem, the pauses it keeps and
//!   the fix (repair or remove the file). A daemon that starts with such a file has read no
//!   pause yet and holds none. Commands and sync passes read the file themselves ([`load`]):
//!   to them an invalid file holds no pause.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use crate::config::{Config, Job};
use crate::persist::Failures;

mod live;
pub use live::LivePauses;

/// The longest pause file read (a hand-edited or planted file cannot exhaust memory).
const MAX_FILE: u64 = 4 << 20;

/// One job's pause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    /// When it was asked for.
    pub since: DateTime<Utc>,
    /// When it ends by itself; `None`: until `resume`.
    #[serde(default)]
    pub until: Option<DateTime<Utc>>,
    /// Why (shown in status).
    #[serde(default)]
    pub reason: Option<String>,
    /// The daemon does not run the job while paused.
    #[serde(default)]
    pub stop_jobs: bool,
    /// `resume` ended it; the check's re-activation is not accepted yet.
    #[serde(default)]
    pub ended: bool,
}

impl Pause {
    /// Whether the pause holds at `now` (not resumed, deadline not reached).
    pub fn in_force(&self, now: DateTime<Utc>) -> bool {
        !self.ended && self.until.map_or(true, |until| now < until)
    }
}

/// Every job's pause, by job name: the content of `pause.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pauses {
    /// Job name -> its pause (in force, or ended and not yet re-activated).
    #[serde(default)]
    pub jobs: BTreeMap<String, Pause>,
}

impl Pauses {
    /// `job`'s pause while it holds at `now`.
    pub fn in_force(&self, job: &str, now: DateTime<Utc>) -> Option<&Pause> {
        self.jobs.get(job).filter(|p| p.in_force(now))
    }

    /// Whether `job` has a pause that ended at `now` and whose check is not re-activated yet.
    pub fn ending(&self, job: &str, now: DateTime<Utc>) -> bool {
        self.jobs.get(job).is_some_and(|p| !p.in_force(now))
    }

    /// Whether the daemon must not run `job` at `now` (`--stop-jobs`).
    pub fn stops(&self, job: &str, now: DateTime<Utc>) -> bool {
        self.in_force(job, now).is_some_and(|p| p.stop_jobs)
    }

    /// The earliest deadline after `now` of a pause in force.
    pub fn next_deadline(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.jobs
            .values()
            .filter(|p| p.in_force(now))
            .filter_map(|p| p.until)
            .min()
    }
}

/// `<state_dir>/pause.json`.
pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join("pause.json")
}

/// The pauses under `state_dir`; none when there is no file. An unreadable or invalid file is
/// logged and read as no pause (it is only ever written whole, so that takes a hand edit). The
/// daemon reads [`LivePauses`] instead, which applies its own rule to a bad file.
pub fn load(state_dir: &Path) -> Pauses {
    let file = path(state_dir);
    let bytes = match read(&file) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Pauses::default(),
        Err(err) => {
            tracing::warn!(file = %file.display(), error = %err, "cannot read the pause file: no job counts as paused");
            return Pauses::default();
        }
    };
    parse(&bytes).unwrap_or_else(|err| {
        tracing::warn!(file = %file.display(), error = %err, "the pause file is not valid: no job counts as paused; pause again to rewrite it");
        Pauses::default()
    })
}

/// The bytes of the pause file `file`; `None` when there is none. Anything but a regular file
/// of at most [`MAX_FILE`] bytes is an error.
fn read(file: &Path) -> std::io::Result<Option<Vec<u8>>> {
    match crate::persist::file::read_regular(file, MAX_FILE) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}

/// The pauses in the bytes of a pause file.
fn parse(bytes: &[u8]) -> Result<Pauses, serde_json::Error> {
    serde_json::from_slice(bytes)
}

/// Why the pause file could not be changed.
#[derive(Debug, thiserror::Error)]
#[error("pause file {}: {source}; check that the state directory is writable", path.display())]
pub struct PauseFileError {
    /// The file (or its lock).
    pub path: PathBuf,
    /// The OS error.
    #[source]
    pub source: std::io::Error,
}

/// Changes the pauses under the lock and writes them crash-safely (the state directory is
/// created, 0700, when missing); returns what `change` returned.
pub fn update<R>(
    state_dir: &Path,
    failures: &Failures,
    change: impl FnOnce(&mut Pauses) -> R,
) -> Result<R, PauseFileError> {
    let file = path(state_dir);
    let err = |path: &Path| {
        let path = path.to_owned();
        move |source| PauseFileError { path, source }
    };
    let lock_path = state_dir.join("pause.lock");
    crate::persist::file::private_dir(state_dir).map_err(err(state_dir))?;
    let _lock = crate::persist::lock::FileLock::acquire(&lock_path).map_err(err(&lock_path))?;
    let mut pauses = load(state_dir);
    let before = pauses.clone();
    let result = change(&mut pauses);
    if pauses != before {
        let written = serde_json::to_vec_pretty(&pauses)
            .map_err(std::io::Error::from)
            .and_then(|text| crate::persist::file::write_atomic(&file, &text));
        if let Err(source) = written {
            failures.failed(crate::persist::What::Pause);
            return Err(PauseFileError { path: file, source });
        }
    }
    Ok(result)
}

/// Forgets the pauses of `jobs` that ended before `now` (their checks are re-activated, or
/// they have none).
pub fn forget_ended(state_dir: &Path, failures: &Failures, jobs: &[String], now: DateTime<Utc>) {
    if jobs.is_empty() {
        return;
    }
    let forgotten = update(state_dir, failures, |pauses| {
        pauses
            .jobs
            .retain(|name, p| p.in_force(now) || !jobs.contains(name));
    });
    if let Err(err) = forgotten {
        tracing::warn!(error = %err, "cannot forget the ended pauses");
    }
}

/// What `pause` asks for, from the command line or the status endpoint (`POST /pause`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseRequest {
    /// The jobs (empty with `all`).
    #[serde(default)]
    pub jobs: Vec<String>,
    /// Every job.
    #[serde(default)]
    pub all: bool,
    /// `--for`, as written (`"30m"`).
    #[serde(default, rename = "for")]
    pub for_: Option<String>,
    /// `--until`, RFC 3339.
    #[serde(default)]
    pub until: Option<String>,
    /// `--reason`.
    #[serde(default)]
    pub reason: Option<String>,
    /// `--stop-jobs`.
    #[serde(default)]
    pub stop_jobs: bool,
}

/// What `resume` asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeRequest {
    /// The jobs (empty with `all`).
    #[serde(default)]
    pub jobs: Vec<String>,
    /// Every paused job.
    #[serde(default)]
    pub all: bool,
}

/// A validated pause: each job with its pause, and whether it has a check to deactivate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PausePlan {
    /// (job, bound to a check) in config order.
    pub jobs: Vec<(String, bool)>,
    /// The pause each of them gets.
    pub pause: Pause,
    /// Jobs `--all` left out: not bound to a check, and no `--stop-jobs`.
    pub left_out: Vec<String>,
}

impl PausePlan {
    /// The jobs whose check the pause deactivates.
    pub fn bound(&self) -> Vec<String> {
        self.jobs
            .iter()
            .filter(|(_, bound)| *bound)
            .map(|(name, _)| name.clone())
            .collect()
    }
}

/// The longest `--for` or the farthest `--until`: the longest duration the config takes.
const MAX_PAUSE: Duration = crate::duration::MAX;

/// The check a job's pause deactivates, given by the caller: the job's `check_id`, or the id
/// recorded for a job with `create = true`; `None` when it has none (yet).
pub type CheckOf<'a> = &'a dyn Fn(&Job) -> Option<String>;

/// Checks `request` against `config` at `now`, each job's check given by `check_of`: every
/// problem is a message naming it (the command exits 2 and nothing is changed).
pub fn plan(
    config: &Config,
    request: &PauseRequest,
    now: DateTime<Utc>,
    check_of: CheckOf<'_>,
) -> Result<PausePlan, String> {
    let until = deadline(request, now)?;
    if request.all != request.jobs.is_empty() {
        return Err(if request.all {
            "name jobs or give --all, not both".to_owned()
        } else {
            "name the jobs to pause, or give --all".to_owned()
        });
    }
    let mut jobs = Vec::new();
    let mut left_out = Vec::new();
    if request.all {
        for job in &config.jobs {
            let has_check = check_of(job).is_some();
            if has_check || request.stop_jobs {
                jobs.push((job.name.clone(), has_check));
            } else {
                left_out.push(job.name.clone());
            }
        }
        if jobs.is_empty() {
            return Err(format!(
                "no job of {} is bound to a check (check_id, or create = true once sync created \
                 the check): nothing to pause; --stop-jobs pauses jobs without one in the daemon \
                 only",
                config.path.display()
            ));
        }
    }
    for name in &request.jobs {
        let Some(job) = config.job(name) else {
            return Err(format!(
                "no job named \"{name}\" in {}; `heartbeat-agent config check` lists the jobs",
                config.path.display()
            ));
        };
        let has_check = check_of(job).is_some();
        if !has_check && !request.stop_jobs {
            return Err(if job.check.create {
                no_check_yet(name)
            } else {
                format!(
                    "job \"{name}\" has no check_id: there is no check the API can deactivate \
                     (its ping_url check keeps its own timer); add --stop-jobs to only stop the \
                     daemon running it, or pause the check on the service"
                )
            });
        }
        if !jobs.iter().any(|(n, _)| n == name) {
            jobs.push((name.clone(), has_check));
        }
    }
    let reason = request
        .reason
        .as_deref()
        .map(str::trim)
        .filter(|r| !r.is_empty());
    if reason.is_some_and(|r| r.len() > 500) {
        return Err("--reason is longer than 500 bytes: shorten it".to_owned());
    }
    Ok(PausePlan {
        jobs,
        pause: Pause {
            since: now,
            until,
            reason: reason.map(str::to_owned),
            stop_jobs: request.stop_jobs,
            ended: false,
        },
        left_out,
    })
}

/// Why a job with `create = true` whose check sync has not found or created yet cannot be
/// paused without `stop_jobs`.
pub fn no_check_yet(name: &str) -> String {
    format!(
        "job \"{name}\" has no check yet: it has `create = true` and sync has not found or \
         created its check, so nothing was deactivated on the service (there is nothing to \
         deactivate); run `heartbeat-agent sync --job {name}` (or let the daemon's sync run) to \
         create it, then pause again; or add --stop-jobs to only stop the daemon running it"
    )
}

/// The pause's deadline from `--for` or `--until`, checked.
fn deadline(request: &PauseRequest, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, String> {
    let max = TimeDelta::from_std(MAX_PAUSE).unwrap_or(TimeDelta::MAX);
    match (&request.for_, &request.until) {
        (Some(_), Some(_)) => Err("--for and --until both set the end: give one".to_owned()),
        (Some(text), None) => {
            let duration = crate::duration::parse(text).map_err(|e| format!("--for: {e}"))?;
            if duration.is_zero() {
                return Err(format!(
                    "--for \"{text}\" is zero: give a positive duration such as \"30m\", or \
                     leave --for out to pause until `heartbeat-agent resume`"
                ));
            }
            let delta = TimeDelta::from_std(duration).unwrap_or(max);
            Ok(now.checked_add_signed(delta))
        }
        (None, Some(text)) => {
            let until = DateTime::parse_from_rfc3339(text.trim())
                .map_err(|e| {
                    format!(
                        "--until \"{text}\" is not an RFC 3339 time ({e}): write it as \
                         2026-11-25T18:00:00Z or 2026-11-25T19:00:00+01:00"
                    )
                })?
                .with_timezone(&Utc);
            if until <= now {
                return Err(format!(
                    "--until {text} is in the past (now is {}): give a later time",
                    now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                ));
            }
            if until - now > max {
                return Err(format!("--until {text} is more than 3650 days away"));
            }
            Ok(Some(until))
        }
        (None, None) => Ok(None),
    }
}

/// The jobs `resume` ends: named ones must be paused; `--all` takes every pause.
pub fn resume_plan(pauses: &Pauses, request: &ResumeRequest) -> Result<Vec<String>, String> {
    if request.all != request.jobs.is_empty() {
        return Err(if request.all {
            "name jobs or give --all, not both".to_owned()
        } else {
            "name the jobs to resume, or give --all".to_owned()
        });
    }
    if request.all {
        return Ok(pauses.jobs.keys().cloned().collect());
    }
    for name in &request.jobs {
        if !pauses.jobs.contains_key(name) {
            let paused: Vec<&str> = pauses.jobs.keys().map(String::as_str).collect();
            return Err(format!(
                "job \"{name}\" is not paused (paused: {})",
                if paused.is_empty() {
                    "none".to_owned()
                } else {
                    paused.join(", ")
                }
            ));
        }
    }
    Ok(request.jobs.clone())
}

/// `jobs` of `config` that have a check (`check_of`): those whose check a pause changes.
pub fn bound_jobs(config: &Config, jobs: &[String], check_of: CheckOf<'_>) -> Vec<String> {
    jobs.iter()
        .filter(|name| config.job(name).is_some_and(|job| check_of(job).is_some()))
        .cloned()
        .collect()
}

/// Records `plan`'s pauses.
pub fn apply(
    state_dir: &Path,
    failures: &Failures,
    plan: &PausePlan,
) -> Result<(), PauseFileError> {
    update(state_dir, failures, |pauses| {
        for (name, _) in &plan.jobs {
            pauses.jobs.insert(name.clone(), plan.pause.clone());
        }
    })
}

/// Ends the pauses of `jobs`: those `bound` to a check are marked ended (the next sync pass
/// re-activates the check, then forgets the pause); the others are forgotten at once.
pub fn end(
    state_dir: &Path,
    failures: &Failures,
    jobs: &[String],
    bound: impl Fn(&str) -> bool,
) -> Result<(), PauseFileError> {
    update(state_dir, failures, |pauses| {
        for name in jobs {
            if !bound(name) {
                pauses.jobs.remove(name);
            } else if let Some(pause) = pauses.jobs.get_mut(name) {
                pause.ended = true;
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        let text = "[[jobs]]\nname = \"bound\"\nschedule = \"@daily\"\ncheck_id = \"c\"\n\
                    command = [\"true\"]\n\n[[jobs]]\nname = \"url\"\nschedule = \"@daily\"\n\
                    ping_url = \"https://hc.example/p/x\"\ncommand = [\"true\"]\n";
        crate::config::Config::from_text(Path::new("/c.toml"), text)
            .expect("valid config")
            .config
    }

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("RFC 3339")
    }

    /// The configured `check_id` (no state directory here).
    fn check_of(job: &Job) -> Option<String> {
        match &job.target {
            crate::config::PingTarget::Check(id) => Some(id.clone()),
            _ => None,
        }
    }

    #[test]
    fn a_failed_write_is_counted_in_the_failures_it_was_given() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(path(dir.path()).join("x")).expect("a directory in the way");
        let failures = Failures::default();
        let pause: Pause =
            serde_json::from_str(r#"{"since": "2026-11-25T12:00:00Z"}"#).expect("a pause");
        let paused = update(dir.path(), &failures, |p| p.jobs.insert("a".into(), pause));
        let err = paused.expect_err("a directory is in the way");
        assert!(err.to_string().contains("pause.json"), "{err}");
        assert_eq!(failures.count(crate::persist::What::Pause), 1);
        end(dir.path(), &failures, &["a".to_owned()], |_| false).expect("nothing to write");
        assert_eq!(failures.count(crate::persist::What::Pause), 1);
    }

    #[test]
    fn bad_requests_name_the_problem() {
        let config = config();
        let now = at("2026-11-25T12:00:00Z");
        let ask = |r: PauseRequest| plan(&config, &r, now, &check_of).expect_err("refused");
        let job = |name: &str| PauseRequest {
            jobs: vec![name.to_owned()],
            ..PauseRequest::default()
        };
        assert!(ask(job("nope")).contains("no job named \"nope\""));
        assert!(ask(job("url")).contains("job \"url\" has no check_id"));
        assert!(ask(PauseRequest {
            for_: Some("0s".into()),
            ..job("bound")
        })
        .contains("is zero"));
        let past = ask(PauseRequest {
            until: Some("2026-11-25T11:00:00Z".into()),
            ..job("bound")
        });
        assert!(past.contains("in the past"), "{past}");
        assert!(ask(PauseRequest {
            until: Some("tomorrow".into()),
            ..job("bound")
        })
        .contains("RFC 3339"));
        assert!(ask(PauseRequest {
            all: true,
            ..job("bound")
        })
        .contains("not both"));
        assert!(ask(PauseRequest::default()).contains("give --all"));
    }

    #[test]
    fn a_pause_holds_until_its_deadline_or_resume() {
        let config = config();
        let now = at("2026-11-25T12:00:00Z");
        let all = PauseRequest {
            all: true,
            for_: Some("30m".into()),
            ..PauseRequest::default()
        };
        let planned = plan(&config, &all, now, &check_of).expect("valid");
        assert_eq!(planned.jobs, vec![("bound".to_owned(), true)]);
        assert_eq!(planned.left_out, vec!["url".to_owned()]);
        let stop = PauseRequest {
            stop_jobs: true,
            ..all
        };
        assert_eq!(
            plan(&config, &stop, now, &check_of)
                .expect("valid")
                .jobs
                .len(),
            2
        );
        let dir = tempfile::tempdir().expect("temp dir");
        apply(dir.path(), &crate::persist::Failures::default(), &planned).expect("written");
        let pauses = load(dir.path());
        assert!(pauses.in_force("bound", now).is_some());
        assert_eq!(pauses.next_deadline(now), Some(at("2026-11-25T12:30:00Z")));
        assert!(pauses.ending("bound", at("2026-11-25T12:30:00Z")));
        end(
            dir.path(),
            &crate::persist::Failures::default(),
            &["bound".to_owned()],
            |_| true,
        )
        .expect("written");
        assert!(load(dir.path()).ending("bound", now));
        forget_ended(
            dir.path(),
            &crate::persist::Failures::default(),
            &["bound".to_owned()],
            now,
        );
        assert_eq!(load(dir.path()), Pauses::default());
    }
}
