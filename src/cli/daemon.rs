//! `heartbeat-agent daemon`: load and validate the config (exit 78 with every problem on
//! stderr; also when another live agent of its cluster has its node name), then run the daemon
//! until SIGTERM/SIGINT (exit 0).

use std::path::Path;
use std::sync::{Arc, OnceLock};

use clap::Args;
use tracing::{error, info, warn};

use super::{assemble, config_watch, context, print_error, GlobalArgs};
use crate::cluster::relay::SyncGate;
use crate::cluster::{Claims, Node};
use crate::config::Config;
use crate::daemon::control::{ControlReceiver, Controller};
use crate::daemon::{self, Options, Plugins};
use crate::exit;
use crate::identity::Identity;
use crate::net::Net;
use crate::run::AfterRun;
use crate::status::owner::DaemonId;
use crate::status::remote::RemoteView;
use crate::sync::SyncStatus;

/// Run and watch the config's jobs on their cron schedules and ping each job's check on success.
///
/// Reloads the config on SIGHUP and when the file's content changes (its directory is watched,
/// so a Kubernetes ConfigMap update is seen); an invalid one is logged and the running one
/// kept. Stops on
/// SIGTERM or SIGINT, giving running jobs `shutdown_timeout` before SIGKILL. Under systemd use
/// `Type=notify`. Exit status: 0 after an orderly stop, 78 when the config is invalid (or, in a
/// cluster, another live agent has this agent's node name), 1 when the daemon cannot start.
#[derive(Debug, Args)]
pub struct DaemonArgs {}

/// Runs the daemon; returns the exit code.
pub fn run(_args: DaemonArgs, global: &GlobalArgs) -> u8 {
    daemon::tune_malloc();
    daemon::raise_open_files_limit();
    match Resolved::resolve(global) {
        Ok(resolved) => resolved.run(),
        Err(code) => code,
    }
}

/// Everything the daemon runs with, resolved before it starts: the validated config, where it
/// keeps its state and who it is (in [`Options`]), the runtime, and its plug-ins (sync, the
/// status endpoint already bound, the config watch, in a `[cluster]` the cluster's tasks and
/// hook). Whatever cannot be resolved stops the start with its exit code.
struct Resolved {
    config: Arc<Config>,
    options: Options,
    runtime: tokio::runtime::Runtime,
    plugins: Plugins,
    /// The control channel: the signals send through `controller` (installed when the daemon
    /// runs), the config watch through a clone of it.
    controller: Controller,
    control: ControlReceiver,
}

/// Why the start was refused: the exit code, the message already printed.
type Refused = u8;

impl Resolved {
    /// Resolves the config, the state directory, the daemon's id and identity, the cluster
    /// node, the runtime, the status endpoint's bind and the plug-ins, in that order.
    fn resolve(global: &GlobalArgs) -> Result<Resolved, Refused> {
        let (path, loaded) = load(global)?;
        // The connections of every client the daemon makes; a reload keeps them.
        let net = crate::net::Net::new(loaded.api.net(None));
        let state_dir = loaded.state_dir(global.state_dir.as_deref());
        crate::paths::check_state_dir(&state_dir)
            .map_err(|message| refuse(message, exit::FAILURE))?;
        // Made before the bind: a daemon that cannot bind has still marked its state
        // directory, so its commands refuse whichever daemon holds the port (`status::owner`).
        let daemon_id = daemon_id(&state_dir);
        let identity = identity(&state_dir, &path)?;
        let node = node(&loaded, &identity, &net)?;
        let options = Options {
            admission: node.clone().map(|node| Arc::new(Claims::new(node)) as _),
            ping_urls: crate::sync::LearnedUrls::new(&state_dir),
            state_dir,
            config_path: path,
            net,
        };
        let runtime = runtime()?;
        if let Some(node) = &node {
            runtime.block_on(node.refuse_duplicate()).map_err(|err| {
                let path = options.config_path.display();
                refuse(format!("{path}: {err}"), exit::CONFIG)
            })?;
        }
        let config = Arc::new(loaded);
        let endpoint = Endpoint {
            bound: bind(&config)?,
            daemon_id,
            identity,
        };
        let (controller, control) = daemon::control::channel();
        let plugins = plugins(&config, &options, global, node, &controller, endpoint);
        Ok(Resolved {
            config,
            options,
            runtime,
            plugins,
            controller,
            control,
        })
    }

