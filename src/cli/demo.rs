//! `heartbeat-agent demo`: the first run. Starts the emulator in-process on loopback, creates
//! the demo's heartbeat checks in it, writes `config/demo.toml` (embedded, placeholders filled
//! in) and a random API key into a fresh temporary directory, runs the daemon in-process on that
//! config (jobs, watch, sync, outbox: the real code paths) and shows a live status table until
//! Ctrl-C or `--duration`. Nothing is written outside the temporary directory, which is removed
//! at the end unless `--keep`.
//!
//! The daemon stops on SIGINT/SIGTERM only; `--duration` raises SIGTERM in the process, so both
//! ways out take the daemon's own orderly shutdown.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::Args;
use rand::Rng;
use tokio_util::sync::CancellationToken;

use super::{exit, print_error, GlobalArgs};
use crate::api::{ApiClient, ApiClientConfig, Quota, RateLimiter, RetryPolicy};
use crate::config::{Config, JobAction, PingTarget};
use crate::daemon::state::{DaemonState, JobState};
use crate::daemon::{self, Context, Options, Plugins, Task};
use crate::emulator::{Emulator, EmulatorHandle, EmulatorOptions};
use crate::redact::Secret;
use crate::run_end::{ProcessEnd, RunEnd};
use crate::sync::{Reconciler, SyncState, SyncStatus};

/// The demo's configuration, with `{{...}}` placeholders (see the file's header).
const TEMPLATE: &str = include_str!("../../config/demo.toml");

/// How often the table is refreshed (and the emulator asked for its view).
const REFRESH: Duration = Duration::from_secs(1);

/// Try the agent without an account: run a demo daemon against an in-process emulator.
///
/// Starts the monitoring API emulator on 127.0.0.1, creates four heartbeat checks in it, and runs
/// the daemon on config/demo.toml (a job that succeeds, one that fails, one that times out and a
/// watch, every few seconds, each bound to a check that sync keeps in line). Shows a live status
/// table until Ctrl-C (on a terminal it is redrawn every second and the logs go to a file in the
/// demo's directory; otherwise one line per change, logs on stderr). Everything is written to a
/// temporary directory under $TMPDIR that is removed at the end. --config, --state-dir and
/// --base-url do not apply: the demo brings its own.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Stop after this long (e.g. "30s") instead of waiting for Ctrl-C
    #[arg(long, value_name = "DUR", value_parser = crate::config::duration::parse)]
    pub duration: Option<Duration>,

    /// Keep the temporary directory (config, state, logs) and print its path at the end
    #[arg(long)]
    pub keep: bool,
}

/// Runs the demo; returns the exit code (0 after Ctrl-C or `--duration`).
pub fn run(args: DemoArgs, _global: &GlobalArgs) -> u8 {
    let dir = match DemoDir::create() {
        Ok(dir) => dir,
        Err(err) => {
            print_error(format!(
                "cannot create the demo's temporary directory: {err}"
            ));
            return exit::FAILURE;
        }
    };
    let live = std::io::stdout().is_terminal();
    let logs = if live && std::io::stderr().is_terminal() {
        LogRedirect::to(&dir.path.join("daemon.log"))
    } else {
        None
    };
    let code = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => {
            let result = runtime.block_on(demo(&dir.path, args.duration, live));
            runtime.shutdown_timeout(Duration::from_secs(1));
            drop(logs);
            match result {
                Ok(()) => exit::OK,
                Err(message) => {
                    print_error(message);
                    exit::FAILURE
                }
            }
        }
        Err(err) => {
            drop(logs);
            print_error(format!("cannot start the async runtime: {err}"));
            exit::FAILURE
        }
    };
    if args.keep {
        println!("kept the demo's directory: {}", dir.keep().display());
    }
    code
}

