//! Drift: a check edited on the service (the web UI, another client) is read with `GET
//! /v1/checks/{id}`, reported by `sync --dry-run` (text and JSON, the service's value as `old`)
//! and `--exit-code`, and repaired under the timer rule: other fields at once, a period only
//! right after an accepted ping. The daemon's re-assertion reads before it writes (nothing is
//! sent when nothing differs) and falls back to re-asserting by `PUT` when the service does not
//! serve the read.

use super::ownership::{edit_elsewhere, puts_to, reconciler, runtime};
use super::*;

/// Reads of check `id` recorded so far.
fn reads_of(setup: &Setup, id: &str) -> usize {
    let path = format!("/v1/checks/{id}");
    setup
        .emulator
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path == path)
        .count()
}

/// The daemon's sync task on `setup`, re-asserting every 400 ms, running on its own runtime.
fn started(
    setup: &Setup,
) -> (
    tokio::runtime::Runtime,
    sync::Reconciler,
    tokio_util::sync::CancellationToken,
    tokio::task::JoinHandle<()>,
) {
    let runtime = runtime();
    let reconciler = reconciler(setup, Duration::from_millis(400));
    let cancel = tokio_util::sync::CancellationToken::new();
    let task = runtime.spawn(reconciler.clone().run(cancel.clone()));
    (runtime, reconciler, cancel, task)
}

/// The period, grace and name edited on the service.
fn edit_period_and_name(setup: &Setup) {
    edit_elsewhere(
        setup,
        "c1",
        json!({"name": "renamed", "heartbeat": {"period": 7, "periodUnit": "days", "grace": 1,
                                                  "graceUnit": "minutes"}}),
    );
}

#[test]
fn sync_dry_run_reports_drift_read_from_the_service_and_exit_code_says_so() {
    let setup = Setup::new(&["c1"]);
    setup.write_config(&job(
        "backup",
        "0 3 * * *",
        "c1",
        "[jobs.check]\ngrace = \"2h\"\n",
    ));
    assert_eq!(setup.agent(&["sync"]).status.code(), Some(0));
    let clean = setup.agent(&["sync", "--dry-run", "--exit-code"]);
    assert_eq!(clean.status.code(), Some(0), "{}", text(&clean.stdout));
    assert_eq!(text(&clean.stdout), "backup (check c1): in_sync\n");

    edit_period_and_name(&setup);
    let json_run = setup.agent(&["sync", "--dry-run", "--json"]);
    assert_eq!(
        json_run.status.code(),
        Some(0),
        "{}",
        text(&json_run.stderr)
    );
    let report: Value = serde_json::from_slice(&json_run.stdout).unwrap();
    let entry = &report["jobs"][0];
    assert_eq!(
        entry["drift"],
        json!([
            "heartbeat.grace",
            "heartbeat.graceUnit",
            "heartbeat.period",
            "name"
        ]),
        "{entry}"
    );
    let has = |list: &str, field: &str, old: &str, new: &str| {
        entry[list]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c == &json!({"field": field, "old": old, "new": new}))
    };
    assert!(
        has("changes", "name", "\"renamed\"", "\"backup\""),
        "{entry}"
    );
    // A grace that changes with the period waits with it (docs/sync.md).
    assert!(has("held", "heartbeat.grace", "1", "2"), "{entry}");
    assert!(has("held", "heartbeat.period", "7", "1"), "{entry}");
    assert_eq!(entry["result"], "would_update");

    let text_run = setup.agent(&["sync", "--dry-run", "--exit-code"]);
    assert_eq!(text_run.status.code(), Some(1), "something would change");
    let out = text(&text_run.stdout);
    assert!(
        out.contains("edited on the service since the agent's last update (drift): heartbeat.grace, heartbeat.graceUnit, heartbeat.period, name")
            && out.contains("  name: \"renamed\" -> \"backup\"")
            && out.contains("    heartbeat.period: 7 -> 1"),
        "{out}"
    );
    assert_eq!(
        setup.puts().len(),
        2,
        "a dry run sends nothing (the edit is the second)"
    );

    // A real sync repairs the name at once and holds the period and grace (no ping yet).
    let repaired = setup.agent(&["sync"]);
    assert_eq!(
        repaired.status.code(),
        Some(0),
        "{}",
        text(&repaired.stderr)
    );
    let check = setup.emulator.heartbeat_check("c1").unwrap();
    assert_eq!(check["name"], "backup");
    assert_eq!(
        (
            &check["heartbeat"]["grace"],
            &check["heartbeat"]["graceUnit"]
        ),
        (&json!(1), &json!("minutes"))
    );
    assert_eq!(
        (
            &check["heartbeat"]["period"],
            &check["heartbeat"]["periodUnit"]
        ),
        (&json!(7), &json!("days"))
    );
}

