//! What sync knows, shared through etcd so that only the leader syncs and every agent can
//! still ping (docs/cluster.md, "One agent syncs"):
//!
//! - `<name>/urls/<job>`: the leader publishes each bound check's sync record after the passes
//!   that change it: the definition the service accepted (and when), the ping URL and the ping
//!   token, and for a job with `create = true` the tag its check was found or created by (only
//!   the leader syncs, so only the leader creates). Followers import it into their own state
//!   directory, so they ping a `check_id` job, or the check the leader created, that they win, and a follower that becomes leader knows what the service has (it does not PUT
//!   a held period change because it has no record, and it sends the same ping token back).
//! - `<name>/accepted/<job>`: the agent that ran a job and had its ping accepted writes the
//!   fire and the time ([`AcceptedPings`], an after-run hook). The leader feeds each new one
//!   into sync's timer rule exactly as a ping of its own ([`crate::sync::timer::record_ping`])
//!   and runs a pass at once: a period change held until "right after an accepted ping" goes
//!   out right after a ping accepted on any agent.
//!
//! The sync task itself runs only while this agent leads ([`SyncGate::run`]); it is
//! dropped (an in-flight PUT abandoned) the moment leadership is lost.
//!
//! The accepted time compared with the time of the last accepted PUT comes from two hosts'
//! clocks; they only need to agree to well under the time between a job's ping and the next
//! PUT (NTP does).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::etcd::{Etcd, EtcdError};
use super::leader::Leadership;
use super::Keys;
use crate::config::{Config, Job, PingTarget};
use crate::run::AfterRun;
use crate::sync::state::{self, CheckRecord};
use crate::sync::{timer, Definition, LearnedUrls, Reconciler};

/// A bound check's sync record as the leader shares it under `<name>/urls/<job>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SharedRecord {
    /// The check the record is about.
    pub check_id: String,
    /// The definition the service last accepted.
    pub accepted: Option<Definition>,
    /// When the leader's PUT of it was accepted.
    pub accepted_at: Option<DateTime<Utc>>,
    /// The ping URL the service handed out (a secret, as in the state file).
    pub ping_url: Option<String>,
    /// The ping token, sent back by every PUT so it never rotates.
    pub ping_token: Option<String>,
    /// For a job with `create = true`: the scope tag the leader found or created its check by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_tag: Option<String>,
}

/// A ping the service accepted, as the agent that ran the job writes it under
/// `<name>/accepted/<job>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcceptedPing {
    /// The job's check.
    pub check_id: String,
    /// The fire (scheduled time) the run belonged to.
    pub fire: DateTime<Utc>,
    /// When the ping was accepted.
    pub at: DateTime<Utc>,
    /// The agent that ran it.
    pub node: String,
}

/// The after-run hook of a cluster agent: every accepted ping of a job bound by `check_id` is
/// handed to [`Relay::run`], which writes it to etcd.
pub struct AcceptedPings {
    node: String,
    /// Where a job with `create = true` finds the id of its check.
    state_dir: PathBuf,
    sender: mpsc::UnboundedSender<(String, AcceptedPing)>,
}

impl AfterRun for AcceptedPings {
    fn after_run(&self, job: &Job, fire: DateTime<Utc>, ping_accepted: bool) {
        let Some(check_id) = crate::sync::created::bound_check(&self.state_dir, job) else {
            return;
        };
        if !ping_accepted {
            return;
        }
        let ping = AcceptedPing {
            check_id,
            fire,
            at: Utc::now(),
            node: self.node.clone(),
        };
        let _ = self.sender.send((job.name.clone(), ping));
    }
}

/// How often the relay reads and writes the shared keys: a quarter of the lease TTL, at most a
/// second (a held period change goes out within that of a ping accepted on another agent;
/// a follower has the leader's records well before it can take over).
pub fn interval(ttl: Duration) -> Duration {
    (ttl / 4).min(Duration::from_secs(1))
}

