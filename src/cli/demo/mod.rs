//! `heartbeat-agent demo`: the first run. Starts the emulator in-process on loopback, creates
//! the demo's heartbeat checks in it, writes `config/demo.toml` (embedded, placeholders filled
//! in) and a random API key into a fresh temporary directory, runs the daemon in-process on that
//! config (jobs, watch, sync, outbox: the real code paths) and shows a live status table until
//! Ctrl-C or `--duration`. The screen names the directory and the log file, and the daemon's
//! status endpoint (the `status` task `daemon` runs, on a free loopback port) is served with
//! the `status --url` command line to try and the dashboard's URL. Nothing is written outside the temporary directory,
//! which is removed at the end unless `--keep`.
//!
//! The daemon stops on SIGINT/SIGTERM (adapted as for `daemon`) or, after `--duration`, on the
//! stop request the table task sends: both ways out take the daemon's own orderly shutdown.
//! The table itself is in `table.rs`.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write as _};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use clap::Args;
use rand::Rng;

use super::{print_error, GlobalArgs};
use crate::api::{ApiClient, ApiClientConfig, Quota, RateLimiter};
use crate::config::Config;
use crate::daemon::{self, Options, Plugins};
use crate::emulator::{Emulator, EmulatorHandle, EmulatorOptions};
use crate::exit;
use crate::net::RetryPolicy;
use crate::redact::Secret;
use crate::run::AfterRun;
use crate::sync::{LearnedUrls, Reconciler};

/// The demo's configuration, with `{{...}}` placeholders (see the file's header).
const TEMPLATE: &str = include_str!("../../../config/demo.toml");

/// Try the agent without an account: run a demo daemon against an in-process emulator.
///
/// Starts the monitoring API emulator on 127.0.0.1, creates four heartbeat checks in it, and runs
/// the daemon on config/demo.toml (a job that succeeds, one that fails, one that times out and a
/// watch, every few seconds, each bound to a check that sync keeps in line). Shows a live status
/// table until Ctrl-C (on a terminal it is redrawn every second and the logs go to daemon.log in
/// the demo's directory; otherwise one line per change, logs on stderr), names that directory
/// and the log file, and serves the daemon's status endpoint on a free loopback port with the
/// `status --url` command to try in a second terminal and the dashboard's URL for a browser.
/// Everything is written to a temporary
/// directory under $TMPDIR that is removed at the end. It brings its own config, state
/// directory and API: --config, --state-dir and --base-url are refused.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Stop after this long (e.g. "30s") instead of waiting for Ctrl-C
    #[arg(long, value_name = "DUR", value_parser = crate::duration::parse)]
    pub duration: Option<Duration>,

    /// Keep the temporary directory (config, state, logs) and print its path at the end
    #[arg(long)]
    pub keep: bool,

    /// The global options the demo does not use, defined here hidden so that `demo --help`
    /// lists only what applies (clap does not copy a global option into a subcommand that
    /// defines its own); given anyway, they are refused.
    #[command(flatten)]
    pub unused: Unused,
}

/// `--config`, `--state-dir` and `--base-url`, which the demo replaces with its own.
#[derive(Debug, Args)]
pub struct Unused {
    #[arg(long, hide = true, value_name = "FILE")]
    config: Option<PathBuf>,
    #[arg(long, hide = true, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    #[arg(long, hide = true, value_name = "URL")]
    base_url: Option<String>,
}

/// Runs the demo; returns the exit code (0 after Ctrl-C or `--duration`).
pub fn run(args: DemoArgs, global: &GlobalArgs) -> u8 {
    let unused = &args.unused;
    let given = [
        (
            "--config",
            unused.config.is_some() || global.config.is_some(),
        ),
        (
            "--state-dir",
            unused.state_dir.is_some() || global.state_dir.is_some(),
        ),
        (
            "--base-url",
            unused.base_url.is_some() || global.base_url.is_some(),
        ),
    ];
    if let Some((flag, _)) = given.iter().find(|(_, given)| *given) {
        print_error(format!(
            "demo: {flag} does not apply: the demo brings its own config, state directory and \
             emulator (see `heartbeat-agent demo --help`)"
        ));
        return exit::USAGE;
    }
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
    let log_file = dir.path.join("daemon.log");
    let logs = if live && std::io::stderr().is_terminal() {
        LogRedirect::to(&log_file)
    } else {
        None
    };
    let where_ = Where {
        dir: dir.path.clone(),
        logs: logs.as_ref().map(|_| log_file),
        keep: args.keep,
        status: None,
        dashboard: None,
    };
    // One thread, as the daemon's (`cli/daemon.rs`, `runtime`).
    let code = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => {
            let result = runtime.block_on(demo(where_, args.duration, live));
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
        crate::logging::write_out(&format!(
            "kept the demo's directory: {}\n",
            dir.keep().display()
        ));
    }
    code
}

