//! `heartbeat-agent api ...` run as a real process against the test server.

use std::io::Write;
use std::process::{Output, Stdio};

use serde_json::{json, Value};

use super::replies::{authorization, error_reply};
use super::{canned, json_page, ACCOUNT, KEY};
use crate::util::http::{refused_url, FakeServer};
use crate::util::Home;

/// Runs `heartbeat-agent --base-url <server> api ARGS` with the key and account in the
/// environment and no config file; `stdin` is written to the child's stdin.
fn api(server: &FakeServer, args: &[&str], stdin: &str) -> Output {
    let home = Home::new();
    let mut cmd = home.agent();
    cmd.args(["--base-url", &server.url(""), "api"])
        .args(args)
        .env("HEARTBEAT_AGENT_API_KEY", KEY)
        .env("HEARTBEAT_AGENT_ACCOUNT", ACCOUNT)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn stdout_json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn check_statuses_prints_compact_json_and_exits_0() {
    let server = FakeServer::scripted(|request, _| canned(request));
    let output = api(&server, &["check-statuses"], "");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        text.lines().count(),
        1,
        "not a terminal: compact JSON: {text}"
    );
    let answer = stdout_json(&output);
    assert_eq!(answer[0], Value::Null);
    assert_eq!(answer[1]["hasFailures"], true);
    let seen = server.requests();
    assert_eq!(
        seen[0].header("authorization"),
        Some(&*format!("Bearer {KEY}"))
    );
    assert_eq!(seen[0].header("x-service-account"), Some(ACCOUNT));
}

#[test]
fn list_all_walks_every_page() {
    let server = FakeServer::scripted(|request, _| match request.query() {
        "limit=2" => json_page(&[1, 2], Some("c2")),
        "limit=2&nextId=c2" => json_page(&[3, 4], Some("c4")),
        "limit=2&nextId=c4" => json_page(&[5], None),
        other => error_reply(
            400,
            "Bad Request",
            &format!("unexpected query {other}"),
            None,
        ),
    });
    let output = api(
        &server,
        &["status-page-services", "list", "--limit", "2", "--all"],
        "",
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let answer = stdout_json(&output);
    assert_eq!(answer["length"], 5);
    assert_eq!(answer["nextId"], Value::Null);
    let ids: Vec<&str> = answer["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["svc-1", "svc-2", "svc-3", "svc-4", "svc-5"]);
    assert_eq!(server.requests().len(), 3);
    // Without --all: one page, cursor shown.
    let output = api(
        &server,
        &["status-page-services", "list", "--limit", "2"],
        "",
    );
    assert_eq!(stdout_json(&output)["nextId"], "c2");
}

#[test]
fn an_api_error_goes_to_stderr_with_status_and_exits_1() {
    let server = FakeServer::scripted(|request, _| {
        let echo = authorization(request);
        match request.path() {
            "/v1/check-groups/9" => error_reply(404, "Not Found", "Not Found", None),
            _ => error_reply(401, "Unauthorized", &format!("Bad Token {echo}"), None),
        }
    });
    let output = api(&server, &["check-group", "get", "9"], "");
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    assert_eq!(
        stderr(&output).trim(),
        "heartbeat-agent: api error 404 Not Found: Not Found (GET /v1/check-groups/9)"
    );
    let output = api(&server, &["snippet", "delete", "4"], "");
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output);
    assert!(
        text.contains("api error 401 Unauthorized: Bad Token"),
        "{text}"
    );
    assert!(!text.contains(KEY), "key leaked: {text}");
}

#[test]
fn usage_errors_exit_2_with_a_message() {
    let server = FakeServer::scripted(|request, _| canned(request));
    for args in [
        &["check-group", "get", "seven"][..],
        &["status-page-services", "list", "--limit", "0"],
        &[
            "maintenance",
            "set-dates",
            "5",
            "m1",
            "--starts-at",
            "tomorrow",
            "--ends-at",
            "2026-01-01",
        ],
        &["heartbeat", "update", "hb-1"],
        &["no-such-operation"],
    ] {
        let output = api(&server, args, "");
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    let output = api(
        &server,
        &["heartbeat", "update", "hb-1", "--body", "-"],
        "{\"name\": }",
    );
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    assert!(
        text.contains("<stdin>:1:10: not a valid heartbeat check body"),
        "{text}"
    );
    let output = api(
        &server,
        &[
            "check-group",
            "update",
            "7",
            "--body",
            "/nonexistent/b.json",
        ],
        "",
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("cannot read the --body /nonexistent/b.json"));
    assert_eq!(
        server.requests().len(),
        0,
        "nothing is sent on a usage error"
    );
}

/// `api heartbeat get` reads the check (`GET /v1/checks/{id}`), its ping secrets redacted
/// unless `--show-secrets`.
#[test]
fn heartbeat_get_reads_the_check_with_its_secrets_redacted() {
    let server = FakeServer::scripted(|request, _| canned(request));
    let output = api(&server, &["heartbeat", "get", "hb-1"], "");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let shown = stdout_json(&output);
    assert_eq!(shown["name"], "backup");
    assert_eq!(shown["heartbeat"]["pingToken"], "[redacted]");
    assert!(!String::from_utf8_lossy(&output.stdout).contains("/tok"));
    let output = api(&server, &["heartbeat", "get", "hb-1", "--show-secrets"], "");
    assert_eq!(
        stdout_json(&output)["heartbeat"]["pingUrl"],
        "http://ping.invalid/tok"
    );
    let seen = server.requests();
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path()),
        ("GET", "/v1/checks/hb-1")
    );
}

