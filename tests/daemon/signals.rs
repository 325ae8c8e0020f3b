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
        .logs()
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
    assert_eq!(status.code(), Some(0), "{}", daemon.dump());
    // shutdown_timeout is 2s: the stubborn job needed SIGKILL after it.
    assert!(
        took >= Duration::from_millis(1900) && took < 4 * SECOND,
        "{took:?}"
    );
    for group in groups {
        let gone = nix::sys::signal::killpg(Pid::from_raw(group), None).is_err();
        assert!(gone || process_gone(group), "group {group} survived");
    }
    let stopped = daemon.wait_for(2, SECOND, |l| message(l).starts_with("job failed"));
    assert!(stopped.iter().all(|l| l["stopped"] == true), "{stopped:?}");
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
