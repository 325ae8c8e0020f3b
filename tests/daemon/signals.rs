//! Signals and systemd: reload (valid and invalid), shutdown with running jobs, notifications,
//! and a bad config at start.

use std::os::unix::net::UnixDatagram;

use super::*;

fn job(name: &str, url: &str) -> String {
    format!(
        "[[jobs]]\nname = \"{name}\"\nschedule = \"*/1 * * * * *\"\ncommand = [\"true\"]\nping_url = \"{url}\"\n\n"
    )
}

#[test]
fn sighup_with_a_valid_config_adds_changes_and_keeps_jobs() {
    let home = Home::new();
    let server = ping_server();
    let long =
        "[[jobs]]\nname = \"long\"\nschedule = \"*/1 * * * * *\"\ncommand = [\"sleep\", \"2\"]\n\n";
    home.write_jobs(&format!("{}{long}", job("first", &server.url("/first"))));
    let daemon = home.start();
    wait_hits(&server, "/first", 1, 5 * SECOND);
    daemon.wait_for(1, 5 * SECOND, |l| is(l, "job started", "long"));
    home.write_jobs(&format!(
        "{}{}{long}",
        job("first", &server.url("/first")),
        job("second", &server.url("/second"))
    ));
    daemon.signal(Signal::SIGHUP);
    daemon.wait_for(1, 5 * SECOND, |l| message(l) == "configuration reloaded");
    wait_hits(&server, "/second", 1, 5 * SECOND);
    let before = hits(&server, "/first");
    wait_hits(&server, "/first", before + 1, 5 * SECOND);
    // The unchanged long job's run went on through the reload and ended by itself.
    let finished = daemon.wait_for(1, 5 * SECOND, |l| is(l, "job finished", "long"));
    assert_eq!(finished[0]["success"], true);
    assert_eq!(daemon.count(|l| is(l, "job failed", "long")), 0);
    assert_eq!(daemon.count(|l| message(l).starts_with("job changed")), 0);
    daemon.stop();
}

