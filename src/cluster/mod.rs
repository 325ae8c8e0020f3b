//! Cluster mode (`[cluster]`): several agents share one config through etcd, and each fire of a
//! `run_on = "one"` job runs on one of them. This module is only reached from the daemon (and
//! `config check`); `run` never calls into it, so its start-up pays nothing.
//!
//! - [`leader`]: which agent syncs (leader election on the agent's lease);
//! - [`relay`]: what sync knows, shared through etcd (ping URLs, accepted pings), and the gate
//!   that runs sync's passes only on the leader;
//! - `view`: what status reads of all this ([`View`], status's `ClusterView`), handed to the
//!   status endpoint when the daemon is assembled.
//!
//! [`etcd`] is the client: etcd's v3 JSON gateway over the agent's reqwest client, not the
//! gRPC `etcd-client` crate (see its header for why); `gateway` is one request to one member
//! and what its answer means. [`lease`] is the agent's one etcd lease (granted, renewed, held
//! or not at an instant, revoked at shutdown), which the presence and the leader key are bound
//! to and without which no claim is made; [`node`] is this agent in the cluster: its lease, its presence and the claim
//! of each fire; [`batch`] sends the claims of fires due together to etcd in one transaction.
//! [`runs`] is one history for the cluster: each agent's runs copied into etcd, and the other
//! agents' read back for `history`, the status routes and the dashboard.
//!
//! # Key layout
//! Every key of a cluster starts with `<name>/` (`[cluster] name`, default `heartbeat-agent`),
//! so several clusters can share one etcd. [`Keys`] builds them; nothing else spells them:
//!
//! | key | value | bound to |
//! |-----|-------|----------|
//! | `<name>/claims/<job>/<fire unix seconds>` | the node that won the fire: `<node> <identity> <start>` | none: kept `keep` past the fire (see [`node`]) |
//! | `<name>/leader` | the node that syncs | the leader's lease |
//! | `<name>/urls/<job>` | the ping URL sync learned for the job | none |
//! | `<name>/accepted/<job>` | the last ping of the job the service accepted | none |
//! | `<name>/nodes/<node>` | the agent's presence: `{"node", "identity", "since"}` | the agent's lease |
//! | `<name>/runs/<job>/<node>/<seq>` | a run of the job on the node (see [`runs`]) | none: the node keeps its last runs |
//!
//! Each agent has one lease ([`lease`]): the leader's and the agent's lease above are that one
//! lease of the agent in question. Claims are bound to no lease, so they outlive their winner. The `claims/` level keeps a job named `leader`
//! (or `urls`, ...) from colliding with the cluster's other keys. Job names hold no `/` (see
//! `config::jobs`), so `claims/<job>/` is the prefix of exactly one job's claims.

pub mod admission;
mod batch;
pub mod etcd;
mod gateway;
pub mod leader;
pub mod lease;
pub mod node;
pub mod relay;
pub mod runs;
mod view;

pub use admission::Claims;
pub use etcd::{Etcd, EtcdError, LeaseId};
pub use gateway::Failure;
pub use lease::Lease;
pub use node::{Claim, ClaimError, DuplicateNode, Node};
pub use view::View;

/// The keys of one cluster (`[cluster] name`): the one place that spells the key layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    name: String,
}

impl Keys {
    /// The keys under `<name>/`.
    pub fn new(name: &str) -> Keys {
        Keys {
            name: name.trim_end_matches('/').to_owned(),
        }
    }

    /// `<name>/`: the prefix of every key of the cluster.
    pub fn root(&self) -> String {
        format!("{}/", self.name)
    }

    /// `<name>/claims/<job>/`: the prefix of the job's claims.
    pub fn claims(&self, job: &str) -> String {
        format!("{}/claims/{job}/", self.name)
    }

    /// `<name>/claims/<job>/<fire>`: the claim of the fire scheduled at `fire` (unix seconds).
    pub fn claim(&self, job: &str, fire: i64) -> String {
        format!("{}{fire}", self.claims(job))
    }

    /// `<name>/leader`.
    pub fn leader(&self) -> String {
        format!("{}/leader", self.name)
    }

    /// `<name>/urls/<job>`: the job's learned ping URL.
    pub fn url(&self, job: &str) -> String {
        format!("{}/urls/{job}", self.name)
    }

    /// `<name>/accepted/<job>`: the job's last accepted ping.
    pub fn accepted(&self, job: &str) -> String {
        format!("{}/accepted/{job}", self.name)
    }

    /// `<name>/runs/`: the prefix of every job's runs.
    pub fn all_runs(&self) -> String {
        format!("{}/runs/", self.name)
    }

    /// `<name>/runs/<job>/`: the prefix of the job's runs on every node.
    pub fn runs(&self, job: &str) -> String {
        format!("{}{job}/", self.all_runs())
    }

    /// `<name>/runs/<job>/<node>/`: the prefix of the job's runs on `node`.
    pub fn node_runs(&self, job: &str, node: &str) -> String {
        format!("{}{node}/", self.runs(job))
    }

    /// `<name>/runs/<job>/<node>/<seq>`: run `seq` of the job on `node` (20 digits, so that
    /// key order is number order).
    pub fn run(&self, job: &str, node: &str, seq: u64) -> String {
        format!("{}{seq:020}", self.node_runs(job, node))
    }

    /// `<name>/nodes/<node>`: the node's presence.
    pub fn node(&self, node: &str) -> String {
        format!("{}/nodes/{node}", self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::Keys;

    #[test]
    fn keys_follow_the_documented_layout() {
        let keys = Keys::new("prod/");
        assert_eq!(keys.root(), "prod/");
        assert_eq!(
            keys.claim("leader", 1_700_000_000),
            "prod/claims/leader/1700000000"
        );
        assert!(keys.claim("backup", 5).starts_with(&keys.claims("backup")));
        assert_eq!(keys.leader(), "prod/leader");
        assert_eq!(keys.url("backup"), "prod/urls/backup");
        assert_eq!(keys.accepted("backup"), "prod/accepted/backup");
        assert_eq!(keys.node("a"), "prod/nodes/a");
    }
}
