//! This agent's one etcd lease: its presence key and, while it leads, the leader key are bound
//! to it, and fires are claimed only while it is held (the claim keys themselves are bound to
//! no lease: they outlive the agent, see [`super::node`]). [`Lease`] grants it, renews it, says whether it is
//! held at an instant, and revokes it at shutdown; [`super::Node`] runs it
//! ([`super::Node::keep_lease`]) and the election ([`super::leader`]) reads it.
//!
//! The rules, the same for every key bound to the lease:
//!
//! - **Grant.** The keeper asks for a lease of `[cluster] lease` (the TTL) and writes the
//!   presence key `<name>/nodes/<node>` bound to it (`{"node", "identity", "since"}`); the lease
//!   counts as held once both are done. A presence another identity holds (another live agent
//!   with the same node name, which the daemon refuses at start: [`presence_of`]) is left alone
//!   and said in an ERROR line: claims are decided by identity, so neither runs a fire twice.
//! - **Renewal.** A keep-alive is sent when a third of the TTL etcd granted has passed since the
//!   *send* of the last request etcd granted ([`renew_at`]): two renewals in a row can fail
//!   before the lease can end. A renewal not answered within a TTL of its send is abandoned (its
//!   answer could no longer make the lease held). After a failed attempt the keeper asks again
//!   after [`RETRY`].
//! - **Held.** The lease is held at an instant before `send + TTL` of the last grant or renewal
//!   etcd granted ([`Held::until`]). etcd renews a lease when the request reaches it, at some
//!   instant after the send, so etcd never ends the lease before that bound: an agent never
//!   believes it holds a lease etcd has already ended.
//! - **Lost.** Past that bound the lease is not held: no claim is made and a leader stops
//!   leading. The keeper goes on renewing the same lease: if etcd still has it, it is held again
//!   (with every key bound to it); when etcd answers that it is gone, a new one is granted at
//!   once and the presence written again.
//! - **Shutdown.** At cancellation renewing stops, the lease counts as not held, and it is
//!   revoked, waiting at most [`revoke_wait`] for etcd: the presence and the leader key go at
//!   once, so another agent leads without waiting for the TTL. The claims stay.
//!
//! The keeper runs in the future of [`Lease::keep`] and starts no task of its own.

use std::sync::Mutex;
use std::time::Duration;

use chrono::Utc;
use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{Etcd, EtcdError, Failure, LeaseId};
use crate::config::OnUnavailable;
use crate::identity::Identity;

/// How long the keeper waits after a failed grant or renewal before it asks again: short, so a
/// lease comes back within a second of etcd answering again.
pub const RETRY: Duration = Duration::from_millis(250);

/// A lease as etcd last granted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// The lease.
    pub id: LeaseId,
    /// When the grant or renewal etcd granted was sent.
    pub sent: Instant,
    /// `sent` plus the TTL etcd answered: until then the lease is held for sure.
    pub until: Instant,
}

impl Held {
    /// Whether the lease is held at `at`.
    pub fn at(self, at: Instant) -> bool {
        at < self.until
    }
}

/// When the lease granted as `held` is renewed next: a third of its TTL after the send.
pub fn renew_at(held: Held) -> Instant {
    held.sent + (held.until - held.sent) / 3
}

/// How long a revocation at shutdown waits for etcd: half the TTL, at most 2 s (a stopping
/// daemon does not hang on an etcd that does not answer; the lease ends by itself anyway).
pub fn revoke_wait(ttl: Duration) -> Duration {
    (ttl / 2).min(Duration::from_secs(2))
}

/// This agent's lease and its keeper.
pub struct Lease {
    etcd: Etcd,
    /// The TTL asked for (`[cluster] lease`).
    ttl: Duration,
    /// This agent's node name, for the log lines.
    node: String,
    /// This agent's identity, written in its presence.
    identity: Identity,
    /// The presence key written under each new lease.
    presence: String,
    /// What fires do without a lease, for the log line that says it was given up.
    on_unavailable: OnUnavailable,
    /// The lease last granted, even once past its `until` (the keeper renews it still).
    granted: watch::Sender<Option<Held>>,
    /// Set when the keeper's first attempt ended, with a lease or not.
    settled: watch::Sender<bool>,
    /// Why the last grant or renewal failed; `None` once one succeeds.
    failure: Mutex<Option<EtcdError>>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("node", &self.node)
            .field("ttl", &self.ttl)
            .field("granted", &*self.granted.borrow())
            .finish_non_exhaustive()
    }
}

