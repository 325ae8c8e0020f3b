//! The daemon's main task: start the jobs, tell systemd, obey its control requests (reload,
//! stop), feed the watchdog, and shut down in order.
//!
//! Shutdown (a stop request: SIGTERM or SIGINT under `cli/`): `STOPPING=1`, job tasks stop
//! scheduling, every running command gets SIGTERM to its process group and SIGKILL after
//! `shutdown_timeout`, background tasks are cancelled; the daemon waits for all of it (bounded),
//! then joins the history's writer thread (bounded too) and returns. A kill request (a second SIGINT) kills every job's group at once and returns
//! [`DaemonEnd::Killed`] without waiting.
//!
//! Reload (a reload request: SIGHUP): `RELOADING=1`, the file is read again; if it is invalid,
//! every problem is logged and the running config stays. Otherwise unchanged jobs keep their
//! task, state and running processes; removed jobs stop being scheduled (a run in progress
//! finishes); changed jobs are rescheduled with their state kept. Then `READY=1`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, error, info, warn};

use super::control::{self, ControlReceiver, Request};
use super::hooks::{Context, Plugins};
use super::job::{self, JobTask, Settings, Shared};
use super::notify::Notifier;
use super::state::{boot_id, DaemonState, Persisted};
use super::view::DaemonView;
use super::{DaemonEnd, Options};
use crate::config::{Config, Job, JobAction};
use crate::ping::outbox::{self, DrainOptions, Outbox};
use crate::process::children::{self, Children};
use crate::run_end::RunOutcome;

/// Extra time over `shutdown_timeout` for runs to report and tasks to end.
const SHUTDOWN_SLACK: Duration = Duration::from_secs(5);

/// How often the outbox drainer looks for pings left by `run` (other processes).
const DRAIN_POLL: Duration = Duration::from_secs(5);

/// How often the main loop ticks without a watchdog (it only proves liveness).
const IDLE_TICK: Duration = Duration::from_secs(60);

/// A job as scheduled: its definition and the token that stops its task.
struct Scheduled {
    job: Arc<Job>,
    cancel: CancellationToken,
}

/// The supervisor's own state.
struct Supervisor {
    options: Options,
    shared: Arc<Shared>,
    jobs: HashMap<String, Scheduled>,
    /// Parent of every job task's token.
    scheduling: CancellationToken,
    /// Job tasks and background tasks.
    tasks: TaskTracker,
    config: watch::Sender<Arc<Config>>,
    notifier: Notifier,
}

/// Runs the daemon with an already validated `config` until `control` asks it to stop.
pub(crate) async fn run(
    options: Options,
    config: Arc<Config>,
    plugins: Plugins,
    mut control: ControlReceiver,
) -> DaemonEnd {
    let notifier = Notifier::from_env();
    // The failed writes under the state directory, counted where the status endpoint reads
    // them (the registry of the daemon's connections).
    let failures = options.net.metrics().persist_failures();
    let shared = Arc::new(Shared {
        settings: RwLock::new(Arc::new(settings(&config))),
        ping_urls: options.ping_urls.clone(),
        admission: options.admission.clone(),
        persisted: Persisted::new(&options.state_dir, failures),
        history: crate::history::Recorder::start(crate::history::History::with_cluster(
            &options.state_dir,
            plugins.history.clone(),
            failures,
        )),
        outbox: Outbox::new(
            &options.state_dir,
            config.agent.outbox_max_entries,
            failures,
        ),
        pings: crate::ping::Sender::new(options.net.clone()),
        state: Arc::new(DaemonState::default()),
        probes: std::sync::OnceLock::new(),
        children: Arc::new(Children::new(children::inherits_orphans())),
        after_run: plugins.after_run,
        runs: TaskTracker::new(),
        runs_idle: tokio::sync::Notify::new(),
        stop_runs: CancellationToken::new(),
        host: crate::host::name(),
        boot_id: boot_id()
            .inspect_err(
                |err| warn!(error = %err, "cannot read the boot id; @reboot jobs will not run"),
            )
            .ok(),
    });
    open_history(&shared, &config);
    let (config_tx, _) = watch::channel(Arc::clone(&config));
    let mut supervisor = Supervisor {
        options,
        shared,
        jobs: HashMap::new(),
        scheduling: CancellationToken::new(),
        tasks: TaskTracker::new(),
        config: config_tx,
        notifier,
    };
    supervisor.apply(&config);
    super::release_free_memory();
    let background = CancellationToken::new();
    supervisor.start_background(plugins.tasks, &background);
    // The status listener was bound by the caller and runs as a background task, so READY=1
    // means it answers.
    let count = supervisor.jobs.len();
    let _ = supervisor.notifier.ready();
    let _ = supervisor.notifier.status(&format!("running {count} jobs"));
    info!(jobs = count, pid = std::process::id(), "daemon started");
    let stop = supervisor.main_loop(&mut control).await;
    supervisor.shutdown(stop, &mut control, background).await
}

