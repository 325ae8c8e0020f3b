//! A hostile file put in the configuration's place while the daemon runs: a FIFO (which a
//! plain open would wait on forever, with the daemon's main loop) and a 200 MB file (which a
//! plain read would hold in memory, twice). A reload refuses both at once: the daemon goes on
//! running its jobs and answering `/healthz`, `/status` names the reload's problem in
//! `config.last_reload_error` until a good reload clears it, and SIGTERM stops it at once.
//! Also: the log line of a pause through the endpoint gives `until` as a time, not
//! `Some(...)`; and a FIFO as the config at start is exit 78 at once.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::Value;

use super::pause_memory::{logged, tick, ticks};
use super::prom::{parse_metrics, sample};
use super::{get, listen_with_token, status_doc, Daemon, StatusHome, SECOND, TOKEN};
use crate::util::Home;

/// `/healthz` answers 200 within a second, and the job keeps running.
fn still_serving(home: &Home, daemon: &Daemon) {
    let asked = Instant::now();
    let answer = home
        .endpoint()
        .request("GET", "/healthz", None, SECOND)
        .expect("/healthz answers within a second");
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(asked.elapsed() < SECOND, "{:?}", asked.elapsed());
    let before = ticks(home);
    daemon.until("the job runs on", Duration::from_secs(5), || {
        (ticks(home) > before).then_some(())
    });
}

/// Replaces the configuration with `hostile` (made at a temporary name, renamed over it, as an
/// editor or a ConfigMap update does), sends SIGHUP and waits for the `n`th failed reload.
fn reload_into(home: &Home, daemon: &Daemon, n: usize, hostile: impl FnOnce(&std::path::Path)) {
    let temp = home.path("config.toml.new");
    hostile(&temp);
    std::fs::rename(&temp, home.config_path()).expect("rename over the config");
    daemon.signal(Signal::SIGHUP);
    daemon.until("the reload to fail", Duration::from_secs(5), || {
        (logged(daemon, "reload failed").len() >= n).then_some(())
    });
}

/// The `/status` document's `config.last_reload_error`.
fn reload_error(home: &Home) -> Value {
    status_doc(&home.endpoint(), false)["config"]["last_reload_error"].clone()
}

#[test]
fn a_fifo_or_a_huge_file_as_the_config_is_refused_and_the_daemon_goes_on() {
    let home = Home::new();
    home.write(None, &listen_with_token(&home), &tick(&home));
    let good = std::fs::read_to_string(home.config_path()).expect("the config");
    let mut daemon = home.daemon("");
    daemon.until("a first run", Duration::from_secs(10), || {
        (ticks(&home) > 0).then_some(())
    });
    assert_eq!(reload_error(&home), Value::Null);

    // A FIFO nobody writes to: opening it for reading the usual way blocks until a writer comes.
    reload_into(&home, &daemon, 1, |temp| {
        nix::unistd::mkfifo(temp, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    });
    still_serving(&home, &daemon);
    let failed = reload_error(&home);
    let problems = failed["problems"].as_array().expect("problems").clone();
    assert_eq!(problems.len(), 1, "{failed}");
    assert_eq!(
        problems[0],
        format!(
            "{}: cannot read the configuration file: it is a FIFO, not a regular file; make it a \
             regular file of at most 8 MiB",
            home.config_path().display()
        )
    );
    assert!(failed["at"].as_str().is_some(), "{failed}");
    let metrics = parse_metrics(&get(&home.endpoint(), "/metrics").body);
    let invalid = [("result", "invalid")];
    let reloads = "heartbeat_agent_config_reloads_total";
    assert_eq!(sample(&metrics, reloads, &invalid), Some(1.0));

    // 200 MB of valid TOML comments: refused from its size, never read.
    reload_into(&home, &daemon, 2, |temp| {
        use std::io::Write;
        let mut file = std::io::BufWriter::new(std::fs::File::create(temp).expect("create"));
        let line = format!("# {}\n", "x".repeat(1021));
        for _ in 0..200 * 1024 {
            file.write_all(line.as_bytes()).expect("write");
        }
        file.write_all(good.as_bytes()).expect("write");
        file.flush().expect("flush");
    });
    still_serving(&home, &daemon);
    let problem = reload_error(&home)["problems"][0].clone();
    assert_eq!(
        problem,
        format!(
            "{}: cannot read the configuration file: it is {} bytes, more than the \
             8388608 a configuration file may hold; make it a regular file of at most 8 MiB",
            home.config_path().display(),
            200 * 1024 * 1024 + good.len()
        )
    );
    let peak = crate::util::peak_kib(daemon.pid());
    eprintln!("the daemon's peak resident size after refusing a 200 MB config: {peak} KiB");
    assert!(
        peak < 64 * 1024,
        "the daemon's peak resident size is {peak} KiB"
    );

    // A good file again: the error is gone.
    std::fs::write(home.config_path(), &good).expect("the good config");
    daemon.signal(Signal::SIGHUP);
    daemon.until("a good reload", Duration::from_secs(5), || {
        (!logged(&daemon, "configuration reloaded").is_empty()).then_some(())
    });
    assert_eq!(reload_error(&home), Value::Null);

    let asked = Instant::now();
    daemon.signal(Signal::SIGTERM);
    let status = daemon.exit_within(Duration::from_secs(5));
    assert!(status.success(), "{status:?}");
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
}

#[test]
fn a_pause_through_the_endpoint_logs_its_end_as_a_time() {
    let home = Home::new();
    home.write(None, &listen_with_token(&home), &tick(&home));
    let daemon = home.daemon("");
    let end = (chrono::Utc::now() + chrono::TimeDelta::hours(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let bodies = [
        format!(r#"{{"jobs":["tick"],"until":"{end}","stop_jobs":true}}"#),
        r#"{"jobs":["tick"],"stop_jobs":true}"#.to_owned(),
    ];
    for body in bodies {
        let answer = home
            .endpoint()
            .post_json("/pause", Some(TOKEN), &body, SECOND * 10)
            .expect("request");
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    let lines = daemon.until("both pauses logged", Duration::from_secs(5), || {
        let lines = logged(&daemon, "jobs paused through the status endpoint");
        (lines.len() == 2).then_some(lines)
    });
    let until: Vec<&str> = lines.iter().filter_map(|l| l["until"].as_str()).collect();
    assert_eq!(until, [end.as_str(), "none"], "{lines:?}");
}

#[test]
fn a_fifo_as_the_config_stops_the_daemon_at_start_at_once() {
    let home = Home::new();
    let fifo = home.path("fifo.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let mut daemon = Daemon::on(&home).config(&fifo).start();
    let status = daemon.exit_within(Duration::from_secs(5));
    assert_eq!(status.code(), Some(78), "{}", daemon.text());
    let line = format!(
        "{}: cannot read the configuration file: it is a FIFO, not a regular file; make it a \
         regular file of at most 8 MiB",
        fifo.display()
    );
    assert!(daemon.text().contains(&line), "{}", daemon.text());
}
