//! Sync owns exactly what the config sets: fields the config never set are not sent (a mute
//! made in the web UI stays), a field removed from the config is cleared once; and a deleted
//! check is `missing`, named, and not retried in a loop (edits made elsewhere: `drift`).

use super::*;

const SERVICE: &str = "123e4567-e89b-12d3-a456-426614174000";

pub(super) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A PUT as someone editing the check in the web UI would make it.
pub(super) fn edit_elsewhere(setup: &Setup, id: &str, body: Value) {
    let runtime = runtime();
    let url = format!("{}/v1/checks/heartbeat/{id}", setup.emulator.base_url());
    let status = runtime.block_on(async {
        reqwest::Client::new()
            .put(url)
            .bearer_auth(setup.emulator.api_key())
            .json(&body)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    });
    assert_eq!(status, 200);
}

#[test]
fn sync_sends_only_what_the_config_sets_and_clears_what_it_no_longer_sets() {
    let setup = Setup::new(&["c1"]);
    let owned = format!(
        "[jobs.check]\ndescription = \"pg_dump\"\nmuted = true\ntags = [\"prod\"]\n\
         use_global_alert_settings = false\n\
         alert_settings = {{ escalation_type = \"RUN_BASED\", reminders = {{ amount = 2, interval = 10 }} }}\n\
         alert_channel_subscriptions = [{{ alert_channel_id = 7 }}]\n\
         trigger_incident = {{ service_id = \"{SERVICE}\", name = \"backup down\", severity = \"MAJOR\" }}\n"
    );
    setup.write_config(&job("backup", "0 3 * * *", "c1", &owned));
    let first = setup.agent(&["sync"]);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let check = setup.emulator.heartbeat_check("c1").unwrap();
    assert_eq!(check["description"], "pg_dump");
    assert_eq!(check["triggerIncident"]["severity"], "MAJOR");
    assert_eq!(check["triggerIncident"]["notifySubscribers"], false);
    assert_eq!(check["alertSettings"]["reminders"]["interval"], 10);

    // Every owned key removed: each is cleared once, with null where the field is nullable.
    setup.write_config(&job("backup", "0 3 * * *", "c1", ""));
    let cleared = setup.agent(&["sync"]);
    assert_eq!(cleared.status.code(), Some(0), "{}", text(&cleared.stderr));
    let puts = setup.puts();
    assert_eq!(puts.len(), 2);
    let body = &puts[1].2;
    assert_eq!(body["description"], Value::Null);
    assert!(body.as_object().unwrap().contains_key("description"));
    assert_eq!(body["triggerIncident"], Value::Null);
    assert!(body.as_object().unwrap().contains_key("triggerIncident"));
    assert_eq!(body["muted"], false);
    assert_eq!(body["tags"], json!([]));
    assert_eq!(body["alertChannelSubscriptions"], json!([]));
    assert_eq!(body["useGlobalAlertSettings"], true);
    assert!(body.get("alertSettings").is_none(), "{body}");
    let check = setup.emulator.heartbeat_check("c1").unwrap();
    assert_eq!(check["description"], Value::Null);
    assert_eq!(check["triggerIncident"], Value::Null);
    assert_eq!(
        (&check["muted"], &check["tags"]),
        (&json!(false), &json!([]))
    );
    // Cleared once: the next pass has nothing to send.
    let again = setup.agent(&["sync"]);
    assert_eq!(text(&again.stdout), "backup (check c1): in_sync\n");
    assert_eq!(setup.puts().len(), 2);

    // A mute and a description made in the web UI: a config that never set them leaves them,
    // even on a forced PUT.
    edit_elsewhere(
        &setup,
        "c1",
        json!({"muted": true, "description": "set by hand"}),
    );
    let forced = setup.agent(&["sync", "--force"]);
    assert_eq!(forced.status.code(), Some(0), "{}", text(&forced.stderr));
    let puts = setup.puts();
    let body = &puts.last().unwrap().2;
    assert_eq!(
        body.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["activated", "heartbeat", "name"]
    );
    let check = setup.emulator.heartbeat_check("c1").unwrap();
    assert_eq!(check["muted"], true);
    assert_eq!(check["description"], "set by hand");
}

pub(super) fn reconciler(setup: &Setup, reassert: Duration) -> sync::Reconciler {
    let client = client(setup, RetryPolicy::none());
    sync::Reconciler::new(Arc::new(load(setup)), client, setup.state_dir()).with_timing(
        sync::task::TaskTiming {
            start_jitter: Duration::from_millis(10),
            resync_interval: Duration::from_secs(3600),
            retry_base: Duration::from_millis(10),
            retry_cap: Duration::from_millis(50),
            reassert_interval: reassert,
            reassert_start_spread: Duration::from_millis(50),
        },
    )
}