#[test]
fn heartbeat_update_sends_the_body_from_stdin_and_the_query() {
    let server = FakeServer::scripted(|request, _| canned(request));
    let body = json!({"script": "", "name": "backup",
                      "heartbeat": {"period": 1, "periodUnit": "days",
                                    "grace": 2, "graceUnit": "hours"}});
    let output = api(
        &server,
        &[
            "heartbeat",
            "update",
            "hb-1",
            "--body",
            "-",
            "--auto-assign-alerts",
            "false",
        ],
        &body.to_string(),
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let shown = stdout_json(&output);
    let url = shown["heartbeat"]["pingUrl"].as_str().unwrap();
    assert!(url.starts_with("http://ping.invalid/…#"), "{url}");
    assert!(!String::from_utf8_lossy(&output.stdout).contains("/tok"));
    assert_eq!(shown["heartbeat"]["pingToken"], "[redacted]");
    let args = [
        "heartbeat",
        "update",
        "hb-1",
        "--body",
        "-",
        "--show-secrets",
    ];
    let output = api(&server, &args, &body.to_string());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout_json(&output)["heartbeat"]["pingUrl"],
        "http://ping.invalid/tok"
    );
    let seen = server.requests();
    assert_eq!(seen[0].method, "PUT");
    assert_eq!(seen[0].query(), "autoAssignAlerts=false");
    assert_eq!(
        serde_json::from_str::<Value>(&seen[0].text()).unwrap(),
        body
    );
}

#[test]
fn the_other_subcommands_reach_their_operations() {
    let server = FakeServer::scripted(|request, _| canned(request));
    let dir = tempfile::tempdir().unwrap();
    let group_body = dir.path().join("group.json");
    std::fs::write(
        &group_body,
        r#"{"name": "group", "retryStrategy": "FALLBACK"}"#,
    )
    .unwrap();
    let cases: [(&[&str], &str); 8] = [
        (
            &["status-page-services", "create", "--name", "API"],
            "POST /v1/status-pages/services",
        ),
        (
            &["maintenance", "get", "5", "m1"],
            "GET /v1/maintenance-windows/5/maintenances/m1",
        ),
        (
            &[
                "maintenance",
                "set-dates",
                "5",
                "m1",
                "--starts-at",
                "2026-07-01",
                "--ends-at",
                "2026-07-02",
            ],
            "PATCH /v1/maintenance-windows/5/maintenances/m1",
        ),
        (
            &["heartbeat", "event", "hb-1", "ev-1"],
            "GET /v1/checks/heartbeats/hb-1/events/ev-1",
        ),
        (&["check-group", "get", "7"], "GET /v1/check-groups/7"),
        (
            &[
                "check-group",
                "update",
                "7",
                "--body",
                group_body.to_str().unwrap(),
            ],
            "PUT /v2/check-groups/7",
        ),
        (
            &["error-groups", "p-1"],
            "GET /v1/test-session-error-groups/projects/p-1",
        ),
        (&["snippet", "delete", "3"], "DELETE /v1/snippets/3"),
    ];
    for (i, (args, target)) in cases.iter().enumerate() {
        let output = api(&server, args, "");
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            stderr(&output)
        );
        let seen = &server.requests()[i];
        assert_eq!(&format!("{} {}", seen.method, seen.path()), target);
        if *target == "DELETE /v1/snippets/3" {
            assert!(output.stdout.is_empty());
        } else {
            stdout_json(&output);
        }
    }
    let seen = server.requests();
    assert_eq!(
        serde_json::from_str::<Value>(&seen[2].text()).unwrap(),
        json!({"startsAt": "2026-07-01", "endsAt": "2026-07-02"})
    );
    assert_eq!(
        serde_json::from_str::<Value>(&seen[5].text()).unwrap(),
        json!({"name": "group", "retryStrategy": "FALLBACK"})
    );
}

#[test]
fn missing_credentials_say_what_to_set() {
    let home = Home::new();
    let output = home
        .agent()
        .args(["--base-url", "http://127.0.0.1:9", "api", "check-statuses"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output);
    assert!(
        text.contains("no API key: set HEARTBEAT_AGENT_API_KEY"),
        "{text}"
    );
    let output = home
        .agent()
        .args(["api", "check-statuses"])
        .env("HEARTBEAT_AGENT_API_KEY", KEY)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("no API base URL: pass --base-url URL"));
}

