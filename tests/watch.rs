//! Watch probes against real resources: processes, files, the file system, /proc, and TCP and
//! HTTP servers on 127.0.0.1.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use heartbeat_agent::config::{Amount, WatchSpec};
use heartbeat_agent::net::Net;
use heartbeat_agent::watch::{Probe, Probes};
use tokio::net::TcpListener;

use crate::util::http::{FakeServer, Mode};

fn unique(prefix: &str) -> String {
    format!("{prefix}{:08x}", rand::random::<u32>())
}

async fn probe(spec: WatchSpec) -> Probe {
    Probes::new(&Net::default()).probe(&spec).await
}

/// A `sleep 30` that is killed and reaped when dropped.
struct Sleeper(Child);

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn process_spec(pattern: &str) -> WatchSpec {
    WatchSpec::Process {
        pattern: pattern.to_owned(),
    }
}

#[tokio::test]
async fn process_found_by_command_line_then_gone() {
    let marker = unique("heartbeat-test-");
    let sleeper = Sleeper(
        Command::new("sleep")
            .arg0(&marker)
            .arg("30")
            .spawn()
            .expect("spawn sleep"),
    );
    let probes = Probes::new(&Net::default());
    let found = probes.probe(&process_spec(&marker)).await;
    assert!(found.healthy, "{found:?}");
    assert!(
        found
            .reason
            .contains(&format!("running as pid {}", sleeper.0.id())),
        "{found:?}"
    );
    drop(sleeper);
    // The same context (cached process table) must notice the process is gone.
    let gone = probes.probe(&process_spec(&marker)).await;
    assert!(!gone.healthy, "{gone:?}");
    assert_eq!(
        gone.reason,
        format!("process {marker:?}: no running process has it in its name or command line")
    );
}

#[tokio::test]
async fn process_found_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The kernel keeps 15 bytes of a process name: "hb-" and 8 hex digits fit.
    let name = unique("hb-");
    let copy = dir.path().join(&name);
    std::fs::copy("/bin/sleep", &copy).expect("copy sleep");
    // argv[0] is something else, so only the name can match.
    let _sleeper = Sleeper(
        Command::new(&copy)
            .arg0("sleeper")
            .arg("30")
            .spawn()
            .expect("spawn copy of sleep"),
    );
    let found = probe(process_spec(&name)).await;
    assert!(found.healthy, "{found:?}");
    assert!(found.reason.ends_with(&format!("({name})")), "{found:?}");
}

#[tokio::test]
async fn process_not_found() {
    let marker = unique("heartbeat-absent-");
    let result = probe(process_spec(&marker)).await;
    assert!(!result.healthy, "{result:?}");
    assert!(result
        .reason
        .starts_with(&format!("process {marker:?}: no running process")));
}

fn file_spec(path: PathBuf, max_age: Duration) -> WatchSpec {
    WatchSpec::File { path, max_age }
}

#[tokio::test]
async fn file_fresh_stale_and_missing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("backup.done");
    std::fs::write(&path, "ok").expect("write file");
    let hour = Duration::from_secs(3600);

    let fresh = probe(file_spec(path.clone(), hour)).await;
    assert!(fresh.healthy, "{fresh:?}");
    assert!(fresh.reason.contains("at most 1h allowed"), "{fresh:?}");

    let status = Command::new("touch")
        .args(["-d", "2 hours ago"])
        .arg(&path)
        .status()
        .expect("run touch");
    assert!(status.success());
    let stale = probe(file_spec(path.clone(), hour)).await;
    assert!(!stale.healthy, "{stale:?}");
    assert!(
        stale
            .reason
            .starts_with(&format!("file {}: modified 2h", path.display())),
        "{stale:?}"
    );
    assert!(
        stale.reason.ends_with("ago, at most 1h allowed"),
        "{stale:?}"
    );

    let missing_path = dir.path().join("absent");
    let missing = probe(file_spec(missing_path.clone(), hour)).await;
    assert!(!missing.healthy);
    assert_eq!(
        missing.reason,
        format!("file {}: missing", missing_path.display())
    );
}

fn disk_spec(path: PathBuf, min_free: Amount) -> WatchSpec {
    WatchSpec::Disk { path, min_free }
}

#[tokio::test]
async fn disk_thresholds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();

    let some = probe(disk_spec(path.clone(), Amount::Bytes(1))).await;
    assert!(some.healthy, "{some:?}");
    assert!(some.reason.ends_with("need at least 1 B"), "{some:?}");

    let huge = probe(disk_spec(path.clone(), Amount::Bytes(u64::MAX))).await;
    assert!(!huge.healthy, "{huge:?}");
    assert!(
        huge.reason
            .starts_with(&format!("disk {}: ", path.display())),
        "{huge:?}"
    );
    assert!(huge.reason.ends_with("need at least 16 EiB"), "{huge:?}");

    let all = probe(disk_spec(path.clone(), Amount::Percent(100.0))).await;
    assert!(!all.healthy, "{all:?}");
    assert!(all.reason.ends_with("need at least 100%"), "{all:?}");

    let none = probe(disk_spec(path.clone(), Amount::Percent(0.0))).await;
    assert!(none.healthy, "{none:?}");

    let absent = dir.path().join("no/such/dir");
    let bad = probe(disk_spec(absent.clone(), Amount::Bytes(1))).await;
    assert!(!bad.healthy);
    assert!(
        bad.reason
            .starts_with(&format!("disk {}: cannot statvfs: ", absent.display())),
        "{bad:?}"
    );
}

