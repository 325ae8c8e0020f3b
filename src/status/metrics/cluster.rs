//! The cluster's families of `/metrics` (`[cluster]` only): this agent's role and the leader
//! it sees, the claims of fires by job and result and how long a claim takes, etcd errors and
//! reachability, and the lease.

use super::Text;
use crate::status::cluster::{ClusterView, CLAIM_BUCKETS};

/// The cluster role (every role present, 1 for this agent's) and the leader it sees.
pub(super) fn role_families(out: &mut Text, view: &dyn ClusterView) {
    let cluster = view.standing();
    out.family(
        "heartbeat_agent_cluster_role",
        "gauge",
        "This agent's cluster role: 1 for the role it has (leader, follower, unavailable), 0 for the others.",
    );
    for &role in view.roles() {
        let value = f64::from(u8::from(cluster.role == role));
        out.sample("heartbeat_agent_cluster_role", &[("role", role)], value);
    }
    out.family(
        "heartbeat_agent_cluster_leader",
        "gauge",
        "The node that leads the cluster as this agent last saw it (always 1; no sample while unknown).",
    );
    if let Some(leader) = &cluster.leader {
        out.sample("heartbeat_agent_cluster_leader", &[("node", leader)], 1.0);
    }
}

/// In a `[cluster]`: claims by job and result, etcd errors by endpoint, whether etcd answers
/// and whether this agent holds its lease.
pub(super) fn claim_families(out: &mut Text, view: &dyn ClusterView) {
    let claims = "heartbeat_agent_cluster_claims_total";
    out.family(claims, "counter", "Fire claims of run_on = \"one\" jobs by result: won (run here), lost (run by another agent), unavailable (etcd could not be asked; on_unavailable applied).");
    for (job, counts) in view.claims() {
        for (result, n) in [
            ("won", counts.won),
            ("lost", counts.lost),
            ("unavailable", counts.unavailable),
        ] {
            out.sample(claims, &[("job", &job), ("result", result)], n as f64);
        }
    }
    let errors = "heartbeat_agent_cluster_etcd_errors_total";
    out.family(
        errors,
        "counter",
        "Failed etcd requests by endpoint since start.",
    );
    let etcd = view.etcd();
    for (endpoint, n) in &etcd.errors_by_endpoint {
        out.sample(errors, &[("endpoint", endpoint)], *n as f64);
    }
    let reachable = "heartbeat_agent_cluster_etcd_reachable";
    out.family(
        reachable,
        "gauge",
        "Whether the last etcd request got an answer (1) or no endpoint answered (0).",
    );
    let answered = etcd.reachable.unwrap_or(false);
    out.sample(reachable, &[], f64::from(u8::from(answered)));
    let lease = "heartbeat_agent_cluster_lease_held";
    out.family(
        lease,
        "gauge",
        "Whether this agent holds its etcd lease (without one, fires follow on_unavailable).",
    );
    out.sample(lease, &[], f64::from(u8::from(etcd.lease_held)));
    let latency = "heartbeat_agent_cluster_claim_seconds";
    out.family(
        latency,
        "histogram",
        "How long each fire's claim took, from its request to its answer (sent up to 2 s before the fire is due; claims of fires due together share one etcd transaction).",
    );
    let times = view.claim_times();
    let mut cumulative = 0;
    for (bound, n) in CLAIM_BUCKETS.iter().zip(times.buckets) {
        cumulative += n;
        out.sample(
            &format!("{latency}_bucket"),
            &[("le", &bound.to_string())],
            cumulative as f64,
        );
    }
    out.sample(
        &format!("{latency}_bucket"),
        &[("le", "+Inf")],
        times.count as f64,
    );
    out.sample(&format!("{latency}_sum"), &[], times.sum);
    out.sample(&format!("{latency}_count"), &[], times.count as f64);
}
