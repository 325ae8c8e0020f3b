//! The scope and owner of a check the agent creates (`create = true`): two configs on one
//! machine, or two machines with the same host name, get a check each; a check made by older
//! agents under the host-named tag is adopted on upgrade, never duplicated; a check carrying the
//! job's scope but owned by another agent is neither pinged nor changed, and said loudly.

use std::path::Path;
use std::process::Stdio;

use heartbeat_agent::status::client::Endpoint;

use super::create::{owner_tag, posts, recorded_id, scope_tag, tagged};
use super::*;

/// A job with `create = true`, due at 3:00 (so a test's runs are its own).
fn backup() -> String {
    "[[jobs]]\nname = \"backup\"\nschedule = \"0 3 * * *\"\n[jobs.check]\ncreate = true\n\
     grace = \"2h\"\n"
        .to_owned()
}

/// Writes into `home` the config of `setup` (same emulator) with `home`'s state directory.
fn second_config(setup: &Setup, home: &Home) {
    let text = std::fs::read_to_string(setup.config_path())
        .unwrap()
        .replace(
            &setup.state_dir().display().to_string(),
            &home.state_dir().display().to_string(),
        );
    home.write_config(&text);
}

/// `heartbeat-agent ARGS` on `config`, with the emulator's key and `env`.
fn agent_on(setup: &Setup, config: &Path, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut command = setup.home.agent();
    command.arg("--config").arg(config).args(args);
    command.env("EMULATOR_KEY", setup.emulator.api_key());
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().unwrap()
}

/// The token of check `id` on the emulator.
fn token(setup: &Setup, id: &str) -> String {
    let check = setup.emulator.heartbeat_check(id).expect("the check");
    check["heartbeat"]["pingToken"]
        .as_str()
        .expect("token")
        .to_owned()
}

/// The tags of check `id` on the emulator.
fn tags(setup: &Setup, id: &str) -> Vec<String> {
    let check = setup.emulator.heartbeat_check(id).expect("the check");
    serde_json::from_value(check["tags"].clone()).expect("tags")
}

