//! `heartbeat-agent daemon`: load and validate the config (exit 78 with every problem on
//! stderr; also when another live agent of its cluster has its node name), then run the daemon
//! until SIGTERM/SIGINT (exit 0).

use std::sync::Arc;

use clap::Args;
use tracing::{error, info, warn};

use super::{assemble, config_watch, context, print_error, GlobalArgs};
use crate::config::Config;
use crate::daemon::{self, Options, Plugins};
use crate::exit;
use crate::run::AfterRun;

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
    let path = crate::paths::config_file(global.config.as_ref());
    let loaded = match Config::load(&path) {
        Ok(loaded) => loaded,
        Err(err) => return context::invalid_config(&path, &err, "; the daemon did not start"),
    };
    for warning in &loaded.warnings {
        warn!("{warning}");
    }
    // The connections of every client the daemon makes; a reload keeps them.
    let net = crate::net::Net::new(loaded.config.api.net(None));
    let state_dir = loaded.config.state_dir(global.state_dir.as_deref());
    if let Err(message) = crate::paths::check_state_dir(&state_dir) {
        print_error(format!("{message}; the daemon did not start"));
        return exit::FAILURE;
    }
    // Made before the bind: a daemon that cannot bind has still marked its state directory,
    // so its commands refuse whichever daemon holds the port (`status::owner`).
    let daemon_id = match crate::status::owner::DaemonId::load_or_create(&state_dir) {
        Ok(id) => Some(id),
        Err(err) => {
            warn!(
                "cannot keep the daemon's id in {}: {err}; the status endpoint names only its \
                 config file, so `status` cannot tell this daemon from another of the same file; \
                 make the state directory writable",
                state_dir
                    .join(crate::status::owner::DAEMON_ID_FILE)
                    .display()
            );
            None
        }
    };
    let identity = match crate::identity::Identity::of(&state_dir, &path) {
        Ok(identity) => identity,
        Err(err) => {
            print_error(format!(
                "this machine has no machine id ({}) and the state directory {} cannot keep the \
                 agent's generated identity: {err}; make it writable; the daemon did not start",
                crate::identity::MACHINE_ID_FILE,
                state_dir.display()
            ));
            return exit::FAILURE;
        }
    };
    info!(identity = %identity, "agent identity");
    let cluster = match loaded
        .config
        .cluster
        .as_ref()
        .map(|settings| crate::cluster::Node::new(settings, identity.clone(), &net))
    {
        None => None,
        Some(Ok(node)) => Some(node),
        Some(Err(err)) => {
            print_error(format!("{err}; the daemon did not start"));
            return exit::CONFIG;
        }
    };
    let options = Options {
        admission: cluster
            .clone()
            .map(|node| Arc::new(crate::cluster::Claims::new(node)) as _),
        ping_urls: crate::sync::LearnedUrls::new(&state_dir),
        state_dir,
        config_path: path,
        net,
    };
    // Jobs are spawned from the spawner threads (from the runtime's threads when none could
    // start): every one of those threads makes its children start at the default priority
    // even when the daemon was given a higher one (see the function). The spawners start
    // here, before any thread of the daemon asks for that, so they keep the daemon's own.
    crate::process::children::start_spawners();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_start(crate::process::children_at_default_priority)
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            print_error(format!("cannot start the async runtime: {err}"));
            return exit::FAILURE;
        }
    };
    // After the workers exist (they would start at the default priority themselves otherwise).
    crate::process::children_at_default_priority();
    if let Some(node) = &cluster {
        if let Err(err) = runtime.block_on(node.refuse_duplicate()) {
            print_error(format!(
                "{}: {err}; the daemon did not start",
                options.config_path.display()
            ));
            return exit::CONFIG;
        }
    }
    let config = Arc::new(loaded.config);
    // Bound before the daemon starts, so READY=1 means the status endpoint answers.
    // A failed bind of an explicit `listen` is fatal; of the implicit default only a warning.
    let bound = match crate::status::bind(&config.status.listen) {
        Ok(bound) => Some(bound),
        Err(err) if !config.status.listen_configured => {
            // An error, not a warning: `status`, `health` and `trigger` cannot reach this
            // daemon, and whatever holds the port answers them instead (they refuse it).
            error!(
                "{err}; running WITHOUT the status endpoint: `status`, `health` and `trigger` \
                 cannot reach this daemon"
            );
            None
        }
        Err(err) => {
            print_error(format!("{err}; the daemon did not start"));
            return exit::FAILURE;
        }
    };
    let mut plugins = Plugins::default();
    // In a cluster only the leader syncs (docs/cluster.md); `[cluster]` is read at start. The
    // election shares the node's etcd client (one connection pool, one error count) and its
    // lease (one lease per agent, kept by the node's task).
    let (gate, view) = match (&cluster, &config.cluster) {
        (Some(node), Some(settings)) => {
            let (gate, view) = assemble::cluster_sync(node, settings, &options, &mut plugins);
            (Some(gate), Some(Arc::new(view) as _))
        }
        _ => (None, None),
    };
    let reconciler = reconciler(&config, &options, global);
    let sync_status = Arc::new(std::sync::OnceLock::new());
    if let Some(reconciler) = &reconciler {
        let _ = sync_status.set(reconciler.status());
        plugins.after_run.push(Arc::new(reconciler.clone()));
        plugins
            .tasks
            .push(("sync", assemble::sync_task(reconciler.clone(), gate)));
    } else {
        // A reload may bind the first job to a check: sync starts then.
        let deferred = Arc::new(assemble::DeferredSync::new(Arc::clone(&sync_status), gate));
        plugins
            .after_run
            .push(Arc::clone(&deferred) as Arc<dyn AfterRun>);
        let (options, global) = (options.clone(), global.clone());
        let build = move |config: &Arc<Config>| self::reconciler(config, &options, &global);
        plugins.tasks.push(("sync", deferred.task(build)));
    }
    let client = context::remote_client(&config, global, &options.net);
    let sources = crate::status::Sources {
        sync: sync_status,
        remote: crate::status::remote::RemoteView::new(client),
        metrics: Arc::default(),
        cluster: view,
        daemon_id,
        identity: Some(identity),
    };
    plugins
        .after_run
        .push(Arc::clone(&sources.metrics) as Arc<dyn AfterRun>);
    if let Some(bound) = bound {
        plugins
            .tasks
            .push(("status", crate::status::task(bound, sources)));
    }
    let (controller, control) = daemon::control::channel();
    plugins.tasks.push((
        "config watch",
        config_watch::task(&options.config_path, controller.clone()),
    ));
    let result = runtime.block_on(async {
        let signals = assemble::signal_control(controller)
            .map_err(|err| format!("cannot install signal handlers: {err}"))?;
        let ended = daemon::run(options, config, plugins, control).await;
        signals.stop().await;
        Ok::<_, String>(ended)
    });
    match result {
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
