//! Start and fail pings of `run`: a job's `start_url` and `fail_url` (and `--start-url`,
//! `--fail-url`) go to a second service, a loopback server here, while the seed service (the
//! emulator) receives only the successes on the check's own ping URL. `{exit_code}` carries
//! the status `run` exits with; `fail_body = "output_tail"` POSTs the bounded tail of an output
//! that still passes through untouched; a start ping that fails is never queued, a fail ping
//! that fails is, and `outbox flush` delivers it.

use std::time::Duration;

use serde_json::{json, Value};

use super::{output, refused_usage, stderr, Env, IGNORES_SIGTERM};
use crate::util::emulator::Background;
use crate::util::http::{refused_url, FakeServer, Mode};

/// The second service's token, in the start and fail URLs.
const SECOND: &str = "second-service-TOKEN-5a5a";
/// The seed check's ping token.
const SEED: &str = "5eed0000-aaaa-4bbb-8ccc-000000000019";

/// An emulator with one check, pinged on `SEED`.
fn seed() -> Background {
    Background::with_checks(&[("c-seed", SEED)])
}

/// Writes a config with job "backup" reporting its success to the emulator and its start and
/// failure to `second`; returns its path.
fn write_job(env: &Env, emulator: &Background, second: &FakeServer, extra: &str) -> String {
    let path = env.path("config.toml");
    std::fs::write(
        &path,
        format!(
            "[[jobs]]\nname = \"backup\"\nschedule = \"@daily\"\nping_url = \"{}/{SEED}\"\n\
             start_url = \"{}\"\nfail_url = \"{}\"\n{extra}",
            emulator.ping_url(),
            second.url(&format!("/{SECOND}/start")),
            second.url(&format!("/{SECOND}/{{exit_code}}")),
        ),
    )
    .expect("write the config");
    path.to_str().expect("utf-8").to_owned()
}

/// Everything `out` printed, checked for the second service's token.
fn assert_no_token(out: &std::process::Output) {
    for text in [&out.stdout, &out.stderr] {
        let text = String::from_utf8_lossy(text);
        assert!(!text.contains(SECOND) && !text.contains(SEED), "{text}");
    }
}

