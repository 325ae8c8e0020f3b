//! The daemon as PID 1 (in a new PID namespace, as in a container): orphans are reaped and no
//! job's exit status is stolen by the reaper.

use super::*;

/// The pids of the zombie children of `parent` (host pids).
fn zombie_children(parent: u32) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().take(2).collect();
        if fields == ["Z", &*parent.to_string()] {
            found.push(pid);
        }
    }
    found
}

/// The host pid of the only child of `parent`.
fn child_of(parent: u32) -> u32 {
    let path = format!("/proc/{parent}/task/{parent}/children");
    util::eventually(5 * SECOND, &format!("a child of {parent}"), || {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        text.split_whitespace()
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or(format!("children: {text:?}"))
    })
}

#[test]
fn as_pid_1_orphans_are_reaped_and_statuses_kept() {
    let namespaces = util::runs("unshare", &["--pid", "--fork", "--mount-proc", "true"]);
    let how = "PID namespaces need root and util-linux's unshare (scripts/test-tools.sh)";
    if !util::require(namespaces, "unshare --pid", how) {
        return;
    }
    let home = Home::new();
    home.write_jobs(
        r#"
[[jobs]]
name = "orphans"
schedule = "@reboot"
shell = "sleep 0.2 & sleep 0.3 & exit 0"

[[jobs]]
name = "status"
schedule = "*/1 * * * * *"
shell = "sleep 0.1 & exit 3"
"#,
    );
    let wrapper = ["unshare", "--pid", "--fork", "--mount-proc"];
    let mut daemon = Daemon::on(&home).via(&wrapper).start();
    let started = daemon.wait_for(1, 5 * SECOND, |l| message(l) == "daemon started");
    assert_eq!(started[0]["pid"], 1, "{}", started[0]);
    let host_pid = child_of(daemon.pid());
    daemon.wait_for(1, 5 * SECOND, |l| is(l, "job finished", "orphans"));
    let failed = daemon.wait_for(3, 6 * SECOND, |l| is(l, "job failed", "status"));
    for line in &failed {
        assert_eq!(line["exit_code"], 3, "status stolen: {line}");
    }
    // Every orphan so far has exited: none may be left as a zombie. Only the latest `status`
    // run's background sleep (100 ms) may be between exit and reaping.
    std::thread::sleep(Duration::from_millis(300));
    let zombies = util::poll(2 * SECOND, Duration::from_millis(50), || {
        let zombies = zombie_children(host_pid);
        if zombies.len() > 1 {
            Err(zombies)
        } else {
            Ok(zombies)
        }
    })
    .unwrap_or_else(|left| left);
    assert!(zombies.len() <= 1, "zombies left: {zombies:?}");
    assert_eq!(
        daemon.count(|l| message(l).contains("cannot get the command's exit status")),
        0
    );
    // unshare does not forward signals: stop the daemon itself; unshare exits with its status.
    kill(
        Pid::from_raw(i32::try_from(host_pid).expect("pid")),
        Signal::SIGTERM,
    )
    .expect("kill");
    let status = daemon.wait_exit(5 * SECOND).and_then(|s| s.code());
    assert_eq!(status, Some(0), "{}", daemon.text());
}