    /// Runs the daemon until it is stopped; the exit code.
    fn run(self) -> u8 {
        let Resolved {
            config,
            options,
            runtime,
            plugins,
            controller,
            control,
        } = self;
        let ended = runtime.block_on(async {
            let signals = assemble::signal_control(controller)
                .map_err(|err| format!("cannot install signal handlers: {err}"))?;
            let ended = daemon::run(options, config, plugins, control).await;
            signals.stop().await;
            Ok::<_, String>(ended)
        });
        match ended {
            Ok(daemon::DaemonEnd::Stopped) => {
                // A probe stuck on a hung file system must not hold the exit.
                runtime.shutdown_timeout(std::time::Duration::from_secs(1));
                exit::OK
            }
            Ok(daemon::DaemonEnd::Killed) => {
                runtime.shutdown_background();
                exit::INTERRUPTED
            }
            Err(message) => {
                print_error(message);
                exit::FAILURE
            }
        }
    }
}

/// What the status endpoint is given besides the plug-ins' figures: its listener (`None`: no
/// endpoint), the daemon's id and the agent's identity.
struct Endpoint {
    bound: Option<crate::status::server::Bound>,
    daemon_id: Option<DaemonId>,
    identity: Identity,
}

/// The daemon's plug-ins: the config watch (sending through `controller`), in a cluster the
/// cluster's tasks and hook, sync, and the status endpoint with its run counters.
fn plugins(
    config: &Arc<Config>,
    options: &Options,
    global: &GlobalArgs,
    node: Option<Arc<Node>>,
    controller: &Controller,
    endpoint: Endpoint,
) -> Plugins {
    let mut plugins = Plugins::default();
    let watch = config_watch::task(&options.config_path, controller.clone());
    plugins.tasks.push(("config watch", watch));
    // In a cluster only the leader syncs (docs/cluster.md); `[cluster]` is read at start.
    let (gate, view) = node
        .zip(config.cluster.as_ref())
        .map(|(node, settings)| assemble::cluster_sync(&node, settings, options, &mut plugins))
        .unzip();
    let sync = sync_plugins(config, options, global, gate, &mut plugins);
    let sources = crate::status::Sources {
        sync,
        remote: RemoteView::new(context::remote_client(config, global, &options.net)),
        metrics: Arc::default(),
        counted: options.net.metrics().clone(),
        cluster: view.map(|view| Arc::new(view) as _),
        history: plugins.history.clone(),
        daemon_id: endpoint.daemon_id,
        identity: Some(endpoint.identity),
    };
    plugins
        .after_run
        .push(Arc::clone(&sources.metrics) as Arc<dyn AfterRun>);
    if let Some(bound) = endpoint.bound {
        let status = crate::status::task(bound, sources);
        plugins.tasks.push(("status", status));
    }
    plugins
}

/// Prints why the daemon did not start; `code` is its exit code.
fn refuse(message: impl std::fmt::Display, code: u8) -> Refused {
    print_error(format!("{message}; the daemon did not start"));
    code
}

/// The config file and its validated content (its warnings logged).
fn load(global: &GlobalArgs) -> Result<(std::path::PathBuf, Config), Refused> {
    let path = crate::paths::config_file(global.config.as_ref());
    let loaded = Config::load(&path)
        .map_err(|err| context::invalid_config(&path, &err, "; the daemon did not start"))?;
    for warning in &loaded.warnings {
        warn!("{warning}");
    }
    Ok((path, loaded.config))
}

/// The daemon's id, kept in the state directory; `None` (warned) when it cannot be kept.
fn daemon_id(state_dir: &Path) -> Option<DaemonId> {
    DaemonId::load_or_create(state_dir)
        .map_err(|err| {
            warn!(
                "cannot keep the daemon's id in {}: {err}; the status endpoint names only its \
                 config file, so `status` cannot tell this daemon from another of the same file; \
                 make the state directory writable",
                state_dir
                    .join(crate::status::owner::DAEMON_ID_FILE)
                    .display()
            );
        })
        .ok()
}

/// The agent's identity (the machine's id, or one generated and kept in the state directory).
fn identity(state_dir: &Path, config: &Path) -> Result<Identity, Refused> {
    let identity = Identity::of(state_dir, config).map_err(|err| {
        let message = format!(
            "this machine has no machine id ({}) and the state directory {} cannot keep the \
             agent's generated identity: {err}; make it writable",
            crate::identity::MACHINE_ID_FILE,
            state_dir.display()
        );
        refuse(message, exit::FAILURE)
    })?;
    info!(identity = %identity, "agent identity");
    Ok(identity)
}

/// In a `[cluster]`: this agent's node (asks etcd nothing yet).
fn node(config: &Config, identity: &Identity, net: &Net) -> Result<Option<Arc<Node>>, Refused> {
    let Some(settings) = &config.cluster else {
        return Ok(None);
    };
    Node::new(settings, identity.clone(), net)
        .map(Some)
        .map_err(|err| refuse(err, exit::CONFIG))
}