impl Lease {
    /// The lease of `node` (its name and identity) with `ttl`, its presence at `presence`; asks
    /// etcd nothing until [`Lease::keep`].
    pub fn new(
        etcd: Etcd,
        ttl: Duration,
        (node, identity): (&str, &Identity),
        presence: String,
        on_unavailable: OnUnavailable,
    ) -> Lease {
        Lease {
            etcd,
            ttl,
            node: node.to_owned(),
            identity: identity.clone(),
            presence,
            on_unavailable,
            granted: watch::channel(None).0,
            settled: watch::channel(false).0,
            failure: Mutex::new(None),
        }
    }

    /// The TTL asked for.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The lease if it is held at `at` (see the module header).
    pub fn held_at(&self, at: Instant) -> Option<Held> {
        (*self.granted.borrow()).filter(|held| held.at(at))
    }

    /// The lease if it is held now.
    pub fn held(&self) -> Option<Held> {
        self.held_at(Instant::now())
    }

    /// Waits until the keeper's first attempt ended, at most `wait`.
    pub async fn settled(&self, wait: Duration) {
        let mut settled = self.settled.subscribe();
        let _ = tokio::time::timeout(wait, settled.wait_for(|done| *done)).await;
    }

    /// Why the last grant or renewal failed, while none has succeeded since.
    pub fn failure(&self) -> Option<EtcdError> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Grants and renews the lease until `cancel`, then revokes it (see the module header).
    pub async fn keep(&self, cancel: &CancellationToken) {
        let mut failing = false;
        let mut given_up = None;
        loop {
            let attempt = tokio::time::timeout(self.ttl, self.renew()).await;
            let attempt = attempt.unwrap_or_else(|_| Err(self.late()));
            self.settled.send_replace(true);
            let next = match attempt {
                Ok(held) => {
                    if std::mem::take(&mut failing) {
                        info!(node = %self.node, "etcd is reachable again; claims resume");
                    }
                    *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = None;
                    given_up = None;
                    renew_at(held)
                }
                Err(err) => {
                    if !std::mem::replace(&mut failing, true) {
                        warn!(node = %self.node, "{err}");
                    }
                    *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(err);
                    self.note_given_up(&mut given_up);
                    Instant::now() + RETRY
                }
            };
            tokio::select! {
                () = cancel.cancelled() => break,
                () = tokio::time::sleep_until(next) => {}
            }
        }
        self.revoke().await;
    }

    /// One attempt: renews the lease last granted, or grants one (and writes the presence) when
    /// there is none or etcd says it is gone.
    async fn renew(&self) -> Result<Held, EtcdError> {
        let sent = Instant::now();
        let last = *self.granted.borrow();
        if let Some(last) = last {
            if let Some(ttl) = self.etcd.keep_alive(last.id).await? {
                let held = Held {
                    id: last.id,
                    sent,
                    until: sent + ttl,
                };
                self.granted.send_replace(Some(held));
                return Ok(held);
            }
            warn!(node = %self.node, lease = last.id, "the lease expired (etcd was out of reach for longer than its TTL); granting a new one");
            self.granted.send_replace(None);
        }
        let id = self.etcd.grant(self.ttl).await?;
        self.present(id).await?;
        let held = Held {
            id,
            sent,
            until: sent + self.ttl,
        };
        info!(node = %self.node, lease = id, ttl = ?self.ttl, "holding a cluster lease");
        self.granted.send_replace(Some(held));
        Ok(held)
    }

