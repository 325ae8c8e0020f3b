//! Exactly-once delivery under crashes and contention: `outbox flush` or the daemon killed with
//! SIGKILL mid-delivery loses nothing and repeats only what was in flight, and two processes
//! draining the same outbox deliver each entry once.

use std::collections::HashSet;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use rand::Rng;

use crate::util::outbox::{Behaviour, PingHost};

use super::{assert_no_secret, flush_in_process, store, token, Env};

#[test]
fn kill_9_while_flushing_loses_nothing_and_repeats_only_what_was_in_flight() {
    let env = Env::new();
    kill_9_cycles(&env, &["outbox", "flush"], 25);
}

/// The same with the daemon's drainer as the process killed: the daemon runs nothing itself (an
/// external job only), so every delivery is its drainer's.
#[test]
fn kill_9_of_the_daemon_while_delivering_loses_nothing() {
    let env = Env::new();
    let config = env.write_config("[[jobs]]\nname = \"elsewhere\"\nschedule = \"@daily\"\n");
    let config = config.to_str().expect("utf8").to_owned();
    kill_9_cycles(&env, &["--config", &config, "daemon"], 60);
}

/// 200 cycles: store 3 pings, start `args` (a process that delivers them), kill -9 it after a
/// random 0..`window_ms`, then deliver the rest in-process. Nothing is lost; a target is sent
/// twice only when its entry was claimed (in flight) at the kill. The process is started here
/// as it is, not through [`Daemon`]: the same cycle kills `outbox flush` and the daemon alike,
/// and reads neither's output (it goes to `/dev/null`, so 200 starts cost no reader threads).
fn kill_9_cycles(env: &Env, args: &[&str], window_ms: u64) {
    let host = PingHost::start(Behaviour::Slow(5));
    let outbox = env.outbox();
    let mut rng = rand::thread_rng();
    let mut duplicates = 0;
    for cycle in 0..200 {
        let tokens: Vec<String> = (0..3).map(|i| token(&format!("k{cycle}-{i}"))).collect();
        for t in &tokens {
            store(&outbox, &host.url(t));
        }
        host.set(Behaviour::Slow(rng.gen_range(0..15)));
        let mut child = env
            .cmd(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the delivering process");
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..window_ms)));
        child.kill().expect("kill -9");
        child.wait().expect("reap");
        let in_flight = claimed_urls(outbox.dir());

        let report = flush_in_process(&outbox);
        assert_eq!(report.remaining, 0, "cycle {cycle}: {report:?}");
        for t in &tokens {
            let count = host.count(t);
            assert!(count >= 1, "cycle {cycle}: {t} never delivered");
            if count > 1 {
                assert!(
                    in_flight.contains(&host.url(t)),
                    "cycle {cycle}: {t} repeated but was not in flight"
                );
                assert_eq!(count, 2, "cycle {cycle}: {t}");
                duplicates += 1;
            }
        }
    }
    eprintln!("200 kill cycles of {args:?}, {duplicates} in-flight duplicates");
    assert!(outbox.list().expect("list").is_empty());
}

/// The URLs of the entries claimed (in flight) in the outbox directory `dir`.
fn claimed_urls(dir: &Path) -> HashSet<String> {
    std::fs::read_dir(dir)
        .expect("read outbox")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "claim"))
        .filter_map(|p| std::fs::read(p).ok())
        .filter_map(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .filter_map(|entry| entry["url"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn two_processes_draining_the_same_outbox_deliver_each_entry_once() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Slow(20));
    let outbox = env.outbox();
    let tokens: Vec<String> = (0..30).map(|i| token(&format!("p{i}"))).collect();
    for t in &tokens {
        store(&outbox, &host.url(t));
    }
    let children: Vec<_> = (0..2)
        .map(|_| {
            env.cmd(&["outbox", "flush"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn flush")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().expect("flush ends");
        assert_no_secret(&out);
    }
    for t in &tokens {
        assert_eq!(host.count(t), 1, "{t}: {:?}", host.paths());
    }
    assert!(outbox.list().expect("list").is_empty());
    assert_eq!(outbox.stats().delivered, 30);
}
