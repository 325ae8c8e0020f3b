//! `heartbeat-agent api ...` as a real process against the emulator, with `--log-level trace`:
//! answers on stdout, errors on stderr with status and message, exit codes 0/1/2, and the key
//! nowhere in either stream.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Output, Stdio};

use heartbeat_agent::emulator::{Fault, FaultKind, RateLimit};
use serde_json::{json, Value};

use super::{options, CHECK, KEY};
use crate::util::emulator::Background;
use crate::util::Home;

/// Runs `heartbeat-agent --log-level trace --base-url <emulator> api ARGS` with `key`.
fn api(emulator: &Background, key: &str, args: &[&str], stdin: &str) -> Output {
    api_at(emulator.base_url(), emulator.account(), key, args, stdin)
}

/// Runs `api ARGS` against `base_url`; asserts neither stream holds `KEY` or `key`.
fn api_at(base_url: &str, account: &str, key: &str, args: &[&str], stdin: &str) -> Output {
    let home = Home::new();
    let mut cmd = home.agent();
    cmd.args(["--log-level", "trace", "--base-url", base_url, "api"])
        .args(args)
        .env("HEARTBEAT_AGENT_API_KEY", key)
        .env("HEARTBEAT_AGENT_ACCOUNT", account)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("the binary starts");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(stdin.as_bytes())
        .expect("stdin written");
    let output = child.wait_with_output().expect("the binary ends");
    for (name, stream) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
        let text = String::from_utf8_lossy(stream);
        assert!(!text.contains(KEY), "the key is in {name}: {text}");
        assert!(!text.contains(key), "the key sent is in {name}: {text}");
    }
    output
}

fn ok_json(output: &Output) -> Value {
    assert_eq!(output.status.code(), Some(0), "{}", stderr(output));
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn commands_round_trip_through_the_binary() {
    let emulator = Background::start_with(options(RateLimit::default()));
    let all = ok_json(&api(
        &emulator,
        KEY,
        &["status-page-services", "list", "--all", "--limit", "1"],
        "",
    ));
    assert_eq!(all["length"], 2);
    assert_eq!(all["entries"][1]["name"], "Dashboard");
    assert_eq!(all["nextId"], Value::Null);
    let pages = emulator
        .requests()
        .iter()
        .filter(|r| r.path == "/v1/status-pages/services")
        .count();
    assert_eq!(pages, 2, "--all followed nextId");

    let body = json!({"script": "", "name": "nightly backup",
        "heartbeat": {"period": 2, "periodUnit": "hours", "grace": 5, "graceUnit": "minutes"}});
    let check = ok_json(&api(
        &emulator,
        KEY,
        &["heartbeat", "update", CHECK, "--body", "-"],
        &body.to_string(),
    ));
    assert_eq!(check["heartbeat"]["period"], 2);
    assert_eq!(check["heartbeat"]["periodUnit"], "hours");
    let url = check["heartbeat"]["pingUrl"].as_str().expect("pingUrl");
    assert!(url.starts_with(emulator.ping_url()), "{url}");

    let events = ok_json(&api(&emulator, KEY, &["heartbeat", "events", CHECK], ""));
    assert_eq!(events[0]["events"], json!([]), "never pinged");
    let window = [
        "heartbeat",
        "events",
        CHECK,
        "--limit",
        "3",
        "--start-time",
        "2026-11-20T00:00:00Z",
    ];
    let windowed = ok_json(&api(&emulator, KEY, &window, ""));
    assert_eq!(windowed[0]["events"], json!([]));
    let sent = emulator.requests();
    let query = sent.last().and_then(|r| r.query.clone());
    assert_eq!(
        query.as_deref(),
        Some("limit=3&startTime=2026-11-20T00%3A00%3A00.000Z")
    );
    let bad = api(
        &emulator,
        KEY,
        &["heartbeat", "events", CHECK, "--start-time", "monday"],
        "",
    );
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("expected an RFC 3339 time"),
        "{}",
        stderr(&bad)
    );
    let statuses = ok_json(&api(&emulator, KEY, &["check-statuses"], ""));
    assert_eq!(statuses[0]["checkId"], CHECK);
    let dates = [
        "maintenance",
        "set-dates",
        "7",
        "m-2026-12-01",
        "--starts-at",
        "2026-12-10",
        "--ends-at",
        "2026-12-11",
    ];
    let moved = ok_json(&api(&emulator, KEY, &dates, ""));
    assert_eq!(moved["updates"][0]["previousStartsAt"], "2026-12-01");
    let deleted = api(&emulator, KEY, &["snippet", "delete", "11"], "");
    assert_eq!(deleted.status.code(), Some(0), "{}", stderr(&deleted));
    assert!(deleted.stdout.is_empty());
}

