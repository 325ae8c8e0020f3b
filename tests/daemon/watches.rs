//! Watch jobs in a running daemon: process, file and tcp probes, healthy (ping) and unhealthy
//! (no ping, reason logged). The other kinds are covered in tests/watch.rs.

use std::os::unix::process::CommandExt;

use super::*;

fn watch_job(name: &str, watch: &str, url: &str) -> String {
    format!(
        "[[jobs]]\nname = \"{name}\"\nschedule = \"*/1 * * * * *\"\nping_url = \"{url}\"\nwatch = {watch}\n\n"
    )
}

#[test]
fn watches_ping_when_healthy_only() {
    let home = Home::new();
    let server = ping_server();
    let marker = format!("heartbeat-daemon-test-{:08x}", rand::random::<u32>());
    let mut sleeper = std::process::Command::new("sleep")
        .arg0(&marker)
        .arg("30")
        .spawn()
        .expect("spawn sleep");
    let fresh = home.path("fresh");
    std::fs::write(&fresh, "x").expect("write");
    let stale = home.path("stale");
    std::fs::write(&stale, "x").expect("write");
    let old = std::process::Command::new("touch")
        .args(["-d", "2 hours ago"])
        .arg(&stale)
        .status()
        .expect("touch");
    assert!(old.success());
    let open = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let jobs = [
        (
            "proc-up",
            format!(r#"{{ kind = "process", pattern = "{marker}" }}"#),
        ),
        (
            "proc-down",
            format!(r#"{{ kind = "process", pattern = "{marker}-absent" }}"#),
        ),
        (
            "file-fresh",
            format!(
                r#"{{ kind = "file", path = "{}", max_age = "1h" }}"#,
                fresh.display()
            ),
        ),
        (
            "file-stale",
            format!(
                r#"{{ kind = "file", path = "{}", max_age = "1h" }}"#,
                stale.display()
            ),
        ),
        (
            "tcp-open",
            format!(
                r#"{{ kind = "tcp", address = "{}", timeout = "1s" }}"#,
                open.local_addr().expect("addr")
            ),
        ),
        (
            "tcp-closed",
            format!(r#"{{ kind = "tcp", address = "{closed}", timeout = "1s" }}"#),
        ),
    ];
    let config: String = jobs
        .iter()
        .map(|(name, watch)| watch_job(name, watch, &server.url(&format!("/{name}"))))
        .collect();
    home.write_jobs(&config);
    let daemon = home.start();
    for healthy in ["proc-up", "file-fresh", "tcp-open"] {
        wait_hits(&server, &format!("/{healthy}"), 1, 5 * SECOND);
    }
    for unhealthy in ["proc-down", "file-stale", "tcp-closed"] {
        let lines = daemon.wait_for(1, 5 * SECOND, |l| is(l, "watch unhealthy", unhealthy));
        let reason = lines[0]["reason"].as_str().unwrap_or_default();
        assert!(!reason.is_empty(), "{}", lines[0]);
    }
    let healthy = daemon.wait_for(1, SECOND, |l| is(l, "watch healthy", "proc-up"));
    assert!(
        healthy[0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains(&sleeper.id().to_string())),
        "{}",
        healthy[0]
    );
    // The process ends: the same daemon (cached process table) must see it gone.
    sleeper.kill().expect("kill");
    sleeper.wait().expect("reap");
    daemon.wait_for(1, 5 * SECOND, |l| is(l, "watch unhealthy", "proc-up"));
    daemon.stop();
    for unhealthy in ["proc-down", "file-stale", "tcp-closed"] {
        assert_eq!(
            hits(&server, &format!("/{unhealthy}")),
            0,
            "{unhealthy} pinged"
        );
    }
}
