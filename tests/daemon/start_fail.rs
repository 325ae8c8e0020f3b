//! The daemon's start and fail pings: a job's `start_url` is pinged as each run starts and its
//! `fail_url` after each run that did not succeed, `{exit_code}` and the output tail filled in,
//! on a loopback server standing for a second service; the seed service (the emulator) gets
//! only the successes on the check's own ping URL; no token reaches the log.

use super::*;
use crate::util::emulator::Background;

/// The second service's token.
const TOKEN: &str = "daemon-second-TOKEN-77c1";
/// The seed checks' ping tokens.
const GOOD: &str = "5eed0000-aaaa-4bbb-8ccc-000000000191";
const BAD: &str = "5eed0000-aaaa-4bbb-8ccc-000000000192";

#[test]
fn runs_report_start_and_failure_to_the_second_service_and_success_to_the_seed() {
    let emulator = Background::with_checks(&[("c-good", GOOD), ("c-bad", BAD)]);
    let second = ping_server();
    let home = Home::new();
    home.write_jobs(&format!(
        r#"
[[jobs]]
name = "good"
schedule = "*/1 * * * * *"
command = ["true"]
ping_url = "{seed}/{GOOD}"
start_url = "{good_start}"
fail_url = "{good_fail}"

[[jobs]]
name = "bad"
schedule = "*/1 * * * * *"
shell = "echo first; echo second-to-last; echo the-end; exit 4"
ping_url = "{seed}/{BAD}"
start_url = "{bad_start}"
fail_url = "{bad_fail}"
fail_body = "output_tail"
output_tail = 20
"#,
        seed = emulator.ping_url(),
        good_start = second.url(&format!("/{TOKEN}/good/start")),
        good_fail = second.url(&format!("/{TOKEN}/good/{{exit_code}}")),
        bad_start = second.url(&format!("/{TOKEN}/bad/start")),
        bad_fail = second.url(&format!("/{TOKEN}/bad/fail?status={{exit_code}}")),
    ));
    let daemon = home.start();
    wait_hits(
        &second,
        &format!("/{TOKEN}/bad/fail?status=4"),
        2,
        6 * SECOND,
    );
    wait_hits(&second, &format!("/{TOKEN}/good/start"), 2, 6 * SECOND);
    let logs = daemon.stop();
    let requests = second.requests();
    let fail = requests
        .iter()
        .find(|r| r.target.starts_with(&format!("/{TOKEN}/bad/fail")))
        .expect("a fail ping");
    assert_eq!(fail.method, "POST");
    // The last 20 bytes of the output.
    assert_eq!(
        String::from_utf8_lossy(&fail.body),
        "ond-to-last\nthe-end\n"
    );
    assert!(
        requests
            .iter()
            .all(|r| !r.target.contains("/good/4")
                && !r.target.starts_with(&format!("/{TOKEN}/good/0"))),
        "a good run sends no fail ping"
    );
    assert!(hits(&second, &format!("/{TOKEN}/bad/start")) >= 2);
    let seed: Vec<String> = emulator.pings().into_iter().map(|r| r.path).collect();
    assert!(
        !seed.is_empty() && seed.iter().all(|p| p.ends_with(GOOD)),
        "{seed:?}"
    );
    let log: String = logs.iter().map(Value::to_string).collect();
    assert!(
        !log.contains(TOKEN) && !log.contains(GOOD) && !log.contains(BAD),
        "{log}"
    );
}

#[test]
fn a_daemon_fail_body_never_carries_the_api_key() {
    // The daemon's path of a job's output to a third party: the key, given only by
    // $HEARTBEAT_AGENT_API_KEY (no `[api]`), printed by the job, is scrubbed from the fail
    // body, from the log and from the recorded tail.
    const KEY: &str = "sk_daemon_fail_body_key_424242";
    let second = ping_server();
    let home = Home::new();
    home.write_jobs(&format!(
        r#"
[[jobs]]
name = "leaky"
schedule = "*/1 * * * * *"
shell = "echo key $LEAK here; exit 3"
env = {{ LEAK = "{KEY}" }}
fail_url = "{fail}"
fail_body = "output_tail"
"#,
        fail = second.url(&format!("/{TOKEN}/leaky/{{exit_code}}")),
    ));
    let daemon = home.start_with(&[("HEARTBEAT_AGENT_API_KEY", KEY)]);
    let path = format!("/{TOKEN}/leaky/3");
    wait_hits(&second, &path, 1, 6 * SECOND);
    let logs = daemon.stop();
    let requests = second.requests();
    let fail = requests
        .iter()
        .find(|r| r.target == path)
        .expect("a fail ping");
    assert_eq!(String::from_utf8_lossy(&fail.body), "key [redacted] here\n");
    let log: String = logs.iter().map(Value::to_string).collect();
    assert!(!log.contains(KEY), "{log}");
    assert!(log.contains("key [redacted] here"), "{log}");
}

