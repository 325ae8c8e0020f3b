//! What status reads of the cluster (`[cluster]` only), as it reads the daemon through
//! `daemon/view.rs`: a [`ClusterView`], offered by `cluster/` (its `view.rs`) and given to the
//! endpoint when the daemon is assembled (`cli/assemble.rs`), so that status/ names no type of
//! `cluster/`. What it reads: where this agent stands in the election ([`ClusterDoc`]), whether
//! it leads (readiness waits for sync only on the leader), its etcd connection and lease
//! ([`EtcdDoc`]), and the claims of its fires ([`JobClaims`], [`ClaimTimes`]), which the cluster
//! counts in these types.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

pub(crate) use super::doc::{ClusterDoc, EtcdDoc};

/// A reader's handle on this agent's part in its cluster: copies of what it knows now.
pub(crate) trait ClusterView: Send + Sync + std::fmt::Debug {
    /// Where this agent stands now: node name, role, leader, since when, last election error.
    fn standing(&self) -> ClusterDoc;
    /// Whether this agent leads now (only the leader syncs).
    fn leading(&self) -> bool;
    /// The name of every role an agent can have, in the order `/metrics` lists them.
    fn roles(&self) -> &'static [&'static str];
    /// This agent's etcd connection and lease; its last error as etcd's client wrote it (the
    /// caller scrubs it).
    fn etcd(&self) -> EtcdDoc;
    /// Each job's claims since start, by job name (only jobs with a claim).
    fn claims(&self) -> BTreeMap<String, JobClaims>;
    /// How long the claims took so far.
    fn claim_times(&self) -> ClaimTimes;
}

/// One job's claims since start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct JobClaims {
    /// Fires this agent won (and ran).
    pub won: u64,
    /// Fires another agent won.
    pub lost: u64,
    /// Fires whose claim could not be made (etcd unavailable).
    pub unavailable: u64,
    /// The node that ran the latest fire and that fire's scheduled time.
    pub last_ran_on: Option<(String, DateTime<Utc>)>,
}

/// Upper bounds (seconds) of the claim latency histogram's buckets.
/// Finer from 0.25 s to 2.5 s, where a burst's claims fall (`scripts/bench-cluster.sh` reads
/// its percentiles from them).
pub(crate) const CLAIM_BUCKETS: [f64; 15] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 5.0,
];

/// How long the claims took, each from its request to its answer (in a batch, its own wait
/// included), for `/metrics` (`heartbeat_agent_cluster_claim_seconds`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ClaimTimes {
    /// Claims per bucket of [`CLAIM_BUCKETS`] (not cumulative; slower ones only in `count`).
    pub buckets: [u64; CLAIM_BUCKETS.len()],
    /// The sum of the durations, in seconds.
    pub sum: f64,
    /// The number of claims timed.
    pub count: u64,
}

impl ClaimTimes {
    /// Counts one claim that took `secs` seconds.
    pub(crate) fn record(&mut self, secs: f64) {
        if let Some(i) = CLAIM_BUCKETS.iter().position(|&bound| secs <= bound) {
            self.buckets[i] += 1;
        }
        self.sum += secs;
        self.count += 1;
    }
}