/// What the relay reads and writes: etcd, the cluster's keys, the local sync state. Cheap to
/// clone.
#[derive(Clone)]
pub struct SharedState {
    etcd: Etcd,
    keys: Keys,
    state_dir: PathBuf,
    /// Where failed writes of the local sync state are counted.
    failures: crate::persist::Failures,
    learned: LearnedUrls,
    /// Keys whose value was not valid, warned about once until they are valid again.
    invalid: Arc<Mutex<BTreeSet<String>>>,
}

/// The relay task of one agent: writes its accepted pings, imports what the leader published
/// (followers), and while it leads, publishes sync's records and feeds accepted pings to sync.
pub struct Relay {
    shared: SharedState,
    leadership: Leadership,
    accepted: mpsc::UnboundedReceiver<(String, AcceptedPing)>,
    /// How often the shared keys are read.
    every: Duration,
}

impl Relay {
    /// The relay of agent `node` and its after-run hook.
    pub fn new(
        shared: SharedState,
        node: &str,
        leadership: Leadership,
        every: Duration,
    ) -> (Relay, AcceptedPings) {
        let (sender, accepted) = mpsc::unbounded_channel();
        let relay = Relay {
            shared,
            leadership,
            accepted,
            every,
        };
        let hook = AcceptedPings {
            node: node.to_owned(),
            state_dir: relay.shared.state_dir.clone(),
            sender,
        };
        (relay, hook)
    }

    /// Until `cancel`: every `every`, writes the accepted pings of this agent's runs, and either
    /// imports the leader's records (follower) or publishes its own and feeds the accepted
    /// pings of every agent to `sync` (leader). Errors are logged once per kind and retried at
    /// the next round; the election reports etcd's reachability.
    pub async fn run(
        mut self,
        mut config: watch::Receiver<Arc<Config>>,
        sync: Arc<OnceLock<Reconciler>>,
        cancel: CancellationToken,
    ) {
        let mut published: BTreeMap<String, SharedRecord> = BTreeMap::new();
        let mut unsent: BTreeMap<String, AcceptedPing> = BTreeMap::new();
        let mut failing = false;
        loop {
            while let Ok((job, ping)) = self.accepted.try_recv() {
                unsent.insert(job, ping);
            }
            let current = Arc::clone(&config.borrow_and_update());
            let result = self
                .round(&current, sync.get(), &mut published, &mut unsent)
                .await;
            match (result, failing) {
                (Err(err), false) => {
                    tracing::warn!(error = %err, "cannot share sync's state through etcd; retrying");
                    failing = true;
                }
                (Ok(()), true) => {
                    tracing::info!("sharing sync's state through etcd works again");
                    failing = false;
                }
                _ => {}
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(self.every) => {}
                Some((job, ping)) = self.accepted.recv() => { unsent.insert(job, ping); }
            }
        }
    }

    async fn round(
        &self,
        config: &Config,
        sync: Option<&Reconciler>,
        published: &mut BTreeMap<String, SharedRecord>,
        unsent: &mut BTreeMap<String, AcceptedPing>,
    ) -> Result<(), EtcdError> {
        let shared = &self.shared;
        while let Some((job, ping)) = unsent.pop_first() {
            let value = serde_json::to_vec(&ping).expect("a ping record serializes");
            let key = shared.keys.accepted(&job);
            if let Err(err) = shared.etcd.put(&key, &value, None).await {
                unsent.insert(job, ping);
                return Err(err);
            }
        }
        if self.leadership.leading() {
            if let Some(sync) = sync {
                shared.feed_accepted(config, sync).await?;
            }
            shared.publish(config, published).await
        } else {
            published.clear();
            shared.import(config).await
        }
    }
}

