//! `grace = "auto"` with `retries`: the grace sync sets covers every attempt at its timeout
//! and every wait at its cap, so a run that fails twice and succeeds on its third attempt
//! (the real `run --job` with a counter file, pinging the emulator's check) never alarms,
//! while the same late ping of a job without retries does: the emulator's real timer, on its
//! frozen clock moved to each event.

use chrono::{DateTime, Utc};
use heartbeat_agent::emulator::{EmulatorOptions, Fixtures};
use serde_json::{json, Value};

use super::{text, Setup};
use crate::util::emulator::{token_for, Background};
use crate::util::{flaky_script, runs_counted, Home};

fn seconds(heartbeat: &Value, amount: &str, unit: &str) -> i64 {
    let per = match heartbeat[unit].as_str() {
        Some("seconds") => 1,
        Some("minutes") => 60,
        Some("hours") => 3_600,
        other => panic!("unexpected unit {other:?}"),
    };
    heartbeat[amount].as_i64().expect("a number") * per
}

fn alarms(setup: &Setup, check: &str) -> Vec<String> {
    let events = setup.emulator.heartbeat_events(check).expect("events");
    events
        .iter()
        .filter(|e| e["state"] == "FAILING")
        .map(|e| e["timestamp"].to_string())
        .collect()
}

#[test]
fn a_success_on_the_last_retry_never_alarms_with_the_auto_grace() {
    let setup = Setup {
        emulator: Background::start_with(EmulatorOptions {
            fixtures: Fixtures::default(),
            clock_scale: 1e-9,
            ..EmulatorOptions::default()
        }),
        home: Home::new(),
    };
    for id in ["retried", "plain"] {
        setup
            .emulator
            .add_heartbeat_check(&json!({"id": id, "name": id,
                "heartbeat": {"period": 1, "periodUnit": "days", "grace": 1,
                              "graceUnit": "hours", "pingToken": token_for(id)}}))
            .expect("check added");
    }
    let counter = setup.home.path("counter");
    setup.write_config(&format!(
        "[[jobs]]\nname = \"retried\"\nschedule = \"0 * * * *\"\ncheck_id = \"retried\"\n\
         timeout = \"10m\"\nshell = \"{}\"\nretries = 2\nretry_delay = \"1s\"\nretry_delay_max = \"2s\"\n\n\
         [[jobs]]\nname = \"plain\"\nschedule = \"0 * * * *\"\ncheck_id = \"plain\"\n\
         timeout = \"10m\"\ncommand = [\"true\"]\n",
        flaky_script(&counter, 3)
    ));
    let synced = setup.agent(&["sync"]);
    assert_eq!(synced.status.code(), Some(0), "{}", text(&synced.stderr));
    let heartbeat =
        |id: &str| setup.emulator.heartbeat_check(id).expect("check")["heartbeat"].clone();
    let (retried, plain) = (heartbeat("retried"), heartbeat("plain"));
    assert_eq!(seconds(&retried, "period", "periodUnit"), 3_600);
    // 3 attempts × 10 m + waits of 1 s and 2 s + 6 m margin, rounded up to a minute.
    assert_eq!(
        seconds(&retried, "grace", "graceUnit"),
        37 * 60,
        "{retried}"
    );
    assert_eq!(seconds(&plain, "grace", "graceUnit"), 16 * 60, "{plain}");
    let run = |job: &str| {
        let out = setup.agent(&["run", "--job", job]);
        assert_eq!(out.status.code(), Some(0), "{job}: {}", text(&out.stderr));
    };
    let set_clock = |to: DateTime<Utc>| {
        let by = (to - setup.emulator.now()).to_std().unwrap_or_default();
        setup.emulator.advance_clock(by);
    };
    // The first runs arm both timers.
    let first = setup.emulator.now();
    run("retried");
    assert_eq!(runs_counted(&counter), 3);
    run("plain");
    // The next fire, an hour later: two attempts fail at their full timeout, the third
    // succeeds after the longest waits. Both jobs ping at that moment.
    std::fs::remove_file(&counter).expect("reset the counter");
    set_clock(first + chrono::Duration::minutes(60 + 20) + chrono::Duration::seconds(3));
    run("retried");
    assert_eq!(runs_counted(&counter), 3, "the run made three attempts");
    run("plain");
    assert_eq!(setup.emulator.pings().len(), 4, "one ping per run");
    set_clock(first + chrono::Duration::minutes(90));
    assert_eq!(
        alarms(&setup, "retried"),
        Vec::<String>::new(),
        "the retried run alarmed"
    );
    // Without the retries' grace the same ping comes too late.
    assert_eq!(
        alarms(&setup, "plain").len(),
        1,
        "{:?}",
        setup.emulator.heartbeat_events("plain")
    );
}
