//! Creation converges and sync reads before it writes: agents (`sync` runs, and daemons' sync
//! tasks) that created at once under failing lookups end with one check, and a duplicate left
//! behind is deleted by the next pass that looks; a check with no record is read before anything is sent
//! (no `PUT` when nothing differs); the creating pass says `created` at INFO; tags set elsewhere
//! stay; the daemon's first re-assertion is never put off by a `PUT`.

use std::process::{Output, Stdio};
use std::time::Instant;

use heartbeat_agent::sync::{CadenceCache, SyncOptions, SyncOutcome};

use super::ownership::{edit_elsewhere, reconciler, runtime};
use super::*;

/// A job that creates its check, with a fixed grace and one configured tag.
fn creating_job(name: &str) -> String {
    format!(
        "[[jobs]]\nname = \"{name}\"\nschedule = \"0 3 * * *\"\n[jobs.check]\ncreate = true\n\
         grace = \"2h\"\ntags = [\"db\"]\n"
    )
}

/// Writes the config of `jobs` with the API key in a file (`api_key_file`), so the test can
/// load it in process too (`create = true` needs a readable key source).
fn write_config(setup: &Setup, jobs: &str) {
    let key = setup.home.path("api-key");
    std::fs::write(&key, setup.emulator.api_key()).unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    setup.write_config(jobs);
    let text = std::fs::read_to_string(setup.config_path())
        .unwrap()
        .replace(
            "api_key_env = \"EMULATOR_KEY\"",
            &format!("api_key_file = \"{}\"", key.display()),
        );
    setup.home.write_config(&text);
}

/// The scope tag of `job`, as the config computes it.
fn scope_tag(setup: &Setup, job: &str) -> String {
    let config = load(setup);
    let job = config.jobs.iter().find(|j| j.name == job).expect("the job");
    job.check
        .scope_tag
        .clone()
        .expect("a job with create = true")
}