/// The whole demo inside the runtime.
async fn demo(dir: &Path, duration: Option<Duration>, live: bool) -> Result<(), String> {
    let key = random_key();
    let emulator = Emulator::start(EmulatorOptions {
        api_key: key.clone(),
        ..EmulatorOptions::default()
    })
    .await
    .map_err(|e| format!("cannot start the emulator: {e}"))?;
    let (text, checks) = fill_template(TEMPLATE, &emulator)?;
    write_private(&dir.join("api-key"), &format!("{key}\n"))?;
    let path = dir.join("config.toml");
    write_private(&path, &text)?;
    let config = match Config::load(&path) {
        Ok(loaded) => Arc::new(loaded.config),
        Err(err) => {
            let problems: Vec<String> = err.problems.iter().map(ToString::to_string).collect();
            return Err(format!(
                "the demo's configuration is invalid (a bug): {}",
                problems.join("; ")
            ));
        }
    };
    let state_dir = config.state_dir(None);
    let client = |retry| {
        let mut options = ApiClientConfig::new(emulator.base_url(), Secret::new(key.clone()));
        options.account_id = Some(emulator.account().to_owned());
        options.retry = retry;
        // Its own limiter: the table's polling must not take sync's share of the quota.
        options.rate_limiter = Arc::new(RateLimiter::new(Quota::DEFAULT));
        ApiClient::new(options).map_err(|e| format!("cannot build the API client: {e}"))
    };
    let reconciler = Reconciler::new(
        Arc::clone(&config),
        client(RetryPolicy::default())?,
        state_dir.clone(),
    );
    let once = RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    };
    let view = View {
        sync: reconciler.status(),
        client: client(once)?,
        checks,
        live,
        daemon: Arc::new(Mutex::new(None)),
    };
    let mut plugins = Plugins::default();
    plugins.after_run.push(Arc::new(reconciler.clone()));
    plugins
        .tasks
        .push(("sync", daemon::hooks::sync_task(reconciler)));
    plugins
        .tasks
        .push(("demo table", table_task(view.clone(), duration)));
    if live {
        println!("heartbeat-agent demo: starting (Ctrl-C to stop) ...");
    }
    let options = Options {
        config_path: path,
        state_dir,
    };
    let result = daemon::run(options, Arc::clone(&config), plugins).await;
    let last = view.rows(&config).await;
    println!("final status:");
    print!("{}", render(&last, Utc::now()));
    emulator.shutdown().await;
    result.map_err(|e| e.to_string())
}

/// The emulator's check ids by check name, as created for the `{{check:NAME}}` placeholders.
type CheckIds = BTreeMap<String, String>;

/// Fills in the template: emulator URLs and account, and a new check per `{{check:NAME}}`.
/// Comment lines are left as they are (the header explains the placeholders).
fn fill_template(template: &str, emulator: &EmulatorHandle) -> Result<(String, CheckIds), String> {
    let mut checks = CheckIds::new();
    let mut text = String::with_capacity(template.len());
    for line in template.lines() {
        if !line.trim_start().starts_with('#') {
            let filled = fill_line(line, emulator, &mut checks)?;
            text.push_str(&filled);
        } else {
            text.push_str(line);
        }
        text.push('\n');
    }
    Ok((text, checks))
}

/// One line of the template, filled in (creating checks as needed).
fn fill_line(
    line: &str,
    emulator: &EmulatorHandle,
    checks: &mut CheckIds,
) -> Result<String, String> {
    let mut text = line
        .replace("{{base_url}}", emulator.base_url())
        .replace("{{ping_url}}", emulator.ping_url())
        .replace("{{account}}", emulator.account());
    while let Some(start) = text.find("{{check:") {
        let end = text[start..]
            .find("}}")
            .map(|i| start + i)
            .ok_or("config/demo.toml: unterminated {{check:...}} placeholder")?;
        let name = text[start + "{{check:".len()..end].to_owned();
        let id = match checks.get(&name) {
            Some(id) => id.clone(),
            None => {
                let check = emulator
                    .add_heartbeat_check(&serde_json::json!({ "name": name }))
                    .map_err(|e| format!("cannot create the demo check {name}: {e:?}"))?;
                let id = check["id"].as_str().unwrap_or_default().to_owned();
                checks.insert(name.clone(), id.clone());
                id
            }
        };
        text.replace_range(start..end + 2, &id);
    }
    match text.find("{{") {
        Some(start) => {
            let rest: String = text[start..].chars().take(30).collect();
            Err(format!("config/demo.toml: unknown placeholder {rest}"))
        }
        None => Ok(text),
    }
}

