//! Entries the outbox gives up on or replaces: corrupt entries moved aside, a pending success
//! dropped by a later failed run, `max_entries`/`max_age` drops counted and logged, a permanent
//! 404 moved aside and never retried.

use std::time::Duration;

use crate::util::outbox::{Behaviour, PingHost};

use super::{store, text, token, Env};

#[test]
fn corrupt_entries_are_moved_aside_and_the_others_delivered() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Status(200));
    let outbox = env.outbox();
    store(&outbox, &host.url(&token("c1")));
    store(&outbox, &host.url(&token("c2")));
    let dir = outbox.dir().to_owned();
    let valid = std::fs::read_dir(&dir)
        .expect("read")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "ping"))
        .expect("an entry");
    let bytes = std::fs::read(&valid).expect("read entry");
    std::fs::write(dir.join("00000000000000aa.ping"), &bytes[..bytes.len() / 2]).expect("write");
    std::fs::write(dir.join("00000000000000bb.ping"), b"\0\0garbage").expect("write");
    std::fs::write(dir.join(".tmp.999999999.x"), b"{").expect("write");

    let out = env.output(&["outbox", "flush"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("unreadable outbox entry skipped"),
        "{}",
        text(&out)
    );
    assert_eq!(host.count(&token("c1")), 1);
    assert_eq!(host.count(&token("c2")), 1);
    assert_eq!(outbox.stats().corrupt, 2);
    let aside = std::fs::read_dir(outbox.failed_dir())
        .expect("failed dir")
        .count();
    assert_eq!(aside, 2);
    assert!(
        !dir.join(".tmp.999999999.x").exists(),
        "a dead writer's temp file is removed"
    );
}

#[test]
fn a_failed_later_run_drops_the_pending_success() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Drop);
    let url = host.url(&token("job"));
    let config = env.write_config(&format!(
        "[[jobs]]\nname = \"backup\"\nschedule = \"*/5 * * * *\"\nping_url = \"{url}\"\n"
    ));
    let config = config.to_str().expect("utf-8 path");
    let run = |cmd: &str| {
        env.output(&[
            "run",
            "--config",
            config,
            "--job",
            "backup",
            "--ping-timeout",
            "200ms",
            "--",
            cmd,
        ])
    };
    assert_eq!(run("true").status.code(), Some(0));
    let listed = env.list();
    let entry = &listed["entries"][0];
    assert_eq!(entry["job"], "backup", "{listed:#}");
    let expires = entry["expires_in_secs"].as_u64().expect("expiry");
    assert!(
        (280..=300).contains(&expires),
        "max age is the job's period (5 min): {expires}"
    );

    let out = run("false");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("pending success dropped: a later run failed"),
        "{}",
        text(&out)
    );
    let listed = env.list();
    assert_eq!(
        listed["entries"].as_array().map(Vec::len),
        Some(0),
        "{listed:#}"
    );
    assert_eq!(listed["stats"]["dropped_failed_run"], 1);

    // The same by target, without a job.
    let plain = host.url(&token("plain"));
    let args = [
        "run",
        "--ping-url",
        plain.as_str(),
        "--ping-timeout",
        "200ms",
        "--",
    ];
    env.output(&[&args[..], &["true"]].concat());
    env.output(&[&args[..], &["false"]].concat());
    let listed = env.list();
    assert_eq!(
        listed["entries"].as_array().map(Vec::len),
        Some(0),
        "{listed:#}"
    );
    assert_eq!(listed["stats"]["dropped_failed_run"], 2);
}

#[test]
fn max_entries_and_max_age_drops_are_counted_and_logged() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Drop);
    let config = env.write_config("[agent]\noutbox_max_entries = 2\noutbox_max_age = \"1s\"\n");
    let config = config.to_str().expect("utf-8 path");
    let mut last = None;
    for name in ["a", "b", "c"] {
        let url = host.url(&token(name));
        let out = env.output(&[
            "run",
            "--config",
            config,
            "--ping-url",
            &url,
            "--ping-timeout",
            "100ms",
            "--",
            "true",
        ]);
        last = Some(out);
    }
    let last = last.expect("three runs");
    assert!(
        text(&last).contains("outbox full: oldest pending ping dropped"),
        "{}",
        text(&last)
    );
    let listed = env.list();
    assert_eq!(
        listed["entries"].as_array().map(Vec::len),
        Some(2),
        "{listed:#}"
    );
    assert_eq!(listed["stats"]["dropped_overflow"], 1);

    std::thread::sleep(Duration::from_millis(1100));
    host.set(Behaviour::Status(200));
    let out = env.output(&["outbox", "flush"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("older than outbox_max_age"),
        "{}",
        text(&out)
    );
    assert!(
        host.paths().is_empty(),
        "stale successes were sent: {:?}",
        host.paths()
    );
    assert_eq!(env.list()["stats"]["dropped_expired"], 2);
}

#[test]
fn a_permanent_404_is_moved_aside_and_not_retried() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Status(404));
    let outbox = env.outbox();
    store(&outbox, &host.url(&token("gone")));
    let out = env.output(&["outbox", "flush"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "nothing is left pending: {}",
        text(&out)
    );
    assert!(
        text(&out).contains("refused by the server for good"),
        "{}",
        text(&out)
    );
    assert_eq!(host.paths().len(), 1);
    assert_eq!(outbox.stats().permanent, 1);
    let aside: Vec<_> = std::fs::read_dir(outbox.failed_dir())
        .expect("failed")
        .collect();
    assert_eq!(aside.len(), 1);
    env.output(&["outbox", "flush"]);
    assert_eq!(host.paths().len(), 1, "a refused ping is not retried");
}
