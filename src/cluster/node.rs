//! This agent as a member of a cluster: its one lease with its presence key
//! `<name>/nodes/<node>` (see [`super::lease`]), and the claim of each fire of a `run_on = "one"`
//! job ([`Node::claim`]), with what status and `/metrics` show about them. The node's task
//! ([`Node::keep_lease`]) keeps the lease and sends the claims; when it is cancelled both stop
//! and the lease is revoked.
//!
//! A claim is one etcd transaction: if `<name>/claims/<job>/<T>` does not exist, create it
//! (value: this node's name, identity and start, [`holder_value`]) and delete the job's claims
//! older than `T - keep`; else read it (who won). A claim is this agent's only when its value
//! names this agent's identity ([`crate::identity`]) and this start of it: two agents that
//! share a node name never both count one claim as won, nor does an agent restarted with its
//! clock set back count the claims of its previous start. `T` is the fire's scheduled time before jitter, so agents whose clocks differ
//! name the same slot. The agent claims only while it holds its lease (else the fire follows
//! `on_unavailable`), but the claim key is bound to **no** lease: it outlives its winner's stop
//! (which revokes the lease), death and stall (after which the lease expires). It stays until a
//! later win of the same job deletes it, at least `keep` ([`CLAIM_KEEP`] plus the job's jitter)
//! after its slot. That is what makes the promise hold for clocks up to [`MAX_SKEW`] ahead of or
//! behind the true time (docs/cluster.md, "Clocks, restarts and stalls"): an agent asks for
//! slot `T` by its clock at `T + jitter` at the latest, at most `MAX_SKEW` after the true
//! instant; the earliest win that deletes the key is sent by its agent's clock at
//! `T + keep - CLAIM_LEAD`, at most `MAX_SKEW` earlier than that instant. Between the two lie
//! `CLAIM_KEEP - CLAIM_LEAD - 2 * MAX_SKEW` = 8 s, the time etcd may take to apply a claim: a
//! win answered later than that after the fire (by this agent's clock, [`trusted_until`]) may
//! have been applied after another agent's win of the slot was deleted, so it does not count
//! ([`ClaimError::Late`]). The range delete compares keys as text, which orders fire times as
//! numbers while they have 10 digits (2001 to 2286). The cost: a job removed from the config
//! leaves its last `keep` of claims in etcd (at most 61 small keys for a job due every second).
//!
//! Claims of fires due together go to etcd together: the node's task (see [`super::batch`])
//! sends what arrived while the previous transaction was in flight as ONE transaction of
//! nested per-fire txns, so each fire costs at most one etcd transaction per agent, and a
//! burst a few. Each fire is still timed from its request to its own answer, counted, and
//! rechecked alone when its answer was lost.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::batch::{self, Request};
use super::{Etcd, EtcdError, Keys, Lease, LeaseId};
use crate::config::{ClusterSettings, OnUnavailable};
use crate::identity::Identity;
use crate::net::Net;
use crate::status::cluster::{ClaimTimes, JobClaims};

/// How long a won claim is kept at least (besides the job's jitter): it covers two clocks
/// [`MAX_SKEW`] off in opposite directions, the claim lead and etcd's time to apply a claim
/// (see the module header).
pub const CLAIM_KEEP: Duration = Duration::from_secs(60);

/// The largest error of an agent's clock, ahead or behind the true time, under which no fire
/// runs twice (docs/cluster.md): two agents may differ by twice that.
pub const MAX_SKEW: Duration = Duration::from_secs(25);

/// How long before its due time a fire is claimed at most (see [`Node::claim_lead`]).
pub const CLAIM_LEAD: Duration = Duration::from_secs(2);

/// How long a claim waits for the lease keeper's first attempt at start-up.
const LEASE_WAIT: Duration = Duration::from_secs(1);

/// What a claim came to.
#[derive(Debug, Clone)]
pub enum Claim {
    /// This agent runs the fire.
    Won,
    /// Another agent does: its node name.
    Lost(String),
    /// etcd could not be asked (or this agent holds no lease): `on_unavailable` decides.
    Unavailable(ClaimError),
}

