//! The reliability and security suite: broken configs, secrets never shown, random
//! input never panics, faults against a running daemon, a full disk and `kill -9`. See
//! RELIABILITY.md for the promise each test proves and the last figures.

use std::process::{Child, Output};
use std::time::Duration;

mod commands;
mod corpus;
mod disk;
mod faults;
mod journal;
mod kill;
mod local_files;
mod pipes;
mod planted;
mod properties;
mod secrets;
mod tokens;

/// Waits for `child` at most `limit`, killing it (and failing) past that.
pub fn wait_bounded(child: Child, limit: Duration) -> Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(output) => output.expect("wait for the agent"),
        Err(_) => {
            signal(pid, libc::SIGKILL);
            panic!("the agent (pid {pid}) did not exit within {limit:?}");
        }
    }
}

/// Sends `sig` to the process `pid` (one this test started).
pub fn signal(pid: u32, sig: libc::c_int) {
    let pid = libc::pid_t::try_from(pid).expect("a pid fits pid_t");
    // SAFETY: kill(2) has no memory-safety preconditions; pid is a child this test spawned.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// The number (`seq`) of the newest run of `job` that `history --json JOB` reads from
/// `home`'s state directory: how many runs were recorded (0 when none, or when it fails).
pub fn newest_run(home: &crate::util::Home, job: &str) -> u64 {
    let out = home
        .agent()
        .arg("--config")
        .arg(home.config_path())
        .args(["history", "--json", "--limit", "1", job])
        .output()
        .expect("run history");
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .ok()
        .and_then(|doc| doc["runs"][0]["seq"].as_u64())
        .unwrap_or(0)
}
