//! The scope and owner of a check the agent creates (`create = true`): two configs on one
//! machine, or two machines with the same host name, get a check each; a check made by older
//! agents under the host-named tag is adopted on upgrade, never duplicated; a check carrying the
//! job's scope but owned by another agent is neither pinged nor changed, and said loudly.

use std::path::Path;

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
            (!doc["jobs"][0]["owner_conflict"].is_null()).then_some(doc)
        },
    );
    assert_eq!(
        doc["jobs"][0]["owner_conflict"],
        json!({"check_id": "theirs", "owner": "0123456789abcdef"}),
        "{doc}"
    );
    assert!(doc["jobs"][0]["check_id"].is_null(), "{doc}");
    let metrics = get("/metrics").expect("metrics");
    assert!(
        metrics.contains("heartbeat_agent_check_owner_conflicts_total{job=\"backup\"} "),
        "{metrics}"
    );
    let table = setup.agent(&["status"]);
    assert!(
        text(&table.stdout).contains(
            "job \"backup\": check theirs is owned by another agent (0123456789abcdef): not \
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
