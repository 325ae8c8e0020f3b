//! A ping host's huge `Retry-After` (2^64-1 seconds or a far date): `run`, `ping`, `flush` and
//! the daemon's drainer clamp it, keep the ping and keep running.

use std::time::Duration;

use heartbeat_agent::ping::outbox::{self, DrainOptions};
use tokio_util::sync::CancellationToken;

use crate::util::outbox::{sender, Behaviour, PingHost};

use super::{runtime, store, text, token, Env};

/// A ping host asking to wait 2^64-1 seconds (or a date far ahead): `run`, `ping` and `flush`
/// keep the ping (their own time arithmetic saturates; the drainer's did not, see the next
/// test), the wrapper passes the command's status through, and `flush` later delivers it.
#[test]
fn a_huge_retry_after_is_clamped_and_the_ping_kept() {
    for value in [
        "18446744073709551615",
        "9223372036854775807",
        "Fri, 31 Dec 9999 23:59:59 GMT",
    ] {
        let env = Env::new();
        let host = PingHost::start(Behaviour::RetryAfter(503, value));
        let url = host.url(&token("huge"));
        let out = env.output(&[
            "run",
            "--ping-url",
            &url,
            "--ping-timeout",
            "2s",
            "--",
            "true",
        ]);
        assert_eq!(out.status.code(), Some(0), "{value}: {}", text(&out));
        let listed = env.list();
        let entries = listed["entries"].as_array().expect("entries");
        assert_eq!(entries.len(), 1, "{value}: the ping is kept: {listed:#}");
        let out = env.output(&["outbox", "flush", "--timeout", "2s"]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{value}: still pending: {}",
            text(&out)
        );
        let out = env.output(&["ping", "--ping-url", &url, "--ping-timeout", "2s"]);
        assert_eq!(out.status.code(), Some(1), "{value}: {}", text(&out));
        host.set(Behaviour::Status(200));
        // The service's wait is honoured by the drainer, but a flush asked for by the user
        // tries every pending ping now.
        let out = env.output(&["outbox", "flush", "--timeout", "5s"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{value}: delivered: {}",
            text(&out)
        );
        assert!(
            host.count(&token("huge")) >= 2,
            "{value}: {:?}",
            host.paths()
        );
    }
}

/// The daemon's drainer, told by the host to wait 2^64-1 seconds, keeps running (before the
/// clamp its next-attempt time overflowed, which aborts a release build at every restart).
#[test]
fn the_drainer_survives_a_huge_retry_after() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::RetryAfter(503, "18446744073709551615"));
    let outbox = env.outbox();
    let rt = runtime();
    let cancel = CancellationToken::new();
    let drainer = rt.spawn(outbox::drain(
        sender(),
        outbox.clone(),
        cancel.clone(),
        DrainOptions::default(),
    ));
    store(&outbox, &host.url(&token("drained")));
    assert!(
        host.wait_until(Duration::from_secs(5), |paths| !paths.is_empty()),
        "the drainer tried the ping"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(!drainer.is_finished(), "the drainer is still running");
    cancel.cancel();
    rt.block_on(drainer)
        .expect("the drainer ended without a panic");
    assert_eq!(outbox.list().expect("list").len(), 1, "the ping is kept");
}