/// Where the demo's things are, as the screen names them.
#[derive(Debug, Clone)]
pub(super) struct Where {
    /// The demo's temporary directory.
    pub(super) dir: PathBuf,
    /// The log file, when the logs go there (the live table owns the terminal).
    pub(super) logs: Option<PathBuf>,
    /// Whether the directory is kept at the end (`--keep`).
    pub(super) keep: bool,
    /// The `status` command line that reads the demo daemon's status endpoint.
    pub(super) status: Option<String>,
    /// The dashboard's URL on that endpoint (`http://ADDR/`).
    pub(super) dashboard: Option<String>,
}

impl Where {
    /// The lines that name the directory, the logs, the `status` command to try and the
    /// dashboard's URL.
    pub(super) fn lines(&self) -> String {
        let kept = if self.keep {
            "kept at the end (--keep)"
        } else {
            "removed at the end; --keep keeps it"
        };
        let logs = self
            .logs
            .as_ref()
            .map_or("on stderr".to_owned(), |p| p.display().to_string());
        let mut out = format!(
            "demo directory: {} ({kept})\nlogs: {logs}\n",
            self.dir.display()
        );
        if let Some(status) = &self.status {
            out.push_str(&format!("in a second terminal, try: {status}\n"));
        }
        if let Some(dashboard) = &self.dashboard {
            out.push_str(&format!("dashboard, in a browser: {dashboard}\n"));
        }
        out
    }
}

/// The `heartbeat-agent status --url URL` line for the endpoint at `addr`: the program as it
/// was started when `heartbeat-agent` on `$PATH` is not this very binary (a `cargo run`
/// build), so the line works as it is.
fn status_command(addr: std::net::SocketAddr) -> String {
    let this = std::env::current_exe().ok();
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(super::NAME))
            .find(|candidate| candidate.is_file())
    });
    let same = |a: &Path, b: &Path| a.canonicalize().ok() == b.canonicalize().ok();
    let program = match (&this, &on_path) {
        (Some(this), Some(found)) if same(this, found) => super::NAME.to_owned(),
        (Some(this), _) => this.display().to_string(),
        (None, _) => super::NAME.to_owned(),
    };
    format!("{program} status --url http://{addr}")
}

