//! Secrets and tokens: a reload that renames a secret variable does not hand the old one to
//! the jobs; failed token attempts at the status endpoint are counted, logged at a bounded
//! pace without the token given, and slowed down per client.

use std::time::{Duration, Instant};

use heartbeat_agent::status::client::Endpoint;
use nix::sys::signal::Signal;
use serde_json::Value;

use crate::util::daemon::Daemon;
use crate::util::http::free_port;
use crate::util::Home;

/// The secret variables of both configs, and their values in the daemon's environment.
const SECRETS: [(&str, &str); 4] = [
    ("HB_OLD_KEY", "old-api-key-0123456789"),
    ("HB_NEW_KEY", "new-api-key-0123456789"),
    ("HB_OLD_HEADER", "old-header-secret-0123"),
    ("HB_NEW_HEADER", "new-header-secret-0123"),
];

/// A config whose API key and fail header come from `key_var` and `header_var`, with a job
/// that writes its environment to `env.txt` every second.
fn write_config(home: &Home, key_var: &str, header_var: &str) {
    let out = home.path("env.txt");
    home.write_config(&format!(
        "[agent]\nstate_dir = \"{state}\"\nshutdown_timeout = \"2s\"\n\n\
         [api]\napi_key_env = \"{key_var}\"\n\n\
         [[jobs]]\nname = \"env\"\nschedule = \"* * * * * *\"\nping_url = \"{ping}\"\n\
         fail_headers = {{ X-Hook = {{ env = \"{header_var}\" }} }}\n\
         command = [\"sh\", \"-c\", \"env > {out}.tmp && mv {out}.tmp {out}\"]\n",
        state = home.state_dir().display(),
        ping = crate::util::http::refused_url("/ping"),
        out = out.display(),
    ));
}

/// The environment the job wrote after `since` was removed.
fn next_environment(home: &Home) -> String {
    let out = home.path("env.txt");
    let _ = std::fs::remove_file(&out);
    crate::util::eventually(Duration::from_secs(15), "the job's environment", || {
        std::fs::read_to_string(&out).map_err(|e| e.to_string())
    })
}

#[test]
fn a_reload_that_renames_secret_variables_keeps_the_old_ones_from_jobs() {
    let home = Home::new();
    write_config(&home, "HB_OLD_KEY", "HB_OLD_HEADER");
    let daemon = Daemon::on(&home).envs(SECRETS).terminate_on_drop().start();
    let first = next_environment(&home);
    assert!(
        first.contains("HB_NEW_KEY="),
        "the unused ones pass: {first}"
    );
    assert!(!first.contains("HB_OLD_KEY") && !first.contains("HB_OLD_HEADER"));
    write_config(&home, "HB_NEW_KEY", "HB_NEW_HEADER");
    daemon.signal(Signal::SIGHUP);
    daemon
        .log()
        .wait_for(1, Duration::from_secs(10), |line: &Value| {
            line["message"] == "configuration reloaded"
        });
    let after = next_environment(&home);
    for (var, value) in SECRETS {
        assert!(
            !after.contains(var),
            "{var} reached the job after the reload"
        );
        assert!(!after.contains(value), "{var}'s value reached the job");
    }
}

const TOKEN: &str = "a-good-status-token-0123";
const GUESS: &str = "guess-7";

#[test]
fn failed_token_attempts_are_counted_logged_at_a_pace_and_slowed_down() {
    let home = Home::new();
    let port = free_port();
    home.write_config(&format!(
        "[agent]\nstate_dir = \"{}\"\nshutdown_timeout = \"2s\"\n\n\
         [status]\nlisten = \"127.0.0.1:{port}\"\ntoken = \"{TOKEN}\"\n",
        home.state_dir().display()
    ));
    let daemon = Daemon::on(&home).terminate_on_drop().start();
    let endpoint = Endpoint::parse(&format!("http://127.0.0.1:{port}")).expect("a URL");
    daemon.until("the endpoint answers", Duration::from_secs(10), || {
        endpoint
            .request("GET", "/healthz", None, Duration::from_secs(1))
            .ok()
            .map(|_| ())
    });
    // Triggering a run needs the token: each wrong guess is a failed attempt.
    let mut took = Vec::new();
    for _ in 0..7 {
        let started = Instant::now();
        let answer = endpoint
            .request(
                "POST",
                "/jobs/none/run",
                Some(GUESS),
                Duration::from_secs(10),
            )
            .expect("an answer");
        took.push(started.elapsed());
        assert_eq!(answer.status, 401, "{}", answer.body);
    }
    let millis: Vec<u128> = took.iter().map(Duration::as_millis).collect();
    // Waits of 0, 100, 200, 400, 800, 1600 and 2000 ms before each answer.
    assert!(millis[0] < 1000, "{millis:?}");
    assert!(millis[5] >= 1500 && millis[6] >= 1900, "{millis:?}");
    let metrics = endpoint
        .request("GET", "/metrics", Some(TOKEN), Duration::from_secs(10))
        .expect("the metrics");
    let failures = metrics
        .body
        .lines()
        .find_map(|l| l.strip_prefix("heartbeat_agent_status_auth_failures_total "))
        .and_then(|v| v.trim().parse::<f64>().ok());
    assert_eq!(failures, Some(7.0), "{}", metrics.body);
    let refused = |line: &Value| {
        line["message"].as_str().is_some_and(|m| {
            m.starts_with("refused a request with a missing or wrong status token")
        })
    };
    let lines = daemon.log().wait_for(1, Duration::from_secs(5), refused);
    assert_eq!(lines.len(), 1, "one line within 10 s: {lines:?}");
    assert_eq!(lines[0]["client"], "127.0.0.1");
    assert!(!daemon.log().text().contains(GUESS), "the guess was logged");
    eprintln!("answers to 7 wrong guesses took {millis:?} ms");
}