#[test]
fn two_configs_on_one_host_with_job_backup_get_two_checks() {
    let setup = Setup::new(&[]);
    setup.write_config(&backup());
    let other = Home::new();
    second_config(&setup, &other);
    for (home, config) in [
        (&setup.home, setup.config_path()),
        (&other, other.config_path()),
    ] {
        let out = agent_on(&setup, &config, &["sync"], &[]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let out = agent_on(
            &setup,
            &config,
            &["run", "--job", "backup", "--", "true"],
            &[],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(home.state_dir().join("sync/backup.json").exists());
    }
    assert_eq!(posts(&setup), 2, "one check per config");
    let a = recorded_id(&setup.state_dir(), &setup.config_path(), "backup");
    let b = recorded_id(&other.state_dir(), &other.config_path(), "backup");
    assert_ne!(a, b);
    for (id, home, config) in [
        (&a, &setup.home, setup.config_path()),
        (&b, &other, other.config_path()),
    ] {
        let tags = tags(&setup, id);
        assert!(tags.contains(&scope_tag(&config, "backup")), "{tags:?}");
        assert!(
            tags.contains(&owner_tag(&home.state_dir(), &config)),
            "{tags:?}"
        );
        assert_eq!(tagged(&setup, &scope_tag(&config, "backup")).len(), 1);
    }
    // Each config's run pinged its own check.
    let mut pinged: Vec<String> = setup.emulator.pings().into_iter().map(|p| p.path).collect();
    pinged.sort();
    let mut expected = vec![
        format!("/{}", token(&setup, &a)),
        format!("/{}", token(&setup, &b)),
    ];
    expected.sort();
    assert_eq!(pinged, expected);

    // Another machine with the same host name and the same config path (its own machine id,
    // its own state directory) gets a third check.
    let machine_id = other.path("machine-id");
    std::fs::write(&machine_id, "0123456789abcdef0123456789abcdef\n").unwrap();
    let third = Home::new();
    let third_state = third.state_dir();
    let args = ["--state-dir", third_state.to_str().unwrap(), "sync"];
    let env = [("HEARTBEAT_AGENT_MACHINE_ID_FILE", machine_id.as_path())];
    let out = agent_on(&setup, &setup.config_path(), &args, &env);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(posts(&setup), 3, "{}", text(&out.stderr));
}

#[test]
fn an_upgrade_adopts_the_check_made_under_the_older_tag_and_makes_no_second() {
    let setup = Setup::new(&[]);
    let old_tag = format!("heartbeat-agent:{}/backup", heartbeat_agent::host::name());
    setup
        .emulator
        .add_heartbeat_check(
            &json!({"id": "old1", "name": "backup", "tags": ["db", old_tag],
            "heartbeat": {"period": 1, "periodUnit": "days", "grace": 2, "graceUnit": "hours",
                          "pingToken": crate::util::emulator::token_for("old1")}}),
        )
        .unwrap();
    setup.write_config(&backup());
    // A dry run names the old check and changes nothing.
    let dry = setup.agent(&["sync", "--dry-run"]);
    assert_eq!(dry.status.code(), Some(0), "{}", text(&dry.stderr));
    assert!(
        text(&dry.stdout).starts_with("backup (check old1)"),
        "{}",
        text(&dry.stdout)
    );
    assert!(setup.puts().is_empty());
    assert_eq!(tags(&setup, "old1"), ["db", old_tag.as_str()]);

    let out = setup.agent(&["sync"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("adopted the check an older agent created for this job"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(posts(&setup), 0, "no second check");
    assert_eq!(
        recorded_id(&setup.state_dir(), &setup.config_path(), "backup"),
        "old1"
    );
    let scope = scope_tag(&setup.config_path(), "backup");
    let owner = owner_tag(&setup.state_dir(), &setup.config_path());
    let now = tags(&setup, "old1");
    assert!(now.contains(&scope) && now.contains(&owner), "{now:?}");
    // The adoption's own PUT kept the other tags: its body had them all.
    let (path, _, body) = setup.puts().into_iter().next().expect("the adoption's PUT");
    assert_eq!(path, "/v1/checks/heartbeat/old1");
    assert_eq!(body, json!({"tags": ["db", old_tag, scope, owner]}));

    // A lost state directory finds it again by the new tag.
    std::fs::remove_dir_all(setup.state_dir().join("sync")).unwrap();
    let again = setup.agent(&["sync"]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert_eq!(posts(&setup), 0);
    assert_eq!(
        recorded_id(&setup.state_dir(), &setup.config_path(), "backup"),
        "old1"
    );

    // A second config of this host upgraded later: the old check is the first's, so it makes
    // its own.
    let other = Home::new();
    second_config(&setup, &other);
    let out = agent_on(&setup, &other.config_path(), &["sync"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(posts(&setup), 1);
    assert_ne!(
        recorded_id(&other.state_dir(), &other.config_path(), "backup"),
        "old1"
    );
}

#[test]
fn a_check_owned_by_another_agent_is_neither_pinged_nor_changed() {
    let setup = Setup::new(&[]);
    let socket = setup.home.path("status.sock");
    setup.home.write_config(&format!(
        "[agent]\nstate_dir = \"{}\"\nsync_jitter = \"1s\"\n\n[api]\nbase_url = \"{}\"\n\
         account_id = \"{}\"\napi_key_env = \"EMULATOR_KEY\"\nping_base_url = \"{}\"\n\n\
         [status]\nlisten = \"{}\"\n\n[[jobs]]\nname = \"backup\"\nschedule = \"* * * * * *\"\n\
         command = [\"true\"]\n[jobs.check]\ncreate = true\nperiod = \"1m\"\n",
        setup.state_dir().display(),
        setup.emulator.base_url(),
        setup.emulator.account(),
        setup.emulator.ping_url(),
        socket.display()
    ));
    let scope = scope_tag(&setup.config_path(), "backup");
    let foreign = "heartbeat-agent-owner:0123456789abcdef";
    setup
        .emulator
        .add_heartbeat_check(
            &json!({"id": "theirs", "name": "backup", "tags": [scope, foreign],
            "heartbeat": {"period": 1, "periodUnit": "minutes", "grace": 1, "graceUnit": "hours",
                          "pingToken": crate::util::emulator::token_for("theirs")}}),
        )
        .unwrap();
    let before = setup.emulator.heartbeat_check("theirs");

    let out = setup.agent(&["sync"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let me = owner_tag(&setup.state_dir(), &setup.config_path());
    let me = me.trim_start_matches("heartbeat-agent-owner:");
    let expected = format!(
        "job \"backup\": check theirs carries the job's scope tag but is owned by agent \
         0123456789abcdef (this agent is {me}): it is neither pinged nor changed"
    );
    assert_eq!(
        text(&out.stdout),
        "backup (no check yet: create = true): failed\n"
    );
    assert!(
        text(&out.stderr).contains(&expected),
        "{}",
        text(&out.stderr)
    );

    let daemon = crate::util::daemon::Daemon::on(&setup.home)
        .config(setup.config_path())
        .env("EMULATOR_KEY", setup.emulator.api_key())
        .terminate_on_drop()
        .start();
    let endpoint = Endpoint::Unix(socket);
    let get = |path: &str| {
        let answer = endpoint.request("GET", path, None, Duration::from_secs(2));
        answer.ok().filter(|a| a.status == 200).map(|a| a.body)
    };
    let doc: Value = daemon.until(
        "the owner conflict in /status",
        Duration::from_secs(30),
        || {
            let doc: Value = serde_json::from_str(&get("/status")?).ok()?;
            (!doc["jobs"][0]["owned_by"].is_null()).then_some(doc)
        },
    );
    let job = &doc["jobs"][0];
    assert_eq!(job["owned_by"], "0123456789abcdef", "{doc}");
    assert_eq!(job["sync"]["state"], "owned_by_other", "{doc}");
    let error = job["sync"]["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("check theirs carries the job's scope tag"),
        "{doc}"
    );
    assert!(job["check_id"].is_null(), "{doc}");
    let metrics = get("/metrics").expect("metrics");
    assert!(
        metrics.contains("heartbeat_agent_check_owner_conflicts_total{job=\"backup\"} "),
        "{metrics}"
    );
    let table = setup.agent(&["status"]);
    assert!(
        text(&table.stdout).contains(
            "job \"backup\": its check is owned by another agent (0123456789abcdef): not \
             pinged nor changed\n"
        ),
        "{}",
        text(&table.stdout)
    );
    // Runs went on (every second), unpinged; the check was not touched.
    std::thread::sleep(Duration::from_secs(2));
    let log = daemon.stop();
    let error = log.iter().find(|line| {
        line["level"] == "ERROR"
            && line["job"] == "backup"
            && line["check"] == "theirs"
            && line["owner"] == "0123456789abcdef"
    });
    assert!(error.is_some(), "{log:?}");
    assert!(
        setup.emulator.pings().is_empty(),
        "{:?}",
        setup.emulator.pings()
    );
    assert!(setup.puts().is_empty(), "{:?}", setup.puts());
    assert_eq!(posts(&setup), 0);
    assert_eq!(setup.emulator.heartbeat_check("theirs"), before);
}

#[test]
fn without_a_machine_id_the_identity_is_kept_in_the_state_directory_and_tells_containers_apart() {
    let setup = Setup::new(&[]);
    setup.write_config(&backup());
    // Containers: no machine-id file.
    let none = setup.home.path("no-machine-id");
    let env = [("HEARTBEAT_AGENT_MACHINE_ID_FILE", none.as_path())];
    let out = agent_on(&setup, &setup.config_path(), &["sync"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(posts(&setup), 1);
    let seed = std::fs::read_to_string(setup.state_dir().join("machine-seed")).expect("seed");
    assert_eq!(seed.trim().len(), 32, "{seed:?}");
    let requests = setup.emulator.requests();
    let created = requests
        .iter()
        .find(|r| r.method == "POST")
        .map(|r| serde_json::from_str::<Value>(&r.body).unwrap())
        .expect("the POST");
    let created_tags: Vec<String> = serde_json::from_value(created["tags"].clone()).unwrap();
    let owner = created_tags
        .iter()
        .find_map(|t| t.strip_prefix("heartbeat-agent-owner:"))
        .expect("an owner tag")
        .to_owned();
    // The scope comes from the host name, not the (missing) machine id.
    let with_machine_id = scope_tag(&setup.config_path(), "backup");
    let scope = created_tags
        .iter()
        .find(|t| t.starts_with("heartbeat-agent:"))
        .expect("a scope tag");
    assert_ne!(scope, &with_machine_id);

    // A lost record finds the check again, owned by the same kept identity.
    std::fs::remove_dir_all(setup.state_dir().join("sync")).unwrap();
    let again = agent_on(&setup, &setup.config_path(), &["sync"], &env);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert_eq!(posts(&setup), 1);

    // Another container with the same host name and config path: the same scope, another
    // identity (its own state directory): refused, not shared.
    let other = Home::new();
    let other_state = other.state_dir();
    let args = ["--state-dir", other_state.to_str().unwrap(), "sync"];
    let out = agent_on(&setup, &setup.config_path(), &args, &env);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("but is owned by agent {owner} (this agent is ")),
        "{stderr}"
    );
    assert_eq!(posts(&setup), 1);
    assert!(!other_state.join("sync/backup.json").exists());
}

#[test]
fn two_configs_upgrading_at_once_adopt_the_old_check_once_and_the_other_makes_its_own() {
    let setup = Setup::new(&[]);
    let old_tag = format!("heartbeat-agent:{}/backup", heartbeat_agent::host::name());
    setup
        .emulator
        .add_heartbeat_check(&json!({"id": "old1", "name": "backup", "tags": [old_tag],
            "heartbeat": {"period": 1, "periodUnit": "days", "grace": 2, "graceUnit": "hours",
                          "pingToken": crate::util::emulator::token_for("old1")}}))
        .unwrap();
    setup.write_config(&backup());
    let other = Home::new();
    second_config(&setup, &other);
    // Each adoption's PUT is applied 1 s after it came (both agents have listed the check
    // unowned by then), and its read back 2 s after: both PUTs land before either read.
    setup.emulator.add_fault(Fault {
        latency_ms: 1000,
        ..Fault::new(FaultKind::Latency)
            .method("PUT")
            .path("/v1/checks/heartbeat/old1")
            .times(2)
    });
    setup.emulator.add_fault(Fault {
        latency_ms: 2000,
        ..Fault::new(FaultKind::Latency)
            .method("GET")
            .path("/v1/checks/old1")
            .times(2)
    });
    let spawn = |config: &Path| {
        setup
            .home
            .agent()
            .arg("--config")
            .arg(config)
            .arg("sync")
            .env("EMULATOR_KEY", setup.emulator.api_key())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = spawn(&setup.config_path());
    let b = spawn(&other.config_path());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_eq!(a.status.code(), Some(0), "{}", text(&a.stderr));
    assert_eq!(b.status.code(), Some(0), "{}", text(&b.stderr));
    let adoptions = setup
        .puts()
        .into_iter()
        .filter(|(path, _, body)| {
            path == "/v1/checks/heartbeat/old1" && body.as_object().is_some_and(|b| b.len() == 1)
        })
        .count();
    assert_eq!(adoptions, 2, "both tried to adopt it: the race happened");
    assert_eq!(
        posts(&setup),
        1,
        "one adopted the old check, the other made its own"
    );
    let ids = [
        recorded_id(&setup.state_dir(), &setup.config_path(), "backup"),
        recorded_id(&other.state_dir(), &other.config_path(), "backup"),
    ];
    assert_ne!(ids[0], ids[1]);
    assert!(ids.contains(&"old1".to_owned()), "{ids:?}");
    let owners = tags(&setup, "old1")
        .into_iter()
        .filter(|t| t.starts_with("heartbeat-agent-owner:"))
        .count();
    assert_eq!(owners, 1, "{:?}", tags(&setup, "old1"));
}
