//! Group commit of claims: the task of each [`super::Node`] ([`super::Node::keep_lease`]) sends
//! the claims of fires due together to etcd in ONE transaction, so a burst of N fires costs an
//! agent a few etcd writes instead of N (etcd orders its writes through one raft log and one
//! fsync per batch, so 1,500 single-claim transactions arriving in the same second queue
//! behind each other).
//!
//! [`run`] is fed by a channel. While fewer than [`IN_FLIGHT`] batches are in flight, what has
//! arrived is sent at once (no timer delay is added to a lone fire); otherwise it is gathered
//! and sent as the next batch when an answer comes. The batches in flight are tasks of its own
//! `JoinSet`: when it is cancelled they are aborted, and every fire still waiting is answered
//! with an error (the node rechecks it). A batch is an outer txn without compares whose
//! `success` ops are nested `request_txn`s (etcd 3.3 and later), one per fire, each exactly
//! the claim of the node module header: compare create_revision == 0; success: the put of the
//! node's name, identity and start (bound to no lease: a claim outlives its winner) and the deleterange of the job's older claims;
//! failure: a range read of the holder. Each fire's outcome is its own `response_txn` (`succeeded`, or the holder from its
//! range answer).
//!
//! Limits: etcd refuses more than `--max-txn-ops` (default 128) ops in one level of a txn, so
//! a batch holds at most [`MAX_BATCH`] fires; it refuses a txn that writes one key twice or
//! puts a key inside another op's deleterange, so a batch holds at most one fire of each job
//! (a job's later fire waits for the next batch: two fires of a job otherwise either share
//! the key or may fall into each other's deleterange).

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::etcd::put_body;
use super::gateway::RangeAnswer;
use super::node::{held, holder_value, Claim};
use super::{Etcd, EtcdError, Keys};
use crate::identity::Identity;

/// The most fires claimed in one transaction (etcd's `--max-txn-ops` defaults to 128 per level).
pub const MAX_BATCH: usize = 100;

/// How many batches an agent has in flight at once: a burst of 500 fires is 5 full batches,
/// sent side by side rather than one after the other (`scripts/bench-cluster.sh` measures the
/// spawn delay this gives).
const IN_FLIGHT: usize = 4;

/// One fire to claim, and where its answer goes.
pub(super) struct Request {
    /// The job's name.
    pub job: String,
    /// The fire's scheduled time (unix seconds).
    pub fire: i64,
    /// How long the claim must outlive its slot.
    pub keep: Duration,
    /// The claim's outcome; an error when the batch got no answer (rechecked by the node).
    pub answer: oneshot::Sender<Result<Claim, EtcdError>>,
}

/// Sends the claims of the agent `holder` names that arrive on `receiver` in batches, until
/// `cancel` (the transactions in flight are then abandoned, and awaited until they have
/// stopped) or until every sender is gone and every batch answered.
pub(super) async fn run(
    etcd: Etcd,
    keys: Keys,
    holder: Holder,
    mut receiver: mpsc::UnboundedReceiver<Request>,
    cancel: CancellationToken,
) {
    let mut pending = VecDeque::new();
    let mut flying = JoinSet::new();
    let mut open = true;
    loop {
        while flying.len() < IN_FLIGHT && !pending.is_empty() {
            let batch = take(&mut pending);
            if !batch.is_empty() {
                flying.spawn(commit(etcd.clone(), keys.clone(), holder.clone(), batch));
            }
        }
        tokio::select! {
            () = cancel.cancelled() => {
                flying.shutdown().await;
                return;
            }
            got = receiver.recv(), if open => match got {
                Some(request) => {
                    pending.push_back(request);
                    while let Ok(request) = receiver.try_recv() {
                        pending.push_back(request);
                    }
                }
                None => open = false,
            },
            Some(_) = flying.join_next(), if !flying.is_empty() => {}
            else => return,
        }
    }
}

