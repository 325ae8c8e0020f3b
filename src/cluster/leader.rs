//! Which agent of a cluster syncs: leader election on etcd (docs/cluster.md, "One agent
//! syncs").
//!
//! The election binds the leader key to the agent's one lease ([`super::lease`]: the lease its
//! presence is bound to) and looks at the key every tick ([`tick`]: an eighth of
//! the TTL, at most 250 ms). The agent whose create-if-absent of `<name>/leader` (its node name
//! as the value, bound to its lease) wins leads while that lease lives; the others read the key
//! every tick and try the create again as soon as it is gone. etcd deletes the key when the
//! leader's lease expires, so after a leader dies another agent leads within the TTL plus one
//! tick plus the time etcd takes to expire the lease.
//!
//! A leader stops leading at once, without waiting for etcd, when:
//! - its lease is not held any more (see [`super::lease`]: its expiry is counted from the send
//!   of the last renewal etcd granted, so by then etcd may have expired it and another agent may
//!   lead), checked every tick and bounding every call of a round;
//! - its lease was replaced (etcd said the old one was gone, and the key went with it);
//! - or `<name>/leader` no longer names it (deleted by hand, or held by another node).
//!
//! Only a key bound to a lease counts: etcd deletes it when that lease ends. A key bound to no
//! lease (another etcd user wrote it) would name a leader forever; it is reported once, deleted
//! (unless it changed meanwhile) and the campaign goes on. A key naming this node under another
//! lease is an earlier run's (killed, its lease not yet expired): this run follows until it goes.
//!
//! Leading is what [`Leadership::leading`] says; the sync task runs only while it is true
//! ([`super::relay::SyncGate`]). On shutdown the election says `unavailable` and the node's
//! task revokes the lease, so another agent takes over at once instead of after the TTL.
//!
//! The election uses the lease that the agent's presence is bound to, and claims are made
//! only while it is held: one rule (never use a lease etcd may have ended), and a leader key
//! that outlived the agent's presence would name an agent that is gone.
//!
//! Home-made consensus is out of the question: the lease, the create-if-absent transaction and
//! the expiry are etcd's; this module only reads them.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::etcd::{Entry, Etcd, LeaseId};
use super::lease::{Held, Lease};
use super::Keys;

/// This agent's part in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// It leads: it runs sync's PUTs and publishes what sync learned.
    Leader,
    /// Another agent leads (or none does yet and this one lost the race).
    Follower,
    /// etcd cannot be reached (or answers errors): the role is unknown, so it does not sync.
    Unavailable,
}

impl Role {
    /// The name status and metrics use: `leader`, `follower`, `unavailable`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Role::Leader => "leader",
            Role::Follower => "follower",
            Role::Unavailable => "unavailable",
        }
    }

    /// Every role, in the order metrics list them.
    pub const ALL: [Role; 3] = [Role::Leader, Role::Follower, Role::Unavailable];
}

/// Where this agent stands, as status and metrics show it (through `view.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    /// This agent's node name (`[cluster] node`).
    pub node: String,
    /// Its role now.
    pub role: Role,
    /// The leader's node name, when known (this agent's own when it leads).
    pub leader: Option<String>,
    /// Since when the role holds.
    pub since: DateTime<Utc>,
    /// The last etcd error, kept until etcd answers again.
    pub last_error: Option<String>,
}

/// The election's published state: cheap to clone, every clone sees the same standing.
#[derive(Debug, Clone)]
pub struct Leadership {
    standing: watch::Receiver<Standing>,
}

impl Leadership {
    /// Where this agent stands now.
    pub fn standing(&self) -> Standing {
        self.standing.borrow().clone()
    }

    /// Whether this agent leads now.
    pub fn leading(&self) -> bool {
        self.standing.borrow().role == Role::Leader
    }

    /// Waits until [`Leadership::leading`] is `want`; false if the election ended first.
    pub async fn until(&mut self, want: bool) -> bool {
        self.standing
            .wait_for(|s| (s.role == Role::Leader) == want)
            .await
            .is_ok()
    }
}

/// How often the election looks at its lease and reads the leader key: an eighth of the TTL, at
/// most 250 ms (a takeover waits for the old lease to expire, then for the next tick).
pub fn tick(ttl: Duration) -> Duration {
    (ttl / 8).min(Duration::from_millis(250))
}

/// One agent's election: who it is, where the key lives, the lease the key is bound to.
pub struct Election {
    etcd: Etcd,
    key: String,
    node: String,
    lease: Arc<Lease>,
    publish: watch::Sender<Standing>,
    /// The revision of the last leader key bound to no lease that was reported (once each).
    stale_seen: AtomicI64,
}