/// The latest 03:00 UTC at or before now: the fire a run of "0 3 * * *" (UTC) belongs to.
fn latest_fire() -> DateTime<Utc> {
    let now = Utc::now();
    let today = now.date_naive().and_hms_opt(3, 0, 0).unwrap().and_utc();
    if today <= now {
        today
    } else {
        today - chrono::Duration::days(1)
    }
}

#[test]
fn the_daemon_reads_before_it_reasserts_and_repairs_drift_under_the_timer_rule() {
    let setup = Setup::new(&["c1"]);
    setup.write_config(&job(
        "backup",
        "0 3 * * *",
        "c1",
        "timezone = \"UTC\"\n[jobs.check]\ngrace = \"2h\"\n",
    ));
    assert_eq!(setup.agent(&["sync"]).status.code(), Some(0));
    let (runtime, reconciler, cancel, task) = started(&setup);
    let status = reconciler.status();
    // Nothing edited: re-assertions read and send nothing.
    runtime.block_on(async { tokio::time::sleep(Duration::from_millis(1500)).await });
    assert!(
        reads_of(&setup, "c1") >= 2,
        "{} reads",
        reads_of(&setup, "c1")
    );
    assert_eq!(puts_to(&setup, "c1"), 1, "nothing differs: nothing sent");
    assert_eq!(status.get("backup").unwrap().state, sync::SyncState::InSync);

    edit_period_and_name(&setup);
    runtime.block_on(util::eventually_async(
        Duration::from_secs(10),
        "the name repaired, the pass recorded",
        || {
            let check = setup.emulator.heartbeat_check("c1").unwrap();
            let found = status.get("backup").unwrap().drift_found;
            match check["name"].as_str() {
                Some("backup") if found > 0 => Ok(()),
                other => Err(format!("{other:?}, drift found {found} times")),
            }
        },
    ));
    let check = setup.emulator.heartbeat_check("c1").unwrap();
    assert_eq!(
        check["heartbeat"]["period"], 7,
        "the period waits for a ping"
    );
    assert_eq!(check["heartbeat"]["grace"], 1, "the grace waits with it");
    let job_status = status.get("backup").unwrap();
    assert_eq!(
        job_status.drift,
        ["heartbeat.grace", "heartbeat.graceUnit", "heartbeat.period"],
        "{job_status:?}"
    );
    assert!(job_status.drift_found >= 1);

    // Right after an accepted ping, the period goes out too; the drift is repaired.
    reconciler.after_run("backup", latest_fire(), true);
    runtime.block_on(util::eventually_async(
        Duration::from_secs(10),
        "the period repaired",
        || {
            let check = setup.emulator.heartbeat_check("c1").unwrap();
            let drift = status.get("backup").unwrap().drift;
            match check["heartbeat"]["period"].as_u64() {
                Some(1) if drift.is_empty() && check["heartbeat"]["graceUnit"] == "hours" => Ok(()),
                other => Err(format!("period {other:?}, drift {drift:?}")),
            }
        },
    ));
    cancel.cancel();
    runtime.block_on(task).unwrap();
}

#[test]
fn without_the_read_route_reassertion_falls_back_to_put_and_only_two_404s_mean_gone() {
    let setup = Setup::new(&["c1"]);
    setup.write_config(&job("backup", "0 3 * * *", "c1", ""));
    assert_eq!(setup.agent(&["sync"]).status.code(), Some(0));
    // A service without the route: GET answers 404, the PUT of the same check works.
    let mut no_route = Fault::new(FaultKind::Status)
        .method("GET")
        .path("/v1/checks/c1");
    no_route.status = Some(404);
    setup.emulator.add_fault(no_route);
    let dry = setup.agent(&["sync", "--dry-run"]);
    assert_eq!(dry.status.code(), Some(0), "{}", text(&dry.stderr));
    assert!(
        text(&dry.stdout).contains("not read from the service: GET /v1/checks/c1 answered 404"),
        "{}",
        text(&dry.stdout)
    );
    let (runtime, reconciler, cancel, task) = started(&setup);
    let status = reconciler.status();
    runtime.block_on(async { tokio::time::sleep(Duration::from_millis(1500)).await });
    let sent = puts_to(&setup, "c1") - 1;
    assert!((2..=5).contains(&sent), "{sent} re-assertions by PUT");
    assert_eq!(status.get("backup").unwrap().state, sync::SyncState::InSync);
    // The check deleted: the GET and the PUT both answer 404, so it is missing.
    assert!(setup.emulator.delete_heartbeat_check("c1"));
    runtime.block_on(util::eventually_async(
        Duration::from_secs(10),
        "the check missing",
        || match status.get("backup") {
            Some(job) if job.state == sync::SyncState::Missing => Ok(()),
            other => Err(format!("{other:?}")),
        },
    ));
    cancel.cancel();
    runtime.block_on(task).unwrap();
}