/// The next batch from `pending`: in order of arrival, at most [`MAX_BATCH`] fires and one
/// fire per job; fires whose caller is gone are dropped.
fn take(pending: &mut VecDeque<Request>) -> Vec<Request> {
    let mut jobs = BTreeSet::new();
    let mut batch = Vec::new();
    let mut rest = VecDeque::new();
    while let Some(request) = pending.pop_front() {
        if request.answer.is_closed() {
            continue;
        }
        if batch.len() < MAX_BATCH && !jobs.contains(&request.job) {
            jobs.insert(request.job.clone());
            batch.push(request);
        } else {
            rest.push_back(request);
        }
    }
    *pending = rest;
    batch
}

/// One fire's claim as a txn (see the module header).
fn claim_txn(keys: &Keys, holder: &str, request: &Request) -> Value {
    let key = keys.claim(&request.job, request.fire);
    let keep = i64::try_from(request.keep.as_secs()).unwrap_or(0);
    let older = keys.claim(&request.job, request.fire - keep);
    json!({
        "compare": [{
            "key": BASE64.encode(&key),
            "target": "CREATE",
            "result": "EQUAL",
            "create_revision": "0",
        }],
        "success": [
            { "request_put": put_body(&key, holder.as_bytes(), None) },
            { "request_delete_range": {
                "key": BASE64.encode(keys.claims(&request.job)),
                "range_end": BASE64.encode(older),
            } },
        ],
        "failure": [{ "request_range": { "key": BASE64.encode(&key) } }],
    })
}

#[derive(Deserialize)]
struct Txn {
    #[serde(default)]
    succeeded: bool,
    #[serde(default)]
    responses: Vec<Response>,
}

#[derive(Deserialize)]
struct Response {
    response_range: Option<RangeAnswer>,
    response_txn: Option<Txn>,
}

/// Sends `batch` as one transaction and answers each fire.
async fn commit(etcd: Etcd, keys: Keys, holder: Holder, batch: Vec<Request>) {
    let value = holder_value(&holder.node, &holder.identity, &holder.start);
    let ops: Vec<Value> = batch
        .iter()
        .map(|r| json!({ "request_txn": claim_txn(&keys, &value, r) }))
        .collect();
    let body = json!({ "success": ops });
    let named = batch
        .first()
        .map(|r| keys.claim(&r.job, r.fire))
        .unwrap_or_default();
    match etcd.call::<Txn>("/v3/kv/txn", &named, &body).await {
        Ok(outer) => {
            let mut answers = outer.responses.into_iter();
            for request in batch {
                let claim = match answers.next().and_then(|r| r.response_txn) {
                    Some(txn) => Ok(outcome(txn, &holder)),
                    None => Err(failed(
                        &etcd,
                        "answered the batch of claims without this fire's answer",
                    )),
                };
                let _ = request.answer.send(claim);
            }
        }
        Err(err) => {
            for request in batch {
                let _ = request.answer.send(Err(err.clone()));
            }
        }
    }
}

/// A claim without an answer, for `detail` (the node rechecks it).
pub(super) fn failed(etcd: &Etcd, detail: &str) -> EtcdError {
    EtcdError::Unavailable(vec![super::Failure {
        endpoint: etcd.endpoints().join(", "),
        detail: detail.to_owned(),
    }])
}

/// The agent whose claims a batch sends: its node name and identity.
#[derive(Debug, Clone)]
pub(super) struct Holder {
    /// `[cluster] node`.
    pub node: String,
    /// The agent's identity: what decides whose a claim is.
    pub identity: Identity,
    /// This start of the agent: a claim of an earlier start is not this one's.
    pub start: String,
}

