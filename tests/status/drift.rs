//! Drift through the real daemon: a check renamed on the service is found by the daemon's
//! re-assertion (which reads the check first), logged as a warning naming the job, the check
//! and the field, counted in `heartbeat_agent_sync_drift_total{job}` and sent back.

use std::time::Duration;

use serde_json::json;

use crate::util::Home;

use super::{
    emulator_with_check, get, job, listen_with_token, parse_metrics, sample, status_doc, StatusHome,
};

#[test]
fn the_daemon_warns_counts_and_repairs_a_check_edited_on_the_service() {
    let emulator = emulator_with_check();
    let key = emulator.api_key().to_owned();
    let home = Home::new();
    let jobs = "[[jobs]]\nname = \"nightly\"\nschedule = \"0 3 * * *\"\nshell = \"true\"\n\
                check_id = \"c1\"\n";
    home.write(Some(&emulator), &listen_with_token(&home), jobs);
    // Re-assert every second (the first one within a second of the start).
    let config = std::fs::read_to_string(home.config_path()).unwrap();
    let config = config.replacen("[agent]\n", "[agent]\nreassert_interval = \"1s\"\n", 1);
    std::fs::write(home.config_path(), config).unwrap();
    let daemon = home.daemon(&key);
    let endpoint = home.endpoint();
    daemon.until("the check in sync", Duration::from_secs(15), || {
        let doc = status_doc(&endpoint, false);
        (job(&doc, "nightly")["sync"]["state"] == "in_sync").then_some(())
    });
    let renamed = emulator.requests().len();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let status = runtime.block_on(async {
        reqwest::Client::new()
            .put(format!("{}/v1/checks/heartbeat/c1", emulator.base_url()))
            .bearer_auth(&key)
            .json(&json!({"name": "renamed by hand"}))
            .send()
            .await
            .unwrap()
            .status()
    });
    assert_eq!(status, 200, "the edit made by hand");
    let warned = daemon.log().wait_for(1, Duration::from_secs(10), |line| {
        line["level"] == "WARN"
            && line["message"]
                .as_str()
                .is_some_and(|m| m.contains("edited on the service (drift)"))
    });
    let line = &warned[0];
    assert_eq!(
        (&line["job"], &line["check"], &line["fields"]),
        (&json!("nightly"), &json!("c1"), &json!("name")),
        "{line}"
    );
    daemon.until("the name sent back", Duration::from_secs(10), || {
        let check = emulator.heartbeat_check("c1")?;
        (check["name"] == "nightly").then_some(())
    });
    assert!(
        emulator.requests()[renamed..]
            .iter()
            .any(|r| r.method == "GET" && r.path == "/v1/checks/c1"),
        "the re-assertion read the check"
    );
    let metrics = get(&endpoint, "/metrics").body;
    let drift = sample(
        &parse_metrics(&metrics),
        "heartbeat_agent_sync_drift_total",
        &[("job", "nightly")],
    );
    assert!(drift.is_some_and(|n| n >= 1.0), "{metrics}");
}