/// At start: removes the history of jobs that left the configuration more than
/// `history_keep_removed` ago, and seeds each job's strip with its last runs.
fn open_history(shared: &Shared, config: &Config) {
    let names: HashSet<&str> = config.jobs.iter().map(|j| j.name.as_str()).collect();
    let history = shared.history.history();
    history.prune_removed(&names, config.agent.history_keep_removed);
    for job in config.jobs.iter().filter(|j| j.history > 0) {
        let outcomes = history.recent_outcomes(&job.name, super::state::RECENT);
        let outcomes = outcomes.iter().filter_map(|o| RunOutcome::named(o));
        shared.state.entry(&job.name).seed_recent(outcomes);
    }
}

fn settings(config: &Config) -> Settings {
    Settings {
        shutdown_timeout: config.agent.shutdown_timeout,
        secret_env: config.secret_env_vars(),
        outbox_max_age: config.agent.outbox_max_age,
    }
}

impl Supervisor {
    /// Waits for a stop request, reloading when asked and feeding the watchdog; returns what
    /// asked to stop.
    async fn main_loop(&mut self, control: &mut ControlReceiver) -> &'static str {
        let watchdog = self.notifier.watchdog_interval();
        let mut tick = tokio::time::interval(watchdog.unwrap_or(IDLE_TICK));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                request = control::next(control) => match request {
                    Request::Reload => self.reload(),
                    Request::Stop { by } => return by,
                    Request::Kill => return "kill request",
                },
                _ = tick.tick() => {
                    // This loop is where scheduling is controlled: if it (or the runtime) is
                    // stuck, the ticks stop and systemd's watchdog restarts the daemon.
                    self.shared.state.beat(watchdog.unwrap_or(IDLE_TICK));
                    if watchdog.is_some() {
                        if let Err(err) = self.notifier.watchdog() {
                            debug!(error = %err, "watchdog notification failed");
                        }
                    }
                }
            }
        }
    }

    /// Starts, keeps, reschedules or drops job tasks to match `config`.
    fn apply(&mut self, config: &Config) {
        let names: HashSet<&str> = config.jobs.iter().map(|j| j.name.as_str()).collect();
        self.jobs.retain(|name, scheduled| {
            let keep = names.contains(name.as_str());
            if !keep {
                info!(job = %name, "job removed: no longer scheduled (a run in progress finishes)");
                scheduled.cancel.cancel();
            }
            keep
        });
        self.shared.state.retain(&names);
        // Every job's output leaves the process (its log lines, its recorded tail, a fail
        // ping's body): it is scrubbed of the API key even when nothing else here reads the
        // key (no `[api] base_url`, no bound check).
        crate::run::pings::learn_api_key(&config.api.api_key);
        for job in &config.jobs {
            match self.jobs.get(&job.name) {
                Some(current) if Arc::ptr_eq(&current.job, job) || current.job == *job => continue,
                Some(current) => {
                    info!(job = %job.name, "job changed: rescheduled");
                    current.cancel.cancel();
                }
                None => debug!(job = %job.name, schedule = %job.schedule, "job added"),
            }
            let scheduled = self.start_job(Arc::clone(job));
            self.jobs.insert(job.name.clone(), scheduled);
        }
    }

    /// Starts the task of one job (none for external and disabled jobs, which are only shown).
    fn start_job(&self, job: Arc<Job>) -> Scheduled {
        let state = self.shared.state.entry(&job.name);
        let cancel = self.scheduling.child_token();
        if !job.enabled {
            info!(job = %job.name, "job disabled: not scheduled");
        } else if job.action == JobAction::External {
            debug!(job = %job.name, "external job: run elsewhere, not by the daemon");
        } else {
            let task = JobTask {
                job: Arc::clone(&job),
                shared: Arc::clone(&self.shared),
                state,
            };
            self.tasks.spawn(job::run(task, cancel.clone()));
        }
        Scheduled { job, cancel }
    }

    fn start_background(
        &self,
        tasks: Vec<(&'static str, super::Task)>,
        cancel: &CancellationToken,
    ) {
        let jobs = Arc::clone(&self.shared.state);
        self.tasks
            .spawn(job::watch_clock(jobs, self.scheduling.child_token()));
        let shared = Arc::clone(&self.shared);
        self.tasks
            .spawn(job::trim_when_quiet(shared, self.scheduling.child_token()));
        if children::inherits_orphans() {
            let children = Arc::clone(&self.shared.children);
            self.tasks.spawn(children::reap(children, cancel.clone()));
        }
        // Pings that could not be delivered (by a run of ours, or by `run` from cron).
        // Entries the daemon stores are noticed at once; the poll is only for entries left by
        // `run`, and a slower one keeps an idle daemon idle.
        let options = DrainOptions {
            poll: DRAIN_POLL,
            ..DrainOptions::default()
        };
        let drainer = outbox::drain(
            self.shared.pings.clone(),
            self.shared.outbox.clone(),
            cancel.clone(),
            options,
        );
        self.tasks.spawn(drainer);
        // Pauses set without the daemon (`pause` writes the file itself) count at once.
        let pauses = Arc::clone(self.shared.persisted.pauses());
        self.tasks.spawn(pauses.watch(cancel.clone()));
        for (name, task) in tasks {
            let context = Context {
                config: self.config.subscribe(),
                view: DaemonView::of(Arc::clone(&self.shared.state)),
                state_dir: self.options.state_dir.clone(),
                pauses: Arc::clone(self.shared.persisted.pauses()),
            };
            let future = task(context, cancel.clone());
            self.tasks.spawn(async move {
                future.await;
                debug!(task = name, "background task ended");
            });
        }
    }

    fn reload(&mut self) {
        let _ = self.notifier.reloading();
        let path = &self.options.config_path;
        info!(config = %path.display(), "reloading the configuration");
        match Config::load(path) {
            Err(err) => {
                for problem in &err.problems {
                    error!(problem = %problem, "invalid configuration");
                }
                self.shared.state.count_reload(Err(&err.problems));
                error!(
                    config = %path.display(),
                    problems = err.problems.len(),
                    "reload failed: the configuration is invalid; keeping the running one"
                );
            }
            Ok(loaded) => {
                for warning in &loaded.warnings {
                    warn!("{warning}");
                }
                let config = loaded.config;
                if config.state_dir(None) != self.options.state_dir
                    && config.agent.state_dir.is_some()
                {
                    warn!("state_dir changed: it takes effect at the next start");
                }
                if config.cluster != self.config.borrow().cluster {
                    warn!("[cluster] changed: it takes effect at the next start");
                }
                let next = settings(&config).keeping_secrets_of(&self.shared.settings());
                *self
                    .shared
                    .settings
                    .write()
                    .unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
                self.apply(&config);
                self.config.send_replace(Arc::new(config));
                self.shared.state.count_reload(Ok(()));
                info!(jobs = self.jobs.len(), "configuration reloaded");
                super::release_free_memory();
            }
        }
        let _ = self.notifier.ready();
    }

    async fn shutdown(
        self,
        stop: &'static str,
        control: &mut ControlReceiver,
        background: CancellationToken,
    ) -> DaemonEnd {
        let _ = self.notifier.stopping();
        let timeout = self.shared.settings().shutdown_timeout;
        let running = self.shared.children.running();
        info!(signal = %stop, running, timeout = ?timeout, "stopping: running jobs get SIGTERM, then SIGKILL after the shutdown timeout");
        let _ = self.notifier.extend_timeout(timeout + SHUTDOWN_SLACK);
        self.scheduling.cancel();
        self.shared.stop_runs.cancel();
        background.cancel();
        self.tasks.close();
        self.shared.runs.close();
        let all_done = async {
            self.shared.runs.wait().await;
            self.tasks.wait().await;
            self.shared.outbox.durable().await;
        };
        let deadline = tokio::time::sleep(timeout + SHUTDOWN_SLACK);
        tokio::pin!(all_done, deadline);
        let mut open = true;
        loop {
            tokio::select! {
                () = &mut all_done => break,
                () = &mut deadline => {
                    warn!("shutdown took too long; exiting with tasks still running");
                    self.shared.children.signal_all(Signal::SIGKILL);
                    break;
                }
                request = control.recv(), if open => match request {
                    Some(Request::Kill) => {
                        warn!("asked again to stop: killing every job and exiting now");
                        self.shared.children.signal_all(Signal::SIGKILL);
                        return DaemonEnd::Killed;
                    }
                    Some(_) => {}
                    None => open = false,
                }
            }
        }
        // The runs' records handed to the history's writer reach the disk and its thread is
        // joined before the exit; within a bound, past which it is left (a hung file system).
        let shared = Arc::clone(&self.shared);
        let _ = tokio::task::spawn_blocking(move || shared.history.finish(HISTORY_FLUSH)).await;
        info!("daemon stopped");
        DaemonEnd::Stopped
    }
}

/// How long the shutdown waits for the history's writer to write what it holds and end.
const HISTORY_FLUSH: Duration = Duration::from_secs(2);
