//! Assembling a daemon from its parts: the control source (the process's signals turned into
//! stop and reload requests, forwarded until the caller stops it), the sync engine wired in as
//! a plug-in (its background task, its after-run hook, and the deferred start when no job is
//! bound to a check yet), and in a `[cluster]` the cluster's tasks, hook and the view status
//! reads of it. Used by `daemon` and by `demo`, which embeds one; the daemon itself knows
//! neither signals nor the sync engine (only the ping URLs sync learned).

use std::sync::{Arc, OnceLock};
use std::task::Poll;

use chrono::{DateTime, Utc};
use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;

use crate::cluster::leader::Election;
use crate::cluster::relay::{self, Relay, SharedState, SyncGate};
use crate::cluster::runs::SharedRuns;
use crate::cluster::{Keys, Node, View};
use crate::config::{ClusterSettings, Config, Job};
use crate::daemon::control::{Controller, Request};
use crate::daemon::{Context, Plugins, Task};
use crate::run::AfterRun;
use crate::sync::{Reconciler, SyncStatus};

/// The daemon's control source from this process's signals: SIGTERM and SIGINT stop it,
/// SIGHUP reloads the config, and a SIGINT after a stop kills every job at once (a second
/// Ctrl-C), each sent through `controller`. Installed here, before the daemon says `READY=1`,
/// so no signal is lost (or kills the process) once systemd thinks it runs. Must be called
/// inside the runtime. The task forwards signals until [`Signals::stop`], which the caller
/// awaits once the daemon has returned (it outlives the daemon's own shutdown, through which a
/// second Ctrl-C must still reach it).
pub(crate) fn signal_control(controller: Controller) -> std::io::Result<Signals> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    let cancel = CancellationToken::new();
    let stopped = cancel.clone();
    let task = tokio::spawn(async move {
        let mut stopping = false;
        loop {
            let received = std::future::poll_fn(|cx| {
                if let Poll::Ready(Some(())) = term.poll_recv(cx) {
                    return Poll::Ready(Request::Stop { by: "SIGTERM" });
                }
                if let Poll::Ready(Some(())) = int.poll_recv(cx) {
                    return Poll::Ready(Request::Stop { by: "SIGINT" });
                }
                if let Poll::Ready(Some(())) = hup.poll_recv(cx) {
                    return Poll::Ready(Request::Reload);
                }
                Poll::Pending
            });
            let received = tokio::select! {
                () = stopped.cancelled() => return,
                received = received => received,
            };
            let request = match received {
                Request::Stop { by: "SIGINT" } if stopping => Request::Kill,
                Request::Stop { .. } if stopping => continue,
                other => other,
            };
            stopping |= matches!(request, Request::Stop { .. });
            if controller.send(request).is_err() {
                return;
            }
        }
    });
    Ok(Signals { task, cancel })
}

/// The task that turns signals into control requests ([`signal_control`]).
pub(crate) struct Signals {
    task: tokio::task::JoinHandle<()>,
    cancel: CancellationToken,
}

impl Signals {
    /// Stops forwarding signals and waits for the task to end (at once: it waits for nothing
    /// else than a signal or this).
    pub(crate) async fn stop(self) {
        self.cancel.cancel();
        let _ = self.task.await;
    }
}

impl AfterRun for Reconciler {
    fn after_run(&self, job: &Job, fire: DateTime<Utc>, ping_accepted: bool) {
        Reconciler::after_run(self, &job.name, fire, ping_accepted);
    }
}

/// The sync engine as a daemon task: [`crate::sync::Reconciler::run`], told about every
/// successful reload; in a cluster (`gate`), its passes run only while this agent leads.
pub(crate) fn sync_task(reconciler: Reconciler, gate: Option<SyncGate>) -> Task {
    Box::new(move |mut context: Context, cancel: CancellationToken| {
        Box::pin(async move {
            let engine = reconciler.clone();
            let task = async move {
                match gate {
                    Some(gate) => gate.run(engine, cancel).await,
                    None => engine.run(cancel).await,
                }
            };
            tokio::pin!(task);
            loop {
                tokio::select! {
                    () = &mut task => return,
                    changed = context.config.changed() => {
                        if changed.is_err() {
                            task.await;
                            return;
                        }
                        let config = Arc::clone(&context.config.borrow_and_update());
                        reconciler.set_config(config);
                    }
                }
            }
        })
    })
}