#[test]
fn an_invalid_config_file_exits_78() {
    let home = Home::new();
    let config = home.path("config.toml");
    std::fs::write(&config, "[api\nbase_url = ").unwrap();
    let output = home
        .agent()
        .args([
            "--config",
            config.to_str().unwrap(),
            "api",
            "check-statuses",
        ])
        .env("HEARTBEAT_AGENT_API_KEY", KEY)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(78), "{}", stderr(&output));
    assert!(stderr(&output).contains("config.toml"));
}

#[test]
fn a_connection_failure_exits_1_without_the_key() {
    let home = Home::new();
    let output = home
        .agent()
        .args([
            "--base-url",
            &refused_url(""),
            "api",
            "check-group",
            "get",
            "1",
        ])
        .env("HEARTBEAT_AGENT_API_KEY", KEY)
        .env("HEARTBEAT_AGENT_LOG", "error")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output);
    assert!(
        text.contains("connection failed") && text.contains("(GET /v1/check-groups/1)"),
        "{text}"
    );
    assert!(!text.contains(KEY));
}

/// A heartbeat check answer with id `id` (its token `tok-<id>`).
fn check(id: &str) -> Value {
    json!({"id": id, "name": id, "checkType": "HEARTBEAT", "tags": ["t"],
           "created_at": "2026-11-20T10:00:00.000Z",
           "heartbeat": {"period": 1, "periodUnit": "days", "grace": 1, "graceUnit": "hours",
                         "pingToken": format!("tok-{id}"),
                         "pingUrl": format!("http://ping.invalid/tok-{id}")}})
}

#[test]
fn checks_list_all_follows_pages_until_one_is_not_full() {
    let server = FakeServer::scripted(|request, _| {
        let page = match request.query() {
            "tag=t&tag=u&checkType=HEARTBEAT&page=1&limit=2" => json!([check("a"), check("b")]),
            "tag=t&tag=u&checkType=HEARTBEAT&page=2&limit=2" => json!([check("c")]),
            other => {
                return error_reply(
                    400,
                    "Bad Request",
                    &format!("unexpected query {other}"),
                    None,
                )
            }
        };
        super::replies::reply(200, page)
    });
    let args = [
        "checks",
        "list",
        "--tag",
        "t",
        "--tag",
        "u",
        "--check-type",
        "HEARTBEAT",
        "--limit",
        "2",
        "--all",
    ];
    let output = api(&server, &args, "");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let listed = stdout_json(&output);
    let ids: Vec<&str> = listed
        .as_array()
        .expect("one array")
        .iter()
        .map(|c| c["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["a", "b", "c"]);
    assert_eq!(listed[0]["heartbeat"]["pingToken"], "[redacted]");
    assert_eq!(server.requests().len(), 2);
    let one = api(
        &server,
        &["checks", "list", "--tag", "t", "--page", "0"],
        "",
    );
    assert_eq!(one.status.code(), Some(2), "a page is from 1");
}

#[test]
fn heartbeat_create_posts_the_body_once_and_a_402_says_what_to_do() {
    let server = FakeServer::scripted(|request, n| match (request.method.as_str(), n) {
        ("POST", 0) => super::replies::reply(201, check("new")),
        ("POST", _) => error_reply(402, "Payment Required", "check limit reached", None),
        _ => error_reply(400, "Bad Request", "unexpected", None),
    });
    let no_heartbeat = api(
        &server,
        &["heartbeat", "create", "--body", "-"],
        r#"{"name": "x"}"#,
    );
    assert_eq!(
        no_heartbeat.status.code(),
        Some(2),
        "{}",
        stderr(&no_heartbeat)
    );
    assert!(
        stderr(&no_heartbeat).contains("needs a \"heartbeat\" object"),
        "{}",
        stderr(&no_heartbeat)
    );
    assert!(server.requests().is_empty(), "nothing sent");
    let body = r#"{"name": "new", "tags": ["t"],
                  "heartbeat": {"period": 1, "periodUnit": "days", "grace": 1, "graceUnit": "hours"}}"#;
    let args = [
        "heartbeat",
        "create",
        "--body",
        "-",
        "--auto-assign-alerts",
        "false",
    ];
    let created = api(&server, &args, body);
    assert_eq!(created.status.code(), Some(0), "{}", stderr(&created));
    let answer = stdout_json(&created);
    assert_eq!(answer["id"], "new");
    assert_eq!(answer["heartbeat"]["pingToken"], "[redacted]");
    let seen = server.requests();
    assert_eq!(
        seen[0].target,
        "/v1/checks/heartbeat?autoAssignAlerts=false"
    );
    let sent: Value = serde_json::from_str(&seen[0].text()).expect("JSON body");
    assert_eq!(sent["heartbeat"]["periodUnit"], "days");
    assert_eq!(sent["tags"], json!(["t"]));

    let refused = api(&server, &args, body);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("api error 402 Payment Required: check limit reached"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(server.requests().len(), 2, "a 402 is not retried");
}
