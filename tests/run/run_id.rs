//! A run's id under `run --job`: the command sees it in `HEARTBEAT_AGENT_RUN_ID`, the job's
//! `start_url` (healthchecks' `?rid=` form), `ping_url` and `fail_url` carry it as
//! `{run_id}`, so the service pairs each start with its end, and the history records it.

use serde_json::Value;

use super::{output, refused_usage, stderr, Env};
use crate::util::http::{FakeServer, Mode};

/// The token in every URL: it must never be printed.
const TOKEN: &str = "run-id-TOKEN-3c3c3c3c";

/// Writes job "backup" pinging `server` with `{run_id}` in all three URLs; returns the path.
fn write_job(env: &Env, server: &FakeServer) -> String {
    let path = env.path("config.toml");
    std::fs::write(
        &path,
        format!(
            "[agent]\nstate_dir = \"{state}\"\n\n[[jobs]]\nname = \"backup\"\n\
             schedule = \"@daily\"\nping_url = \"{ping}\"\nstart_url = \"{start}\"\n\
             fail_url = \"{fail}\"\n",
            state = env.path("state").display(),
            ping = server.url(&format!("/{TOKEN}/{{run_id}}")),
            start = server.url(&format!("/{TOKEN}/start?rid={{run_id}}")),
            fail = server.url(&format!("/{TOKEN}/fail/{{exit_code}}?rid={{run_id}}")),
        ),
    )
    .expect("write the config");
    path.to_str().expect("utf-8").to_owned()
}

/// Whether `id` is a version 4 UUID in its hyphenated lower-case form.
fn is_uuid_v4(id: &str) -> bool {
    let groups: Vec<&str> = id.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && id
            .chars()
            .all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c))
        && groups[2].starts_with('4')
        && groups[3].starts_with(['8', '9', 'a', 'b'])
}

#[test]
fn each_run_has_an_id_in_its_environment_its_urls_and_its_history() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(200));
    let config = write_job(&env, &server);
    let seen = env.path("seen");
    let script = format!(
        "echo \"$HEARTBEAT_AGENT_RUN_ID\" >> '{}'; exit \"$1\"",
        seen.display()
    );
    for (code, status) in [("0", 0), ("3", 3)] {
        let out = output(env.run(&[
            "--config", &config, "--job", "backup", "--", "sh", "-c", &script, "sh", code,
        ]));
        assert_eq!(out.status.code(), Some(status), "{}", stderr(&out));
        let printed = format!("{}{}", stderr(&out), String::from_utf8_lossy(&out.stdout));
        assert!(!printed.contains(TOKEN), "{printed}");
    }
    let ids: Vec<String> = std::fs::read_to_string(&seen)
        .expect("the commands wrote their ids")
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_ne!(ids[0], ids[1], "each run has its own id");
    assert!(ids.iter().all(|id| is_uuid_v4(id)), "{ids:?}");
    let targets: Vec<String> = server.requests().into_iter().map(|r| r.target).collect();
    assert_eq!(
        targets,
        [
            format!("/{TOKEN}/start?rid={}", ids[0]),
            format!("/{TOKEN}/{}", ids[0]),
            format!("/{TOKEN}/start?rid={}", ids[1]),
            format!("/{TOKEN}/fail/3?rid={}", ids[1]),
        ]
    );
    let mut history = env.home.agent();
    history.args(["--config", &config, "history", "--json", "backup"]);
    let out = output(history);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("history --json prints JSON");
    let recorded: Vec<&str> = doc["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|run| run["run_id"].as_str().expect("a run_id"))
        .collect();
    assert_eq!(recorded, [ids[1].as_str(), ids[0].as_str()], "newest first");
}

#[test]
fn a_run_id_in_the_flags_urls_is_filled_and_an_unknown_placeholder_refused() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(200));
    let ping = server.url(&format!("/{TOKEN}?rid={{run_id}}"));
    let out = output(env.run(&["--ping-url", &ping, "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let targets: Vec<String> = server.requests().into_iter().map(|r| r.target).collect();
    assert_eq!(targets.len(), 1, "{targets:?}");
    let id = targets[0]
        .strip_prefix(&format!("/{TOKEN}?rid="))
        .expect("the ping carries the run's id");
    assert!(is_uuid_v4(id), "{id}");

    let bad = server.url(&format!("/{TOKEN}/{{exit_code}}"));
    let said = refused_usage(&env, "--ping-url", &bad);
    assert!(
        said.contains("invalid --ping-url: http://127.0.0.1")
            && said.contains("unknown placeholder \"{exit_code}\""),
        "{said}"
    );
    assert!(!said.contains(TOKEN), "{said}");
}

#[test]
fn the_emulators_check_takes_a_ping_with_the_healthchecks_style_rid() {
    // The seed service's ping host, with `?rid={run_id}` written after the token: the check is
    // pinged (2xx, no outbox entry) and the query carries the run's id.
    const SEED: &str = "5eed0000-aaaa-4bbb-8ccc-000000000031";
    let env = Env::new();
    let emulator = crate::util::emulator::Background::with_checks(&[("c-rid", SEED)]);
    let url = format!("{}/{SEED}?rid={{run_id}}", emulator.ping_url());
    let out = output(env.run(&["--ping-url", &url, "-v", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let pings = emulator.pings();
    assert_eq!(pings.len(), 1, "{pings:?}");
    assert!(pings[0].path.ends_with(SEED), "{pings:?}");
    assert_eq!(pings[0].status, Some(200), "{pings:?}");
    let id = pings[0]
        .query
        .as_deref()
        .and_then(|q| q.strip_prefix("rid="));
    assert!(id.is_some_and(is_uuid_v4), "{pings:?}");
    assert!(!stderr(&out).contains(SEED), "{}", stderr(&out));
}