/// The ids of the checks carrying `tag`, read from the emulator's API.
fn tagged_ids(setup: &Setup, tag: &str) -> Vec<String> {
    let out = setup.agent(&["api", "checks", "list", "--tag", tag, "--all"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let checks: Vec<Value> = serde_json::from_slice(&out.stdout).expect("a JSON array");
    checks
        .iter()
        .map(|c| c["id"].as_str().expect("an id").to_owned())
        .collect()
}

fn count(setup: &Setup, method: &str, path: &str) -> usize {
    setup
        .emulator
        .requests()
        .iter()
        .filter(|r| r.method == method && r.path == path)
        .count()
}

/// The check id `home`'s state records for `job` under its scope tag, if any.
fn recorded(home: &Home, job: &str, tag: &str) -> Option<String> {
    let record = sync::state::load(&home.state_dir(), job)?;
    (record.created_tag.as_deref() == Some(tag)).then_some(record.check_id)
}

/// `heartbeat-agent sync` of the one config file (one scope: the same file on the same machine)
/// with `home`'s state directory.
fn sync_in(setup: &Setup, home: &Home) -> std::process::Command {
    let mut command = home.agent();
    command
        .arg("--config")
        .arg(setup.config_path())
        .arg("--state-dir")
        .arg(home.state_dir())
        .arg("sync")
        .env("EMULATOR_KEY", setup.emulator.api_key());
    command
}

/// The lookups met both a 429 and a 500, and one check carrying `tag` remains, recorded by
/// both agents.
fn one_check_after_faulted_lookups(setup: &Setup, other: &Home, tag: &str) {
    let statuses: Vec<u16> = setup
        .emulator
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path == "/v1/checks")
        .filter_map(|r| r.status)
        .collect();
    assert!(
        statuses.contains(&429) && statuses.contains(&500),
        "the lookups met the faults: {statuses:?}"
    );
    let ids = tagged_ids(setup, tag);
    assert_eq!(ids.len(), 1, "one check remains: {ids:?}");
    assert_eq!(recorded(&setup.home, "vacuum", tag), Some(ids[0].clone()));
    assert_eq!(recorded(other, "vacuum", tag), Some(ids[0].clone()));
}

/// Runs `sync` in both homes at once, with the creations delayed 3 s so that both look up,
/// find nothing and create; `during` runs once both `POST`s are in flight.
fn race(setup: &Setup, other: &Home, during: impl FnOnce()) -> (Output, Output) {
    setup.emulator.add_fault(Fault {
        latency_ms: 3000,
        ..Fault::new(FaultKind::Latency)
            .method("POST")
            .path("/v1/checks/heartbeat")
            .times(2)
    });
    let spawn = |home: &Home| {
        sync_in(setup, home)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(&setup.home), spawn(other));
    let deadline = Instant::now() + Duration::from_secs(20);
    while count(setup, "POST", "/v1/checks/heartbeat") < 2 {
        assert!(Instant::now() < deadline, "the agents never both created");
        std::thread::sleep(Duration::from_millis(10));
    }
    during();
    (a.wait_with_output().unwrap(), b.wait_with_output().unwrap())
}

#[test]
fn racing_creates_with_429s_and_500s_on_the_lookup_end_with_one_check() {
    let setup = Setup::new(&[]);
    write_config(&setup, &creating_job("vacuum"));
    // A second agent of the same scope: the same config file, its own state directory.
    let other = Home::new();
    let tag = scope_tag(&setup, "vacuum");
    let (a, b) = race(&setup, &other, || {
        // The lookups after the creations: two 429s, then two 500s, then answers.
        let mut limited = Fault::new(FaultKind::RateLimit)
            .method("GET")
            .path("/v1/checks")
            .times(2);
        limited.retry_after = Some(json!(0));
        setup.emulator.add_fault(limited);
        let mut failing = Fault::new(FaultKind::Status)
            .method("GET")
            .path("/v1/checks")
            .times(2);
        failing.status = Some(500);
        setup.emulator.add_fault(failing);
    });
    assert_eq!(a.status.code(), Some(0), "{}", text(&a.stderr));
    assert_eq!(b.status.code(), Some(0), "{}", text(&b.stderr));
    assert_eq!(count(&setup, "POST", "/v1/checks/heartbeat"), 2);
    one_check_after_faulted_lookups(&setup, &other, &tag);
    let outputs = format!("{}{}", text(&a.stdout), text(&b.stdout));
    assert_eq!(
        outputs.matches(": created\n").count(),
        1,
        "only the creator of the kept check says created: {outputs}"
    );
}

#[test]
fn racing_creates_whose_lookups_keep_failing_record_nothing_and_converge_at_the_next_pass() {
    let setup = Setup::new(&[]);
    write_config(&setup, &creating_job("vacuum"));
    // A second agent of the same scope: the same config file, its own state directory.
    let other = Home::new();
    let tag = scope_tag(&setup, "vacuum");
    let mut failing = Fault::new(FaultKind::Status)
        .method("GET")
        .path("/v1/checks");
    failing.status = Some(500);
    let fault = std::cell::Cell::new(0);
    let (a, b) = race(&setup, &other, || {
        fault.set(setup.emulator.add_fault(failing));
    });
    for out in [&a, &b] {
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(&format!(
                "job \"vacuum\": the check tagged \"{tag}\" (create = true): confirming it \
                 failed: created check "
            )) && stderr.contains(
                "no check is recorded for the job until a lookup by its tag says which is the \
                 job's: the next pass looks again, keeps the oldest and deletes the others \
                 carrying the tag"
            ),
            "{stderr}"
        );
    }
    // The lookups were retried with the API's back-off (4 attempts each), and nothing recorded.
    let failed = setup
        .emulator
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path == "/v1/checks" && r.status == Some(500))
        .count();
    assert_eq!(failed, 8, "two agents, four attempts each");
    assert_eq!(recorded(&setup.home, "vacuum", &tag), None);
    assert_eq!(recorded(&other, "vacuum", &tag), None);
    // The service answers again: each agent's next pass looks up, keeps the oldest, deletes the
    // younger one carrying the tag.
    assert!(setup.emulator.remove_fault(fault.get()));
    let both = tagged_ids(&setup, &tag);
    assert_eq!(both.len(), 2, "{both:?}");
    let puts = setup.puts().len();
    for home in [&setup.home, &other] {
        let out = sync_in(&setup, home).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    let ids = tagged_ids(&setup, &tag);
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert!(both.contains(&ids[0]));
    assert_eq!(recorded(&setup.home, "vacuum", &tag), Some(ids[0].clone()));
    assert_eq!(recorded(&other, "vacuum", &tag), Some(ids[0].clone()));
    let deletes: Vec<String> = setup
        .emulator
        .requests()
        .into_iter()
        .filter(|r| r.method == "DELETE")
        .map(|r| r.path)
        .collect();
    let younger = both.iter().find(|id| **id != ids[0]).unwrap();
    assert_eq!(deletes, [format!("/v1/checks/{younger}")]);
    assert_eq!(
        setup.puts().len(),
        puts,
        "the kept check was read, not rewritten"
    );
}