/// The demo daemon's status endpoint on a free loopback port, as `heartbeat-agent daemon`
/// serves it ([`crate::status`]); `None` (the demo goes on without it) when it cannot bind.
fn status_endpoint(
    sync: &crate::sync::SyncStatus,
    client: ApiClient,
    counted: crate::metrics_registry::MetricsRegistry,
) -> Option<(
    std::net::SocketAddr,
    daemon::Task,
    Arc<crate::status::metrics::RunMetrics>,
)> {
    let listen = crate::config::Listen::Tcp(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
    let bound = crate::status::bind(&listen).ok()?;
    let crate::status::server::Bound::Tcp(listener) = &bound else {
        return None;
    };
    let addr = listener.local_addr().ok()?;
    let cell = std::sync::OnceLock::new();
    let _ = cell.set(sync.clone());
    let sources = crate::status::Sources {
        sync: Arc::new(cell),
        remote: crate::status::remote::RemoteView::new(Some(client)),
        metrics: Arc::default(),
        counted,
        cluster: None,
        history: None,
        daemon_id: None,
        identity: None,
    };
    let metrics = Arc::clone(&sources.metrics);
    Some((addr, crate::status::task(bound, sources), metrics))
}

/// The whole demo inside the runtime.
async fn demo(mut where_: Where, duration: Option<Duration>, live: bool) -> Result<(), String> {
    let dir = where_.dir.clone();
    let dir = dir.as_path();
    let key = random_key();
    let emulator = Emulator::start(EmulatorOptions {
        api_key: key.clone(),
        ..EmulatorOptions::default()
    })
    .await
    .map_err(|e| format!("cannot start the emulator: {e}"))?;
    let (text, checks) = fill_template(TEMPLATE, &emulator)?;
    // Before the demo's config exists: the environment's connections (the emulator is local).
    arm(&emulator, &checks, &crate::net::Net::default()).await;
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
    let net = crate::net::Net::new(config.api.net(None));
    let client = |retry| {
        let mut options = ApiClientConfig::new(emulator.base_url(), Secret::new(key.clone()));
        options.account_id = Some(emulator.account().to_owned());
        options.retry = retry;
        // Its own limiter: the table's polling must not take sync's share of the quota.
        options.rate_limiter = Arc::new(RateLimiter::new(Quota::DEFAULT));
        options.net = net.clone();
        ApiClient::new(options).map_err(|e| format!("cannot build the API client: {e}"))
    };
    let ping_urls = LearnedUrls::new(&state_dir);
    let reconciler = Reconciler::sharing(
        Arc::clone(&config),
        client(RetryPolicy::default())?,
        state_dir.clone(),
        ping_urls.clone(),
    );
    let once = RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    };
    let view = View {
        sync: reconciler.status(),
        client: client(once.clone())?,
        checks,
        live,
        daemon: Arc::new(Mutex::new(None)),
        state_dir: state_dir.clone(),
    };
    let (controller, control) = daemon::control::channel();
    let signals = super::assemble::signal_control(controller.clone())
        .map_err(|err| format!("cannot install signal handlers: {err}"))?;
    let mut plugins = Plugins::default();
    if let Some((addr, task, metrics)) = status_endpoint(
        &reconciler.status(),
        client(once.clone())?,
        net.metrics().clone(),
    ) {
        where_.status = Some(status_command(addr));
        where_.dashboard = Some(format!("http://{addr}/"));
        plugins.after_run.push(metrics as Arc<dyn AfterRun>);
        plugins.tasks.push(("status", task));
    }
    plugins.after_run.push(Arc::new(reconciler.clone()));
    plugins
        .tasks
        .push(("sync", super::assemble::sync_task(reconciler, None)));
    plugins.tasks.push((
        "demo table",
        table_task(view.clone(), duration, controller, where_.clone()),
    ));
    if live {
        crate::logging::write_out("heartbeat-agent demo: starting (Ctrl-C to stop) ...\n");
    } else {
        crate::logging::write_out(&format!("heartbeat-agent demo\n{}", where_.lines()));
    }
    let options = Options {
        config_path: path,
        state_dir,
        ping_urls,
        admission: None,
        net,
    };
    daemon::run(options, Arc::clone(&config), plugins, control).await;
    signals.stop().await;
    let last = view.rows(&config).await;
    crate::logging::write_out("final status:\n");
    crate::logging::write_out(&format!(
        "{}{}",
        render(&last, Utc::now(), live),
        table::LEGEND
    ));
    emulator.shutdown().await;
    Ok(())
}

/// Arms every demo check with one ping, as checks that once worked: under the service's timer
/// a check never pinged never fails, and the demo's failing jobs must show an alarm. Their
/// checks (period 30 s, no grace, config/demo.toml) are `FAILING` about 35 s after sync's first
/// `PUT`, which restarts the timer when it is saved.
async fn arm(emulator: &EmulatorHandle, checks: &CheckIds, net: &crate::net::Net) {
    let sender = crate::ping::Sender::new(net.clone());
    for id in checks.values() {
        let url = emulator
            .heartbeat_check(id)
            .and_then(|c| c["heartbeat"]["pingUrl"].as_str().map(str::to_owned));
        let ping =
            url.and_then(|u| crate::ping::Ping::new(&u, crate::ping::PingMethod::Get, "demo").ok());
        if let Some(ping) = ping {
            crate::ping::send(&sender, &ping, &crate::ping::Budget::default()).await;
        }
    }
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

mod table;

use table::{render, table_task, View};

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
}