#[test]
fn sighup_with_an_invalid_config_keeps_the_old_one() {
    let home = Home::new();
    let server = ping_server();
    home.write_jobs(&job("steady", &server.url("/steady")));
    let daemon = home.start();
    wait_hits(&server, "/steady", 1, 5 * SECOND);
    std::fs::write(
        home.config_path(),
        "[[jobs]]\nname = \"steady\"\nschedule = \"* * *\"\ncomand = [\"true\"]\n",
    )
    .expect("write");
    daemon.signal(Signal::SIGHUP);
    daemon.wait_for(1, 5 * SECOND, |l| message(l).starts_with("reload failed"));
    let problems: Vec<String> = daemon
        .lines()
        .iter()
        .filter(|l| message(l) == "invalid configuration")
        .filter_map(|l| l["problem"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems
            .iter()
            .any(|p| p.contains(":3:") && p.contains("schedule")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("`comand`")),
        "{problems:?}"
    );
    let before = hits(&server, "/steady");
    wait_hits(&server, "/steady", before + 2, 5 * SECOND);
    daemon.stop();
}

#[test]
fn sigterm_stops_running_jobs_within_the_shutdown_timeout() {
    let home = Home::new();
    let polite = home.path("polite.pid");
    let stubborn = home.path("stubborn.pid");
    home.write_jobs(&format!(
        r#"
[[jobs]]
name = "polite"
schedule = "*/1 * * * * *"
shell = "echo $$ > {polite}; sleep 30"

[[jobs]]
name = "stubborn"
schedule = "*/1 * * * * *"
shell = "trap '' TERM; echo $$ > {stubborn}; sleep 30 & wait; sleep 30"
"#,
        polite = polite.display(),
        stubborn = stubborn.display(),
    ));
    let mut daemon = home.start();
    let groups = [read_pid(&polite), read_pid(&stubborn)];
    daemon.wait_for(2, 5 * SECOND, |l| message(l) == "job started");
    let asked = Instant::now();
    daemon.signal(Signal::SIGTERM);
    let status = daemon.wait_exit(5 * SECOND).expect("the daemon exits");
    let took = asked.elapsed();
    assert_eq!(status.code(), Some(0), "{}", daemon.text());
    // shutdown_timeout is 2s: the stubborn job needed SIGKILL after it.
    assert!(
        took >= Duration::from_millis(1900) && took < 4 * SECOND,
        "{took:?}"
    );
    for group in groups {
        let gone = nix::sys::signal::killpg(Pid::from_raw(group), None).is_err();
        assert!(gone || process_gone(group), "group {group} survived");
    }
    let stopped = daemon.wait_for(2, SECOND, |l| {
        message(l).starts_with("job stopped at shutdown: ")
    });
    assert!(stopped.iter().all(|l| l["stopped"] == true), "{stopped:?}");
    assert_eq!(
        daemon.count(|l| message(l).starts_with("job failed")),
        0,
        "a run the shutdown stopped did not fail: {}",
        daemon.text()
    );
}

fn receive(socket: &UnixDatagram) -> String {
    let mut buffer = [0u8; 512];
    let n = socket.recv(&mut buffer).expect("a notification in time");
    String::from_utf8_lossy(&buffer[..n]).into_owned()
}

#[test]
fn notify_socket_gets_ready_reloading_watchdog_and_stopping() {
    let home = Home::new();
    let path = home.path("notify.sock");
    let socket = UnixDatagram::bind(&path).expect("bind");
    socket.set_read_timeout(Some(5 * SECOND)).expect("timeout");
    home.write_jobs("");
    let mut daemon = home.start_with(&[
        ("NOTIFY_SOCKET", path.to_str().expect("utf-8")),
        ("WATCHDOG_USEC", "400000"),
    ]);
    assert_eq!(receive(&socket), "READY=1");
    let mut seen = Vec::new();
    while seen.iter().filter(|m: &&String| *m == "WATCHDOG=1").count() < 2 {
        seen.push(receive(&socket));
    }
    daemon.signal(Signal::SIGHUP);
    let mut next = receive(&socket);
    while next != "READY=1" {
        seen.push(next);
        next = receive(&socket);
    }
    assert!(
        seen.iter()
            .any(|m| m.starts_with("RELOADING=1\nMONOTONIC_USEC=")),
        "{seen:?}"
    );
    daemon.signal(Signal::SIGTERM);
    let mut next = receive(&socket);
    while next == "WATCHDOG=1" {
        next = receive(&socket);
    }
    assert_eq!(next, "STOPPING=1");
    let status = daemon.wait_exit(5 * SECOND).and_then(|s| s.code());
    assert_eq!(status, Some(0));
}

#[test]
fn invalid_config_at_start_exits_78_with_every_problem() {
    let home = Home::new();
    std::fs::write(
        home.config_path(),
        "[[jobs]]\nname = \"a\"\nschedule = \"0 25 * * *\"\ncommand = [\"true\"]\ntimeout = 30\n",
    )
    .expect("write");
    let out = home
        .agent()
        .args(["daemon", "--config"])
        .arg(home.config_path())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let shown = home.config_path().display().to_string();
    assert!(
        stderr.contains(&format!("{shown}:3:")) && stderr.contains("hour field"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{shown}:5:")) && stderr.contains("no unit"),
        "{stderr}"
    );
    assert!(stderr.contains("the daemon did not start"), "{stderr}");
}

/// The config as Kubernetes mounts a ConfigMap: `config.toml` is a link to `..data/config.toml`
/// and `..data` a link to a timestamped directory. An update writes a new directory, points a
/// new link `..data_tmp` at it, renames that over `..data` and removes the old directory
/// (kubelet's atomic writer): the file the daemon was given never changes itself.
fn configmap_swap(dir: &Path, version: &str, text: &str) {
    let target = dir.join(format!("..{version}"));
    std::fs::create_dir(&target).expect("a new timestamped directory");
    std::fs::write(target.join("config.toml"), text).expect("write");
    let old = std::fs::read_link(dir.join("..data")).ok();
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(format!("..{version}"), &tmp).expect("..data_tmp");
    std::fs::rename(&tmp, dir.join("..data")).expect("swap ..data");
    if let Some(old) = old {
        std::fs::remove_dir_all(dir.join(old)).expect("remove the old directory");
    }
    let link = dir.join("config.toml");
    if std::fs::symlink_metadata(&link).is_err() {
        std::os::unix::fs::symlink("..data/config.toml", &link).expect("config.toml link");
    }
}

#[test]
fn a_configmap_update_reloads_without_a_signal_and_an_invalid_one_is_kept_out() {
    let home = Home::new();
    let server = ping_server();
    let agent = format!(
        "[agent]\nstate_dir = \"{}\"\nshutdown_timeout = \"2s\"\n\n",
        home.state_dir().display()
    );
    let first = format!("{agent}{}", job("first", &server.url("/first")));
    configmap_swap(home.root(), "2026_01_01_00_00_00.1", &first);
    let daemon = home.start();
    daemon.wait_for(1, 5 * SECOND, |l| {
        message(l) == "watching the configuration for changes"
    });
    wait_hits(&server, "/first", 1, 5 * SECOND);

    let both = format!("{first}{}", job("second", &server.url("/second")));
    configmap_swap(home.root(), "2026_01_01_00_01_00.2", &both);
    daemon.wait_for(1, 5 * SECOND, |l| message(l) == "configuration reloaded");
    wait_hits(&server, "/second", 1, 5 * SECOND);

    // An invalid update: logged with its place, the running config kept, both jobs still run.
    let broken = format!("{both}[[jobs]]\nname = \"third\"\nschedule = \"* * *\"\n");
    configmap_swap(home.root(), "2026_01_01_00_02_00.3", &broken);
    let failed = daemon.wait_for(1, 5 * SECOND, |l| message(l).starts_with("reload failed"));
    assert!(failed[0]["config"]
        .as_str()
        .is_some_and(|c| c.ends_with("config.toml")));
    assert!(daemon
        .lines()
        .iter()
        .any(|l| message(l) == "invalid configuration"
            && l["problem"]
                .as_str()
                .is_some_and(|p| p.contains(":") && p.contains("schedule"))));
    let before = (hits(&server, "/first"), hits(&server, "/second"));
    wait_hits(&server, "/first", before.0 + 2, 5 * SECOND);
    wait_hits(&server, "/second", before.1 + 2, 5 * SECOND);

    // One reload per update, and none for a file beside it or a rewrite with the same bytes.
    std::fs::write(home.path("unrelated.txt"), "x").expect("write");
    std::fs::write(home.root().join("..data/config.toml"), &broken).expect("same bytes");
    std::thread::sleep(SECOND);
    let reloads = daemon.count(|l| message(l) == "reloading the configuration");
    assert_eq!(reloads, 2, "{}", daemon.text());
    daemon.stop();
}

#[test]
fn sigterm_ends_every_task_of_the_daemon_before_it_exits() {
    let home = Home::new();
    let socket = home.path("status.sock");
    let text = format!(
        "[agent]\nstate_dir = \"{state}\"\nshutdown_timeout = \"2s\"\n\n\
         [status]\nlisten = \"{socket}\"\nremote_refresh = \"60s\"\n\n\
         [[jobs]]\nname = \"beat\"\nschedule = \"*/1 * * * * *\"\ncommand = [\"true\"]\n",
        state = home.path("state").display(),
        socket = socket.display(),
    );
    std::fs::write(home.config_path(), text).expect("write config");
    let daemon = home.start();
    daemon.wait_for(1, 5 * SECOND, |l| {
        message(l) == "watching the configuration for changes"
    });
    daemon.wait_for(1, 5 * SECOND, |l| message(l) == "job finished");
    assert!(socket.exists(), "the status socket is bound");
    // The history's writer is a thread of its own (named `history`), which the shutdown joins.
    let threads = |pid: u32| -> Vec<String> {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .expect("the daemon's threads")
            .flatten()
            .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
            .map(|name| name.trim().to_owned())
            .collect()
    };
    let running = threads(daemon.pid());
    assert!(running.iter().any(|t| t == "history"), "{running:?}");
    let lines = daemon.stop();
    let at = |what: &str| {
        lines
            .iter()
            .position(|l| message(l) == what)
            .unwrap_or_else(|| panic!("no {what:?} in the log: {lines:?}"))
    };
    // The config watch and the status endpoint (with its helpers) are background tasks: the
    // shutdown awaits them, so each says it ended before the daemon says it stopped.
    let stopped = at("daemon stopped");
    assert!(
        at("stopped watching the configuration") < stopped,
        "{lines:?}"
    );
    assert!(at("status endpoint closed") < stopped, "{lines:?}");
    // Said after the writer thread was joined, which ends only once its queue is closed.
    assert!(at("history writer stopped") < stopped, "{lines:?}");
    assert!(!socket.exists(), "the status socket was removed at exit");
}