impl Election {
    /// An election of `node` in the cluster of `keys` on `lease` (kept by the node's task);
    /// nothing happens until [`Election::run`]. The returned [`Leadership`] starts `unavailable`.
    pub fn new(etcd: Etcd, keys: &Keys, node: &str, lease: Arc<Lease>) -> (Election, Leadership) {
        let (publish, standing) = watch::channel(Standing {
            node: node.to_owned(),
            role: Role::Unavailable,
            leader: None,
            since: Utc::now(),
            last_error: None,
        });
        let election = Election {
            etcd,
            key: keys.leader(),
            node: node.to_owned(),
            lease,
            publish,
            stale_seen: AtomicI64::new(0),
        };
        (election, Leadership { standing })
    }

    /// Campaigns, leads and follows until `cancel`; then says `unavailable` (the node's task
    /// revokes the lease, so another agent leads at once).
    pub async fn run(self, cancel: CancellationToken) {
        let tick = tick(self.lease.ttl());
        let mut seen: Option<LeaseId> = None;
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                now = self.round(seen) => seen = now,
            }
            tokio::select! {
                () = cancel.cancelled() => break,
                () = tokio::time::sleep(tick) => {}
            }
        }
        // Stopping: no more leading, said without the "cannot be reached" warning of `set`.
        self.publish.send_modify(|s| {
            s.role = Role::Unavailable;
            s.since = Utc::now();
        });
    }

    /// One tick: look at the lease (`seen`: the one of the previous round), then lead, follow
    /// or campaign. Returns the lease of this round.
    async fn round(&self, seen: Option<LeaseId>) -> Option<LeaseId> {
        let Some(lease) = self.lease.held() else {
            match self.lease.failure() {
                Some(err) => self.unreachable(&err.to_string()),
                // No answer yet: a renewal still in flight past the lease's end, or (before any
                // lease) the first grant at start-up, which is no error.
                None if seen.is_some() => self.unreachable(&self.late()),
                None => {}
            }
            return seen;
        };
        if self.leading() && seen.is_some_and(|id| id != lease.id) {
            tracing::warn!(node = %self.node, "etcd says this agent's cluster lease is gone: it stops leading (no more sync) and campaigns again");
            self.set(Role::Follower, None, None);
        }
        let deadline = self.call_deadline(lease);
        let leader = match tokio::time::timeout_at(deadline, self.etcd.entry(&self.key)).await {
            Ok(Ok(Some(entry))) if entry.lease.is_none() => {
                self.replace_stale(lease, &entry).await;
                return Some(lease.id);
            }
            Ok(Ok(Some(entry)))
                if entry.lease != Some(lease.id) && entry.value == self.node.as_bytes() =>
            {
                // This node's name under another lease: an earlier run of this agent (killed,
                // its lease not yet expired). Not this run's leadership: it goes with that lease.
                self.set(Role::Follower, None, None);
                return Some(lease.id);
            }
            Ok(Ok(entry)) => entry.map(|e| String::from_utf8_lossy(&e.value).into_owned()),
            Ok(Err(err)) => {
                self.unreachable(&err.to_string());
                return Some(lease.id);
            }
            Err(_) => {
                self.unreachable(&self.late());
                return Some(lease.id);
            }
        };
        match leader {
            Some(name) if name == self.node => self.set(Role::Leader, Some(name), None),
            Some(name) => {
                if self.leading() {
                    // The key went (by hand, or with a lease etcd expired early) and another
                    // agent took it before this one's next tick.
                    tracing::warn!(node = %self.node, leader = %name, "another agent holds the leader key: this agent stops leading (no more sync)");
                }
                self.set(Role::Follower, Some(name), None);
            }
            None if self.leading() => {
                // The key went with the lease (or by hand): campaign again at the next tick.
                tracing::warn!(node = %self.node, "the leader key is gone: this agent stops leading (no more sync) and campaigns again");
                self.set(Role::Follower, None, None);
            }
            None => self.campaign(lease).await,
        }
        Some(lease.id)
    }

    /// `<name>/leader` bound to no lease (written by hand or by another program): it names no
    /// live agent and would never go by itself, so nobody would ever lead. Said once per such
    /// key, deleted unless it changed meanwhile, and the create of the campaign tried at once.
    async fn replace_stale(&self, lease: Held, entry: &Entry) {
        if self.leading() {
            self.set(Role::Follower, None, None);
        }
        if self.stale_seen.swap(entry.revision, Ordering::Relaxed) != entry.revision {
            let value = String::from_utf8_lossy(&entry.value);
            tracing::warn!(node = %self.node, key = %self.key, value = ?value, "the leader key is bound to no lease (written by hand or by another program), so it names no live agent: deleting it and campaigning; write nothing under the cluster's prefix but the agents");
        }
        let deleted = tokio::time::timeout_at(
            self.call_deadline(lease),
            self.etcd.delete_unchanged(&self.key, entry.revision),
        )
        .await;
        match deleted {
            Ok(Ok(_)) => self.campaign(lease).await,
            Ok(Err(err)) => self.unreachable(&err.to_string()),
            Err(_) => self.unreachable(&self.late()),
        }
    }

    /// Creates the leader key bound to `lease` if it is absent: leads when the create wins.
    async fn campaign(&self, lease: Held) {
        let value = self.node.as_bytes();
        let created = tokio::time::timeout_at(
            self.call_deadline(lease),
            self.etcd.create(&self.key, value, Some(lease.id)),
        )
        .await;
        match created {
            Ok(Ok(true)) => self.set(Role::Leader, Some(self.node.clone()), None),
            // Another agent won this race: who it is shows at the next tick.
            Ok(Ok(false)) => self.set(Role::Follower, None, None),
            Ok(Err(err)) => self.unreachable(&err.to_string()),
            Err(_) => self.unreachable(&self.late()),
        }
    }

    /// etcd could not be asked, or the lease is not held: while the lease is held a leader keeps
    /// leading (its lease keeps the key); once it is not, nobody here leads.
    fn unreachable(&self, error: &str) {
        let alive = self.lease.held().is_some();
        if self.leading() && alive {
            self.publish
                .send_modify(|s| s.last_error = Some(error.to_owned()));
            return;
        }
        if self.leading() {
            tracing::warn!(node = %self.node, error, "cannot renew the cluster lease before it expired: this agent stops leading (no more sync)");
        }
        let leader = self.publish.borrow().leader.clone();
        self.set(Role::Unavailable, leader, Some(error.to_owned()));
    }

    /// The latest time an etcd call of this round may take: half the TTL (a loaded machine
    /// answers slowly; a follower loses nothing by waiting), and for a leader never past the
    /// instant its lease is held until (it must notice that in time).
    fn call_deadline(&self, lease: Held) -> Instant {
        let now = Instant::now();
        let limit = now + self.lease.ttl() / 2;
        if self.leading() {
            limit.min(lease.until.max(now))
        } else {
            limit
        }
    }

    /// Why a call ran out of time, naming the endpoints (and the client's last error).
    fn late(&self) -> String {
        let endpoints = self.etcd.endpoints().join(", ");
        match self.etcd.last_error() {
            Some(last) => format!("etcd ({endpoints}) did not answer in time; last error: {last}"),
            None => format!("etcd ({endpoints}) did not answer in time"),
        }
    }

    fn leading(&self) -> bool {
        self.publish.borrow().role == Role::Leader
    }

    /// Publishes a role (logged when it changes) and the leader's name.
    fn set(&self, role: Role, leader: Option<String>, error: Option<String>) {
        let before = self.publish.borrow().role;
        if before != role {
            match role {
                Role::Leader => {
                    tracing::info!(node = %self.node, "this agent leads the cluster: it syncs checks")
                }
                Role::Follower => {
                    tracing::info!(node = %self.node, leader = leader.as_deref().unwrap_or("(unknown)"), "this agent follows: another agent leads and syncs checks")
                }
                Role::Unavailable => {
                    tracing::warn!(node = %self.node, error = error.as_deref().unwrap_or("stopped"), "etcd cannot be reached: this agent's cluster role is unknown (no sync)")
                }
            }
        }
        self.publish.send_modify(|s| {
            if s.role != role {
                s.since = Utc::now();
            }
            s.role = role;
            if leader.is_some() || role != Role::Unavailable {
                s.leader = leader;
            }
            s.last_error = error;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tick_lets_a_follower_take_over_well_within_a_second_of_the_expiry() {
        assert_eq!(tick(Duration::from_secs(2)), Duration::from_millis(250));
        assert_eq!(tick(Duration::from_secs(60)), Duration::from_millis(250));
        assert_eq!(
            tick(Duration::from_millis(1600)),
            Duration::from_millis(200)
        );
        assert_eq!(Role::Unavailable.as_str(), "unavailable");
    }
}