/// The background task that shows the table while the daemon runs, and ends the demo after
/// `duration` by raising SIGTERM (the daemon's own stop signal).
fn table_task(view: View, duration: Option<Duration>) -> Task {
    Box::new(move |context: Context, cancel: CancellationToken| {
        Box::pin(async move {
            *view.daemon.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(Arc::clone(&context.state));
            let stop_at = duration.map(|d| tokio::time::Instant::now() + d);
            let mut tick = tokio::time::interval(REFRESH);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut shown: BTreeMap<String, String> = BTreeMap::new();
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return,
                    _ = tick.tick() => {}
                }
                let config = Arc::clone(&context.config.borrow());
                let rows = view.rows(&config).await;
                if view.live {
                    // Home, clear the screen, then the table.
                    print!("\x1b[H\x1b[2J{}", render(&rows, Utc::now()));
                    println!("\nlogs: daemon.log in the demo's directory; Ctrl-C stops the demo");
                } else {
                    for row in &rows {
                        let line = row.change_line();
                        if shown.get(&row.job) != Some(&line) {
                            println!("{line}");
                            shown.insert(row.job.clone(), line);
                        }
                    }
                }
                let _ = std::io::stdout().flush();
                if stop_at.is_some_and(|at| tokio::time::Instant::now() >= at) {
                    // The same orderly shutdown as Ctrl-C; the handler is installed by now.
                    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGTERM);
                    return;
                }
            }
        })
    })
}

/// What the table is made from.
#[derive(Clone)]
struct View {
    /// Per-job sync state, from the reconciler.
    sync: SyncStatus,
    /// A client of the emulator, for its view of each check.
    client: ApiClient,
    /// The demo's checks by name (to show checks by id).
    checks: CheckIds,
    /// Whether stdout is a terminal (redraw) or not (a line per change).
    live: bool,
    /// The daemon's live job state, handed over by the table task once the daemon runs.
    daemon: Arc<Mutex<Option<Arc<DaemonState>>>>,
}

/// One job's row.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    job: String,
    schedule: String,
    /// When the last run ended and how (`None` before the first).
    last_run: Option<(DateTime<Utc>, String)>,
    /// When the last ping was sent and what came of it.
    ping: Option<(DateTime<Utc>, String)>,
    sync: String,
    emulator: String,
}

impl View {
    /// The rows of every job of `config`.
    async fn rows(&self, config: &Config) -> Vec<Row> {
        let state = self
            .daemon
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let failing = self.failing_checks().await;
        let mut rows = Vec::new();
        for job in &config.jobs {
            let job_state = state.as_ref().and_then(|s| s.job(&job.name));
            let sync = match (&job.target, self.sync.get(&job.name)) {
                (PingTarget::Check(_), Some(status)) => match status.state {
                    SyncState::InSync => "in sync".to_owned(),
                    SyncState::Pending => "pending".to_owned(),
                    SyncState::Failed => "failed".to_owned(),
                },
                (PingTarget::Check(_), None) => "not managed".to_owned(),
                _ => "-".to_owned(),
            };
            let emulator = match &job.target {
                PingTarget::Check(id) => self.emulator_view(id, failing.get(id)).await,
                _ => "-".to_owned(),
            };
            rows.push(Row {
                job: job.name.clone(),
                schedule: job.schedule.to_string(),
                last_run: job_state.as_deref().and_then(|s| last_run(s, &job.action)),
                ping: job_state
                    .as_deref()
                    .and_then(|s| s.snapshot().last_ping)
                    .map(|p| {
                        let verdict = if p.accepted { "ok" } else { "refused" };
                        (p.at, format!("{verdict} {}", p.detail))
                    }),
                sync,
                emulator,
            });
        }
        rows
    }

    /// `hasFailures` of every check, by id (empty when the emulator cannot be asked).
    async fn failing_checks(&self) -> BTreeMap<String, bool> {
        let statuses = self.client.list_check_statuses().await.unwrap_or_default();
        statuses
            .into_iter()
            .flatten()
            .filter_map(|s| Some((s.check_id?, s.has_failures)))
            .collect()
    }

