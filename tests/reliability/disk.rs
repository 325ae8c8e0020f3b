//! A full disk under `state_dir` (a 256 KiB tmpfs, filled up): jobs still run on time, the
//! failure to persist (outbox entries, fire records) is logged and counted in `/status` and
//! `/metrics`, and nothing panics. Skipped with a message where tmpfs cannot be mounted (not
//! root, no CAP_SYS_ADMIN).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use heartbeat_agent::status::client::Endpoint;
use nix::sys::signal::Signal;
use serde_json::Value;

use crate::util::daemon::Daemon;
use crate::util::Home;

/// A tmpfs mounted at a path, unmounted on drop.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(at: &Path) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).expect("the mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
            .arg(at)
            .stderr(Stdio::null())
            .status()
            .ok()?;
        status.success().then(|| Tmpfs(at.to_owned()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Writes to `dir/filler` until the filesystem is full.
fn fill(dir: &Path) {
    let mut file = std::fs::File::create(dir.join("filler")).expect("the filler file");
    let block = [0u8; 4096];
    while file.write_all(&block).is_ok() {}
    // Small files too: what is left below one block.
    for i in 0.. {
        if std::fs::write(dir.join(format!("f{i}")), [0u8; 64]).is_err() {
            break;
        }
    }
}

#[test]
fn with_state_dir_full_jobs_still_run_and_the_failure_to_persist_is_logged() {
    let home = Home::new();
    let state = home.path("state");
    let mounted = Tmpfs::mount(&state);
    if !crate::util::require(
        mounted.is_some(),
        "mount -t tmpfs",
        "mounting a tmpfs needs root",
    ) {
        return;
    }
    // The daemon's directories exist (as after an earlier start), then the disk fills up.
    for dir in ["outbox", "daemon/fires", "sync"] {
        std::fs::create_dir_all(state.join(dir)).expect("state subdirectories");
    }
    fill(&state);
    let config = home.path("config.toml");
    let socket = home.path("status.sock");
    let mut text = format!(
        "[agent]\nstate_dir = \"{}\"\n\n[status]\nlisten = \"{}\"\n\n",
        state.display(),
        socket.display()
    );
    for job in ["a", "b"] {
        text += &format!(
            "[[jobs]]\nname = \"{job}\"\nschedule = \"* * * * * *\"\ncommand = [\"/bin/true\"]\n\
             catch_up = true\nping_url = \"http://127.0.0.1:1/tok-{job}\"\n\n"
        );
    }
    std::fs::write(&config, text).expect("write the config");
    let mut daemon = Daemon::on(&home).config(&config).start();
    let started = Instant::now();
    let endpoint = Endpoint::Unix(socket);
    let get = |path: &str| {
        let answer = endpoint.request("GET", path, None, Duration::from_secs(5));
        answer.ok().filter(|a| a.status == 200).map(|a| a.body)
    };
    // Counted by what failed: the catch_up fire times and the pending pings (the ping host
    // refuses connections, so every success goes to the outbox, which cannot write it).
    let mut counts = Value::Null;
    while started.elapsed() < Duration::from_secs(5) || !full_disk_counted(&counts) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "/status never counted the failures to persist: {counts}\n{}",
            daemon.text()
        );
        std::thread::sleep(Duration::from_millis(200));
        if let Some(body) = get("/status") {
            let doc: Value = serde_json::from_str(&body).expect("the status document is JSON");
            counts = doc["persist_failures"].clone();
        }
    }
    let metrics = get("/metrics").expect("/metrics answers");
    for what in ["fire_time", "outbox_entry"] {
        let line = format!("heartbeat_agent_persist_failures_total{{what=\"{what}\"}} ");
        let metric: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {line} in /metrics:\n{metrics}"));
        let in_doc = counts[what].as_u64().expect("a count");
        assert!(
            metric >= in_doc,
            "{what}: /metrics {metric} < /status {in_doc}"
        );
    }
    daemon.signal(Signal::SIGTERM);
    let status = daemon.exit_within(Duration::from_secs(20));
    let text = daemon.text();
    assert_eq!(status.code(), Some(0), "{text}");
    assert!(!text.contains("panicked"), "{text}");
    for job in ["a", "b"] {
        let runs = text
            .lines()
            .filter(|l| l.contains("\"job finished\"") && l.contains(&format!("\"job\":\"{job}\"")))
            .count();
        assert!(
            runs >= 3,
            "{job} ran {runs} times in 5 s with the disk full:\n{text}"
        );
    }
    let full: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("No space left on device"))
        .collect();
    assert!(
        !full.is_empty(),
        "the failure to persist was not logged:\n{text}"
    );
    eprintln!(
        "FIGURES disk: {} log lines name the full disk, e.g. {}; persist_failures {counts}",
        full.len(),
        full[0]
    );
}

/// Whether the status document's `persist_failures` counts failed fire times and outbox entries.
fn full_disk_counted(counts: &Value) -> bool {
    ["fire_time", "outbox_entry"]
        .iter()
        .all(|what| counts[what].as_u64().is_some_and(|n| n > 0))
}
