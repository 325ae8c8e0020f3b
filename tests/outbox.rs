//! Integration tests of the durable outbox: the real binary (`run`, `ping`,
//! `outbox`), the drainer started in-process, a loopback ping host and the emulator's faults.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use heartbeat_agent::ping::outbox::{self, DrainOptions, Outbox, PassOptions, PingContext};
use heartbeat_agent::ping::{Budget, Ping, PingMethod};
use rand::Rng;
use tokio_util::sync::CancellationToken;

use crate::util::daemon::{Daemon, Launch};
use crate::util::outbox::{sender, Behaviour, PingHost};
use crate::util::{self, Home};

mod counters;
mod death;
mod faults;
mod hostile;

/// Every token in these tests contains this, so output can be searched for a leak.
const SECRET: &str = "SECRETtok";

struct Env {
    home: Home,
}

impl Env {
    fn new() -> Env {
        Env { home: Home::new() }
    }

    fn state(&self) -> PathBuf {
        self.home.state_dir()
    }

    /// `heartbeat-agent --state-dir STATE ARGS...`.
    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = self.home.agent();
        cmd.arg("--state-dir")
            .arg(self.state())
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    /// The daemon on `config`, with this state directory and the default (text) log, which the
    /// outbox tests search for what a person reads and for leaked tokens.
    fn daemon(&self, config: &Path) -> Launch<'_> {
        Daemon::on(&self.home)
            .arg("--state-dir")
            .arg(self.state())
            .config(config)
            .text_log()
    }

    fn output(&self, args: &[&str]) -> Output {
        let out = self.cmd(args).output().expect("run the agent");
        assert_no_secret(&out);
        out
    }

    fn outbox(&self) -> Outbox {
        Outbox::new(&self.state(), outbox::DEFAULT_MAX_ENTRIES)
    }

    /// `outbox list --json`, parsed.
    fn list(&self) -> serde_json::Value {
        let out = self.output(&["outbox", "list", "--json"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        serde_json::from_slice(&out.stdout).expect("list --json is JSON")
    }

    fn write_config(&self, text: &str) -> PathBuf {
        self.home.write_config(text)
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn assert_no_secret(out: &Output) {
    assert_no_secret_in(&text(out));
}

/// [`assert_no_secret`] for a daemon's log.
fn assert_no_secret_in(all: &str) {
    assert!(!all.contains(SECRET), "a token was printed:\n{all}");
}

fn token(name: &str) -> String {
    format!("{SECRET}-{name}")
}

fn ping(url: &str) -> Ping {
    Ping::new(url, PingMethod::Get, "test").expect("valid ping URL")
}

/// Stores a pending ping for `url` as a failed delivery would.
fn store(outbox: &Outbox, url: &str) {
    outbox
        .store(
            &ping(url),
            &PingContext::default(),
            1,
            None,
            "connection failed",
        )
        .expect("store");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn flush_in_process(outbox: &Outbox) -> outbox::PassReport {
    let options = PassOptions {
        budget: Budget {
            total: Duration::from_secs(5),
            ..Budget::default()
        },
        ..PassOptions::default()
    };
    runtime()
        .block_on(outbox::deliver_pending(&sender(), outbox, &options))
        .expect("deliver_pending")
}

/// Runs `heartbeat-agent run` for each URL at once with the host down; waits for all.
fn runs_while_down(env: &Env, urls: &[String]) {
    let children: Vec<_> = urls
        .iter()
        .map(|url| {
            env.cmd(&[
                "run",
                "--ping-url",
                url,
                "--ping-timeout",
                "300ms",
                "--",
                "true",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn run")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().expect("run ends");
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert_no_secret(&out);
    }
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn host_down_twenty_runs_leave_three_entries_then_flush_delivers_each_once() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Drop);
    let tokens: Vec<String> = (0..3).map(|i| token(&format!("t{i}"))).collect();
    let urls: Vec<String> = (0..20).map(|i| host.url(&tokens[i % 3])).collect();
    runs_while_down(&env, &urls);

    let listed = env.list();
    let entries = listed["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 3, "{listed:#}");
    let stats = &listed["stats"];
    assert_eq!(stats["queued"], 20, "{listed:#}");
    assert_eq!(
        stats["coalesced"], 17,
        "every older success coalesced: {listed:#}"
    );
    let dir = env.state().join("outbox");
    assert_eq!(mode(&dir), 0o700);
    for file in std::fs::read_dir(&dir).expect("read outbox") {
        let file = file.expect("entry").path();
        if file.is_file() {
            assert_eq!(mode(&file), 0o600, "{}", file.display());
        }
    }
    let table = env.output(&["outbox"]);
    assert!(text(&table).contains("coalesced 17"), "{}", text(&table));

    host.set(Behaviour::Status(200));
    let started = Instant::now();
    let out = env.output(&["outbox", "flush"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(started.elapsed() < Duration::from_secs(5));
    for token in &tokens {
        assert_eq!(host.count(token), 1, "{:?}", host.paths());
    }
    assert_eq!(env.list()["stats"]["delivered"], 3);
    assert!(text(&env.output(&["outbox", "list"])).contains("no pending pings"));
}

#[test]
fn drainer_delivers_what_runs_left_within_five_seconds() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Drop);
    let tokens: Vec<String> = (0..3).map(|i| token(&format!("d{i}"))).collect();
    let urls: Vec<String> = (0..6).map(|i| host.url(&tokens[i % 3])).collect();
    runs_while_down(&env, &urls);
    assert_eq!(env.list()["entries"].as_array().map(Vec::len), Some(3));

    host.set(Behaviour::Status(200));
    let rt = runtime();
    let cancel = CancellationToken::new();
    let drainer = rt.spawn(outbox::drain(
        sender(),
        env.outbox(),
        cancel.clone(),
        DrainOptions::default(),
    ));
    let outbox = env.outbox();
    util::wait_until(Duration::from_secs(5), Duration::from_millis(10), || {
        outbox.stats().delivered >= 3
    });
    let all = tokens.iter().all(|t| host.count(t) == 1);
    cancel.cancel();
    rt.block_on(drainer).expect("drainer ends on cancel");
    assert!(all, "not all delivered within 5 s: {:?}", host.paths());
    assert_eq!(host.paths().len(), 3, "each once: {:?}", host.paths());
    let listed = env.list();
    assert_eq!(listed["entries"].as_array().map(Vec::len), Some(0));
    assert_eq!(listed["stats"]["delivered"], 3);
}

/// The outage scenario end to end: runs leave their pings while the host is down, then the
/// real daemon (started after the host is back) delivers every target within 5 s, each once.
#[test]
fn daemon_started_after_the_outage_delivers_all_pending_within_five_seconds() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Drop);
    let tokens: Vec<String> = (0..3).map(|i| token(&format!("m{i}"))).collect();
    let urls: Vec<String> = (0..20).map(|i| host.url(&tokens[i % 3])).collect();
    runs_while_down(&env, &urls);
    let listed = env.list();
    assert_eq!(listed["entries"].as_array().map(Vec::len), Some(3));
    assert_eq!(listed["stats"]["coalesced"], 17);

    host.set(Behaviour::Status(200));
    // An external job only: the daemon runs nothing itself, so every ping is the drainer's.
    let config = env.write_config("[[jobs]]\nname = \"elsewhere\"\nschedule = \"@daily\"\n");
    let started = Instant::now();
    let mut daemon = env.daemon(&config).start();
    // Delivered means acknowledged by the host and removed from the outbox (an entry whose
    // request is still in flight at SIGTERM is put back, to be sent again: correct, but not
    // what this test measures).
    let outbox = env.outbox();
    let left = Duration::from_secs(5).saturating_sub(started.elapsed());
    util::wait_until(left, Duration::from_millis(20), || {
        tokens.iter().all(|t| host.count(t) > 0) && outbox.stats().delivered >= 3
    });
    let elapsed = started.elapsed();
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    let status = daemon.exit_within(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{}", daemon.text());
    assert_no_secret_in(&daemon.text());
    for token in &tokens {
        assert_eq!(
            host.count(token),
            1,
            "each target once, within 5 s ({elapsed:?}): {:?}",
            host.paths()
        );
    }
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    let listed = env.list();
    assert_eq!(listed["entries"].as_array().map(Vec::len), Some(0));
    assert_eq!(listed["stats"]["delivered"], 3);
}

#[test]
fn drainer_notices_entries_stored_through_its_handle_at_once() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Status(200));
    let outbox = env.outbox();
    let rt = runtime();
    let cancel = CancellationToken::new();
    let options = DrainOptions {
        poll: Duration::from_secs(60),
        ..DrainOptions::default()
    };
    let drainer = rt.spawn(outbox::drain(
        sender(),
        outbox.clone(),
        cancel.clone(),
        options,
    ));
    std::thread::sleep(Duration::from_millis(50));
    store(&outbox, &host.url(&token("n")));
    let seen = host.wait_until(Duration::from_secs(2), |paths| !paths.is_empty());
    cancel.cancel();
    rt.block_on(drainer).expect("drainer ends");
    assert!(
        seen,
        "the drainer waited for its poll instead of the notification"
    );
}

#[test]
fn kill_9_while_flushing_loses_nothing_and_repeats_only_what_was_in_flight() {
    let env = Env::new();
    kill_9_cycles(&env, &["outbox", "flush"], 25);
}

/// The same with the daemon's drainer as the process killed: the daemon runs nothing itself (an
/// external job only), so every delivery is its drainer's.
#[test]
fn kill_9_of_the_daemon_while_delivering_loses_nothing() {
    let env = Env::new();
    let config = env.write_config("[[jobs]]\nname = \"elsewhere\"\nschedule = \"@daily\"\n");
    let config = config.to_str().expect("utf8").to_owned();
    kill_9_cycles(&env, &["--config", &config, "daemon"], 60);
}

/// 200 cycles: store 3 pings, start `args` (a process that delivers them), kill -9 it after a
/// random 0..`window_ms`, then deliver the rest in-process. Nothing is lost; a target is sent
/// twice only when its entry was claimed (in flight) at the kill. The process is started here
/// as it is, not through [`Daemon`]: the same cycle kills `outbox flush` and the daemon alike,
/// and reads neither's output (it goes to `/dev/null`, so 200 starts cost no reader threads).
fn kill_9_cycles(env: &Env, args: &[&str], window_ms: u64) {
    let host = PingHost::start(Behaviour::Slow(5));
    let outbox = env.outbox();
    let mut rng = rand::thread_rng();
    let mut duplicates = 0;
    for cycle in 0..200 {
        let tokens: Vec<String> = (0..3).map(|i| token(&format!("k{cycle}-{i}"))).collect();
        for t in &tokens {
            store(&outbox, &host.url(t));
        }
        host.set(Behaviour::Slow(rng.gen_range(0..15)));
        let mut child = env
            .cmd(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the delivering process");
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..window_ms)));
        child.kill().expect("kill -9");
        child.wait().expect("reap");
        let in_flight = claimed_urls(outbox.dir());

        let report = flush_in_process(&outbox);
        assert_eq!(report.remaining, 0, "cycle {cycle}: {report:?}");
        for t in &tokens {
            let count = host.count(t);
            assert!(count >= 1, "cycle {cycle}: {t} never delivered");
            if count > 1 {
                assert!(
                    in_flight.contains(&host.url(t)),
                    "cycle {cycle}: {t} repeated but was not in flight"
                );
                assert_eq!(count, 2, "cycle {cycle}: {t}");
                duplicates += 1;
            }
        }
    }
    eprintln!("200 kill cycles of {args:?}, {duplicates} in-flight duplicates");
    assert!(outbox.list().expect("list").is_empty());
}

/// The URLs of the entries claimed (in flight) in the outbox directory `dir`.
fn claimed_urls(dir: &Path) -> HashSet<String> {
    std::fs::read_dir(dir)
        .expect("read outbox")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "claim"))
        .filter_map(|p| std::fs::read(p).ok())
        .filter_map(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .filter_map(|entry| entry["url"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn two_processes_draining_the_same_outbox_deliver_each_entry_once() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Slow(20));
    let outbox = env.outbox();
    let tokens: Vec<String> = (0..30).map(|i| token(&format!("p{i}"))).collect();
    for t in &tokens {
        store(&outbox, &host.url(t));
    }
    let children: Vec<_> = (0..2)
        .map(|_| {
            env.cmd(&["outbox", "flush"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn flush")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().expect("flush ends");
        assert_no_secret(&out);
    }
    for t in &tokens {
        assert_eq!(host.count(t), 1, "{t}: {:?}", host.paths());
    }
    assert!(outbox.list().expect("list").is_empty());
    assert_eq!(outbox.stats().delivered, 30);
}

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

#[test]
fn flush_exits_1_while_the_host_stays_down() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Status(503));
    store(&env.outbox(), &host.url(&token("down")));
    let out = env.output(&["outbox", "flush", "--timeout", "1s"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("still pending 1"), "{}", text(&out));
    let purged = env.output(&["outbox", "purge"]);
    assert!(
        text(&purged).contains("purged 1 pending ping(s)"),
        "{}",
        text(&purged)
    );
    assert_eq!(env.list()["entries"].as_array().map(Vec::len), Some(0));
}

#[test]
fn ping_command_queues_on_failure_and_delivers_through_the_same_path() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Drop);
    let url = host.url(&token("cmd"));
    let out = env.output(&["ping", "--ping-url", &url, "--ping-timeout", "200ms"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("kept in the outbox"), "{}", text(&out));
    assert_eq!(env.list()["entries"].as_array().map(Vec::len), Some(1));

    host.set(Behaviour::Status(200));
    let out = env.output(&["ping", "--ping-url", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let listed = env.list();
    assert_eq!(
        listed["entries"].as_array().map(Vec::len),
        Some(0),
        "newer success delivered"
    );
    assert_eq!(listed["stats"]["coalesced"], 1);

    let out = env.output(&["ping"]);
    assert_eq!(out.status.code(), Some(2));
    let config = env.write_config("");
    let out = env.output(&[
        "ping",
        "--config",
        config.to_str().expect("utf-8"),
        "--job",
        "nope",
    ]);
    assert_eq!(out.status.code(), Some(78));
    assert!(
        text(&out).contains("job \"nope\" is not in"),
        "{}",
        text(&out)
    );
}

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
