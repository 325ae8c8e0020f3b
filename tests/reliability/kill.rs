//! `kill -9` of the daemon at random moments, 20 times, while jobs run every second, pings are
//! pending (the ping host answers 500 or hangs in turns) and sync is in flight. After the last
//! restart, with the faults gone, every pending success is delivered, no outbox entry is
//! corrupt, and every job runs again (nothing a killed daemon left behind blocks it).

use std::time::Duration;

use heartbeat_agent::emulator::{Fault, FaultKind, Listener};
use nix::sys::signal::Signal;
use rand::{Rng, SeedableRng};

use super::faults::{fires, Rig};
use crate::util;

const CYCLES: usize = 20;

#[test]
fn after_repeated_kill_9_nothing_acknowledged_is_lost_and_jobs_run_again() {
    let seed = std::env::var("RELIABILITY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(77);
    eprintln!("kill -9: seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let rig = Rig::new("outbox_max_age = \"1h\"\nresync_interval = \"2s\"");
    let mut queued_before_kill = 0;
    for cycle in 0..CYCLES {
        let kind = if cycle % 3 == 2 {
            FaultKind::Hang
        } else {
            FaultKind::Drop
        };
        let fault = rig
            .emulator
            .add_fault(Fault::new(kind).listener(Listener::Ping));
        let api_fault = (cycle % 4 == 1).then(|| {
            rig.emulator.add_fault(Fault {
                status: Some(503),
                ..Fault::new(FaultKind::Status).listener(Listener::Api)
            })
        });
        let mut daemon = rig.daemon();
        std::thread::sleep(Duration::from_millis(rng.gen_range(300..2_500)));
        daemon.signal(Signal::SIGKILL);
        let status = daemon.exit_within(Duration::from_secs(10));
        assert_eq!(status.code(), None, "the daemon was killed by a signal");
        rig.emulator.remove_fault(fault);
        if let Some(id) = api_fault {
            rig.emulator.remove_fault(id);
        }
        queued_before_kill += daemon
            .log()
            .json()
            .iter()
            .filter(|e| {
                e["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("ping not delivered"))
            })
            .count();
    }
    let pending = rig.outbox();
    let pending_entries = pending["entries"].as_array().map_or(0, Vec::len);
    assert!(
        queued_before_kill > 0,
        "no ping was ever pending: the test proves nothing"
    );
    let before = rig.emulator.pings().len();
    let mut daemon = rig.daemon();
    util::eventually_every(
        Duration::from_millis(250),
        Duration::from_secs(40),
        "the outbox to drain",
        || {
            let outbox = rig.outbox();
            if outbox["entries"].as_array().is_some_and(Vec::is_empty) {
                Ok(())
            } else {
                Err(outbox)
            }
        },
    );
    std::thread::sleep(Duration::from_secs(2));
    let log = Rig::stop(&mut daemon);
    let stats = rig.outbox()["stats"].clone();
    assert_eq!(stats["corrupt"], 0, "{stats}");
    let n = |key: &str| stats[key].as_u64().unwrap_or(0);
    let accounted = [
        "coalesced",
        "delivered",
        "dropped_expired",
        "dropped_failed_run",
        "dropped_overflow",
        "permanent",
        "purged",
    ]
    .iter()
    .map(|k| n(k))
    .sum::<u64>();
    assert_eq!(
        n("queued"),
        accounted,
        "a queued ping is unaccounted for: {stats}"
    );
    assert!(!log.iter().any(|e| e.to_string().contains("panicked")));
    for job in ["fast-1", "fast-2", "fast-3"] {
        let (fires, _) = fires(&log, job);
        assert!(fires.len() >= 2, "{job} did not run after the restarts");
    }
    let delivered_after = rig.emulator.pings().len() - before;
    eprintln!(
        "FIGURES kill -9: {CYCLES} cycles, {queued_before_kill} pings queued before kills, \
         {pending_entries} entries pending at the last restart, all delivered \
         ({delivered_after} pings after it); stats {stats}"
    );
}