/// Sync for a daemon that started with no job bound to a check: started by the first reload
/// that binds one. Until then it does nothing; afterwards it is the sync engine's
/// [`AfterRun`] hook.
pub(crate) struct DeferredSync {
    started: OnceLock<Reconciler>,
    /// Where the status endpoint looks for the engine's status; filled when it starts.
    status: Arc<OnceLock<SyncStatus>>,
    /// In a cluster: what keeps the engine's passes to the leader.
    gate: Option<SyncGate>,
}

impl AfterRun for DeferredSync {
    fn after_run(&self, job: &Job, fire: DateTime<Utc>, ping_accepted: bool) {
        if let Some(reconciler) = self.started.get() {
            Reconciler::after_run(reconciler, &job.name, fire, ping_accepted);
        }
    }
}

impl DeferredSync {
    /// A deferred engine that publishes its status in `status` when it starts.
    pub(crate) fn new(status: Arc<OnceLock<SyncStatus>>, gate: Option<SyncGate>) -> DeferredSync {
        DeferredSync {
            started: OnceLock::new(),
            status,
            gate,
        }
    }

    /// The background task: waits for a reloaded config with a job bound by `check_id`, makes
    /// the engine with `build` (which logs why it cannot, e.g. no API key; the next reload
    /// tries again), then runs it as [`sync_task`] does.
    pub(crate) fn task(
        self: Arc<Self>,
        build: impl Fn(&Arc<Config>) -> Option<Reconciler> + Send + 'static,
    ) -> Task {
        Box::new(move |mut context: Context, cancel: CancellationToken| {
            Box::pin(async move {
                loop {
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        changed = context.config.changed() => if changed.is_err() { return },
                    }
                    let config = Arc::clone(&context.config.borrow_and_update());
                    let bound = config.jobs.iter().any(|job| job.has_synced_check());
                    let Some(reconciler) = bound.then(|| build(&config)).flatten() else {
                        continue;
                    };
                    tracing::info!("a job is bound to a check now: check sync started");
                    let reconciler = self.started.get_or_init(|| reconciler).clone();
                    let _ = self.status.set(reconciler.status());
                    return sync_task(reconciler, self.gate.clone())(context, cancel).await;
                }
            })
        })
    }
}

/// A cluster agent's part in the daemon (`[cluster]`): its lease (one per agent, kept by
/// [`Node::keep_lease`]), the leader election on that lease and the
/// relay of sync's state through etcd and the cluster's history ([`SharedRuns`]) as daemon
/// tasks, the relay's after-run hook (accepted
/// pings), and the gate that keeps sync's passes to the leader (hand it to [`sync_task`] or
/// [`DeferredSync`]), and what the status endpoint reads of it ([`View`]). The claims of its
/// fires are the daemon's admission ([`crate::cluster::Claims`], in [`crate::daemon::Options`]).
pub(crate) fn cluster_sync(
    node: &Arc<Node>,
    settings: &ClusterSettings,
    options: &crate::daemon::Options,
    plugins: &mut Plugins,
) -> (SyncGate, View) {
    let lease = Arc::clone(node);
    plugins.tasks.push((
        "cluster lease",
        Box::new(move |_: Context, cancel: CancellationToken| Box::pin(lease.keep_lease(cancel))),
    ));
    let keys = Keys::new(&settings.name);
    let etcd = &node.etcd;
    let (runs, copies) = SharedRuns::new(etcd.clone(), keys.clone(), &settings.node);
    plugins.history = Some(Arc::new(runs.clone()));
    plugins.tasks.push((
        "cluster history",
        Box::new(move |_: Context, cancel: CancellationToken| Box::pin(runs.run(copies, cancel))),
    ));
    let (election, leadership) =
        Election::new(etcd.clone(), &keys, &settings.node, node.shared_lease());
    let shared = SharedState::new(
        etcd.clone(),
        keys,
        &options.state_dir,
        options.net.metrics().persist_failures(),
        options.ping_urls.clone(),
    );
    let every = relay::interval(settings.lease);
    let (relay, hook) = Relay::new(shared.clone(), &settings.node, leadership.clone(), every);
    let gate = SyncGate {
        leadership: leadership.clone(),
        shared,
        engine: Arc::default(),
    };
    plugins.after_run.push(Arc::new(hook));
    plugins.tasks.push((
        "cluster election",
        Box::new(move |_: Context, cancel: CancellationToken| Box::pin(election.run(cancel))),
    ));
    let engine = Arc::clone(&gate.engine);
    plugins.tasks.push((
        "cluster relay",
        Box::new(move |context: Context, cancel: CancellationToken| {
            Box::pin(relay.run(context.config, engine, cancel))
        }),
    ));
    (gate, View::new(leadership, Arc::clone(node)))
}
