//! A check deleted on the service is never "ok": the first 404 for it (here the job's ping)
//! marks it `missing` in `/status` (`sync.state` too), the `status` table, `/metrics` and the
//! dashboard at once, without waiting for the remote view's cache, whether the job names it by
//! `check_id` or the agent created it; `health` keeps its exit code (the service's state never
//! fails liveness).

use std::time::{Duration, Instant};

use crate::util::Home;

use super::dashboard::cell_text;
use super::{
    emulator_with_check, get, job, listen_with_token, made_id, parse_metrics, sample, status_doc,
    table_row, StatusHome,
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
    assert_missing_everywhere(&home, &key, "good");
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
    assert_missing_everywhere(&home, &key, "gone");
}

/// A deleted check of a job with `create = true` is missing as soon as its next ping is
/// answered 404, in every view, exactly as one named by `check_id`.
#[test]
fn a_deleted_check_the_agent_created_is_missing_within_seconds_of_its_next_ping() {
    let emulator = emulator_with_check();
    let key = emulator.api_key().to_owned();
    let home = Home::new();
    let jobs = "[[jobs]]\nname = \"made\"\nschedule = \"*/1 * * * * *\"\nshell = \"true\"\n\
                [jobs.check]\nperiod = \"1m\"\ncreate = true\n";
    home.write(Some(&emulator), &listen_with_token(&home), jobs);
    let daemon = home.daemon(&key);
    let endpoint = home.endpoint();
    daemon.until(
        "the created check pinged and in_sync",
        Duration::from_secs(20),
        || {
            let doc = status_doc(&endpoint, false);
            let made = job(&doc, "made");
            let ok =
                made["last_ping"]["result"] == "accepted" && made["sync"]["state"] == "in_sync";
            ok.then_some(())
        },
    );
    let id = made_id(&home);
    assert!(emulator.delete_heartbeat_check(&id));
    let deleted = Instant::now();
    let doc = daemon.until("the created check missing", Duration::from_secs(10), || {
        let doc = status_doc(&endpoint, false);
        job(&doc, "made")["missing"].is_object().then_some(doc)
    });
    let seen = deleted.elapsed();
    let made = job(&doc, "made");
    assert_eq!(made["missing"]["by"], "ping", "{made}");
    assert_eq!(made["last_ping"]["status"], 404, "{made}");
    let reason = made["missing"]["reason"].as_str().expect("reason");
    assert!(
        reason.contains(&format!("no check {id}")) && reason.contains("create = true"),
        "{reason}"
    );
    assert_missing_everywhere(&home, &key, "made");
    eprintln!("the deleted created check was missing {seen:?} after its deletion");
}

/// Job `name`'s check is `missing` and nothing else, and it is the only missing one, in each
/// view: `/status` (`missing` and `sync.state`), the `status` table (SYNC and REMOTE), the
/// metrics (parsed: `heartbeat_agent_checks_missing` and `heartbeat_agent_sync_jobs`) and the
/// dashboard's row (the words a reader sees in its sync and check cells).
fn assert_missing_everywhere(home: &Home, key: &str, name: &str) {
    let endpoint = home.endpoint();
    let doc = status_doc(&endpoint, false);
    let shown = job(&doc, name);
    assert!(shown["missing"].is_object(), "{shown}");
    assert_eq!(shown["sync"]["state"], "missing", "never in_sync: {shown}");
    let cells = table_row(&home.output(&["status"], key), name);
    assert_eq!(cells[5], "missing", "SYNC: {cells:?}");
    assert_eq!(cells[6], "missing", "REMOTE: {cells:?}");
    let metrics = parse_metrics(&get(&endpoint, "/metrics").body);
    let gauge = |name: &str, labels: &[(&str, &str)]| sample(&metrics, name, labels);
    assert_eq!(gauge("heartbeat_agent_checks_missing", &[]), Some(1.0));
    assert_eq!(
        gauge("heartbeat_agent_sync_jobs", &[("state", "missing")]),
        Some(1.0)
    );
    assert_eq!(
        gauge("heartbeat_agent_sync_jobs", &[("state", "in_sync")]),
        Some(0.0)
    );
    let page = get(&endpoint, "/").body;
    assert_eq!(cell_text(&page, name, "sync"), "missing", "{page}");
    assert_eq!(cell_text(&page, name, "check"), "missing", "{page}");
}
