//! Unit tests of the daemon: driven in-process through its control channel (no signal is
//! raised, so the tests share their process with every other test safely), and its limits.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::control::{self, Request};
use super::{DaemonEnd, Options, Plugins};
use crate::config::Config;

fn job(name: &str, marker: &Path) -> String {
    format!(
        "[[jobs]]\nname = \"{name}\"\nschedule = \"* * * * * *\"\nshell = \"echo ran >> '{}'\"\n",
        marker.display()
    )
}

async fn appears(path: &Path) -> bool {
    for _ in 0..200 {
        if path.exists() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_runs_reloads_and_stops_on_requests() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    let path = dir.path().join("config.toml");
    std::fs::write(&path, job("first", &first)).expect("config written");
    let config = Arc::new(Config::load(&path).expect("a valid config").config);
    let state_dir = dir.path().join("state");
    let options = Options {
        config_path: path.clone(),
        ping_urls: crate::sync::LearnedUrls::new(&state_dir),
        admission: None,
        state_dir,
        net: crate::net::Net::default(),
    };
    let (controller, control) = control::channel();
    let daemon = tokio::spawn(super::run(options, config, Plugins::default(), control));
    assert!(appears(&first).await, "the configured job ran");

    let both = format!("{}{}", job("first", &first), job("second", &second));
    std::fs::write(&path, both).expect("config rewritten");
    controller.send(Request::Reload).expect("daemon listening");
    assert!(appears(&second).await, "the job added by the reload ran");

    controller
        .send(Request::Stop { by: "test" })
        .expect("daemon listening");
    let ended = tokio::time::timeout(Duration::from_secs(20), daemon)
        .await
        .expect("the daemon stops within its shutdown timeout")
        .expect("the daemon task did not panic");
    assert_eq!(ended, DaemonEnd::Stopped);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_whose_control_is_dropped_stops() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config.toml");
    std::fs::write(&path, job("only", &dir.path().join("ran"))).expect("config written");
    let config = Arc::new(Config::load(&path).expect("a valid config").config);
    let state_dir = dir.path().join("state");
    let options = Options {
        config_path: path,
        ping_urls: crate::sync::LearnedUrls::new(&state_dir),
        admission: None,
        state_dir,
        net: crate::net::Net::default(),
    };
    let (controller, control) = control::channel();
    drop(controller);
    let ended = tokio::time::timeout(
        Duration::from_secs(20),
        super::run(options, config, Plugins::default(), control),
    )
    .await
    .expect("nothing could stop it any more, so it stops");
    assert_eq!(ended, DaemonEnd::Stopped);
}

#[test]
fn open_files_soft_limit_reaches_the_hard_limit() {
    use nix::sys::resource::{getrlimit, Resource};
    let raised = super::raise_open_files_limit().expect("limit readable");
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("limit");
    assert_eq!((raised, soft), (hard, hard));
}