/// The runtime: one thread runs every task (job tasks, runs, pings, the status endpoint), its
/// blocking pool's threads' children at the default priority.
///
/// One thread, not tokio's multi-thread scheduler: the daemon's work is waiting (timers, pipes,
/// sockets), and the costly part of a run, the spawn, happens on the spawner threads. The
/// multi-thread scheduler's `pow` (its poll-time average) made every process of the binary
/// load libm (512 KiB of the 100-job daemon's RSS), and its workers' allocations a second
/// malloc arena (about 0.9 MiB after a 1,000-job burst). Measured side by side against it
/// (`scripts/bench-burst.sh 3`, 1,000 jobs due together): p99 start delay over the C floor
/// 0.867 against 0.913, CPU per run 0.64 against 0.66 ms (medians; within the noise).
fn runtime() -> Result<tokio::runtime::Runtime, Refused> {
    // Jobs are spawned from the spawner threads (from the runtime's threads when none could
    // start): every one of those threads makes its children start at the default priority
    // even when the daemon was given a higher one (see the function). The spawners start
    // here, before any thread of the daemon asks for that, so they keep the daemon's own.
    crate::process::children::start_spawners();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .on_thread_start(crate::process::children_at_default_priority)
        .build()
        .map_err(|err| {
            print_error(format!("cannot start the async runtime: {err}"));
            exit::FAILURE
        })?;
    // After the workers exist (they would start at the default priority themselves otherwise).
    crate::process::children_at_default_priority();
    Ok(runtime)
}

/// The status endpoint's listener, bound before the daemon starts so that READY=1 means it
/// answers. A failed bind of an explicit `listen` is fatal; of the implicit default only an
/// error in the log (`None`).
fn bind(config: &Config) -> Result<Option<crate::status::server::Bound>, Refused> {
    match crate::status::bind(&config.status.listen) {
        Ok(bound) => Ok(Some(bound)),
        Err(err) if !config.status.listen_configured => {
            // An error, not a warning: `status`, `health` and `trigger` cannot reach this
            // daemon, and whatever holds the port answers them instead (they refuse it).
            error!(
                "{err}; running WITHOUT the status endpoint: `status`, `health` and `trigger` \
                 cannot reach this daemon"
            );
            Ok(None)
        }
        Err(err) => Err(refuse(err, exit::FAILURE)),
    }
}

/// Sync's task and after-run hook: the engine now when a job is bound to a check, otherwise
/// deferred until a reload binds one; in a cluster (`gate`) its passes run only on the leader.
/// Returns where the status endpoint finds sync's status.
fn sync_plugins(
    config: &Arc<Config>,
    options: &Options,
    global: &GlobalArgs,
    gate: Option<SyncGate>,
    plugins: &mut Plugins,
) -> Arc<OnceLock<SyncStatus>> {
    let status = Arc::new(OnceLock::new());
    if let Some(reconciler) = reconciler(config, options, global) {
        let _ = status.set(reconciler.status());
        plugins.after_run.push(Arc::new(reconciler.clone()));
        plugins
            .tasks
            .push(("sync", assemble::sync_task(reconciler, gate)));
    } else {
        let deferred = Arc::new(assemble::DeferredSync::new(Arc::clone(&status), gate));
        plugins
            .after_run
            .push(Arc::clone(&deferred) as Arc<dyn AfterRun>);
        let (options, global) = (options.clone(), global.clone());
        let build = move |config: &Arc<Config>| self::reconciler(config, &options, &global);
        plugins.tasks.push(("sync", deferred.task(build)));
    }
    status
}

/// The sync engine, when a job is bound to a check and the API can be reached; otherwise
/// nothing is synced (logged: pings to already learned URLs go on).
fn reconciler(
    config: &Arc<Config>,
    options: &Options,
    global: &GlobalArgs,
) -> Option<crate::sync::Reconciler> {
    let bound = config.jobs.iter().any(|job| job.has_synced_check());
    if !bound {
        info!("no job is bound to a check (check_id or create = true): check sync is off until a reload binds one");
        return None;
    }
    let net = options.net.clone();
    match context::config_client(config.api.clone(), &options.config_path, global, net) {
        // The reconciler makes one attempt per request and paces itself (see Reconciler::new).
        Ok(client) => Some(crate::sync::Reconciler::sharing(
            Arc::clone(config),
            client,
            options.state_dir.clone(),
            options.ping_urls.clone(),
        )),
        Err((_, message)) => {
            warn!("check sync is off: {message}");
            None
        }
    }
}
