//! A job whose check the agent creates (`[jobs.check] create = true`) in `/status`: before sync
//! created the check, its remote view says the check does not exist yet; once the id is
//! recorded, `check_id` and the remote view (the service's status and heartbeat statistics)
//! are those of that check, as for a job bound by `check_id`.

use std::time::Duration;

use heartbeat_agent::emulator::{Fault, FaultKind};

use super::{
    created_job, emulator_with_check, job, listen_with_token, made_id, status_doc, StatusHome,
};
use crate::util::Home;

#[test]
fn the_remote_view_shows_the_check_the_agent_created() {
    let emulator = emulator_with_check();
    // The service refuses to create it at first (a plan without room for another check).
    let mut full = Fault::new(FaultKind::Status)
        .method("POST")
        .path("/v1/checks/heartbeat");
    full.status = Some(402);
    emulator.add_fault(full);
    let home = Home::new();
    home.write(
        Some(&emulator),
        &listen_with_token(&home),
        &created_job("[jobs.check]\nperiod = \"1d\"\ngrace = \"1h\"\n"),
    );
    let endpoint = home.endpoint();
    let daemon = home.daemon(emulator.api_key());
    daemon.until("the refused creation", Duration::from_secs(10), || {
        let doc = status_doc(&endpoint, false);
        (job(&doc, "made")["sync"]["state"] == "failed").then_some(())
    });
    let doc = status_doc(&endpoint, true);
    let made = job(&doc, "made");
    assert!(made["check_id"].is_null(), "{made}");
    assert_eq!(made["remote"]["state"], "unavailable", "{made}");
    assert!(
        made["remote"]["reason"]
            .as_str()
            .expect("a reason")
            .contains("the job's check does not exist yet (create = true"),
        "{made}"
    );

    // The check is created (by the one-shot sync) and pinged.
    emulator.clear_faults();
    let out = home.output(&["sync", "--job", "made"], emulator.api_key());
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = home.output(&["run", "--job", "made"], emulator.api_key());
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let id = made_id(&home);
    let doc = status_doc(&endpoint, true);
    let made = job(&doc, "made");
    assert_eq!(made["check_id"], id.as_str(), "{made}");
    let remote = &made["remote"];
    assert_eq!(remote["state"], "available", "{remote}");
    assert_eq!(remote["check_status"]["checkId"], id.as_str(), "{remote}");
    assert_eq!(remote["heartbeat"]["state"], "available", "{remote}");
    assert_eq!(
        remote["heartbeat"]["latest_event"]["state"], "RECEIVED",
        "{remote}"
    );
    drop(daemon);
}