#[tokio::test]
async fn memory_thresholds() {
    let all = probe(WatchSpec::Memory {
        max_used_percent: 100.0,
    })
    .await;
    assert!(all.healthy, "{all:?}");
    assert!(all.reason.ends_with("at most 100% allowed"), "{all:?}");
    // Some memory is always in use.
    let none = probe(WatchSpec::Memory {
        max_used_percent: 0.0,
    })
    .await;
    assert!(!none.healthy, "{none:?}");
    assert!(none.reason.starts_with("memory: "), "{none:?}");
}

#[tokio::test]
async fn load_thresholds() {
    let high = probe(WatchSpec::Load { max_load1: 1e9 }).await;
    assert!(high.healthy, "{high:?}");
    // A load average is never negative, even on an idle machine where it reads 0.00.
    let negative = probe(WatchSpec::Load { max_load1: -1.0 }).await;
    assert!(!negative.healthy, "{negative:?}");
    assert!(
        negative.reason.starts_with("load: 1-minute average ")
            && negative.reason.ends_with(", at most -1 allowed"),
        "{negative:?}"
    );
}

fn tcp_spec(address: String) -> WatchSpec {
    WatchSpec::Tcp {
        address,
        timeout: Duration::from_secs(5),
    }
}

#[tokio::test]
async fn tcp_open_and_closed_port() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let open = listener.local_addr().expect("addr").to_string();
    let result = probe(tcp_spec(open.clone())).await;
    assert!(result.healthy, "{result:?}");
    assert!(result
        .reason
        .starts_with(&format!("tcp {open}: connected in ")));

    drop(listener);
    let closed = probe(tcp_spec(open.clone())).await;
    assert!(!closed.healthy, "{closed:?}");
    assert!(
        closed
            .reason
            .starts_with(&format!("tcp {open}: cannot connect: ")),
        "{closed:?}"
    );
}

/// A fake HTTP server answering in `mode`, and a URL on it holding secrets to redact.
fn http_server(mode: Mode) -> (FakeServer, String) {
    let server = FakeServer::start(mode);
    let url = server.url("/secret-token-123?key=hidden");
    (server, url)
}

fn http_spec(url: &str, expect_status: u16, timeout: Duration) -> WatchSpec {
    WatchSpec::Http {
        url: url.to_owned(),
        expect_status,
        timeout,
    }
}

fn assert_redacted(probe: &Probe) {
    assert!(
        probe.reason.starts_with("http http://127.0.0.1:"),
        "{probe:?}"
    );
    assert!(!probe.reason.contains("secret-token-123"), "{probe:?}");
    assert!(!probe.reason.contains("hidden"), "{probe:?}");
}

#[tokio::test]
async fn http_expected_status_mismatch_and_timeout() {
    let five = Duration::from_secs(5);
    let (_ok, ok_url) = http_server(Mode::Status(200));
    let ok = probe(http_spec(&ok_url, 200, five)).await;
    assert!(ok.healthy, "{ok:?}");
    assert!(ok.reason.contains(": answered 200 in "), "{ok:?}");
    assert_redacted(&ok);

    let (_down, down_url) = http_server(Mode::Status(503));
    let down = probe(http_spec(&down_url, 200, five)).await;
    assert!(!down.healthy, "{down:?}");
    assert!(down.reason.ends_with(", expected 200"), "{down:?}");
    assert!(down.reason.contains(": answered 503 in "), "{down:?}");
    assert_redacted(&down);

    // A 503 is what this URL is expected to answer (a maintenance page, say).
    let expected = probe(http_spec(&down_url, 503, five)).await;
    assert!(expected.healthy, "{expected:?}");

    // 200 while 204 was expected is unhealthy too.
    let mismatch = probe(http_spec(&ok_url, 204, five)).await;
    assert!(!mismatch.healthy);
    assert!(mismatch.reason.ends_with("expected 204"), "{mismatch:?}");

    let (_silent, silent_url) = http_server(Mode::Hang);
    let started = std::time::Instant::now();
    let silent = probe(http_spec(&silent_url, 200, Duration::from_millis(300))).await;
    assert!(!silent.healthy, "{silent:?}");
    assert!(
        silent.reason.ends_with(": no answer within 300ms"),
        "{silent:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_redacted(&silent);
}

#[tokio::test]
async fn http_connection_refused() {
    let url = crate::util::http::refused_url("/secret-token-123?key=hidden");
    let refused = probe(http_spec(&url, 200, Duration::from_secs(5))).await;
    assert!(!refused.healthy);
    assert!(
        refused.reason.contains(": connection failed"),
        "{refused:?}"
    );
    assert_redacted(&refused);
}
