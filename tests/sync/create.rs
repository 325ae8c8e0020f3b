//! Jobs with `[jobs.check] create = true`: sync finds the check by the job's scope tag or
//! creates it once (`POST /v1/checks/heartbeat`), records it, pings it; a deleted check is made
//! again; two agents of one scope racing converge on one check; an agent killed between its
//! `POST` and recording the answer makes no second check when it starts again.

use std::process::Stdio;
use std::time::Instant;

use super::*;

/// A job that creates its check, with a fixed grace so the definition is known.
fn creating_job(name: &str) -> String {
    format!(
        "[[jobs]]\nname = \"{name}\"\nschedule = \"0 3 * * *\"\n[jobs.check]\ncreate = true\n\
         grace = \"2h\"\ntags = [\"db\"]\n"
    )
}

/// The scope tag of `job` of the config at `config` on this machine.
pub(super) fn scope_tag(config: &std::path::Path, job: &str) -> String {
    let id = heartbeat_agent::identity::scope_id(config);
    format!(
        "heartbeat-agent:{}@{id}/{job}",
        heartbeat_agent::host::name()
    )
}

/// The owner tag of the agent running the config at `config` with `state_dir`.
pub(super) fn owner_tag(state_dir: &std::path::Path, config: &std::path::Path) -> String {
    let id = heartbeat_agent::identity::Identity::of(state_dir, config).expect("identity");
    format!("heartbeat-agent-owner:{id}")
}

