//! `/metrics` beyond the per-run counters: the series the alert rules select are pre-initialised
//! next to the `process_*` metrics (the rules themselves: `packaging/prometheus/`, tested by
//! `scripts/check-alert-rules.sh` and `tests/cluster/alert_rules.rs`), refused ping-host
//! certificates are counted by host and explained once, and the outbox's oldest age follows a
//! ping host going down and coming back.

use std::time::Duration;

use crate::util::Home;

use super::{get, parse_metrics, promtool, sample, StatusHome};

/// A job that has failed ever since the daemon started has every series the documented alert
/// rules select: its success count at 0, its last success at the daemon's start, its pings at 0;
/// the reload counters and the standard `process_*` metrics are there, with plausible values.
#[test]
fn metrics_preinitialise_alerted_series_and_have_process_metrics() {
    let home = Home::new();
    let jobs = "[[jobs]]\nname = \"backup\"\nschedule = \"*/1 * * * * *\"\ncommand = [\"false\"]\n";
    home.write(
        None,
        &format!("listen = \"{}\"", home.socket().display()),
        jobs,
    );
    let daemon = home.daemon("");
    let endpoint = home.endpoint();
    let body = daemon.until("a failed run counted", Duration::from_secs(10), || {
        let body = get(&endpoint, "/metrics").body;
        let failed = sample(
            &parse_metrics(&body),
            "heartbeat_agent_runs_total",
            &[("job", "backup"), ("outcome", "failed")],
        );
        failed.is_some_and(|n| n >= 1.0).then_some(body)
    });
    let samples = parse_metrics(&body);
    let value = |name: &str, labels: &[(&str, &str)]| {
        sample(&samples, name, labels).unwrap_or_else(|| panic!("no {name} {labels:?} in:\n{body}"))
    };
    for outcome in [
        "success",
        "timed_out",
        "signaled",
        "not_started",
        "stopped",
        "unhealthy",
    ] {
        let n = value(
            "heartbeat_agent_runs_total",
            &[("job", "backup"), ("outcome", outcome)],
        );
        assert_eq!(n, 0.0, "{outcome}");
    }
    for result in ["accepted", "failed"] {
        assert_eq!(
            value(
                "heartbeat_agent_pings_total",
                &[("job", "backup"), ("result", result)]
            ),
            0.0
        );
    }
    let start = value("heartbeat_agent_start_time_seconds", &[]);
    let last = value(
        "heartbeat_agent_last_success_timestamp_seconds",
        &[("job", "backup")],
    );
    assert_eq!(last, start, "no success yet: the start time");
    for result in ["ok", "invalid"] {
        assert_eq!(
            value(
                "heartbeat_agent_config_reloads_total",
                &[("result", result)]
            ),
            0.0
        );
    }
    let now = chrono::Utc::now().timestamp() as f64;
    assert!(value("process_cpu_seconds_total", &[]) > 0.0);
    let rss = value("process_resident_memory_bytes", &[]);
    assert!((1e6..200e6).contains(&rss), "rss {rss}");
    assert!(value("process_virtual_memory_bytes", &[]) > rss);
    let (open, max) = (
        value("process_open_fds", &[]),
        value("process_max_fds", &[]),
    );
    assert!(open >= 3.0 && open < max, "{open} of {max}");
    assert_eq!(value("process_start_time_seconds", &[]), start);
    assert!((now - 60.0..=now).contains(&start), "{start} vs {now}");
    promtool(&body);
}

/// A ping host whose certificate is not trusted: every refusal is counted by host in
/// `/metrics`, and the full explanation (host, trust source, what to set) is logged once.
#[test]
fn refused_certificates_are_counted_by_host_and_explained_once() {
    use crate::util::outbox::{Behaviour, PingHost};
    use crate::util::tls::{self, Cert, Front};
    let host = PingHost::start(Behaviour::Status(200));
    let front = Front::start("127.0.0.1:0", tls::addr_of(&host.url("x")), Cert::Untrusted);
    let home = Home::new();
    let jobs = format!(
        "[[jobs]]\nname = \"beat\"\nschedule = \"*/1 * * * * *\"\ncommand = [\"true\"]\n\
         ping_url = \"{}\"\n",
        front.url("untrusted-token")
    );
    home.write(
        None,
        &format!("listen = \"{}\"", home.socket().display()),
        &jobs,
    );
    let daemon = home.daemon("");
    let endpoint = home.endpoint();
    daemon.until("two refusals counted", Duration::from_secs(15), || {
        let body = get(&endpoint, "/metrics").body;
        let refused = sample(
            &parse_metrics(&body),
            "heartbeat_agent_tls_errors_total",
            &[("host", "127.0.0.1")],
        );
        refused.is_some_and(|n| n >= 2.0).then_some(())
    });
    let log = daemon.text();
    assert_eq!(log.matches("UnknownIssuer").count(), 1, "{log}");
    assert!(log.contains("SSL_CERT_FILE"), "{log}");
    assert!(
        log.matches("the certificate of 127.0.0.1 is not trusted")
            .count()
            >= 2,
        "{log}"
    );
    assert_eq!(host.paths().len(), 0, "nothing reached the host");
}

/// `heartbeat_agent_outbox_oldest_age_seconds` (what the `HeartbeatAgentPingsPending` alert
/// compares): 0 while nothing waits, rising while a ping waits for a host that is down, back to
/// 0 once the host answers and the outbox drains.
#[test]
fn the_outbox_oldest_age_rises_while_the_ping_host_is_down_and_drops_to_zero_when_it_drains() {
    use crate::util::http::{FakeServer, Mode};
    let home = Home::new();
    let host = FakeServer::start(Mode::Drop);
    let jobs = format!(
        "[[jobs]]\nname = \"once\"\nschedule = \"@reboot\"\ncommand = [\"true\"]\nping_url = \"{}\"\n",
        host.url("/once")
    );
    home.write(
        None,
        &format!("listen = \"{}\"", home.socket().display()),
        &jobs,
    );
    let daemon = home.daemon("");
    let endpoint = home.endpoint();
    let age = || {
        let body = get(&endpoint, "/metrics").body;
        let samples = parse_metrics(&body);
        let depth = sample(&samples, "heartbeat_agent_outbox_depth", &[]);
        let age = sample(&samples, "heartbeat_agent_outbox_oldest_age_seconds", &[]);
        (
            age.unwrap_or_else(|| panic!("no outbox age in:\n{body}")),
            depth,
        )
    };
    let first = daemon.until(
        "a ping waiting in the outbox",
        Duration::from_secs(20),
        || {
            let (age, depth) = age();
            (depth == Some(1.0) && age >= 1.0).then_some(age)
        },
    );
    daemon.until("the age to rise", Duration::from_secs(20), || {
        (age().0 >= first + 2.0).then_some(())
    });
    host.set_mode(Mode::Status(200));
    daemon.until("the outbox to drain", Duration::from_secs(60), || {
        (age() == (0.0, Some(0.0))).then_some(())
    });
}