#[test]
fn a_job_reports_start_and_failure_to_the_second_service_and_success_to_the_seed() {
    let env = Env::new();
    let (emulator, second) = (seed(), FakeServer::start(Mode::Status(200)));
    let config = write_job(
        &env,
        &emulator,
        &second,
        "output_tail = 64\nfail_body = \"output_tail\"\n",
    );
    // A line on stderr, then 2,000 bytes through stdout, then exit 3.
    let script = "echo on-stderr >&2; sleep 0.2; i=0; while [ $i -lt 40 ]; do \
                  echo \"line $i of the output, padded to fifty bytes..\"; i=$((i+1)); done; \
                  echo last-line; exit 3";
    let out = output(env.run(&[
        "--config",
        &config,
        "--job",
        "backup",
        "--log-level",
        "debug",
        "--",
        "sh",
        "-c",
        script,
    ]));
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let expected: String = (0..40)
        .map(|i| format!("line {i} of the output, padded to fifty bytes..\n"))
        .chain(["last-line\n".to_owned()])
        .collect();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        expected,
        "stdout passes through"
    );
    assert!(stderr(&out).contains("on-stderr\n"), "{}", stderr(&out));
    assert_no_token(&out);
    let requests = second.wait_for(2, Duration::from_secs(5));
    let paths: Vec<&str> = requests.iter().map(|r| r.target.as_str()).collect();
    assert_eq!(paths, [format!("/{SECOND}/start"), format!("/{SECOND}/3")]);
    let fail = &requests[1];
    assert_eq!(fail.method, "POST");
    assert_eq!(
        fail.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(
        fail.body.len(),
        64,
        "{:?}",
        String::from_utf8_lossy(&fail.body)
    );
    assert_eq!(
        fail.body,
        expected.as_bytes()[expected.len() - 64..],
        "the last 64 bytes"
    );
    assert!(
        emulator.pings().is_empty(),
        "the seed check never hears of a failure"
    );

    second.clear();
    let out = output(env.run(&["--config", &config, "--job", "backup", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_no_token(&out);
    let paths: Vec<String> = second
        .wait_for(1, Duration::from_secs(5))
        .into_iter()
        .map(|r| r.target)
        .collect();
    assert_eq!(paths, [format!("/{SECOND}/start")]);
    let seed_pings: Vec<String> = emulator.pings().into_iter().map(|r| r.path).collect();
    assert!(
        seed_pings.len() == 1 && seed_pings[0].ends_with(SEED),
        "{seed_pings:?}"
    );
}

#[test]
fn the_exit_code_placeholder_carries_the_status_run_exits_with() {
    let env = Env::new();
    let second = FakeServer::start(Mode::Status(200));
    let fail = second.url(&format!("/{SECOND}/{{exit_code}}"));
    let cases: [(&[&str], i32); 4] = [
        (&["--", "sh", "-c", "exit 7"], 7),
        (&["--", "sh", "-c", "kill -TERM $$"], 143),
        (&["--timeout", "300ms", "--", "sleep", "5"], 124),
        (&IGNORES_SIGTERM, 137),
    ];
    for (args, status) in cases {
        second.clear();
        let out = output(env.run(&[&["--fail-url", fail.as_str()][..], args].concat()));
        assert_eq!(out.status.code(), Some(status), "{}", stderr(&out));
        assert_no_token(&out);
        let requests = second.wait_for(1, Duration::from_secs(5));
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].target, format!("/{SECOND}/{status}"));
        assert_eq!(requests[0].method, "GET");
    }
    // A placeholder other than {exit_code} and {run_id} is a usage error: nothing runs.
    let bad = second.url(&format!("/{SECOND}/{{code}}"));
    let said = refused_usage(&env, "--fail-url", &bad);
    assert!(
        said.contains(
            "unknown placeholder \"{code}\"; the only ones are {exit_code} (in a fail URL) and {run_id}"
        ),
        "{said}"
    );
    assert!(!said.contains(SECOND), "{said}");
}

/// `outbox list --json`, parsed.
fn outbox_list(env: &Env) -> Value {
    let out = output({
        let mut cmd = env.home.agent();
        cmd.args(["outbox", "list", "--json"]);
        cmd
    });
    serde_json::from_slice(&out.stdout).expect("outbox list --json")
}

#[test]
fn a_failed_start_ping_is_dropped_and_a_failed_fail_ping_is_kept_until_flushed() {
    let env = Env::new();
    let second = FakeServer::start(Mode::Status(503));
    let start = refused_url(&format!("/{SECOND}/start"));
    let config = env.path("config.toml");
    std::fs::write(
        &config,
        format!(
            "[[jobs]]\nname = \"backup\"\nschedule = \"@daily\"\nstart_url = \"{start}\"\n\
             fail_url = \"{}\"\nfail_body = \"output_tail\"\n",
            second.url(&format!("/{SECOND}/{{exit_code}}")),
        ),
    )
    .expect("write the config");
    let config = config.to_str().expect("utf-8");
    let out = output(env.run(&[
        "--config",
        config,
        "--job",
        "backup",
        "--ping-timeout",
        "1s",
        "--",
        "sh",
        "-c",
        "echo broken; exit 5",
    ]));
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("start ping not delivered; not kept (a late start would mislead)"),
        "{err}"
    );
    assert!(
        err.contains("ping not delivered; kept in the outbox for a later retry"),
        "{err}"
    );
    assert_no_token(&out);
    let listed = outbox_list(&env);
    let entries = listed["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 1, "only the fail ping is kept: {listed}");
    assert_eq!(entries[0]["job"], "backup");
    assert!(!listed.to_string().contains(SECOND), "{listed}");

    second.set_mode(Mode::Status(200));
    second.clear();
    let out = output({
        let mut cmd = env.home.agent();
        cmd.args(["outbox", "flush"]);
        cmd
    });
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("delivered 1, failed 0"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_no_token(&out);
    let requests = second.wait_for(1, Duration::from_secs(5));
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].target, format!("/{SECOND}/5"));
    assert_eq!(
        (requests[0].method.as_str(), requests[0].body.as_slice()),
        ("POST", &b"broken\n"[..])
    );
    assert_eq!(outbox_list(&env)["entries"], json!([]));
}

