//! Runs: pings on success only, overlap, timeouts, external jobs, output, users.

use super::*;

#[test]
fn success_pings_and_failure_does_not() {
    let home = Home::new();
    let server = ping_server();
    home.write_jobs(&format!(
        r#"
[[jobs]]
name = "good"
schedule = "*/1 * * * * *"
command = ["true"]
ping_url = "{good}"

[[jobs]]
name = "bad"
schedule = "*/1 * * * * *"
shell = "echo failing; exit 3"
ping_url = "{bad}"
"#,
        good = server.url("/good"),
        bad = server.url("/bad"),
    ));
    let daemon = home.start();
    wait_hits(&server, "/good", 2, 5 * SECOND);
    let failed = daemon.wait_for(2, 5 * SECOND, |l| is(l, "job failed", "bad"));
    assert_eq!(failed[0]["exit_code"], 3, "{}", failed[0]);
    assert_eq!(failed[0]["success"], false);
    daemon.wait_for(1, SECOND, |l| {
        is(l, "output", "bad") && l["line"] == "failing" && l["stream"] == "stdout+stderr"
    });
    let logs = daemon.stop();
    assert_eq!(hits(&server, "/bad"), 0, "a failed run must not ping");
    // Each success ping carries the agent's headers.
    let ping = server.requests().into_iter().find(|r| r.target == "/good");
    let ping = ping.expect("a ping");
    assert!(ping
        .header("user-agent")
        .is_some_and(|ua| ua.starts_with("heartbeat-agent/")));
    assert!(ping.header("origin").is_some_and(|o| !o.is_empty()));
    let started = logs.iter().find(|l| is(l, "job started", "good"));
    let started = started.expect("a start line");
    assert!(
        started["scheduled"]
            .as_str()
            .is_some_and(|s| s.ends_with(".000Z")),
        "{started}"
    );
    assert!(started["delay_ms"].as_f64().is_some(), "{started}");
}

#[test]
fn overlapping_fire_is_skipped_and_recorded() {
    let home = Home::new();
    home.write_jobs(
        r#"
[[jobs]]
name = "slow"
schedule = "*/1 * * * * *"
command = ["sleep", "2"]
"#,
    );
    let daemon = home.start();
    let skipped = daemon.wait_for(1, 4 * SECOND, |l| is(l, "run skipped", "slow"));
    assert_eq!(skipped[0]["skipped"], true);
    // Only one run was started while the first was running.
    let started = daemon.count(|l| is(l, "job started", "slow"));
    assert_eq!(started, 1, "{}", daemon.text());
    daemon.stop();
}

#[test]
fn timeout_kills_the_whole_group() {
    let home = Home::new();
    let pid_file = home.path("bg.pid");
    home.write_jobs(&format!(
        r#"
[[jobs]]
name = "hang"
schedule = "*/1 * * * * *"
shell = "sleep 30 & echo $! > {pid}; sleep 30"
timeout = "1s"
kill_after = "1s"
ping_url = "http://127.0.0.1:9/never"
"#,
        pid = pid_file.display()
    ));
    let daemon = home.start();
    let background = read_pid(&pid_file);
    let failed = daemon.wait_for(1, 5 * SECOND, |l| is(l, "job failed", "hang"));
    assert_eq!(failed[0]["timed_out"], true, "{}", failed[0]);
    util::eventually(
        3 * SECOND,
        &format!("background sleep {background} to end with the timeout"),
        || {
            if process_gone(background) {
                Ok(())
            } else {
                Err("still running")
            }
        },
    );
    drop(daemon);
}

#[test]
fn external_job_is_not_run() {
    let home = Home::new();
    let server = ping_server();
    let marker = home.path("ran");
    home.write_jobs(&format!(
        r#"
[[jobs]]
name = "external"
schedule = "*/1 * * * * *"
ping_url = "{ext}"

[[jobs]]
name = "control"
schedule = "*/1 * * * * *"
shell = "touch {marker}"
ping_url = "{ctl}"
"#,
        ext = server.url("/ext"),
        ctl = server.url("/ctl"),
        marker = marker.display(),
    ));
    let daemon = home.start();
    wait_hits(&server, "/ctl", 2, 5 * SECOND);
    let logs = daemon.stop();
    assert_eq!(hits(&server, "/ext"), 0);
    assert!(!logs
        .iter()
        .any(|l| job_of(l) == Some("external") && message(l).starts_with("job ")));
    assert!(marker.exists());
}