/// Why a fire could not be claimed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClaimError {
    /// This agent holds no lease now (see [`super::lease`]): etcd cannot be asked.
    #[error("this agent holds no etcd lease (etcd is unavailable)")]
    NoLease,
    /// etcd did not answer the claim, nor the read of its key after it.
    #[error(transparent)]
    Etcd(#[from] EtcdError),
    /// The claim was won, but its answer came too long after the fire to be sure that no
    /// agent ran the slot (see the module header): this agent does not run it either.
    #[error(
        "etcd answered the claim {late_ms} ms after the fire, later than the {trust_s} s after \
         it within which a win is sure (docs/cluster.md, \"Clocks, restarts and stalls\"); \
         check etcd's latency and the hosts' clocks"
    )]
    Late {
        /// How long after the fire's scheduled time the answer came.
        late_ms: i64,
        /// How long after the fire a win counts.
        trust_s: u64,
    },
}

/// At start: another live agent is registered under this agent's node name with another
/// identity (see [`Node::refuse_duplicate`]).
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "another live agent is registered in cluster \"{cluster}\" as node \"{node}\" with identity \
     {other} (this agent is {identity}); two agents cannot share a node name: set [cluster] node \
     to a name of its own on each agent (it defaults to the host name)"
)]
pub struct DuplicateNode {
    /// `[cluster] name`.
    pub cluster: String,
    /// The node name both use.
    pub node: String,
    /// The other agent's identity.
    pub other: String,
    /// This agent's identity.
    pub identity: Identity,
}

/// This agent in its cluster.
pub struct Node {
    /// The etcd client.
    pub etcd: Etcd,
    /// The cluster's keys.
    pub keys: Keys,
    /// This agent's name in the cluster (`[cluster] node`): readable, not unique.
    pub name: String,
    /// This agent's identity: what its claims and its presence name, unique by construction.
    pub identity: Identity,
    /// This start of the agent (random, new for each process): a claim counts as won only
    /// under it, see [`held`].
    start: String,
    /// The lease TTL.
    pub ttl: Duration,
    /// What a fire does when etcd cannot be asked.
    pub on_unavailable: OnUnavailable,
    /// The agent's lease, shared with the election.
    lease: Arc<Lease>,
    jobs: Mutex<BTreeMap<String, JobClaims>>,
    /// How long the claims took.
    times: Mutex<ClaimTimes>,
    /// Where claims go to be sent in the next batch.
    claims_to_send: mpsc::UnboundedSender<Request>,
    /// The other end, taken by the node's task ([`Node::keep_lease`]).
    claims_to_take: Mutex<Option<mpsc::UnboundedReceiver<Request>>>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("name", &self.name)
            .field("identity", &self.identity)
            .field("keys", &self.keys)
            .field("lease", &self.lease())
            .finish_non_exhaustive()
    }
}

impl Node {
    /// The node of `settings` with `identity`, reaching etcd through `net`; asks etcd nothing
    /// yet ([`Node::keep_lease`] does).
    pub fn new(
        settings: &ClusterSettings,
        identity: Identity,
        net: &Net,
    ) -> Result<Arc<Node>, EtcdError> {
        let etcd = Etcd::new(settings, net)?;
        let keys = Keys::new(&settings.name);
        let lease = Lease::new(
            etcd.clone(),
            settings.lease,
            (&settings.node, &identity),
            keys.node(&settings.node),
            settings.on_unavailable,
        );
        let (claims_to_send, claims_to_take) = mpsc::unbounded_channel();
        Ok(Arc::new(Node {
            etcd,
            keys,
            name: settings.node.clone(),
            identity,
            start: format!("{:08x}", rand::random::<u32>()),
            ttl: settings.lease,
            on_unavailable: settings.on_unavailable,
            lease: Arc::new(lease),
            jobs: Mutex::new(BTreeMap::new()),
            times: Mutex::new(ClaimTimes::default()),
            claims_to_send,
            claims_to_take: Mutex::new(Some(claims_to_take)),
        }))
    }