/// What one fire's nested `response_txn` says, for `holder`: a claim held under another
/// identity is lost, even to an agent of the same node name, and so is one of this agent's
/// earlier starts.
fn outcome(txn: Txn, holder: &Holder) -> Claim {
    if txn.succeeded {
        return Claim::Won;
    }
    let value = txn
        .responses
        .into_iter()
        .filter_map(|r| r.response_range)
        .flat_map(|r| r.kvs)
        .find_map(|kv| BASE64.decode(kv.value).ok());
    match value {
        // Ours when it is our own first attempt, whose answer was lost on a closed connection.
        Some(value) => held(&value, &holder.identity, &holder.start),
        None => Claim::Lost("another node".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(job: &str, fire: i64) -> (Request, oneshot::Receiver<Result<Claim, EtcdError>>) {
        let (answer, receiver) = oneshot::channel();
        let request = Request {
            job: job.to_owned(),
            fire,
            keep: Duration::from_secs(60),
            answer,
        };
        (request, receiver)
    }

    #[test]
    fn a_batch_holds_one_fire_per_job_and_at_most_max_batch() {
        let mut pending = VecDeque::new();
        let mut receivers = Vec::new();
        for (job, fire) in [("a", 10), ("a", 11), ("b", 10)] {
            let (r, rx) = request(job, fire);
            pending.push_back(r);
            receivers.push(rx);
        }
        for i in 0..MAX_BATCH + 5 {
            let (r, rx) = request(&format!("j{i}"), 10);
            pending.push_back(r);
            receivers.push(rx);
        }
        let first = take(&mut pending);
        assert_eq!(first.len(), MAX_BATCH);
        assert_eq!((first[0].job.as_str(), first[0].fire), ("a", 10));
        assert_eq!(first[1].job, "b");
        // The second fire of `a` waits for the next batch, ahead of the overflow.
        let second = take(&mut pending);
        assert_eq!((second[0].job.as_str(), second[0].fire), ("a", 11));
        assert_eq!(second.len(), 1 + 5 + 2);
        assert!(pending.is_empty());
    }

    #[test]
    fn fires_whose_caller_is_gone_are_not_claimed() {
        let (r, rx) = request("a", 10);
        drop(rx);
        let (r2, _rx2) = request("b", 10);
        let mut pending = VecDeque::from([r, r2]);
        let batch = take(&mut pending);
        assert_eq!(batch.len(), 1);
        assert_eq!(batch[0].job, "b");
    }

    fn holder() -> Holder {
        Holder {
            node: "node-a".to_owned(),
            identity: Identity::parse("aaaaaaaaaaaaaaaa").expect("id"),
            start: "0000002a".to_owned(),
        }
    }

    #[test]
    fn a_nested_answer_names_the_holder() {
        let txn: Txn = serde_json::from_value(json!({
            "responses": [{ "response_range": { "kvs": [{
                "key": BASE64.encode("hb/claims/a/10"), "value": BASE64.encode("b bbbbbbbbbbbbbbbb"),
            }] } }],
        }))
        .expect("txn");
        let me = holder();
        assert!(matches!(outcome(txn, &me), Claim::Lost(n) if n == "b"));
        let won: Txn = serde_json::from_value(json!({ "succeeded": true })).expect("txn");
        assert!(matches!(outcome(won, &me), Claim::Won));
    }

    #[test]
    fn a_claim_held_under_this_name_by_another_identity_is_lost() {
        let held_by = |value: &str| -> Txn {
            serde_json::from_value(json!({
                "responses": [{ "response_range": { "kvs": [{
                    "key": BASE64.encode("hb/claims/a/10"), "value": BASE64.encode(value),
                }] } }],
            }))
            .expect("txn")
        };
        let me = holder();
        // Two agents left `node` at the same host name: the other's claim is not ours.
        let twin = held_by("node-a bbbbbbbbbbbbbbbb");
        assert!(matches!(outcome(twin, &me), Claim::Lost(n) if n == "node-a"));
        // Our own claim whose answer was lost is ours.
        let mine = held_by("node-a aaaaaaaaaaaaaaaa 0000002a");
        assert!(matches!(outcome(mine, &me), Claim::Won));
        // Ours from before a restart is not.
        let before = held_by("node-a aaaaaaaaaaaaaaaa 0000002b");
        assert!(matches!(outcome(before, &me), Claim::Lost(n) if n == "node-a"));
        // An older agent's value (the bare name) is never ours.
        assert!(matches!(outcome(held_by("node-a"), &me), Claim::Lost(n) if n == "node-a"));
    }
}