    /// The emulator's view of check `id`: its events and whether it is failing.
    async fn emulator_view(&self, id: &str, failing: Option<&bool>) -> String {
        let name = self
            .checks
            .iter()
            .find(|(_, check)| check.as_str() == id)
            .map_or(id, |(name, _)| name.as_str());
        let events = match self.client.list_heartbeat_events(id).await {
            Ok(lists) => lists.into_iter().flat_map(|l| l.events).collect::<Vec<_>>(),
            Err(err) => return format!("{name}: cannot ask ({err})"),
        };
        let failing = match failing {
            Some(true) => "hasFailures",
            Some(false) => "no failures",
            None => "status unknown",
        };
        match events.first() {
            Some(last) => format!(
                "{name}: {} events, last {}, {failing}",
                events.len(),
                last.state
            ),
            None => format!("{name}: no events, {failing}"),
        }
    }
}

/// How the job's last run ended, or that one is running now.
fn last_run(state: &JobState, action: &JobAction) -> Option<(DateTime<Utc>, String)> {
    let snapshot = state.snapshot();
    let record = match snapshot.last_run {
        Some(record) => record,
        None if state.running() > 0 => return Some((Utc::now(), "running".to_owned())),
        None => return None,
    };
    let outcome = match &record.end {
        RunEnd::TimedOut { .. } => "timed out".to_owned(),
        RunEnd::Stopped { .. } => "stopped by shutdown".to_owned(),
        RunEnd::Ended(ProcessEnd::Exited(code)) if record.success() => format!("ok (exit {code})"),
        RunEnd::Ended(ProcessEnd::Exited(code)) => format!("failed (exit {code})"),
        RunEnd::Ended(ProcessEnd::Signaled { signal, .. }) => format!("failed (signal {signal})"),
        RunEnd::NotStarted { reason, .. } => format!("not started: {reason}"),
        RunEnd::Probed { healthy: true, .. } => "healthy".to_owned(),
        RunEnd::Probed { reason, .. } => format!("unhealthy: {reason}"),
    };
    let runs = state.runs();
    let kind = if matches!(action, JobAction::Watch(_)) {
        "probe"
    } else {
        "run"
    };
    Some((record.ended, format!("{kind} {runs}: {outcome}")))
}

impl Row {
    /// The row as one line without ages, so it changes only when something happened.
    fn change_line(&self) -> String {
        let at = |t: &DateTime<Utc>| t.format("%H:%M:%S").to_string();
        let run = self
            .last_run
            .as_ref()
            .map_or("no run yet".to_owned(), |(t, what)| {
                format!("{what} at {}", at(t))
            });
        let ping = self
            .ping
            .as_ref()
            .map_or("not pinged".to_owned(), |(t, what)| {
                format!("{what} at {}", at(t))
            });
        format!(
            "{}: {run}; ping {ping}; sync {}; emulator {}",
            self.job, self.sync, self.emulator
        )
    }
}

