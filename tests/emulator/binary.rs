//! The `heartbeat-agent emulator` binary: prints its URLs, serves, exits 0 on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::util::{self, Home};

fn wait_with_deadline(child: &mut Child, deadline: Duration) -> std::process::ExitStatus {
    util::wait_exit(child, deadline).unwrap_or_else(|| {
        let _ = child.kill();
        panic!("the emulator did not exit within {deadline:?}");
    })
}

#[test]
fn prints_urls_serves_and_exits_zero_on_sigterm() {
    let home = Home::new();
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/config/emulator-fixtures.json");
    let mut child = home
        .agent()
        .args([
            "emulator",
            "--listen",
            "127.0.0.1:0",
            "--ping-listen",
            "127.0.0.1:0",
        ])
        .args(["--api-key", "k-test", "--fixtures", fixtures])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the binary starts");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout piped")).lines();
    let mut next = || lines.next().expect("a line").expect("readable");
    let base = next()
        .strip_prefix("base_url=")
        .expect("base_url= line")
        .to_owned();
    let ping = next()
        .strip_prefix("ping_url=")
        .expect("ping_url= line")
        .to_owned();
    assert!(base.starts_with("http://127.0.0.1:") && ping.starts_with("http://127.0.0.1:"));

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client");
        let pinged = http
            .get(format!("{ping}/3f2a9c1e-5b7d-4e8f-9a6b-1c2d3e4f5a01"))
            .send()
            .await
            .expect("ping answered");
        assert_eq!(pinged.status().as_u16(), 200);
        let statuses = http
            .get(format!("{base}/v1/check-statuses"))
            .bearer_auth("k-test")
            .send()
            .await
            .expect("answered");
        assert_eq!(statuses.status().as_u16(), 200);
        let statuses = http
            .get(format!("{base}/v1/check-statuses"))
            .bearer_auth("emulator-api-key")
            .send()
            .await
            .expect("answered");
        assert_eq!(
            statuses.status().as_u16(),
            401,
            "--api-key replaces the default key"
        );
    });

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("signal sent");
    let status = wait_with_deadline(&mut child, Duration::from_secs(10));
    assert_eq!(status.code(), Some(0));
}

#[test]
fn bad_fixtures_and_flags_are_reported() {
    let home = Home::new();
    let file = home.path("fixtures.json");
    std::fs::write(
        &file,
        r#"{"heartbeatChecks": [{"id": "c1", "name": "x", "description": 5}]}"#,
    )
    .expect("written");
    let output = home
        .agent()
        .args([
            "emulator",
            "--listen",
            "127.0.0.1:0",
            "--ping-listen",
            "127.0.0.1:0",
            "--fixtures",
        ])
        .arg(&file)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("fixtures: heartbeatChecks[0] \"c1\": \"description\" must be a string"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());

    let output = home
        .agent()
        .args(["emulator", "--rate-limit", "600"])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("expected N/SECS such as 600/60"),
        "{stderr}"
    );

    let missing = home.path("missing.json");
    let output = home
        .agent()
        .args(["emulator", "--listen", "127.0.0.1:0", "--fixtures"])
        .arg(&missing)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot read fixtures file"), "{stderr}");
    assert!(stderr.contains("missing.json"), "{stderr}");

    let output = home
        .agent()
        .args(["emulator", "--clock-scale", "0"])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("invalid --clock-scale 0"), "{stderr}");
}

#[test]
fn a_port_in_use_is_reported() {
    let home = Home::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let output = home
        .agent()
        .args([
            "emulator",
            "--listen",
            &addr,
            "--ping-listen",
            "127.0.0.1:0",
        ])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot listen on {addr} for the emulator's API")),
        "{stderr}"
    );
}

#[test]
fn background_emulator_serves_synchronous_tests() {
    let emulator = util::emulator::Background::start();
    let mut stream = std::net::TcpStream::connect(emulator.ping_addr()).expect("connects");
    stream
        .write_all(b"POST /3f2a9c1e-5b7d-4e8f-9a6b-1c2d3e4f5a01 HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
        .expect("written");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer read");
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(answer.contains("\"state\":\"RECEIVED\""), "{answer}");
    let pings = emulator.pings();
    assert_eq!(pings.len(), 1);
    assert_eq!(pings[0].method, "POST");
}

/// Reads both lines the emulator prints (so it never writes to a closed pipe); returns the
/// `base_url=` one's URL.
fn base_url(child: &mut Child) -> String {
    let mut lines = BufReader::new(child.stdout.take().expect("stdout piped")).lines();
    let mut next = || lines.next().expect("a line").expect("readable");
    let base = next();
    assert!(next().starts_with("ping_url="));
    base.strip_prefix("base_url=")
        .expect("base_url= line")
        .to_owned()
}

/// One `GET path` with `Authorization: {auth}` to `base` (`http://HOST:PORT`): the status.
fn get_with_auth(base: &str, path: &str, auth: &str) -> u16 {
    let authority = base.strip_prefix("http://").expect("an http URL");
    let host = format!("Host: {authority}");
    let auth = format!("Authorization: {auth}");
    util::http::exchange(authority, &format!("GET {path} HTTP/1.1"), &[&host, &auth]).0
}

#[test]
fn the_bearer_scheme_is_read_in_any_case_and_an_open_admin_api_is_warned_about_once() {
    let home = Home::new();
    let start = |listen: &str, log: &str| {
        let stderr = std::fs::File::create(home.path(log)).expect("log file");
        home.agent()
            .args([
                "emulator",
                "--listen",
                listen,
                "--ping-listen",
                "127.0.0.1:0",
            ])
            .args(["--api-key", "k-test"])
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("the binary starts")
    };
    let stop = |mut child: Child| {
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("signal sent");
        let status = wait_with_deadline(&mut child, Duration::from_secs(10));
        assert_eq!(status.code(), Some(0));
    };
    let warning = "admin API (/_emulator/) needs no authentication";

    let mut open = start("0.0.0.0:0", "open.log");
    let base = base_url(&mut open);
    for auth in [
        "Bearer k-test",
        "bearer k-test",
        "BEARER k-test",
        "bEaReR  k-test",
    ] {
        assert_eq!(
            get_with_auth(&base, "/v1/check-statuses", auth),
            200,
            "{auth}"
        );
    }
    for auth in ["Basic k-test", "bearer k-tes", "bearerk-test"] {
        assert_eq!(
            get_with_auth(&base, "/v1/check-statuses", auth),
            401,
            "{auth}"
        );
    }
    stop(open);
    let log = std::fs::read_to_string(home.path("open.log")).expect("log");
    assert_eq!(log.matches(warning).count(), 1, "{log}");
    assert!(
        log.contains("not on loopback") && log.contains("listen on 127.0.0.1"),
        "{log}"
    );

    let mut private = start("127.0.0.1:0", "loopback.log");
    base_url(&mut private);
    stop(private);
    let log = std::fs::read_to_string(home.path("loopback.log")).expect("log");
    assert!(!log.contains(warning), "{log}");
    assert!(!log.contains("k-test"), "the key is never logged: {log}");
}