#[test]
fn the_creating_pass_says_created_and_logs_it_at_info() {
    let setup = Setup::new(&[]);
    write_config(&setup, &creating_job("vacuum"));
    let out = setup.agent(&["--log-format", "json", "--log-level", "info", "sync"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let tag = scope_tag(&setup, "vacuum");
    let id = recorded(&setup.home, "vacuum", &tag).expect("recorded");
    let shown = text(&out.stdout);
    assert!(
        shown.starts_with(&format!("vacuum (check {id}): created\n")),
        "{shown}"
    );
    assert!(
        shown.contains("  heartbeat.grace: (none) -> 2\n"),
        "{shown}"
    );
    let lines: Vec<Value> = text(&out.stderr)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let created: Vec<&Value> = lines
        .iter()
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.contains("created the job's heartbeat check"))
        })
        .collect();
    assert_eq!(created.len(), 1, "{lines:?}");
    assert_eq!(created[0]["level"], "INFO", "{}", created[0]);
    let json_run = setup.agent(&["sync", "--json"]);
    let report: Value = serde_json::from_slice(&json_run.stdout).unwrap();
    assert_eq!(report["jobs"][0]["result"], "in_sync", "{report}");
}

#[test]
fn after_a_lost_state_directory_sync_reads_the_check_and_sends_no_put() {
    let setup = Setup::new(&["c1"]);
    setup.write_config(&job(
        "backup",
        "0 3 * * *",
        "c1",
        "[jobs.check]\ngrace = \"2h\"\n",
    ));
    assert_eq!(setup.agent(&["sync"]).status.code(), Some(0));
    assert_eq!(setup.puts().len(), 1);
    std::fs::remove_dir_all(setup.state_dir().join("sync")).unwrap();

    let dry = setup.agent(&["sync", "--dry-run"]);
    assert_eq!(dry.status.code(), Some(0), "{}", text(&dry.stderr));
    assert_eq!(text(&dry.stdout), "backup (check c1): in_sync\n");
    let synced = setup.agent(&["sync"]);
    assert_eq!(text(&synced.stdout), "backup (check c1): in_sync\n");
    assert_eq!(setup.puts().len(), 1, "nothing differs: no PUT");
    assert!(count(&setup, "GET", "/v1/checks/c1") >= 2, "read first");
    // The read taught the job where to ping.
    let run = setup.agent(&["run", "--job", "backup", "--", "true"]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let token = crate::util::emulator::token_for("c1");
    let pings: Vec<String> = setup.emulator.pings().into_iter().map(|p| p.path).collect();
    assert_eq!(pings, [format!("/{token}")]);

    // Edited elsewhere, then lost again: the dry run shows the real differences only.
    edit_elsewhere(&setup, "c1", json!({"name": "renamed"}));
    std::fs::remove_dir_all(setup.state_dir().join("sync")).unwrap();
    let dry = setup.agent(&["sync", "--dry-run"]);
    assert_eq!(
        text(&dry.stdout),
        "backup (check c1): would update (dry run: nothing sent)\n  name: \"renamed\" -> \"backup\"\n"
    );
    let puts = setup.puts().len();
    assert_eq!(setup.agent(&["sync"]).status.code(), Some(0));
    let sent = setup.puts();
    assert_eq!(sent.len(), puts + 1);
    assert_eq!(sent[puts].2["name"], "backup");
}

#[test]
fn a_created_check_found_after_a_lost_state_directory_gets_no_put() {
    let setup = Setup::new(&[]);
    write_config(&setup, &creating_job("vacuum"));
    assert_eq!(setup.agent(&["sync"]).status.code(), Some(0));
    std::fs::remove_dir_all(setup.state_dir().join("sync")).unwrap();
    let dry = setup.agent(&["sync", "--dry-run"]);
    let tag = scope_tag(&setup, "vacuum");
    let id = recorded(&setup.home, "vacuum", &tag).expect("found by its tag");
    assert_eq!(text(&dry.stdout), format!("vacuum (check {id}): in_sync\n"));
    let again = setup.agent(&["sync"]);
    assert_eq!(
        text(&again.stdout),
        format!("vacuum (check {id}): in_sync\n")
    );
    assert!(setup.puts().is_empty(), "found, read, in sync: no PUT");
    assert_eq!(count(&setup, "POST", "/v1/checks/heartbeat"), 1);
}

#[test]
fn tags_set_elsewhere_stay_through_force_and_config_changes() {
    let setup = Setup::new(&[]);
    write_config(&setup, &creating_job("vacuum"));
    assert_eq!(setup.agent(&["sync"]).status.code(), Some(0));
    let tag = scope_tag(&setup, "vacuum");
    let id = recorded(&setup.home, "vacuum", &tag).expect("recorded");
    let tags_on_service = || {
        let check = setup.emulator.heartbeat_check(&id).expect("the check");
        let tags: Vec<String> = serde_json::from_value(check["tags"].clone()).unwrap();
        tags
    };
    // The owner tag the agent gave its check: one of its own, like the scope tag.
    let owner = tags_on_service()
        .into_iter()
        .find(|t| t.starts_with("heartbeat-agent-owner:"))
        .expect("an owner tag");
    // Someone adds a tag in the web UI (tags are sent whole).
    edit_elsewhere(&setup, &id, json!({"tags": ["db", tag, owner, "team-x"]}));
    let forced = setup.agent(&["sync", "--force", "--json"]);
    assert_eq!(forced.status.code(), Some(0), "{}", text(&forced.stderr));
    let report: Value = serde_json::from_slice(&forced.stdout).unwrap();
    assert_eq!(report["jobs"][0]["result"], "updated", "{report}");
    assert!(
        report["jobs"][0].get("drift").is_none(),
        "no drift: {report}"
    );
    assert_eq!(report["jobs"][0]["changes"], json!([]), "{report}");
    assert_eq!(tags_on_service(), ["db", tag.as_str(), &owner, "team-x"]);

    // The agent's own tag removed elsewhere is drift, and comes back beside the others.
    edit_elsewhere(&setup, &id, json!({"tags": ["db", "team-x"]}));
    let dry = setup.agent(&["sync", "--dry-run", "--json"]);
    let report: Value = serde_json::from_slice(&dry.stdout).unwrap();
    assert_eq!(report["jobs"][0]["drift"], json!(["tags"]), "{report}");
    assert_eq!(setup.agent(&["sync"]).status.code(), Some(0));
    assert_eq!(tags_on_service(), ["db", "team-x", tag.as_str(), &owner]);

    // A pass that does not read (the daemon's) sends a changed tag list merged with what the
    // service has: it reads the tags first.
    write_config(
        &setup,
        &creating_job("vacuum").replace("[\"db\"]", "[\"nightly\"]"),
    );
    let report = runtime().block_on(sync::sync_all(
        &load(&setup),
        &client(&setup, RetryPolicy::none()),
        &setup.state_dir(),
        &SyncOptions::at(Utc::now()),
        &mut CadenceCache::default(),
    ));
    assert_eq!(report.jobs[0].outcome, SyncOutcome::Updated, "{report:?}");
    assert_eq!(
        tags_on_service(),
        ["team-x", tag.as_str(), &owner, "nightly"]
    );
    // Unchanged tags are left out of a PUT: the service keeps what it has.
    edit_elsewhere(
        &setup,
        &id,
        json!({"tags": ["nightly", tag, owner, "team-x", "team-y"]}),
    );
    write_config(
        &setup,
        &creating_job("vacuum")
            .replace("[\"db\"]", "[\"nightly\"]")
            .replace("2h", "3h"),
    );
    let report = runtime().block_on(sync::sync_all(
        &load(&setup),
        &client(&setup, RetryPolicy::none()),
        &setup.state_dir(),
        &SyncOptions::at(Utc::now()),
        &mut CadenceCache::default(),
    ));
    assert_eq!(report.jobs[0].outcome, SyncOutcome::Updated, "{report:?}");
    let last = setup.puts().pop().unwrap().2;
    assert!(last.get("tags").is_none(), "{last}");
    assert_eq!(
        tags_on_service(),
        ["nightly", tag.as_str(), &owner, "team-x", "team-y"]
    );
}

#[test]
fn the_first_reassertion_comes_within_the_start_spread_and_a_put_counts_as_one() {
    let setup = Setup::new(&["c1", "c2"]);
    setup.write_config(&format!(
        "{}{}",
        job("backup", "0 3 * * *", "c1", ""),
        job("vacuum", "0 4 * * *", "c2", "")
    ));
    assert_eq!(setup.agent(&["sync"]).status.code(), Some(0));
    // A changed config for one job: the daemon's first pass sends its PUT, whose answer is what
    // a re-assertion would read; the other job's first pass sends nothing.
    setup.write_config(&format!(
        "{}{}",
        job(
            "backup",
            "0 3 * * *",
            "c1",
            "[jobs.check]\ngrace = \"2h\"\n"
        ),
        job("vacuum", "0 4 * * *", "c2", "")
    ));
    let reads = |id: &str| count(&setup, "GET", &format!("/v1/checks/{id}"));
    let (c1_before, c2_before) = (reads("c1"), reads("c2"));
    let puts_before = setup.puts().len();
    let runtime = runtime();
    // Re-assertions every hour; the first at a random point of the 2 s after the start. The
    // first pass comes at once: a point that fell before it would make backup due there (read,
    // then PUT), so the spread is long beside a pass's start even on a loaded machine (a 50 ms
    // spread failed in CI).
    let spread = Duration::from_secs(2);
    let reconciler =
        reconciler(&setup, Duration::from_secs(3600)).with_timing(sync::task::TaskTiming {
            start_jitter: Duration::ZERO,
            resync_interval: Duration::from_secs(3600),
            retry_base: Duration::from_millis(10),
            retry_cap: Duration::from_millis(50),
            reassert_interval: Duration::from_secs(3600),
            reassert_start_spread: spread,
        });
    let started = Instant::now();
    let cancel = tokio_util::sync::CancellationToken::new();
    let task = runtime.spawn(reconciler.run(cancel.clone()));
    let reassert_read = || match (setup.puts().len() - puts_before, reads("c2") - c2_before) {
        (1, 1..) => Ok(()),
        other => Err(format!("(PUTs, re-assertion reads of c2): {other:?}")),
    };
    runtime.block_on(crate::util::eventually_async(
        Duration::from_secs(10),
        "the PUT of backup and the first re-assertion's read of vacuum",
        reassert_read,
    ));
    // Past the spread: the PUT stood for backup's first re-assertion.
    std::thread::sleep(
        (started + spread + Duration::from_millis(300)).saturating_duration_since(Instant::now()),
    );
    cancel.cancel();
    runtime.block_on(task).unwrap();
    assert_eq!(
        reads("c1"),
        c1_before,
        "backup's PUT counted as its re-assertion"
    );
    assert_eq!(
        setup.puts().len() - puts_before,
        1,
        "backup's PUT alone: the read of vacuum found nothing to send"
    );
}

#[test]
fn a_younger_duplicate_left_by_another_agent_is_deleted_by_the_next_looking_pass() {
    let setup = Setup::new(&[]);
    write_config(&setup, &creating_job("vacuum"));
    assert_eq!(setup.agent(&["sync"]).status.code(), Some(0));
    let tag = scope_tag(&setup, "vacuum");
    let id = recorded(&setup.home, "vacuum", &tag).expect("recorded");
    // An agent of the same scope created a second check and died before its lookup; a check
    // without the tag stands beside them.
    for (dup, tags) in [("dup", json!([tag])), ("other", json!(["db"]))] {
        setup
            .emulator
            .add_heartbeat_check(&json!({"id": dup, "name": "vacuum", "tags": tags,
                "created_at": "2099-01-01T00:00:00Z",
                "heartbeat": {"period": 1, "periodUnit": "days", "grace": 1,
                              "graceUnit": "hours",
                              "pingToken": crate::util::emulator::token_for(dup)}}))
            .unwrap();
    }
    // The daemon's passes between re-assertions do not look (the record is confirmed).
    let report = runtime().block_on(sync::sync_all(
        &load(&setup),
        &client(&setup, RetryPolicy::none()),
        &setup.state_dir(),
        &SyncOptions::at(Utc::now()),
        &mut CadenceCache::default(),
    ));
    assert_eq!(report.jobs[0].outcome, SyncOutcome::InSync, "{report:?}");
    assert_eq!(count(&setup, "DELETE", "/v1/checks/dup"), 0);
    // `sync` (as a re-assertion does) looks the check up by its tag and converges.
    let out = setup.agent(&["sync"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), format!("vacuum (check {id}): in_sync\n"));
    assert_eq!(tagged_ids(&setup, &tag), std::slice::from_ref(&id));
    assert!(setup.emulator.heartbeat_check("dup").is_none());
    assert!(
        setup.emulator.heartbeat_check("other").is_some(),
        "a check without the tag is never deleted"
    );
    assert_eq!(recorded(&setup.home, "vacuum", &tag), Some(id));
}

#[test]
fn two_daemons_racing_creates_under_429s_and_500s_on_the_lookup_end_with_one_check() {
    let setup = Setup::new(&[]);
    write_config(&setup, &creating_job("vacuum"));
    // A second agent of the same scope: the same config file, its own state directory.
    let other = Home::new();
    let tag = scope_tag(&setup, "vacuum");
    setup.emulator.add_fault(Fault {
        latency_ms: 1500,
        ..Fault::new(FaultKind::Latency)
            .method("POST")
            .path("/v1/checks/heartbeat")
            .times(2)
    });
    let runtime = runtime();
    // The daemon's own client sends every request once; its lookups still retry.
    let daemon = |state_dir: std::path::PathBuf| {
        let first = reconciler(&setup, Duration::from_secs(3600));
        sync::Reconciler::new(
            first.config(),
            client(&setup, RetryPolicy::none()),
            state_dir,
        )
        .with_timing(sync::task::TaskTiming {
            start_jitter: Duration::from_millis(10),
            resync_interval: Duration::from_secs(3600),
            retry_base: Duration::from_millis(10),
            retry_cap: Duration::from_millis(50),
            reassert_interval: Duration::from_secs(3600),
            reassert_start_spread: Duration::from_secs(3600),
        })
    };
    let (a, b) = (daemon(setup.state_dir()), daemon(other.state_dir()));
    let cancel = tokio_util::sync::CancellationToken::new();
    let tasks = [
        runtime.spawn(a.clone().run(cancel.clone())),
        runtime.spawn(b.clone().run(cancel.clone())),
    ];
    let deadline = Instant::now() + Duration::from_secs(20);
    while count(&setup, "POST", "/v1/checks/heartbeat") < 2 {
        assert!(Instant::now() < deadline, "the daemons never both created");
        runtime.block_on(async { tokio::time::sleep(Duration::from_millis(10)).await });
    }
    let mut limited = Fault::new(FaultKind::RateLimit)
        .method("GET")
        .path("/v1/checks")
        .times(3);
    limited.retry_after = Some(json!(0));
    setup.emulator.add_fault(limited);
    let mut failing = Fault::new(FaultKind::Status)
        .method("GET")
        .path("/v1/checks")
        .times(3);
    failing.status = Some(500);
    setup.emulator.add_fault(failing);
    let settled = || {
        let ids: Vec<String> = [&a, &b]
            .iter()
            .filter_map(|d| d.status().get("vacuum"))
            .filter(|s| s.state == sync::SyncState::InSync)
            .map(|s| s.check_id)
            .collect();
        match ids.as_slice() {
            [x, y] if x == y => Ok(()),
            other => Err(format!("in sync on {other:?}")),
        }
    };
    runtime.block_on(crate::util::eventually_async(
        Duration::from_secs(20),
        "both daemons in sync on one check",
        settled,
    ));
    cancel.cancel();
    for task in tasks {
        runtime.block_on(task).unwrap();
    }
    one_check_after_faulted_lookups(&setup, &other, &tag);
}