#[test]
fn overlapping_runs_pair_each_start_with_its_end_by_run_id() {
    // Runs of 2.5 s every second with `overlap = "allow"`: three run at once. Each start and
    // success carries its run's id, so the service can tell which start each end closes.
    let second = ping_server();
    let home = Home::new();
    let seen = home.path("seen");
    home.write_jobs(&format!(
        r#"
[[jobs]]
name = "slow"
schedule = "*/1 * * * * *"
overlap = "allow"
shell = "echo \"$HEARTBEAT_AGENT_RUN_ID\" >> '{seen}'; sleep 2.5"
ping_url = "{ping}"
start_url = "{start}"
"#,
        seen = seen.display(),
        ping = second.url(&format!("/{TOKEN}/slow/{{run_id}}")),
        start = second.url(&format!("/{TOKEN}/slow/start?rid={{run_id}}")),
    ));
    let daemon = home.start();
    let end_prefix = format!("/{TOKEN}/slow/");
    let start_prefix = format!("/{TOKEN}/slow/start?rid=");
    let is_end =
        |target: &str| target.starts_with(&end_prefix) && !target.starts_with(&start_prefix);
    let arrived = second.receive_until(10 * SECOND, |requests| {
        requests.iter().filter(|r| is_end(&r.target)).count() >= 3
    });
    let logs = daemon.stop();
    assert!(arrived, "three runs ended");
    let targets: Vec<String> = second.requests().into_iter().map(|r| r.target).collect();
    let starts: Vec<(usize, &str)> = targets
        .iter()
        .enumerate()
        .filter_map(|(i, t)| Some((i, t.strip_prefix(&start_prefix)?)))
        .collect();
    let ends: Vec<(usize, &str)> = targets
        .iter()
        .enumerate()
        .filter(|(_, t)| is_end(t))
        .filter_map(|(i, t)| Some((i, t.strip_prefix(&end_prefix)?)))
        .collect();
    // The runs overlapped: the second run started before the first one ended.
    assert!(starts.len() >= 2 && starts[1].0 < ends[0].0, "{targets:?}");
    let written = std::fs::read_to_string(&seen).expect("the runs wrote their ids");
    for (at, id) in &ends {
        let started = starts.iter().find(|(_, s)| s == id);
        assert!(
            started.is_some_and(|(start_at, _)| start_at < at),
            "the end of run {id} follows its own start: {targets:?}"
        );
        assert!(written.lines().any(|l| l == *id), "{id} in {written}");
        let logged = |msg: &str| {
            logs.iter()
                .any(|l| is(l, msg, "slow") && l.get("run_id").and_then(Value::as_str) == Some(*id))
        };
        assert!(
            logged("job started") && logged("job finished"),
            "{id} in the log"
        );
    }
    let mut distinct: Vec<&str> = starts.iter().map(|(_, id)| *id).collect();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), starts.len(), "each run has its own id");
    let log: String = logs.iter().map(Value::to_string).collect();
    assert!(!log.contains(TOKEN), "{log}");
}

#[test]
fn a_daemon_fail_ping_is_a_json_summary_with_its_headers() {
    const HEADER: &str = "daemon-hook-secret-9d9d9d";
    const VAR: &str = "DAEMON_HOOK_SECRET";
    let second = ping_server();
    let home = Home::new();
    let seen = home.path("child-env");
    home.write_jobs(&format!(
        r#"
[[jobs]]
name = "broken"
schedule = "*/1 * * * * *"
shell = "env > '{seen}'; echo it broke; exit 5"
fail_url = "{fail}"
fail_body = "json"
fail_headers = {{ X-Hook-Token = {{ env = "{VAR}" }} }}
"#,
        seen = seen.display(),
        fail = second.url(&format!("/{TOKEN}/hook")),
    ));
    let daemon = home.start_with(&[(VAR, HEADER)]);
    wait_hits(&second, &format!("/{TOKEN}/hook"), 1, 6 * SECOND);
    let logs = daemon.stop();
    let requests = second.requests();
    let hook = &requests[0];
    assert_eq!(hook.method, "POST");
    assert_eq!(hook.header("content-type"), Some("application/json"));
    assert_eq!(hook.header("x-hook-token"), Some(HEADER));
    let doc: Value = serde_json::from_slice(&hook.body).expect("JSON");
    assert_eq!(
        (
            doc["job"].as_str(),
            doc["exit_code"].as_i64(),
            doc["outcome"].as_str()
        ),
        (Some("broken"), Some(5), Some("failed"))
    );
    assert_eq!(doc["output_tail"], "it broke\n");
    let run_id = doc["run_id"].as_str().expect("run_id");
    assert!(
        logs.iter().any(|l| is(l, "job failed", "broken")
            && l.get("run_id").and_then(Value::as_str) == Some(run_id)),
        "the log names the run"
    );
    let child_env = std::fs::read_to_string(&seen).expect("the job wrote its env");
    assert!(!child_env.contains(VAR), "{child_env}");
    let log: String = logs.iter().map(Value::to_string).collect();
    assert!(!log.contains(HEADER) && !log.contains(TOKEN), "{log}");
}
