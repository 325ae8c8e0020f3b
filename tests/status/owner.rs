//! Whose endpoint answers: a daemon of config A holds the port that config B names. `status`,
//! `health`, `trigger`, `pause` and `resume` with `--config B` refuse it (exit 1, naming A's config)
//! instead of showing A's jobs as B's, and trigger nothing; `config check` of B says the port
//! is taken by A's daemon; with A's own config everything works; a daemon that cannot bind
//! the default port says so at error level. The same holds for another daemon of the very same
//! config file, told apart by the id in the state directory (`state_dir` edited after the
//! daemon started, a second daemon of the file that could not bind); a user who cannot read
//! the state directory is judged by the config path alone.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::{free_port, tcp_daemon, StatusHome, TOKEN};
use crate::util::daemon::Daemon;
use crate::util::Home;

/// A config listening on 127.0.0.1:`port`, with the status token and one job writing
/// `marker` when run; its state directory is `state` in the home.
fn write(home: &Home, port: u16, marker: &std::path::Path) {
    home.write(
        None,
        &format!("listen = \"127.0.0.1:{port}\"\ntoken = \"{TOKEN}\""),
        &job(marker),
    );
}

/// The config of [`write`] with `state` (in the home) as its state directory.
fn write_with_state(home: &Home, port: u16, marker: &std::path::Path, state: &str) {
    home.write_config(&format!(
        "[agent]\nstate_dir = \"{}\"\n\n[status]\nlisten = \"127.0.0.1:{port}\"\n\
         token = \"{TOKEN}\"\n\n{}",
        home.path(state).display(),
        job(marker)
    ));
}

fn job(marker: &std::path::Path) -> String {
    format!(
        "[[jobs]]\nname = \"j\"\nschedule = \"0 0 1 1 *\"\nshell = \"echo ran >> {}\"\n",
        marker.display()
    )
}

/// The daemon id kept in the home's state directory `state`.
fn daemon_id(home: &Home, state: &str) -> String {
    let path = home.path(&format!("{state}/daemon-id"));
    let text = std::fs::read_to_string(&path).expect("the daemon wrote its id");
    let id = text.trim().to_owned();
    assert!(
        id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit()),
        "{id:?}"
    );
    id
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The commands that ask the daemon of their config: each must refuse another daemon.
const ASKING: &[&[&str]] = &[
    &["status"],
    &["status", "--json"],
    &["health"],
    &["trigger", "j"],
    &["pause", "j", "--stop-jobs"],
    &["resume", "--all"],
];

