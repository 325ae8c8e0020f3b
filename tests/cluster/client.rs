//! The etcd client (`heartbeat_agent::cluster::etcd`) against a real 3-member cluster: one
//! winner per create, leases that expire, keys by prefix, and a stopped member.

use std::time::{Duration, Instant};

use super::client;
use crate::util::etcd::EtcdCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_twice_gives_one_winner_and_the_first_value_stays() {
    let Some(cluster) = EtcdCluster::start(3) else {
        return;
    };
    let a = client(&cluster.endpoints_toml(), "").await;
    let b = client(&cluster.endpoints_toml(), "").await;
    let (la, lb) = (
        a.grant(Duration::from_secs(10)).await.expect("grant a"),
        b.grant(Duration::from_secs(10)).await.expect("grant b"),
    );
    assert_ne!(la, lb);
    let key = "t/claims/backup/1700000000";
    let (first, second) =
        tokio::join!(a.create(key, b"a", Some(la)), b.create(key, b"b", Some(lb)));
    let (first, second) = (first.expect("create a"), second.expect("create b"));
    assert!(
        first ^ second,
        "exactly one create wins: a {first}, b {second}"
    );
    let winner: &[u8] = if first { b"a" } else { b"b" };
    assert_eq!(a.get(key).await.expect("get").as_deref(), Some(winner));
    assert!(!a.create(key, b"again", None).await.expect("create again"));
    assert_eq!(b.get(key).await.expect("get").as_deref(), Some(winner));
    assert_eq!(a.get("t/claims/backup/1").await.expect("get"), None);
    // Revoking the winner's lease deletes the claim: the loser can claim the slot now.
    let (winner_lease, loser, loser_lease) = if first { (la, &b, lb) } else { (lb, &a, la) };
    a.revoke(winner_lease).await.expect("revoke");
    a.revoke(winner_lease)
        .await
        .expect("a lease already gone is no error");
    assert_eq!(a.get(key).await.expect("get"), None);
    let again = loser.create(key, b"l", Some(loser_lease)).await;
    assert!(again.expect("create after the revoke"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_takes_its_keys_with_it() {
    let Some(cluster) = EtcdCluster::start(3) else {
        return;
    };
    let etcd = client(&cluster.endpoints_toml(), "").await;
    let lease = etcd.grant(Duration::from_secs(2)).await.expect("grant");
    etcd.put("t/nodes/a", b"here", Some(lease))
        .await
        .expect("put");
    let ttl = etcd.keep_alive(lease).await.expect("keep alive");
    assert_eq!(
        ttl,
        Some(Duration::from_secs(2)),
        "a kept lease has its TTL again"
    );
    let kept = Instant::now();
    let gone = loop {
        if etcd.get("t/nodes/a").await.expect("get").is_none() {
            break kept.elapsed();
        }
        assert!(
            kept.elapsed() < Duration::from_secs(8),
            "the key outlived its lease"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        gone >= Duration::from_millis(1500),
        "gone after {gone:?}, before the TTL"
    );
    assert_eq!(etcd.keep_alive(lease).await.expect("keep alive"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_by_prefix_in_order_and_deleted() {
    let Some(cluster) = EtcdCluster::start(3) else {
        return;
    };
    let etcd = client(&cluster.endpoints_toml(), "").await;
    for (key, value) in [
        ("t/urls/b", "2"),
        ("t/urls/a", "1"),
        ("t/urlsx", "no"),
        ("t/leader", "n"),
    ] {
        etcd.put(key, value.as_bytes(), None).await.expect("put");
    }
    let listed = etcd.get_prefix("t/urls/").await.expect("prefix");
    let expected = vec![
        ("t/urls/a".to_owned(), b"1".to_vec()),
        ("t/urls/b".to_owned(), b"2".to_vec()),
    ];
    assert_eq!(listed, expected);
    etcd.delete("t/urls/a").await.expect("delete");
    etcd.delete("t/urls/none")
        .await
        .expect("deleting nothing is fine");
    assert_eq!(etcd.get_prefix("t/urls/").await.expect("prefix").len(), 1);
    etcd.delete_prefix("t/urls/").await.expect("delete prefix");
    assert!(etcd.get_prefix("t/urls/").await.expect("prefix").is_empty());
    assert_eq!(
        etcd.get("t/urlsx").await.expect("get").as_deref(),
        Some(&b"no"[..])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_member_is_skipped_and_remembered() {
    let Some(mut cluster) = EtcdCluster::start(3) else {
        return;
    };
    let etcd = client(&cluster.endpoints_toml(), "").await;
    let stopped = cluster.endpoint(0);
    cluster.stop(0);
    let lease = etcd
        .grant(Duration::from_secs(5))
        .await
        .expect("grant with a member down");
    for slot in 0..5 {
        let key = format!("t/claims/j/{slot}");
        assert!(etcd.create(&key, b"a", Some(lease)).await.expect("create"));
    }
    assert_eq!(etcd.reachable(), Some(true));
    // The stopped member is asked once, then skipped; the others may have failed a request
    // while they elected a new leader (when the stopped one led).
    let errors = etcd.errors_by_endpoint();
    let asked = errors.iter().find(|(e, _)| *e == stopped).map(|(_, n)| *n);
    assert_eq!(asked, Some(1), "{errors:?}");
    cluster.start_member(0);
    assert!(etcd
        .create("t/claims/j/9", b"a", Some(lease))
        .await
        .expect("create"));
}