    /// At start, before the lease: refuses when another live agent (its presence is bound to
    /// its lease) is registered under this node name with another identity. The same
    /// identity is this agent before a restart, whose lease has not expired yet: not refused;
    /// nor is an older agent's presence, which names no identity. When etcd does not answer
    /// within the lease's TTL nothing is refused (the lease keeper says why etcd is out of
    /// reach; claims are decided by identity anyway).
    pub async fn refuse_duplicate(&self) -> Result<(), DuplicateNode> {
        let presence = self.keys.node(&self.name);
        let read = tokio::time::timeout(self.ttl, super::lease::presence_of(&self.etcd, &presence));
        let Ok(Ok(Some(present))) = read.await else {
            return Ok(());
        };
        match present.identity {
            Some(other) if other != self.identity.as_str() => Err(DuplicateNode {
                cluster: self.keys.root().trim_end_matches('/').to_owned(),
                node: self.name.clone(),
                other,
                identity: self.identity.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// The lease this agent holds now (`None` while etcd is unavailable, before the first, and
    /// once it may have ended: see [`super::lease`]).
    pub fn lease(&self) -> Option<LeaseId> {
        self.lease.held().map(|held| held.id)
    }

    /// The agent's lease itself, for the election to bind the leader key to.
    pub fn shared_lease(&self) -> Arc<Lease> {
        Arc::clone(&self.lease)
    }

    /// How long the claims took so far.
    pub(crate) fn claim_times(&self) -> ClaimTimes {
        self.times.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Each job's claims so far, by job name.
    pub(crate) fn claims(&self) -> BTreeMap<String, JobClaims> {
        self.jobs().clone()
    }

    fn jobs(&self) -> MutexGuard<'_, BTreeMap<String, JobClaims>> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The node's task, until `cancel`: keeps the lease ([`Lease::keep`]) and sends the claims
    /// ([`super::batch`]). When cancelled, claims stop (a claim still waiting gets an error and
    /// is rechecked by a read of its key) and the lease is revoked. It starts no task that
    /// outlives it; whoever runs it owns it (the daemon's task tracker).
    pub async fn keep_lease(self: Arc<Self>, cancel: CancellationToken) {
        let receiver = self
            .claims_to_take
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let claims = async {
            if let Some(receiver) = receiver {
                let (etcd, keys) = (self.etcd.clone(), self.keys.clone());
                let holder = batch::Holder {
                    node: self.name.clone(),
                    identity: self.identity.clone(),
                    start: self.start.clone(),
                };
                batch::run(etcd, keys, holder, receiver, cancel.clone()).await;
            }
        };
        tokio::join!(self.lease.keep(&cancel), claims);
    }

    /// Claims the fire of `job` scheduled at `fire` (see the module header). `keep` is how long
    /// the claim must outlive its slot (the job's jitter plus [`CLAIM_KEEP`]). A win answered
    /// after [`trusted_until`] is [`ClaimError::Late`]. Not counted for status: the caller
    /// counts each fire once, through [`Node::record`], whatever it asked.
    pub async fn claim(&self, job: &str, fire: DateTime<Utc>, keep: Duration) -> Claim {
        if self.lease_now().await.is_none() {
            return Claim::Unavailable(ClaimError::NoLease);
        }
        let started = std::time::Instant::now();
        let done = self.transact(job, fire.timestamp(), keep).await;
        self.time(started.elapsed());
        let claim = match done {
            Ok(claim) => claim,
            Err(err) => self.recheck(job, fire.timestamp(), err).await,
        };
        let until = trusted_until(fire, keep);
        let now = Utc::now();
        match claim {
            Claim::Won if now > until => Claim::Unavailable(ClaimError::Late {
                late_ms: (now - fire).num_milliseconds(),
                trust_s: (until - fire).num_seconds().unsigned_abs(),
            }),
            claim => claim,
        }
    }

    /// How long before a fire is due its claim is sent, so that the claim's round trip (and
    /// the batch it waits for in a burst) is not on the way to the spawn: [`CLAIM_LEAD`], or a
    /// quarter of the lease when that is shorter (a short lease asks for a quick hand-over,
    /// and the fires an agent claimed before it died are not run by another).
    pub fn claim_lead(&self) -> Duration {
        (self.ttl / 4).min(CLAIM_LEAD)
    }

    /// Counts the outcome of the fire of `job` at `fire`, for status and `/metrics`.
    pub fn record(&self, job: &str, fire: DateTime<Utc>, claim: &Claim) {
        let mut jobs = self.jobs();
        let counts = jobs.entry(job.to_owned()).or_default();
        match claim {
            Claim::Won => {
                counts.won += 1;
                counts.last_ran_on = Some((self.name.clone(), fire));
            }
            Claim::Lost(node) => {
                counts.lost += 1;
                counts.last_ran_on = Some((node.clone(), fire));
            }
            Claim::Unavailable(_) => counts.unavailable += 1,
        }
    }

    /// Counts one claim that took `took`.
    fn time(&self, took: Duration) {
        let mut times = self.times.lock().unwrap_or_else(|p| p.into_inner());
        times.record(took.as_secs_f64());
    }

    /// After a failed claim: the txn may have been applied with its answer lost (a member
    /// that lost its raft leader answers late, or not at all). One read of the key, through
    /// whichever member answers now, tells whether this node holds the slot; without an answer
    /// the fire stays unavailable.
    async fn recheck(&self, job: &str, fire: i64, err: EtcdError) -> Claim {
        match self.etcd.get(&self.keys.claim(job, fire)).await {
            Ok(Some(value)) => held(&value, &self.identity, &self.start),
            Ok(None) | Err(_) => Claim::Unavailable(ClaimError::Etcd(err)),
        }
    }

    /// The lease; at start-up, after the lease keeper's first attempt (waiting at most
    /// [`LEASE_WAIT`]).
    async fn lease_now(&self) -> Option<LeaseId> {
        self.lease.settled(LEASE_WAIT).await;
        self.lease()
    }

    /// The claim, sent by the node's task in the next batch (see [`super::batch`]).
    async fn transact(&self, job: &str, fire: i64, keep: Duration) -> Result<Claim, EtcdError> {
        let (answer, receiver) = oneshot::channel();
        let request = Request {
            job: job.to_owned(),
            fire,
            keep,
            answer,
        };
        let gone = || batch::failed(&self.etcd, "the agent's claim task has stopped");
        self.claims_to_send.send(request).map_err(|_| gone())?;
        receiver.await.map_err(|_| gone())?
    }
}

/// A claim key's value: the winner's node name, identity and start,
/// `<node> <identity> <start>` (node names hold no space).
pub fn holder_value(node: &str, identity: &Identity, start: &str) -> String {
    format!("{node} {identity} {start}")
}

/// What a claim key holding `value` means for the agent with `identity`, started as `start`:
/// won when the value names both, else lost to the node it names. A claim this agent made
/// before it restarted is lost too: the process before may have run the fire, and a restart
/// with the clock set back would run it again. An older agent's
/// value (the bare node name, or `<node> <identity>`) is never this process's.
pub(super) fn held(value: &[u8], identity: &Identity, start: &str) -> Claim {
    let value = String::from_utf8_lossy(value);
    let mut parts = value.split(' ');
    let node = parts.next().unwrap_or_default();
    let (id, started) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if id == identity.as_str() && started == start {
        Claim::Won
    } else {
        Claim::Lost(node.to_owned())
    }
}

/// Until when (by this agent's clock) a win of the fire at `fire`, kept `keep`, counts:
/// `keep - CLAIM_LEAD - 2 * MAX_SKEW` after the fire (see the module header).
pub fn trusted_until(fire: DateTime<Utc>, keep: Duration) -> DateTime<Utc> {
    let trust = keep.saturating_sub(CLAIM_LEAD + 2 * MAX_SKEW);
    fire + chrono::TimeDelta::from_std(trust).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_is_won_only_under_this_agents_identity_and_start_whatever_the_name() {
        let me = Identity::parse("aaaaaaaaaaaaaaaa").expect("id");
        let twin = Identity::parse("bbbbbbbbbbbbbbbb").expect("id");
        let mine = holder_value("node-a", &me, "0000002a");
        assert_eq!(mine, "node-a aaaaaaaaaaaaaaaa 0000002a");
        assert!(matches!(held(mine.as_bytes(), &me, "0000002a"), Claim::Won));
        // Another agent with the same node name: lost, named by its node.
        let theirs = holder_value("node-a", &twin, "0000002a");
        let lost = held(theirs.as_bytes(), &me, "0000002a");
        assert!(matches!(lost, Claim::Lost(n) if n == "node-a"));
        // This agent before a restart: lost (that process may have run the fire).
        let before = held(mine.as_bytes(), &me, "0000002b");
        assert!(matches!(before, Claim::Lost(n) if n == "node-a"));
        // An older agent's values (the bare name; name and identity) are never this one's.
        assert!(matches!(held(b"node-a", &me, ""), Claim::Lost(n) if n == "node-a"));
        let old = held(b"node-a aaaaaaaaaaaaaaaa", &me, "0000002a");
        assert!(matches!(old, Claim::Lost(n) if n == "node-a"));
    }

    #[test]
    fn a_win_counts_until_keep_less_the_lead_and_twice_the_skew_after_the_fire() {
        let fire = DateTime::from_timestamp(1_700_000_000, 0).expect("time");
        let keep = CLAIM_KEEP + Duration::from_secs(30);
        assert_eq!(
            trusted_until(fire, keep),
            fire + chrono::TimeDelta::seconds(38)
        );
        // The promised skew leaves etcd some seconds to apply a claim.
        assert!(trusted_until(fire, CLAIM_KEEP) >= fire + chrono::TimeDelta::seconds(5));
    }
}
