//! Sudden death mid-ping (issue 18 item 3): `run` and the daemon killed with SIGKILL or stopped
//! with SIGTERM while their ping hangs, is slow or fails. The ping was written to the outbox
//! before its first attempt, so an `outbox flush` right after the death delivers it: no success
//! lost, exactly one delivery when the host never answered, at most one (counted) duplicate
//! when the host may have received it.

use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use rand::Rng;

use crate::util::daemon::Daemon;
use crate::util::outbox::{Behaviour, PingHost};
use crate::util::{self, wait_exit};

use super::{assert_no_secret_in, text, token, Env};

/// How the death comes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Death {
    Kill,
    Term,
}

/// Cycles per host behaviour and death (kept small: each spawns two processes).
const CYCLES: usize = 6;

/// `run --ping-url URL --ping-timeout 20s -- true`, output captured.
fn spawn_run(env: &Env, url: &str) -> Child {
    env.cmd(&[
        "run",
        "--ping-url",
        url,
        "--ping-timeout",
        "20s",
        "--",
        "true",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn run")
}

/// Whether a claim (a ping in flight) is in the outbox directory.
fn in_flight(env: &Env) -> bool {
    std::fs::read_dir(env.state().join("outbox"))
        .map(|items| {
            items
                .filter_map(Result::ok)
                .any(|i| i.file_name().to_string_lossy().ends_with(".claim"))
        })
        .unwrap_or(false)
}

/// Waits until the ping is known to be on its way (the host holds the request, or for a host
/// that drops connections, the claim is on disk), then a random moment more.
fn wait_mid_ping(env: &Env, host: &PingHost, path: &str, behaviour: Behaviour) {
    let seen = match behaviour {
        Behaviour::Drop => {
            util::wait_until(Duration::from_secs(10), Duration::from_millis(2), || {
                in_flight(env)
            })
        }
        _ => host.wait_until(Duration::from_secs(10), |paths| {
            paths.iter().any(|p| p == path)
        }),
    };
    assert!(seen, "{behaviour:?}: the ping never started");
    let extra = rand::thread_rng().gen_range(0..300);
    std::thread::sleep(Duration::from_millis(extra));
}

/// Kills (or stops) `child` and waits for it; for SIGTERM, checks it exits within `prompt`
/// with status 0 and says the ping was kept.
fn die(mut child: Child, death: Death, prompt: Duration) {
    judge_death(child.id(), death, prompt, |limit| {
        let status = wait_exit(&mut child, limit).expect("it ends at once");
        let out = child.wait_with_output().expect("output");
        (status, text(&out))
    });
}

/// [`die`] for a daemon, whose log holds its stdout and stderr.
fn die_daemon(mut daemon: Daemon, death: Death, prompt: Duration) {
    judge_death(daemon.pid(), death, prompt, |limit| {
        let status = daemon.wait_exit(limit).expect("it ends at once");
        (status, daemon.text())
    });
}

/// Sends process `pid` the signal of `death`, then `wait`s for it (given how long it may
/// take): its exit status and everything it wrote. No output holds a token; after SIGTERM it
/// exited within `prompt`, with status 0, saying the ping was kept.
fn judge_death(
    pid: u32,
    death: Death,
    prompt: Duration,
    wait: impl FnOnce(Duration) -> (ExitStatus, String),
) {
    let pid = Pid::from_raw(pid as i32);
    let sent = Instant::now();
    match death {
        Death::Kill => kill(pid, Signal::SIGKILL).expect("SIGKILL"),
        Death::Term => kill(pid, Signal::SIGTERM).expect("SIGTERM"),
    }
    let (status, out) = wait(prompt * 2);
    assert_no_secret_in(&out);
    if death == Death::Term {
        assert!(sent.elapsed() < prompt, "SIGTERM took {:?}", sent.elapsed());
        assert_eq!(status.code(), Some(0), "{out}");
        assert!(out.contains("kept in the outbox"), "{out}");
    }
}

/// `outbox flush`, right after the death, with the host answering 200 again.
fn flush(env: &Env) {
    let out = env.output(&["outbox", "flush"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

fn run_dies_mid_ping(behaviour: Behaviour, death: Death) {
    let env = Env::new();
    let host = PingHost::start(behaviour);
    let outbox = env.outbox();
    for cycle in 0..CYCLES {
        host.set(behaviour);
        let path = token(&format!("{death:?}-{cycle}"));
        let child = spawn_run(&env, &host.url(&path));
        wait_mid_ping(&env, &host, &path, behaviour);
        let heard_before = host.count(&path);
        die(child, death, Duration::from_secs(3));
        host.set(Behaviour::Status(200));
        let recovered_before = outbox.stats().recovered;
        flush(&env);
        let sent = host.count(&path) - heard_before;
        assert_eq!(
            sent, 1,
            "cycle {cycle}: delivered {sent} times after the death"
        );
        assert!(outbox.list().expect("list").is_empty(), "cycle {cycle}");
        let recovered = outbox.stats().recovered - recovered_before;
        match death {
            // The claim of the dead process is taken back at once, and counted: the host may
            // have had it (a hanging or slow host) or not (dropped connections).
            // Against a host that drops connections, `run` may have used up its attempts and
            // kept the ping itself just before the kill: then there was nothing to recover.
            Death::Kill if behaviour == Behaviour::Drop => assert!(recovered <= 1, "{cycle}"),
            Death::Kill => assert_eq!(recovered, 1, "cycle {cycle}"),
            // A stopping `run` put it back itself, marked as sent unanswered: the host has
            // it (hanging), so sending it again is a possible duplicate, counted (issue 33
            // item 14). A host that drops connections answered each request by closing:
            // nothing to count, unless the stop came while one was on its way.
            Death::Term if behaviour == Behaviour::Drop => assert!(recovered <= 1, "{cycle}"),
            Death::Term => assert_eq!(recovered, 1, "cycle {cycle}"),
        }
        if behaviour == Behaviour::Drop {
            assert_eq!(
                host.count(&path),
                1,
                "cycle {cycle}: exactly one delivery in all"
            );
        } else {
            assert!(
                host.count(&path) <= 2,
                "cycle {cycle}: at most one duplicate"
            );
        }
    }
    // The counters add up: every ping that entered the outbox for later left it one way.
    let s = outbox.stats();
    let left = s.delivered + s.coalesced + s.dropped_expired + s.dropped_failed_run;
    assert_eq!(
        s.queued,
        left + s.dropped_overflow + s.permanent + s.purged,
        "{s:?}"
    );
    assert_eq!(s.queued, CYCLES as u64, "{s:?}");
}

#[test]
fn run_killed_while_the_host_hangs_loses_no_success() {
    run_dies_mid_ping(Behaviour::Hang, Death::Kill);
}

#[test]
fn run_killed_while_the_host_is_slow_loses_no_success() {
    run_dies_mid_ping(Behaviour::Slow(5_000), Death::Kill);
}

#[test]
fn run_killed_while_the_host_drops_connections_delivers_exactly_once_later() {
    run_dies_mid_ping(Behaviour::Drop, Death::Kill);
}

#[test]
fn run_stopped_while_the_host_hangs_keeps_the_ping_and_exits_at_once() {
    run_dies_mid_ping(Behaviour::Hang, Death::Term);
}

#[test]
fn run_stopped_while_the_host_fails_keeps_the_ping_and_exits_at_once() {
    run_dies_mid_ping(Behaviour::Drop, Death::Term);
}

/// The daemon runs a job every second whose ping hangs; it is killed (or stopped) at a random
/// moment while pings are in flight, then `outbox flush` delivers the job's latest success
/// (several fires of one job share one target: the newest success stands for them).
fn daemon_dies_mid_ping(death: Death) {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Hang);
    let outbox = env.outbox();
    for cycle in 0..4 {
        host.set(Behaviour::Hang);
        let path = token(&format!("daemon-{death:?}-{cycle}"));
        // A success of a job firing every second is stale after a second by default (see
        // `a_stale_success_is_dropped_and_counted`): these cycles keep theirs for an hour.
        let config = env.write_config(&format!(
            "[agent]\noutbox_max_age = \"1h\"\n\n\
             [[jobs]]\nname = \"beat\"\nschedule = \"*/1 * * * * *\"\ncommand = [\"true\"]\n\
             ping_url = \"{}\"\n",
            host.url(&path)
        ));
        let daemon = env.daemon(&config).both_outputs().start();
        let fires = rand::thread_rng().gen_range(1..4);
        let heard = host.wait_until(Duration::from_secs(15), |paths| {
            paths.iter().filter(|p| *p == &path).count() >= fires
        });
        assert!(heard, "cycle {cycle}: the daemon never pinged");
        std::thread::sleep(Duration::from_millis(rand::thread_rng().gen_range(0..500)));
        die_daemon(daemon, death, Duration::from_secs(5));
        let heard_before = host.count(&path);
        host.set(Behaviour::Status(200));
        flush(&env);
        assert_eq!(
            host.count(&path) - heard_before,
            1,
            "cycle {cycle}: the latest success is delivered once"
        );
        assert!(outbox.list().expect("list").is_empty(), "cycle {cycle}");
    }
}

#[test]
fn daemon_killed_while_pings_hang_loses_no_success() {
    daemon_dies_mid_ping(Death::Kill);
}

#[test]
fn daemon_stopped_while_pings_hang_keeps_them_and_exits_promptly() {
    daemon_dies_mid_ping(Death::Term);
}

/// A success older than its job's period (the default `outbox_max_age` of a job) is not worth
/// sending once the job has run again: after a death it is dropped, counted and logged.
#[test]
fn a_stale_success_is_dropped_and_counted() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Hang);
    let path = token("stale");
    let config = env.write_config(&format!(
        "[[jobs]]\nname = \"beat\"\nschedule = \"*/1 * * * * *\"\ncommand = [\"true\"]\n\
         ping_url = \"{}\"\n",
        host.url(&path)
    ));
    let daemon = env.daemon(&config).start();
    assert!(host.wait_until(Duration::from_secs(15), |paths| paths.contains(&path)));
    daemon.kill();
    std::thread::sleep(Duration::from_millis(1500));
    let heard_before = host.count(&path);
    host.set(Behaviour::Status(200));
    let out = env.output(&["outbox", "flush"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("older than outbox_max_age"),
        "{}",
        text(&out)
    );
    assert_eq!(host.count(&path), heard_before, "nothing stale is sent");
    let stats = env.outbox().stats();
    assert!(stats.dropped_expired >= 1, "{stats:?}");
    assert!(env.outbox().list().expect("list").is_empty());
}

/// `outbox list` after a `kill -9` of `run` (and of `outbox flush`) mid-ping: the dead
/// holder's entry is "pending (its sender died)", not "in flight (pid N)", in text and JSON;
/// while the holder lives it is in flight; the next drain takes it back and delivers it.
#[test]
fn outbox_list_tells_a_dead_sender_from_one_in_flight() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Hang);
    for (round, args) in [("run", None), ("flush", Some(["outbox", "flush"]))] {
        host.set(Behaviour::Hang);
        let path = token(&format!("list-{round}"));
        let child = match args {
            None => spawn_run(&env, &host.url(&path)),
            Some(args) => {
                super::store(&env.outbox(), &host.url(&path));
                env.cmd(&args)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("spawn flush")
            }
        };
        let pid = child.id();
        wait_mid_ping(&env, &host, &path, Behaviour::Hang);
        let alive = env.output(&["outbox", "list"]);
        assert!(
            text(&alive).contains(&format!("in flight (pid {pid})")),
            "{round}: {}",
            text(&alive)
        );
        die(child, Death::Kill, Duration::from_secs(3));
        let dead = env.output(&["outbox", "list"]);
        let shown = text(&dead);
        assert!(
            shown.contains("pending (its sender died)") && !shown.contains("in flight"),
            "{round}: {shown}"
        );
        let json = env.list();
        let entry = &json["entries"][0];
        assert_eq!(entry["in_flight_pid"], serde_json::Value::Null, "{json}");
        assert_eq!(entry["died_sender_pid"], pid, "{json}");
        host.set(Behaviour::Status(200));
        let (recovered, heard) = (env.outbox().stats().recovered, host.count(&path));
        flush(&env);
        assert_eq!(env.outbox().stats().recovered, recovered + 1, "{round}");
        assert!(env.outbox().list().expect("list").is_empty(), "{round}");
        assert_eq!(
            host.count(&path),
            heard + 1,
            "{round}: delivered after the death"
        );
    }
}