#[test]
fn a_reader_that_goes_away_gives_the_command_its_broken_pipe_while_the_tail_is_kept() {
    use std::io::Read;
    let env = Env::new();
    let (emulator, second) = (seed(), FakeServer::start(Mode::Status(200)));
    let config = write_job(&env, &emulator, &second, "fail_body = \"output_tail\"\n");
    let mut cmd = env.run(&[
        "--config", &config, "--job", "backup", "--", "yes", "endless",
    ]);
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start run");
    let mut first = [0u8; 8];
    let mut stdout = child.stdout.take().expect("piped stdout");
    stdout.read_exact(&mut first).expect("read the first bytes");
    assert_eq!(&first, b"endless\n");
    drop(stdout);
    let status = crate::util::wait_exit(&mut child, Duration::from_secs(10));
    // 128 + SIGPIPE, as `yes` gets writing to a closed pipe without run in between.
    assert_eq!(status.and_then(|s| s.code()), Some(141));
    let requests = second.wait_for(2, Duration::from_secs(5));
    assert_eq!(requests[1].target, format!("/{SECOND}/141"));
    assert!(
        requests[1].body.ends_with(b"endless\n"),
        "the tail is the output"
    );
}

#[test]
fn a_fail_body_never_carries_the_api_key_even_when_the_job_pings_by_url() {
    // A job bound by `ping_url` needs no API key, so nothing else made `run` read it: the
    // fail body must still be scrubbed of it, as the daemon's is.
    let env = Env::new();
    let (emulator, second) = (seed(), FakeServer::start(Mode::Status(200)));
    const KEY: &str = "sk_fail_body_api_key_0123456789";
    let key_file = env.path("api-key");
    std::fs::write(&key_file, format!("{KEY}\n")).expect("write the key");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let config = write_job(&env, &emulator, &second, "fail_body = \"output_tail\"\n");
    let text = std::fs::read_to_string(&config).expect("read the config");
    let api = format!("[api]\napi_key_file = \"{}\"\n\n", key_file.display());
    std::fs::write(&config, api + &text).expect("write the config");
    let script = format!("echo \"key {KEY} leaked\"; exit 4");
    let out = output(env.run(&[
        "--config", &config, "--job", "backup", "--", "sh", "-c", &script,
    ]));
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("key {KEY} leaked\n"),
        "the output itself passes through untouched"
    );
    let requests = second.wait_for(2, Duration::from_secs(5));
    let fail = &requests[1];
    assert_eq!(fail.path(), format!("/{SECOND}/4"));
    let body = String::from_utf8_lossy(&fail.body);
    assert_eq!(body, "key [redacted] leaked\n", "the fail body is scrubbed");
}

#[test]
fn the_api_key_from_the_environment_is_scrubbed_and_plain_run_sends_no_output() {
    // Every path of `run` that could send a job's output: `run --job` with `fail_body`, the
    // key given only by $HEARTBEAT_AGENT_API_KEY (no `[api]` in the config): scrubbed; plain
    // `run --fail-url` (no job, so no `fail_body`): the fail ping carries nothing of the
    // output.
    let env = Env::new();
    let (emulator, second) = (seed(), FakeServer::start(Mode::Status(200)));
    const KEY: &str = "sk_env_only_api_key_0123456789";
    let config = write_job(&env, &emulator, &second, "fail_body = \"output_tail\"\n");
    let script = "echo \"key $LEAK leaked\"; exit 5";
    let mut cmd = env.run(&[
        "--config", &config, "--job", "backup", "--", "sh", "-c", script,
    ]);
    cmd.env("HEARTBEAT_AGENT_API_KEY", KEY).env("LEAK", KEY);
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(!stderr(&out).contains(KEY), "{}", stderr(&out));
    let requests = second.wait_for(2, Duration::from_secs(5));
    assert_eq!(requests[1].path(), format!("/{SECOND}/5"));
    assert_eq!(
        String::from_utf8_lossy(&requests[1].body),
        "key [redacted] leaked\n"
    );
    second.clear();
    let fail_url = second.url(&format!("/{SECOND}/{{exit_code}}"));
    let mut cmd = env.run(&["--fail-url", &fail_url, "--", "sh", "-c", script]);
    cmd.env("HEARTBEAT_AGENT_API_KEY", KEY).env("LEAK", KEY);
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(!stderr(&out).contains(KEY), "{}", stderr(&out));
    let requests = second.wait_for(1, Duration::from_secs(5));
    assert_eq!(requests[0].path(), format!("/{SECOND}/5"));
    assert!(requests[0].body.is_empty(), "{:?}", requests[0].text());
}