/// The lines the job `env` printed (its environment) once it finished, within `timeout`.
fn env_dump(daemon: &Daemon, timeout: std::time::Duration) -> Vec<String> {
    daemon.wait_for(1, timeout, |l| is(l, "job finished", "env"));
    daemon
        .lines()
        .iter()
        .filter(|l| is(l, "output", "env"))
        .filter_map(|l| l["line"].as_str().map(str::to_owned))
        .collect()
}

/// The variables a config names for its secrets (`[api] api_key_env`, `[cluster] password_env`)
/// never reach a job: the job dumps its environment. etcd is not needed: the daemon starts
/// while its endpoint refuses, and `on_unavailable = "run"` runs the fires.
#[test]
fn children_never_see_the_api_key_or_etcd_password_variables() {
    let home = Home::new();
    home.write_jobs(
        r#"
[api]
api_key_env = "HB_TEST_API_KEY_VAR"

[cluster]
endpoints = ["http://127.0.0.1:9"]
user = "agent"
password_env = "HB_TEST_ETCD_PASSWORD_VAR"
on_unavailable = "run"

[[jobs]]
name = "env"
schedule = "*/1 * * * * *"
shell = "env"
"#,
    );
    let daemon = home.start_with(&[
        ("HB_TEST_API_KEY_VAR", "sk-api-key-4242"),
        ("HB_TEST_ETCD_PASSWORD_VAR", "etcd-pw-4242"),
        ("HB_TEST_KEPT", "yes"),
    ]);
    let lines = env_dump(&daemon, 10 * SECOND);
    assert!(lines.iter().any(|l| l == "HB_TEST_KEPT=yes"), "{lines:?}");
    for banned in ["HB_TEST_API_KEY_VAR=", "HB_TEST_ETCD_PASSWORD_VAR="] {
        assert!(
            !lines.iter().any(|l| l.starts_with(banned)),
            "{banned} leaked into the job: {lines:?}"
        );
    }
    daemon.stop();
}

#[test]
fn children_get_the_job_name_and_not_the_notify_socket() {
    let home = Home::new();
    let socket = home.path("notify.sock");
    let _listener = std::os::unix::net::UnixDatagram::bind(&socket).expect("bind");
    home.write_jobs(
        r#"
[[jobs]]
name = "env"
schedule = "*/1 * * * * *"
shell = "env"
"#,
    );
    let daemon = home.start_with(&[
        ("NOTIFY_SOCKET", socket.to_str().expect("utf-8")),
        ("WATCHDOG_USEC", "60000000"),
        ("HEARTBEAT_AGENT_API_KEY", "sekrit"),
    ]);
    let lines = env_dump(&daemon, 5 * SECOND);
    assert!(
        lines.iter().any(|l| l == "HEARTBEAT_AGENT_JOB=env"),
        "{lines:?}"
    );
    for banned in ["NOTIFY_SOCKET=", "WATCHDOG_", "HEARTBEAT_AGENT_API_KEY="] {
        assert!(
            !lines.iter().any(|l| l.starts_with(banned)),
            "{banned} leaked: {lines:?}"
        );
    }
    daemon.stop();
}

#[test]
fn jobs_run_as_their_user_when_root() {
    let root = nix::unistd::geteuid().is_root();
    if !util::require(
        root,
        "root",
        "switching users needs root; the config warns otherwise",
    ) {
        return;
    }
    let home = Home::new();
    home.write_jobs(
        r#"
[[jobs]]
name = "who"
schedule = "*/1 * * * * *"
shell = "id -u; id -g"
user = "nobody"
"#,
    );
    let daemon = home.start();
    daemon.wait_for(1, 5 * SECOND, |l| is(l, "job finished", "who"));
    let ids: Vec<String> = daemon
        .lines()
        .iter()
        .filter(|l| is(l, "output", "who"))
        .filter_map(|l| l["line"].as_str().map(str::to_owned))
        .take(2)
        .collect();
    assert_eq!(ids, ["65534", "65534"]);
    daemon.stop();
}