    /// Writes the presence bound to lease `id`, unless another identity holds it (see the
    /// module header).
    async fn present(&self, id: LeaseId) -> Result<(), EtcdError> {
        let presence =
            json!({ "node": self.node, "identity": self.identity.as_str(), "since": Utc::now() });
        let presence = presence.to_string();
        if self
            .etcd
            .create(&self.presence, presence.as_bytes(), Some(id))
            .await?
        {
            return Ok(());
        }
        match presence_of(&self.etcd, &self.presence).await? {
            Some(Present {
                identity: Some(other),
                ..
            }) if other != self.identity.as_str() => {
                tracing::error!(node = %self.node, identity = %self.identity, other = %other, "another live agent is registered under this node name; claims are decided by identity, so neither runs a fire twice, but set [cluster] node to a name of its own on each agent");
                Ok(())
            }
            // This agent's own presence from before a restart, an older agent's, or gone since.
            _ => {
                self.etcd
                    .put(&self.presence, presence.as_bytes(), Some(id))
                    .await
            }
        }
    }

    /// After a failed attempt: says once per lease that it is no longer held.
    fn note_given_up(&self, given_up: &mut Option<LeaseId>) {
        let Some(last) = *self.granted.borrow() else {
            return;
        };
        if last.at(Instant::now()) || *given_up == Some(last.id) {
            return;
        }
        *given_up = Some(last.id);
        warn!(node = %self.node, "the lease was not renewed for {:?}: given up; fires of run_on = \"one\" jobs follow on_unavailable = \"{}\" until etcd answers", self.ttl, self.on_unavailable.as_str());
    }

    /// At shutdown: the lease counts as not held, then is revoked (at most [`revoke_wait`]).
    async fn revoke(&self) {
        let Some(last) = self.granted.send_replace(None) else {
            return;
        };
        let wait = revoke_wait(self.ttl);
        match tokio::time::timeout(wait, self.etcd.revoke(last.id)).await {
            Ok(Ok(())) => info!(node = %self.node, "cluster lease revoked at shutdown"),
            Ok(Err(err)) => {
                warn!(node = %self.node, error = %err, "cannot revoke the cluster lease at shutdown; another agent leads once it expires")
            }
            Err(_) => {
                warn!(node = %self.node, "etcd did not answer the lease revocation at shutdown; another agent leads once the lease expires")
            }
        }
    }

    /// A grant or renewal not answered within a TTL, naming the endpoints.
    fn late(&self) -> EtcdError {
        EtcdError::Unavailable(vec![Failure {
            endpoint: self.etcd.endpoints().join(", "),
            detail: format!("did not answer the lease request within {:?}", self.ttl),
        }])
    }
}

/// An agent's presence as its key holds it.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Present {
    /// Its node name.
    pub node: String,
    /// Its identity; `None` from agents older than identities.
    #[serde(default)]
    pub identity: Option<String>,
}

/// The presence at key `presence`, `None` when there is none (no live agent has that node
/// name: a presence is bound to its agent's lease) or it cannot be read as one.
pub async fn presence_of(etcd: &Etcd, presence: &str) -> Result<Option<Present>, EtcdError> {
    let value = etcd.get(presence).await?;
    Ok(value.and_then(|v| serde_json::from_slice(&v).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(ttl: u64) -> Held {
        let sent = Instant::now();
        Held {
            id: 7,
            sent,
            until: sent + Duration::from_secs(ttl),
        }
    }

    #[test]
    fn a_lease_is_held_until_a_ttl_after_the_send_of_its_last_granted_renewal() {
        let h = held(6);
        assert!(h.at(h.sent));
        assert!(h.at(h.sent + Duration::from_millis(5999)));
        assert!(!h.at(h.sent + Duration::from_secs(6)));
    }

    #[test]
    fn a_lease_is_renewed_a_third_of_its_ttl_after_the_send() {
        let h = held(6);
        assert_eq!(renew_at(h), h.sent + Duration::from_secs(2));
        // Two renewals may fail (each retried later) before it ends.
        assert!(h.at(renew_at(h) + Duration::from_secs(2) + RETRY));
    }

    #[test]
    fn a_revocation_waits_half_the_ttl_and_at_most_two_seconds() {
        assert_eq!(revoke_wait(Duration::from_secs(2)), Duration::from_secs(1));
        assert_eq!(revoke_wait(Duration::from_secs(60)), Duration::from_secs(2));
    }
}