/// The table: one line per job, columns padded to the widest cell.
fn render(rows: &[Row], now: DateTime<Utc>) -> String {
    let age = |t: &DateTime<Utc>| {
        let secs = (now - *t).num_seconds().max(0);
        format!("{secs}s ago")
    };
    let mut cells = vec![[
        "JOB".to_owned(),
        "SCHEDULE".to_owned(),
        "LAST RUN".to_owned(),
        "PING".to_owned(),
        "SYNC".to_owned(),
        "EMULATOR (CHECK)".to_owned(),
    ]];
    for row in rows {
        cells.push([
            row.job.clone(),
            row.schedule.clone(),
            row.last_run
                .as_ref()
                .map_or("-".to_owned(), |(t, what)| format!("{what}, {}", age(t))),
            row.ping
                .as_ref()
                .map_or("not pinged".to_owned(), |(t, what)| {
                    format!("{what}, {}", age(t))
                }),
            row.sync.clone(),
            row.emulator.clone(),
        ]);
    }
    let mut widths = [0usize; 6];
    for line in &cells {
        for (width, cell) in widths.iter_mut().zip(line) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for line in &cells {
        let mut text = String::new();
        for (cell, width) in line.iter().zip(widths) {
            let _ = write!(text, "{cell:<width$}  ");
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}

/// A random API key for the emulator (the demo never uses a real one).
fn random_key() -> String {
    let suffix: String = rand::thread_rng()
        .sample_iter(rand::distributions::Alphanumeric)
        .take(32)
        .map(char::from)
        .collect();
    format!("demo-{suffix}")
}

/// Writes a file only the user can read.
fn write_private(path: &Path, text: &str) -> Result<(), String> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The demo's private temporary directory, removed on drop unless kept.
struct DemoDir {
    path: PathBuf,
    keep: bool,
}

impl DemoDir {
    /// A new directory `heartbeat-agent-demo-XXXXXXXX` (mode 0700) under `$TMPDIR` or `/tmp`.
    fn create() -> std::io::Result<DemoDir> {
        let base = std::env::temp_dir();
        let mut attempts = 0;
        loop {
            let suffix: u32 = rand::thread_rng().gen();
            let path = base.join(format!("heartbeat-agent-demo-{suffix:08x}"));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(DemoDir { path, keep: false }),
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists && attempts < 10 => {
                    attempts += 1;
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// Keeps the directory; returns its path.
    fn keep(mut self) -> PathBuf {
        self.keep = true;
        self.path.clone()
    }
}

impl Drop for DemoDir {
    fn drop(&mut self) {
        if !self.keep {
            if let Err(err) = std::fs::remove_dir_all(&self.path) {
                print_error(format!(
                    "cannot remove the demo's directory {}: {err}",
                    self.path.display()
                ));
            }
        }
    }
}

/// Sends stderr (the logs) to a file while the live table owns the terminal; restores it on
/// drop.
struct LogRedirect {
    saved: std::os::fd::OwnedFd,
}

impl LogRedirect {
    /// Points file descriptor 2 at `path`; `None` (logs stay on the terminal) when it cannot.
    fn to(path: &Path) -> Option<LogRedirect> {
        use std::os::fd::{AsRawFd, FromRawFd};
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .ok()?;
        let saved = nix::unistd::dup(libc::STDERR_FILENO).ok()?;
        nix::unistd::dup2(file.as_raw_fd(), libc::STDERR_FILENO).ok()?;
        // SAFETY: `dup` returned a new descriptor that nothing else owns.
        let saved = unsafe { std::os::fd::OwnedFd::from_raw_fd(saved) };
        Some(LogRedirect { saved })
    }
}

impl Drop for LogRedirect {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        let _ = nix::unistd::dup2(self.saved.as_raw_fd(), libc::STDERR_FILENO);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_config_names_only_known_placeholders() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let emulator = Emulator::start(EmulatorOptions::default())
                .await
                .expect("emulator");
            let (text, checks) = fill_template(TEMPLATE, &emulator).expect("filled");
            let settings = text.lines().filter(|l| !l.trim_start().starts_with('#'));
            assert!(settings.clone().all(|l| !l.contains("{{")), "{text}");
            assert_eq!(
                checks.keys().collect::<Vec<_>>(),
                [
                    "demo-api-up",
                    "demo-backup",
                    "demo-report",
                    "demo-slow-export"
                ]
            );
            for id in checks.values() {
                assert!(emulator.heartbeat_check(id).is_some(), "{id}");
                assert!(text.contains(&format!("check_id = \"{id}\"")), "{text}");
            }
            assert!(text.contains(emulator.base_url()));
            let bad = fill_template("x = \"{{nope}}\"", &emulator).expect_err("unknown");
            assert!(bad.contains("unknown placeholder {{nope}}"), "{bad}");
        });
    }

    #[test]
    fn the_table_pads_columns_and_shows_ages() {
        let now = Utc::now();
        let rows = vec![Row {
            job: "backup".into(),
            schedule: "* * * * * *".into(),
            last_run: Some((
                now - chrono::TimeDelta::seconds(3),
                "run 2: ok (exit 0)".into(),
            )),
            ping: None,
            sync: "in sync".into(),
            emulator: "demo-backup: 2 events, last RECEIVED, no failures".into(),
        }];
        let table = render(&rows, now);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 2, "{table}");
        assert!(lines[0].starts_with("JOB     SCHEDULE"), "{table}");
        assert!(lines[1].contains("run 2: ok (exit 0), 3s ago"), "{table}");
        assert!(lines[1].contains("not pinged"), "{table}");
        let line = rows[0].change_line();
        assert!(line.starts_with("backup: run 2: ok (exit 0) at "), "{line}");
        assert!(!line.contains("ago"), "{line}");
    }
}