#[test]
fn failures_exit_1_with_status_and_message_and_never_the_key() {
    let emulator = Background::start_with(options(RateLimit::default()));
    let wrong = api(&emulator, "sk_wrong_key_1234", &["check-statuses"], "");
    assert_eq!(wrong.status.code(), Some(1));
    assert!(
        stderr(&wrong).contains("api error 401 Unauthorized: Bad Token"),
        "{}",
        stderr(&wrong)
    );
    let missing = api(&emulator, KEY, &["check-group", "get", "999"], "");
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("api error 404 Not Found: Not Found (GET /v1/check-groups/999)"),
        "{}",
        stderr(&missing)
    );
    let invalid = api(
        &emulator,
        KEY,
        &["check-group", "update", "42", "--body", "-"],
        r#"{"name": "g", "concurrency": 0}"#,
    );
    assert_eq!(invalid.status.code(), Some(1));
    assert!(
        stderr(&invalid).contains("api error 400 Bad Request: \"concurrency\""),
        "{}",
        stderr(&invalid)
    );
    let mut storm = Fault::new(FaultKind::RateLimit).path("/v1/check-statuses");
    storm.retry_after = Some(json!(0));
    emulator.add_fault(storm);
    let limited = api(&emulator, KEY, &["check-statuses"], "");
    assert_eq!(limited.status.code(), Some(1));
    assert!(
        stderr(&limited).contains("api error 429 Too Many Requests"),
        "{}",
        stderr(&limited)
    );
    emulator.clear_faults();
    emulator.add_fault(
        Fault::new(FaultKind::Status)
            .path("/v1/check-statuses")
            .times(4),
    );
    let broken = api(&emulator, KEY, &["check-statuses"], "");
    assert_eq!(broken.status.code(), Some(1), "{}", stderr(&broken));
    let usage = api(&emulator, KEY, &["check-group", "get", "not-a-number"], "");
    assert_eq!(usage.status.code(), Some(2));
}

#[test]
fn list_all_against_the_emulator_binary_with_trace_logs_on_both_sides() {
    let home = Home::new();
    let fixtures = crate::util::emulator::example_fixtures_path();
    let mut emulator = home
        .agent()
        .args([
            "--log-level",
            "trace",
            "emulator",
            "--listen",
            "127.0.0.1:0",
        ])
        .args([
            "--ping-listen",
            "127.0.0.1:0",
            "--api-key",
            KEY,
            "--rate-limit",
            "3/60",
            "--fixtures",
        ])
        .arg(&fixtures)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the emulator starts");
    let mut lines = BufReader::new(emulator.stdout.take().expect("piped")).lines();
    let base_url = lines
        .next()
        .and_then(Result::ok)
        .and_then(|line| line.strip_prefix("base_url=").map(str::to_owned))
        .expect("a base_url= line");
    let ping_url = lines
        .next()
        .and_then(Result::ok)
        .and_then(|line| line.strip_prefix("ping_url=").map(str::to_owned))
        .expect("a ping_url= line");
    ping_raw(&ping_url, super::TOKEN);
    let account = heartbeat_agent::emulator::DEFAULT_ACCOUNT;
    let args = ["status-page-services", "list", "--all", "--limit", "1"];
    let all = ok_json(&api_at(&base_url, account, KEY, &args, ""));
    let names: Vec<&str> = all["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(names, ["API", "Dashboard"]);
    let refused = api_at(
        &base_url,
        account,
        "sk_wrong_key_5678",
        &["check-statuses"],
        "",
    );
    assert_eq!(refused.status.code(), Some(1));
    // Two pages used two of the three requests the window allows (a 401 does not count).
    ok_json(&api_at(&base_url, account, KEY, &["check-statuses"], ""));
    let limited = api_at(&base_url, account, KEY, &["check-statuses"], "");
    assert_eq!(limited.status.code(), Some(1));
    assert!(
        stderr(&limited).contains("api error 429 Too Many Requests: Too Many Requests"),
        "{}",
        stderr(&limited)
    );

    let pid = nix::unistd::Pid::from_raw(emulator.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("signal sent");
    let mut log = String::new();
    emulator
        .stderr
        .take()
        .expect("piped")
        .read_to_string(&mut log)
        .expect("stderr read");
    assert_eq!(emulator.wait().expect("exits").code(), Some(0), "{log}");
    assert!(
        log.contains("emulator listening"),
        "trace logs were written: {log}"
    );
    for secret in [KEY, "sk_wrong_key_5678", super::TOKEN] {
        assert!(!log.contains(secret), "the emulator logged a secret: {log}");
    }
}

/// A `GET /{token}` on the ping host over a plain socket; asserts a 200 answer.
fn ping_raw(ping_url: &str, token: &str) {
    let addr = ping_url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).expect("the ping host accepts");
    write!(
        stream,
        "GET /{token} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: roundtrip\r\nConnection: close\r\n\r\n"
    )
    .expect("request written");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer read");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[test]
fn answers_are_pretty_on_a_terminal() {
    let emulator = Background::start_with(options(RateLimit::default()));
    let pty = nix::pty::openpty(None, None).expect("a pseudo-terminal");
    let home = Home::new();
    let mut cmd = home.agent();
    cmd.args([
        "--base-url",
        emulator.base_url(),
        "api",
        "check-group",
        "get",
        "42",
    ])
    .env("HEARTBEAT_AGENT_API_KEY", KEY)
    .env("HEARTBEAT_AGENT_ACCOUNT", emulator.account())
    .stdin(Stdio::null())
    .stdout(Stdio::from(pty.slave))
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("the binary starts");
    // The command holds the only other copy of the terminal's slave side: close it, so reading
    // the master ends (EIO) when the child exits.
    drop(cmd);
    let mut master = std::fs::File::from(pty.master);
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match master.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
        }
    }
    assert!(child.wait().expect("exits").success());
    let text = String::from_utf8_lossy(&bytes).replace("\r\n", "\n");
    assert!(
        text.starts_with("{\n  \""),
        "pretty JSON on a terminal: {text:?}"
    );
    let group: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(group["id"], 42);
}