pub(super) fn puts_to(setup: &Setup, id: &str) -> usize {
    let path = format!("/v1/checks/heartbeat/{id}");
    setup.puts().iter().filter(|(p, _, _)| *p == path).count()
}

#[test]
fn a_deleted_check_is_missing_named_and_not_retried_in_a_loop() {
    let setup = Setup::new(&["c1", "c2"]);
    setup.write_config(&format!(
        "{}{}",
        job("backup", "0 3 * * *", "c1", ""),
        job("report", "0 4 * * *", "c2", "")
    ));
    assert_eq!(setup.agent(&["sync"]).status.code(), Some(0));
    assert!(setup.emulator.delete_heartbeat_check("c1"));
    // `sync` names the job and the check and fails.
    let out = setup.agent(&["sync", "--force"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("job \"backup\": check c1: the service has no such check (404)"),
        "{err}"
    );
    assert!(
        text(&out.stdout)
            .contains("backup (check c1): missing: the service has no such check (404)"),
        "{}",
        text(&out.stdout)
    );
    // The daemon's task: missing in the status, and PUT again only at its re-assertions.
    let runtime = runtime();
    let reconciler = reconciler(&setup, Duration::from_millis(500));
    let status = reconciler.status();
    let cancel = tokio_util::sync::CancellationToken::new();
    let task = runtime.spawn(reconciler.clone().run(cancel.clone()));
    runtime.block_on(util::eventually_async(
        Duration::from_secs(10),
        "backup missing",
        || match status.get("backup") {
            Some(job) if job.state == sync::SyncState::Missing => Ok(()),
            other => Err(format!("{other:?}")),
        },
    ));
    let message = status.get("backup").unwrap().last_error.unwrap();
    assert!(message.contains("job \"backup\": check c1"), "{message}");
    assert_eq!(
        status.get("report").map(|s| s.state),
        Some(sync::SyncState::InSync),
        "the other check is not held up"
    );
    // Passes keep running (a run of the auto-period job triggers one each time); retries of a
    // failed PUT back off from 10 ms, yet the missing check is sent only at its re-assertions.
    let before = puts_to(&setup, "c1");
    for _ in 0..20 {
        reconciler.after_run("backup", at("2026-11-22T03:00:00Z"), false);
        runtime.block_on(async { tokio::time::sleep(Duration::from_millis(75)).await });
    }
    let sent = puts_to(&setup, "c1") - before;
    assert!(sent <= 4, "{sent} PUTs to a deleted check in 1.5 s");
    assert_eq!(
        status.get("backup").unwrap().state,
        sync::SyncState::Missing
    );
    cancel.cancel();
    runtime.block_on(task).unwrap();
}

#[test]
fn a_reassertion_that_changes_no_period_does_not_postpone_the_alarm() {
    let setup = Setup::new(&["c1"]);
    setup.write_config(&job(
        "backup",
        "0 3 * * *",
        "c1",
        "[jobs.check]\ngrace = \"1h\"\n",
    ));
    assert_eq!(setup.agent(&["sync"]).status.code(), Some(0));
    let url = sync::learned_ping_url(&setup.state_dir(), "backup", "c1").unwrap();
    assert_eq!(ping(&url), 200);
    // Ten minutes before the deadline (1 day + 1 hour after the ping) the definition is
    // re-asserted (the same PUT the daemon sends), unchanged.
    setup
        .emulator
        .advance_clock(Duration::from_secs(24 * 3600 + 50 * 60));
    let forced = setup.agent(&["sync", "--force"]);
    assert_eq!(forced.status.code(), Some(0), "{}", text(&forced.stderr));
    assert_eq!(setup.puts().len(), 2);
    // Twenty minutes later the deadline has passed: the check fails at the ping's deadline,
    // not a day after the re-assertion.
    setup.emulator.advance_clock(Duration::from_secs(20 * 60));
    let check = setup.emulator.heartbeat_check("c1").unwrap();
    assert_eq!(check["heartbeat"]["period"], 1);
    let runtime = runtime();
    // The list's default window is the last 24 hours: ask for three days.
    let events: Value = runtime.block_on(async {
        reqwest::Client::new()
            .get(format!(
                "{}/v1/checks/heartbeats/c1/events?startTime={}",
                setup.emulator.base_url(),
                (setup.emulator.now() - chrono::Duration::days(3)).date_naive()
            ))
            .bearer_auth(setup.emulator.api_key())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    let time = |state: &str| {
        let event = events[0]["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["state"] == state)
            .unwrap_or_else(|| panic!("no {state} event: {events}"));
        at(event["timestamp"].as_str().unwrap())
    };
    assert_eq!(
        time("FAILING") - time("RECEIVED"),
        chrono::Duration::hours(25),
        "the re-assertion restarted the timer"
    );
}