/// The checks carrying `tag`, as `api checks list --tag TAG --all` prints them.
pub(super) fn tagged(setup: &Setup, tag: &str) -> Vec<Value> {
    let out = setup.agent(&["api", "checks", "list", "--tag", tag, "--all"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice::<Vec<Value>>(&out.stdout).expect("a JSON array")
}

pub(super) fn posts(setup: &Setup) -> usize {
    setup
        .emulator
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path == "/v1/checks/heartbeat")
        .count()
}

/// The check id recorded for `job` of the config at `config` in `state_dir`.
pub(super) fn recorded_id(
    state_dir: &std::path::Path,
    config: &std::path::Path,
    job: &str,
) -> String {
    let path = state_dir.join("sync").join(format!("{job}.json"));
    let record: Value = serde_json::from_slice(&std::fs::read(&path).expect("a record")).unwrap();
    assert_eq!(
        record["createdTag"],
        json!(scope_tag(config, job)),
        "{record}"
    );
    record["checkId"].as_str().expect("an id").to_owned()
}

#[test]
fn sync_creates_the_check_once_finds_it_again_and_run_job_pings_it() {
    let setup = Setup::new(&[]);
    setup.write_config(&creating_job("vacuum"));
    let checked = setup.agent(&["config", "check"]);
    assert_eq!(checked.status.code(), Some(0), "{}", text(&checked.stderr));
    assert!(
        text(&checked.stdout).contains("  check:    will be created as \"vacuum\"\n"),
        "{}",
        text(&checked.stdout)
    );

    let dry = setup.agent(&["sync", "--dry-run"]);
    assert_eq!(dry.status.code(), Some(0), "{}", text(&dry.stderr));
    let shown = text(&dry.stdout);
    assert!(
        shown.starts_with(
            "vacuum (no check yet: create = true): would create the check: POST \
             /v1/checks/heartbeat with the fields below (dry run: nothing sent)\n"
        ),
        "{shown}"
    );
    let tag = scope_tag(&setup.config_path(), "vacuum");
    let owner = owner_tag(&setup.state_dir(), &setup.config_path());
    assert!(
        shown.contains(&format!(
            "  tags: (none) -> [\"db\",\"{tag}\",\"{owner}\"]\n"
        )),
        "{shown}"
    );
    assert!(
        shown.contains("  heartbeat.grace: (none) -> 2\n"),
        "{shown}"
    );
    assert_eq!(posts(&setup), 0, "a dry run sends no POST");

    let first = setup.agent(&["sync"]);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    assert_eq!(posts(&setup), 1);
    assert!(
        setup.puts().is_empty(),
        "the created definition needs no PUT"
    );
    let checks = tagged(&setup, &tag);
    assert_eq!(checks.len(), 1, "{checks:?}");
    let id = checks[0]["id"].as_str().expect("id").to_owned();
    assert_eq!(checks[0]["name"], "vacuum");
    assert_eq!(checks[0]["heartbeat"]["grace"], 2);
    assert_eq!(
        recorded_id(&setup.state_dir(), &setup.config_path(), "vacuum"),
        id
    );

    let again = setup.agent(&["sync"]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert_eq!(
        text(&again.stdout),
        format!("vacuum (check {id}): in_sync\n")
    );

    // A lost state directory: the check is found by its tag, not made again.
    std::fs::remove_dir_all(setup.state_dir().join("sync")).unwrap();
    let found = setup.agent(&["sync"]);
    assert_eq!(found.status.code(), Some(0), "{}", text(&found.stderr));
    assert_eq!(posts(&setup), 1, "{}", text(&found.stdout));
    assert_eq!(
        recorded_id(&setup.state_dir(), &setup.config_path(), "vacuum"),
        id
    );

    let run = setup.agent(&["run", "--job", "vacuum", "--", "true"]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let token = setup.emulator.heartbeat_check(&id).expect("the check")["heartbeat"]["pingToken"]
        .as_str()
        .expect("token")
        .to_owned();
    let paths: Vec<String> = setup.emulator.pings().into_iter().map(|p| p.path).collect();
    assert_eq!(paths, [format!("/{token}")]);
}

#[test]
fn a_check_deleted_on_the_service_is_made_again_only_with_create() {
    let setup = Setup::new(&["c1"]);
    setup.write_config(&format!(
        "{}{}",
        creating_job("vacuum"),
        job("bound", "0 4 * * *", "c1", "")
    ));
    assert_eq!(setup.agent(&["sync"]).status.code(), Some(0));
    let old = recorded_id(&setup.state_dir(), &setup.config_path(), "vacuum");
    assert!(setup.emulator.delete_heartbeat_check(&old));
    assert!(setup.emulator.delete_heartbeat_check("c1"));
    // A change, so the pass sends a PUT, which the service answers 404.
    setup.write_config(&format!(
        "{}grace = \"3h\"\n{}",
        creating_job("vacuum").replace("grace = \"2h\"\n", ""),
        job("bound", "0 4 * * *", "c1", "[jobs.check]\ngrace = \"3h\"\n")
    ));
    let out = setup.agent(&["sync"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the bound job's check is missing"
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("the job's check was deleted on the service; creating it again"),
        "{stderr}"
    );
    assert!(stderr.contains("job \"bound\": check c1: the service has no such check (404)"));
    assert_eq!(
        posts(&setup),
        2,
        "one creation, one re-creation; none for the bound job"
    );
    let new = recorded_id(&setup.state_dir(), &setup.config_path(), "vacuum");
    assert_ne!(new, old);
    let checks = tagged(&setup, &scope_tag(&setup.config_path(), "vacuum"));
    assert_eq!(checks.len(), 1);
    assert_eq!(checks[0]["id"], json!(new));
    assert_eq!(
        checks[0]["heartbeat"]["grace"], 3,
        "created with the current definition"
    );
}

#[test]
fn two_agents_of_one_scope_racing_keep_one_check() {
    let setup = Setup::new(&[]);
    setup.write_config(&creating_job("vacuum"));
    // Both creations are carried out after a delay, so each agent's first lookup finds
    // nothing and both create.
    setup.emulator.add_fault(Fault {
        latency_ms: 3000,
        ..Fault::new(FaultKind::Latency)
            .method("POST")
            .path("/v1/checks/heartbeat")
            .times(2)
    });
    // One scope: the same config file on the same machine, run with another state directory.
    let other = Home::new();
    let spawn = |home: &Home| {
        home.agent()
            .arg("--config")
            .arg(setup.config_path())
            .arg("--state-dir")
            .arg(home.state_dir())
            .arg("sync")
            .env("EMULATOR_KEY", setup.emulator.api_key())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = spawn(&setup.home);
    let b = spawn(&other);
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_eq!(a.status.code(), Some(0), "{}", text(&a.stderr));
    assert_eq!(b.status.code(), Some(0), "{}", text(&b.stderr));
    assert_eq!(posts(&setup), 2, "both agents created: the race happened");
    let checks = tagged(&setup, &scope_tag(&setup.config_path(), "vacuum"));
    assert_eq!(checks.len(), 1, "one check remains: {checks:?}");
    let kept = checks[0]["id"].as_str().unwrap();
    assert_eq!(
        recorded_id(&setup.state_dir(), &setup.config_path(), "vacuum"),
        kept
    );
    assert_eq!(
        recorded_id(&other.state_dir(), &setup.config_path(), "vacuum"),
        kept
    );
    let deletes = setup
        .emulator
        .requests()
        .iter()
        .filter(|r| r.method == "DELETE")
        .count();
    assert_eq!(deletes, 1, "only the younger one's creator deletes it");
}

#[test]
fn an_agent_killed_between_its_post_and_recording_the_answer_makes_no_second_check() {
    let setup = Setup::new(&[]);
    setup.write_config(&creating_job("vacuum"));
    setup.emulator.add_fault(
        Fault::new(FaultKind::ApplyThenHang)
            .method("POST")
            .path("/v1/checks/heartbeat")
            .times(1),
    );
    let mut agent = setup
        .home
        .agent()
        .arg("--config")
        .arg(setup.config_path())
        .arg("sync")
        .env("EMULATOR_KEY", setup.emulator.api_key())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let tag = scope_tag(&setup.config_path(), "vacuum");
    let deadline = Instant::now() + Duration::from_secs(20);
    while posts(&setup) == 0 {
        assert!(Instant::now() < deadline, "the agent never sent its POST");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The check exists on the service; the agent has not learned its id.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(agent.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    agent.wait().unwrap();
    assert!(!setup.state_dir().join("sync/vacuum.json").exists());
    assert_eq!(tagged(&setup, &tag).len(), 1);

    let restarted = setup.agent(&["sync"]);
    assert_eq!(
        restarted.status.code(),
        Some(0),
        "{}",
        text(&restarted.stderr)
    );
    assert_eq!(posts(&setup), 1, "the restart found the check by its tag");
    let checks = tagged(&setup, &tag);
    assert_eq!(checks.len(), 1);
    assert_eq!(
        recorded_id(&setup.state_dir(), &setup.config_path(), "vacuum"),
        checks[0]["id"].as_str().unwrap()
    );
}

#[test]
fn the_daemon_creates_the_check_and_its_runs_ping_it() {
    let setup = Setup::new(&[]);
    let text = format!(
        "[agent]\nstate_dir = \"{}\"\nsync_jitter = \"1s\"\n\n[api]\nbase_url = \"{}\"\n\
         account_id = \"{}\"\napi_key_env = \"EMULATOR_KEY\"\nping_base_url = \"{}\"\n\n\
         [status]\nlisten = \"127.0.0.1:0\"\n\n\
         [[jobs]]\nname = \"tick\"\nschedule = \"* * * * * *\"\ncommand = [\"true\"]\n\
         [jobs.check]\ncreate = true\nperiod = \"1m\"\n",
        setup.state_dir().display(),
        setup.emulator.base_url(),
        setup.emulator.account(),
        setup.emulator.ping_url(),
    );
    setup.home.write_config(&text);
    let daemon = crate::util::daemon::Daemon::on(&setup.home)
        .config(setup.config_path())
        .env("EMULATOR_KEY", setup.emulator.api_key())
        .terminate_on_drop()
        .start();
    let tag = scope_tag(&setup.config_path(), "tick");
    let deadline = Instant::now() + Duration::from_secs(30);
    let token = loop {
        let checks = tagged(&setup, &tag);
        let token = checks
            .first()
            .and_then(|c| c["id"].as_str())
            .and_then(|id| setup.emulator.heartbeat_check(id))
            .and_then(|c| c["heartbeat"]["pingToken"].as_str().map(str::to_owned));
        if let Some(token) = token {
            if setup
                .emulator
                .pings()
                .iter()
                .any(|p| p.path == format!("/{token}"))
            {
                break token;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no ping to a created check within 30 s: {}",
            daemon.log().text()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    daemon.stop();
    assert_eq!(posts(&setup), 1, "created once");
    assert_eq!(tagged(&setup, &tag).len(), 1);
    assert!(setup
        .emulator
        .pings()
        .iter()
        .all(|p| p.path == format!("/{token}")));
}