impl SharedState {
    /// The shared state of cluster `keys`, kept locally in `state_dir` (its failed writes
    /// counted in `failures`) and `learned`.
    pub fn new(
        etcd: Etcd,
        keys: Keys,
        state_dir: &Path,
        failures: &crate::persist::Failures,
        learned: LearnedUrls,
    ) -> Self {
        SharedState {
            etcd,
            keys,
            state_dir: state_dir.to_owned(),
            failures: failures.clone(),
            learned,
            invalid: Arc::default(),
        }
    }

    /// `value` of `key` as a `T`; `None` (warned once per key, never with the value: it may
    /// hold a ping URL) when it is not one.
    fn parse<T: DeserializeOwned>(&self, key: &str, value: &[u8]) -> Option<T> {
        let mut invalid = self.invalid.lock().unwrap_or_else(|e| e.into_inner());
        match serde_json::from_slice::<T>(value) {
            Ok(parsed) => {
                invalid.remove(key);
                Some(parsed)
            }
            Err(err) => {
                if invalid.insert(key.to_owned()) {
                    tracing::warn!(key, error = %err, "a record in etcd is not what this agent writes there; ignored until it is rewritten (or delete it: etcdctl del KEY)");
                }
                None
            }
        }
    }

    /// The records under `prefix` (`<prefix><job>`) about the check their job is bound to in
    /// `config` (`check` of the record), each with the job's name and its local sync state.
    async fn records<T: DeserializeOwned>(
        &self,
        prefix: &str,
        config: &Config,
        check: impl Fn(&T) -> &String,
    ) -> Result<Vec<(String, T, Option<CheckRecord>)>, EtcdError> {
        let mut found = Vec::new();
        for (key, value) in self.etcd.get_prefix(prefix).await? {
            let job = key.trim_start_matches(prefix);
            let Some(record) = self.parse::<T>(&key, &value) else {
                continue;
            };
            let id = check(&record);
            // A job with `create = true` names no id: the leader's is the job's check.
            let creates = config
                .job(job)
                .is_some_and(|j| j.check.create && j.target == PingTarget::None);
            if !creates && bound_check(config, job) != Some(id.as_str()) {
                continue;
            }
            let local = state::load(&self.state_dir, job).filter(|r| &r.check_id == id);
            found.push((job.to_owned(), record, local));
        }
        Ok(found)
    }

    /// Leader: every accepted ping newer than the local record goes into sync's timer rule,
    /// then a pass runs at once.
    async fn feed_accepted(&self, config: &Config, sync: &Reconciler) -> Result<(), EtcdError> {
        let mut fed = false;
        let prefix = self.keys.accepted("");
        for (job, ping, known) in self
            .records(&prefix, config, |p: &AcceptedPing| &p.check_id)
            .await?
        {
            let job = job.as_str();
            let newer = known.as_ref().map_or(true, |k| {
                Some(ping.fire) > k.acked_fire || Some(ping.at) > k.acked_at
            });
            if !newer {
                continue;
            }
            let recorded = timer::record_ping(
                &self.state_dir,
                &self.failures,
                job,
                &ping.check_id,
                ping.fire,
                ping.at,
            );
            match recorded {
                Ok(_) => {
                    tracing::debug!(job, node = %ping.node, fire = %ping.fire, "accepted ping of another agent recorded for sync");
                    fed = true;
                }
                Err(err) => {
                    tracing::warn!(job, error = %err, "cannot record an accepted ping for sync")
                }
            }
        }
        if fed {
            sync.trigger();
        }
        Ok(())
    }

    /// Leader: publishes every bound job's sync record that changed since it was last
    /// published.
    async fn publish(
        &self,
        config: &Config,
        published: &mut BTreeMap<String, SharedRecord>,
    ) -> Result<(), EtcdError> {
        for job in &config.jobs {
            let Some(check_id) = crate::sync::created::bound_check(&self.state_dir, job) else {
                continue;
            };
            let Some(record) =
                state::load(&self.state_dir, &job.name).filter(|r| r.check_id == check_id)
            else {
                continue;
            };
            let shared = SharedRecord::from(&record);
            if shared.accepted.is_none() || published.get(&job.name) == Some(&shared) {
                continue;
            }
            let value = serde_json::to_vec(&shared).expect("a sync record serializes");
            self.etcd
                .put(&self.keys.url(&job.name), &value, None)
                .await?;
            published.insert(job.name.clone(), shared);
        }
        Ok(())
    }