#[test]
fn queued_fire_starts_when_the_running_one_ends() {
    let home = Home::new();
    home.write_jobs(
        r#"
[[jobs]]
name = "queued"
schedule = "*/1 * * * * *"
shell = "sleep 1.5"
overlap = "queue"
"#,
    );
    let daemon = home.start();
    let started = daemon.wait_for(2, 6 * SECOND, |l| is(l, "job started", "queued"));
    let finished = daemon.wait_for(1, SECOND, |l| is(l, "job finished", "queued"));
    assert!(
        daemon.count(|l| is(l, "run queued", "queued")) >= 1,
        "{}",
        daemon.text()
    );
    assert_eq!(daemon.count(|l| is(l, "run skipped", "queued")), 0);
    // The waiting run started as soon as the first ended, not at a later fire time.
    let time = |l: &Value, key: &str| {
        chrono::DateTime::parse_from_rfc3339(l[key].as_str().expect("time")).expect("rfc 3339")
    };
    let gap = time(&started[1], "spawned") - time(&finished[0], "timestamp");
    assert!(
        gap.num_milliseconds().abs() < 300,
        "{gap}: {}",
        daemon.text()
    );
    assert!(
        started[1]["delay_ms"].as_f64().is_some_and(|d| d > 200.0),
        "{}",
        started[1]
    );
    daemon.stop();
}

/// The nice value (field 19 of `/proc/PID/stat`, after the parenthesized command name).
fn nice_of(stat: &str) -> i32 {
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    after
        .split_whitespace()
        .nth(16)
        .and_then(|n| n.parse().ok())
        .expect("a nice field")
}

/// A daemon given a higher priority (`Nice=-5` in a drop-in) keeps it; its jobs run at the
/// default one, as under cron (SCHED_RESET_ON_FORK on the threads that spawn them).
#[test]
fn jobs_run_at_the_default_priority_when_the_daemon_has_a_higher_one() {
    let raised = util::runs("nice", &["-n", "-5", "true"]) && nix::unistd::geteuid().is_root();
    if !util::require(
        raised,
        "nice -n -5",
        "raising a priority needs root (CAP_SYS_NICE)",
    ) {
        return;
    }
    let home = Home::new();
    let out = home.path("job-stat");
    home.write_jobs(&format!(
        r#"
[[jobs]]
name = "probe"
schedule = "*/1 * * * * *"
shell = "cat /proc/self/stat > {}"
"#,
        out.display()
    ));
    // `nice -n` is relative: from a runner that is itself under `nice`, reach -5 all the same.
    let own = nice_of(&std::fs::read_to_string("/proc/self/stat").expect("own stat"));
    let delta = (-5 - own).to_string();
    let daemon = Daemon::on(&home).via(&["nice", "-n", &delta]).start();
    daemon.wait_for(1, 5 * SECOND, |l| is(l, "job finished", "probe"));
    let pid = daemon.pid();
    let mut threads = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("daemon threads") {
        let task = task.expect("task").path();
        let stat = std::fs::read_to_string(task.join("stat")).expect("thread stat");
        // The run history's writer runs 10 below the daemon, behind its spawns.
        let name = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
        let expected = if name.trim() == "history" { 5 } else { -5 };
        assert_eq!(nice_of(&stat), expected, "daemon thread {}", name.trim());
        threads += 1;
    }
    assert!(threads > 1, "the daemon runs a multi-thread runtime");
    let job = std::fs::read_to_string(&out).expect("the job wrote its stat");
    assert_eq!(nice_of(&job), 0, "the job's priority: {job}");
    daemon.stop();
}
