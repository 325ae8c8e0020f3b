//! Whose endpoint answers: a daemon of config A holds the port that config B names. `status`,
//! `health`, `trigger` and `pause` with `--config B` refuse it (exit 1, naming A's config)
//! instead of showing A's jobs as B's, and trigger nothing; `config check` of B says the port
//! is taken by A's daemon; with A's own config everything works; a daemon that cannot bind
//! the default port says so at error level.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::{free_port, tcp_daemon, StatusHome, TOKEN};
use crate::util::daemon::Daemon;
use crate::util::Home;

/// A config listening on 127.0.0.1:`port`, with the status token and one job writing
/// `marker` when run.
fn write(home: &Home, port: u16, marker: &std::path::Path) {
    home.write(
        None,
        &format!("listen = \"127.0.0.1:{port}\"\ntoken = \"{TOKEN}\""),
        &format!(
            "[[jobs]]\nname = \"j\"\nschedule = \"0 0 1 1 *\"\nshell = \"echo ran >> {}\"\n",
            marker.display()
        ),
    );
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn commands_refuse_a_daemon_that_runs_another_config() {
    let port = free_port();
    let (a, b) = (Home::new(), Home::new());
    write(&a, port, &a.path("ran"));
    write(&b, port, &b.path("ran"));
    let _daemon = tcp_daemon(&a, port, "", &[]);
    let a_config = std::fs::canonicalize(a.config_path()).expect("canonical");
    let a_shown = a_config.display().to_string();

    // A's own config: the endpoint is its daemon's.
    let ok = a.output(&["status", "--json"], "");
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let doc: Value = serde_json::from_slice(&ok.stdout).expect("JSON");
    assert_eq!(doc["config"]["canonical_path"], a_shown.as_str(), "{doc}");
    assert_eq!(a.output(&["health"], "").status.code(), Some(0));
    let checked = a.output(&["config", "check"], "");
    assert!(
        !stderr(&checked).contains("already in use"),
        "{}",
        stderr(&checked)
    );

    // B's config names the same port: every command refuses A's daemon, naming it.
    for args in [
        vec!["status"],
        vec!["status", "--json"],
        vec!["health"],
        vec!["trigger", "j"],
        vec!["pause", "j", "--stop-jobs"],
    ] {
        let out = b.output(&args, "");
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("belongs to a daemon running another config")
                && err.contains(&a_shown)
                && err.contains(&format!("http://127.0.0.1:{port}")),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?} printed A's status");
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(!a.path("ran").exists(), "B's trigger ran A's job");
    assert!(
        !a.path("state/pause.json").exists(),
        "B's pause paused A's job"
    );

    // `config check` of B names the port and who holds it; still valid (exit 0).
    let checked = b.output(&["config", "check"], "");
    let err = stderr(&checked);
    assert_eq!(checked.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("[status] listen 127.0.0.1:{port} is already in use by a heartbeat-agent daemon running {a_shown}")),
        "{err}"
    );

    // With --url the caller chose the daemon: no config is compared.
    let url = format!("http://127.0.0.1:{port}");
    let asked = b.output(&["status", "--url", &url], "");
    assert_eq!(asked.status.code(), Some(0), "{}", stderr(&asked));
}

/// A daemon whose default status port (127.0.0.1:9465) is taken runs without its endpoint and
/// says so at error level.
#[test]
fn a_daemon_without_its_default_endpoint_says_so_at_error_level() {
    // Hold the default port unless something else does (then it stays taken as well).
    let deadline = Instant::now() + Duration::from_secs(10);
    let _held = loop {
        match std::net::TcpListener::bind("127.0.0.1:9465") {
            Ok(listener) => break Some(listener),
            Err(_) if Instant::now() > deadline => break None,
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    let home = Home::new();
    home.write_config(&format!(
        "[agent]\nstate_dir = \"{}\"\n\n[[jobs]]\nname = \"j\"\nschedule = \"0 0 1 1 *\"\n\
         command = [\"true\"]\n",
        home.path("state").display()
    ));
    let daemon = Daemon::on(&home).start();
    let line = daemon.wait_for(1, Duration::from_secs(10), |l| {
        l["message"]
            .as_str()
            .is_some_and(|m| m.contains("running WITHOUT the status endpoint"))
    });
    assert_eq!(line[0]["level"], "ERROR", "{}", line[0]);
    assert!(
        line[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("127.0.0.1:9465")),
        "{}",
        line[0]
    );
}
