//! A check deleted on the service is never "ok": the first 404 for it (here the job's ping)
//! marks it missing in `/status`, the `status` table and `/metrics` at once, without waiting
//! for the remote view's cache; `health` keeps its exit code (the service's state never fails
//! liveness).

use std::time::Duration;

use heartbeat_agent::status::client::Endpoint;

use crate::util::Home;

use super::{
    emulator_with_check, get, job, listen_with_token, parse_metrics, sample, status_doc, StatusHome,
};

#[test]
fn a_check_deleted_on_the_service_is_missing_at_its_first_404() {
    let emulator = emulator_with_check();
    let key = emulator.api_key().to_owned();
    let home = Home::new();
    let jobs = "[[jobs]]\nname = \"good\"\nschedule = \"*/1 * * * * *\"\nshell = \"true\"\n\
                check_id = \"c1\"\n[jobs.check]\nperiod = \"1m\"\n";
    home.write(Some(&emulator), &listen_with_token(&home), jobs);
    let daemon = home.daemon(&key);
    let endpoint = home.endpoint();
    daemon.until(
        "a ping accepted, the remote view ok",
        Duration::from_secs(15),
        || {
            let doc = status_doc(&endpoint, true);
            let good = job(&doc, "good");
            let ok = good["last_ping"]["result"] == "accepted"
                && good["remote"]["state"] == "available"
                && good["sync"]["state"] == "in_sync";
            ok.then_some(())
        },
    );
    assert!(job(&status_doc(&endpoint, false), "good")["missing"].is_null());
    assert!(emulator.delete_heartbeat_check("c1"));
    // The next run's ping gets 404; the cached remote view (60 s) still says "available".
    let doc = daemon.until("the check missing", Duration::from_secs(10), || {
        let doc = status_doc(&endpoint, false);
        job(&doc, "good")["missing"].is_object().then_some(doc)
    });
    let good = job(&doc, "good");
    assert_eq!(good["missing"]["by"], "ping", "{good}");
    let reason = good["missing"]["reason"].as_str().expect("reason");
    assert!(
        reason.contains("no check c1") && reason.contains("job \"good\""),
        "{reason}"
    );
    assert_eq!(good["remote"]["state"], "available", "from the cache");
    let table = home.output(&["status"], &key);
    let table = String::from_utf8_lossy(&table.stdout).into_owned();
    let row = table
        .lines()
        .find(|l| l.starts_with("good"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        row.contains("check missing") && row.contains("MISSING on the service"),
        "{row}"
    );
    assert!(!row.contains("ok 24h") && !row.contains("in sync"), "{row}");
    assert_one_missing(&endpoint);
    let health = home.output(&["health"], &key);
    assert_eq!(
        health.status.code(),
        Some(0),
        "liveness is not the service's state"
    );
    let said = String::from_utf8_lossy(&health.stderr);
    assert!(
        said.contains("job \"good\": the service has no check c1"),
        "{said}"
    );
}

#[test]
fn a_check_the_service_does_not_have_is_missing_before_any_ping_and_the_remote_view_says_why() {
    // No run yet: sync's 404 marks the check missing, and the remote view's 404 for the
    // check's events says the same in its own words (the heartbeat part of `remote`).
    let emulator = emulator_with_check();
    let key = emulator.api_key().to_owned();
    let home = Home::new();
    let jobs = "[[jobs]]\nname = \"gone\"\nschedule = \"0 0 1 1 *\"\nshell = \"true\"\n\
                check_id = \"no-such-check\"\n";
    home.write(Some(&emulator), &listen_with_token(&home), jobs);
    let daemon = home.daemon(&key);
    let endpoint = home.endpoint();
    let doc = daemon.until("the check missing", Duration::from_secs(15), || {
        let doc = status_doc(&endpoint, true);
        let gone = job(&doc, "gone");
        // Sync reads the check before its PUT: the remote view may say so first.
        let synced = gone["sync"]["state"] == "missing";
        (synced && gone["missing"].is_object() && gone["remote"]["heartbeat"].is_object())
            .then_some(doc)
    });
    let gone = job(&doc, "gone");
    assert_eq!(gone["missing"]["by"], "sync", "{gone}");
    let heartbeat = &gone["remote"]["heartbeat"];
    assert_eq!(heartbeat["state"], "unavailable", "{gone}");
    assert_eq!(
        heartbeat["reason"], "the service has no heartbeat check no-such-check",
        "{gone}"
    );
    assert!(gone["last_ping"].is_null(), "no run yet: {gone}");
    assert_one_missing(&endpoint);
}

/// `/metrics` counts exactly one missing check.
fn assert_one_missing(endpoint: &Endpoint) {
    let metrics = get(endpoint, "/metrics").body;
    let missing = sample(
        &parse_metrics(&metrics),
        "heartbeat_agent_checks_missing",
        &[],
    );
    assert_eq!(missing, Some(1.0), "{metrics}");
}