    /// Follower: takes every record the leader published that is newer than the local one.
    pub async fn import(&self, config: &Config) -> Result<(), EtcdError> {
        let prefix = self.keys.url("");
        for (job, shared, local) in self
            .records(&prefix, config, |r: &SharedRecord| &r.check_id)
            .await?
        {
            let job = job.as_str();
            if local.as_ref().map(SharedRecord::from).as_ref() == Some(&shared)
                || local.as_ref().and_then(|l| l.accepted_at) > shared.accepted_at
            {
                continue;
            }
            let saved = state::update(
                &self.state_dir,
                &self.failures,
                job,
                &shared.check_id,
                |r| {
                    r.accepted.clone_from(&shared.accepted);
                    r.accepted_at = shared.accepted_at;
                    r.ping_url.clone_from(&shared.ping_url);
                    r.ping_token.clone_from(&shared.ping_token);
                    r.created_tag.clone_from(&shared.created_tag);
                },
            );
            match saved {
                Ok(_) => {
                    if let Some(url) = &shared.ping_url {
                        self.learned.record(job, &shared.check_id, url);
                    }
                }
                Err(err) => {
                    tracing::warn!(job, error = %err, "cannot keep the leader's sync record")
                }
            }
        }
        Ok(())
    }
}

impl From<&CheckRecord> for SharedRecord {
    fn from(record: &CheckRecord) -> Self {
        SharedRecord {
            check_id: record.check_id.clone(),
            accepted: record.accepted.clone(),
            accepted_at: record.accepted_at,
            ping_url: record.ping_url.clone(),
            ping_token: record.ping_token.clone(),
            created_tag: record.created_tag.clone(),
        }
    }
}

/// The check `job` is bound to in `config`.
fn bound_check<'a>(config: &'a Config, job: &str) -> Option<&'a str> {
    match &config.job(job)?.target {
        PingTarget::Check(id) => Some(id),
        _ => None,
    }
}

/// What keeps sync to the leader: the election's state, the shared records a new leader reads
/// first, and the slot where the running engine is found by [`Relay::run`] (which feeds it the
/// accepted pings of every agent). Cheap to clone.
#[derive(Clone)]
pub struct SyncGate {
    /// Whether this agent leads.
    pub leadership: Leadership,
    /// The shared records.
    pub shared: SharedState,
    /// The sync engine, once it runs.
    pub engine: Arc<OnceLock<Reconciler>>,
}

impl SyncGate {
    /// Runs `sync`'s passes only while this agent leads, until `cancel`: starts them (at once,
    /// without the start jitter a fleet needs: a cluster has one syncing agent) when it becomes
    /// leader, after importing what the previous leader published, and drops them (an
    /// in-flight PUT abandoned) the moment it stops leading.
    pub async fn run(&self, sync: Reconciler, cancel: CancellationToken) {
        let _ = self.engine.set(sync.clone());
        let mut leadership = self.leadership.clone();
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                up = leadership.until(true) => if !up { return },
            }
            // The previous leader's last records (a leader stopped in order hands over at once).
            if let Err(err) = self.shared.import(&sync.config()).await {
                tracing::warn!(error = %err, "cannot read the previous leader's sync records from etcd; syncing from the local ones");
            }
            tracing::info!("leading the cluster: check sync runs on this agent");
            tokio::select! {
                () = sync.clone().passes(cancel.clone()) => return,
                up = leadership.until(false) => if !up { return },
            }
            tracing::warn!("no longer leading the cluster: check sync stopped on this agent");
        }
    }
}