/// Runs each of [`ASKING`] with `home`'s config: each exits 1, prints nothing on stdout, and
/// says on stderr what `said` looks for.
fn every_command_refuses(home: &Home, said: impl Fn(&str) -> bool) {
    for args in ASKING {
        let out = home.output(args, "");
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(said(&err), "{args:?}: {err}");
        assert!(
            out.stdout.is_empty(),
            "{args:?} printed the other daemon's status"
        );
    }
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
    every_command_refuses(&b, |err| {
        err.contains("belongs to a daemon running another config")
            && err.contains(&a_shown)
            && err.contains(&format!("http://127.0.0.1:{port}"))
    });
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

/// Daemon A runs config P with state directory S1. P is then edited to name S2 (A keeps S1
/// until it restarts): every command with P refuses A, naming its id and what to do, since no
/// daemon ever started on S2; then a second daemon of P that cannot bind the port marks S2
/// with its own id, and the commands still refuse A, naming both ids. With `--url` A answers.
#[test]
fn commands_refuse_another_daemon_of_the_same_config_file() {
    let port = free_port();
    let a = Home::new();
    write(&a, port, &a.path("ran"));
    let _daemon = tcp_daemon(&a, port, "", &[]);
    let config = std::fs::canonicalize(a.config_path()).expect("canonical");
    let config = config.display().to_string();
    let a_id = daemon_id(&a, "state");
    let url = format!("http://127.0.0.1:{port}");

    // The endpoint tells its id in every answer and in /status; its own config is served.
    let endpoint = heartbeat_agent::status::client::Endpoint::parse(&url).expect("url");
    let answer = endpoint
        .request("GET", "/healthz", None, Duration::from_secs(5))
        .expect("answer");
    assert_eq!(answer.daemon.as_deref(), Some(a_id.as_str()));
    let ok = a.output(&["status", "--json"], "");
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let doc: Value = serde_json::from_slice(&ok.stdout).expect("JSON");
    assert_eq!(doc["daemon_id"], a_id.as_str(), "{doc}");

    // P now names S2, where no daemon ever started.
    write_with_state(&a, port, &a.path("ran"), "state2");
    let refused = |what: &str| {
        every_command_refuses(&a, |err| {
            err.contains(&format!(
                "the status endpoint at {url} belongs to another daemon of this config file \
                 {config}: daemon id {}…",
                &a_id[..8]
            )) && err.contains(&format!("pass --url {url}"))
                && err.contains(what)
        });
    };
    let state2 = a.path("state2").display().to_string();
    refused(&format!("state directory {state2} holds no daemon id"));
    let checked = a.output(&["config", "check"], "");
    assert_eq!(checked.status.code(), Some(0), "{}", stderr(&checked));
    assert!(
        stderr(&checked).contains(&format!(
            "[status] listen 127.0.0.1:{port} is already in use by another heartbeat-agent \
             daemon of this config file (daemon id {}…",
            &a_id[..8]
        )),
        "{}",
        stderr(&checked)
    );

    // A second daemon of P cannot bind the port (it is written in P: fatal), but marks S2.
    let mut second = Daemon::on(&a).start();
    let ended = second.exit_within(Duration::from_secs(10));
    assert_eq!(ended.code(), Some(1), "the second daemon could not bind");
    let b_id = daemon_id(&a, "state2");
    assert_ne!(a_id, b_id);
    refused(&format!(
        "state directory {state2} holds daemon id {}…",
        &b_id[..8]
    ));

    std::thread::sleep(Duration::from_millis(500));
    assert!(!a.path("ran").exists(), "a refused trigger ran the job");
    for state in ["state", "state2"] {
        assert!(
            !a.path(&format!("{state}/pause.json")).exists(),
            "a refused pause paused the job"
        );
    }
    let asked = a.output(&["status", "--url", &url], "");
    assert_eq!(asked.status.code(), Some(0), "{}", stderr(&asked));
}

/// A user who cannot read the state directory (0700, the daemon's) cannot know the id: its
/// commands compare the config path alone, as before ids, and reach the daemon; root, who can
/// read it, is refused the same daemon once the config names a state directory it never ran on.
#[test]
fn a_user_who_cannot_read_the_state_directory_compares_the_config_path() {
    if !crate::util::require(
        nix::unistd::geteuid().is_root(),
        "root",
        "run as root (the test switches to the user nobody; CI does)",
    ) {
        return;
    }
    let port = free_port();
    let a = Home::new();
    use std::os::unix::fs::PermissionsExt;
    // The config is readable by nobody; the state directory stays private (0700).
    std::fs::set_permissions(a.root(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    write(&a, port, &a.path("ran"));
    let _daemon = tcp_daemon(&a, port, "", &[]);
    let mode = std::fs::metadata(a.path("state"))
        .expect("state")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    let as_nobody = |args: &[&str]| {
        a.agent_via(&[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ])
        .arg("--config")
        .arg(a.config_path())
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("the agent runs")
    };
    for args in [vec!["status"], vec!["health"]] {
        let out = as_nobody(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    }
    assert!(String::from_utf8_lossy(&as_nobody(&["status"]).stdout).contains('j'));

    // P names S2 (private to root, no id in it): root is refused, nobody cannot tell.
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(a.path("state2"))
        .expect("mkdir");
    write_with_state(&a, port, &a.path("ran"), "state2");
    let root = a.output(&["status"], "");
    assert_eq!(root.status.code(), Some(1), "{}", stderr(&root));
    assert!(
        stderr(&root).contains("belongs to another daemon of this config file"),
        "{}",
        stderr(&root)
    );
    let nobody = as_nobody(&["status"]);
    assert_eq!(nobody.status.code(), Some(0), "{}", stderr(&nobody));
}
