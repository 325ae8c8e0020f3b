//! What the cluster offers the status endpoint ([`crate::status::cluster::ClusterView`]): this
//! agent's standing in the election, its etcd connection and lease, and the claims of its
//! fires, read at each request from the election's published state and the node. The daemon's
//! assembly (`cli/assemble.rs`) makes it and hands it to status, which names no type of this
//! module.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::leader::{Leadership, Role};
use super::Node;
use crate::status::cluster::{ClaimTimes, ClusterDoc, ClusterView, EtcdDoc, JobClaims};

/// This agent's part in its cluster, as status reads it.
#[derive(Debug, Clone)]
pub struct View {
    leadership: Leadership,
    node: Arc<Node>,
}

impl View {
    /// The view of the election that published `leadership` and of `node`.
    pub fn new(leadership: Leadership, node: Arc<Node>) -> View {
        View { leadership, node }
    }
}

/// Every role's name, in the order of [`Role::ALL`].
const ROLES: [&str; Role::ALL.len()] = {
    let mut names = [""; Role::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = Role::ALL[i].as_str();
        i += 1;
    }
    names
};

impl ClusterView for View {
    fn standing(&self) -> ClusterDoc {
        let standing = self.leadership.standing();
        ClusterDoc {
            node: standing.node,
            role: standing.role.as_str().to_owned(),
            leader: standing.leader,
            since: standing.since,
            last_error: standing.last_error,
        }
    }

    fn leading(&self) -> bool {
        self.leadership.leading()
    }

    fn roles(&self) -> &'static [&'static str] {
        &ROLES
    }

    fn etcd(&self) -> EtcdDoc {
        let node = &self.node;
        EtcdDoc {
            node: node.name.clone(),
            identity: Some(node.identity.to_string()),
            name: node.keys.root().trim_end_matches('/').to_owned(),
            endpoints: node.etcd.endpoints(),
            on_unavailable: node.on_unavailable.as_str().to_owned(),
            reachable: node.etcd.reachable(),
            lease_held: node.lease().is_some(),
            errors_by_endpoint: node.etcd.errors_by_endpoint().into_iter().collect(),
            last_error: node.etcd.last_error(),
        }
    }

    fn claims(&self) -> BTreeMap<String, JobClaims> {
        self.node.claims()
    }

    fn claim_times(&self) -> ClaimTimes {
        self.node.claim_times()
    }
}
