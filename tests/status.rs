//! The status endpoint, `status`, `health` and `trigger` against the real daemon binary running
//! real jobs next to the emulator: the document matches what happened, remote statistics
//! appear after a ping and turn `unavailable` (not an error) when the API is down, metrics
//! parse, liveness never depends on the API, triggers need the token, and no output holds the
//! API key or a ping token.

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use heartbeat_agent::emulator::{EmulatorOptions, Fault, FaultKind, Fixtures, Listener};
use heartbeat_agent::status::client::{Endpoint, StatusAnswer};
use serde_json::{json, Value};

use crate::util::daemon::Daemon;
use crate::util::http::free_port;
use crate::util::{emulator::Background, Home};

mod created;
mod dashboard;
mod day;
mod drift;
mod hostile_config;
mod local_users;
mod metrics;
mod missing;
mod next_run;
mod owner;
mod pause;
mod pause_memory;
mod prom;
mod retries;
mod scrub;
mod token_file;
mod words;
use prom::{parse_metrics, promtool, sample};

const TOKEN: &str = "s3cret-status-token";

/// What the status tests do with a [`Home`]: a config whose `[status]` listens on a unix
/// socket inside it, the agent's commands and the daemon on that config.
trait StatusHome {
    fn socket(&self) -> PathBuf;
    fn endpoint(&self) -> Endpoint;
    fn write(&self, emulator: Option<&Background>, status: &str, jobs: &str);
    fn output(&self, args: &[&str], key: &str) -> Output;
    fn daemon(&self, key: &str) -> Daemon;
}

impl StatusHome for Home {
    fn socket(&self) -> PathBuf {
        self.path("status.sock")
    }

    fn endpoint(&self) -> Endpoint {
        Endpoint::Unix(self.socket())
    }

    /// Writes the config: state dir, `[api]` (when an emulator is given), `status`, `jobs`.
    fn write(&self, emulator: Option<&Background>, status: &str, jobs: &str) {
        let api = emulator.map_or_else(String::new, |e| {
            format!(
                "[api]\nbase_url = \"{base}\"\nping_base_url = \"{base}\"\naccount_id = \"{}\"\n\
                 api_key_env = \"EMULATOR_KEY\"\n\n",
                e.account(),
                base = e.base_url()
            )
        });
        let text = format!(
            "[agent]\nstate_dir = \"{}\"\nshutdown_timeout = \"2s\"\nsync_jitter = \"0s\"\n\n{api}\
             [status]\n{status}\n\n{jobs}",
            self.path("state").display()
        );
        self.write_config(&text);
    }

    fn output(&self, args: &[&str], key: &str) -> Output {
        self.agent()
            .arg("--config")
            .arg(self.config_path())
            .args(args)
            .env("EMULATOR_KEY", key)
            .env("NO_COLOR", "1")
            .output()
            .expect("run the agent")
    }

    fn daemon(&self, key: &str) -> Daemon {
        start_daemon(self, key, &[], &self.endpoint())
    }
}

const SECOND: Duration = Duration::from_secs(1);

/// Starts the daemon on `home`'s config through `wrapper` (a program and its arguments, or
/// nothing), stopped with SIGTERM when dropped, and waits until `endpoint` answers.
fn start_daemon(home: &Home, key: &str, wrapper: &[&str], endpoint: &Endpoint) -> Daemon {
    let daemon = Daemon::on(home)
        .via(wrapper)
        .env("EMULATOR_KEY", key)
        .terminate_on_drop()
        .start();
    daemon.until("the endpoint answers", Duration::from_secs(10), || {
        endpoint
            .request("GET", "/healthz", None, SECOND)
            .ok()
            .map(|_| ())
    });
    daemon
}

/// The `[status]` keys of a home whose endpoint listens on its socket and needs [`TOKEN`] to
/// trigger.
fn listen_with_token(home: &Home) -> String {
    format!(
        "listen = \"{}\"\ntoken = \"{TOKEN}\"",
        home.socket().display()
    )
}

fn get(endpoint: &Endpoint, path: &str) -> StatusAnswer {
    endpoint
        .request("GET", path, None, Duration::from_secs(15))
        .expect("request")
}

/// The `/status` document; a refresh carries the token (without it, refreshes are
/// rate-limited: `local_users`).
fn status_doc(endpoint: &Endpoint, refresh: bool) -> Value {
    let answer = if refresh {
        endpoint.request(
            "GET",
            "/status?refresh=1",
            Some(TOKEN),
            Duration::from_secs(15),
        )
    } else {
        endpoint.request("GET", "/status", None, Duration::from_secs(15))
    }
    .expect("request");
    assert_eq!(answer.status, 200, "{}", answer.body);
    serde_json::from_str(&answer.body).expect("JSON")
}

fn job<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .find(|j| j["name"] == name)
        .unwrap_or_else(|| panic!("no job {name} in {doc}"))
}

/// A job `made` whose check the agent creates (`create = true`), with `check`, a
/// `[jobs.check]` table that sets period and grace.
fn created_job(check: &str) -> String {
    format!(
        "[[jobs]]\nname = \"made\"\nschedule = \"0 0 1 1 *\"\ncommand = [\"true\"]\n\
         {check}create = true\n"
    )
}

/// The id sync recorded for `made`'s check.
fn made_id(home: &Home) -> String {
    let text = std::fs::read_to_string(home.path("state/sync/made.json")).expect("a record");
    let record: Value = serde_json::from_str(&text).expect("JSON");
    assert!(record["createdTag"].is_string(), "{record}");
    record["checkId"].as_str().expect("an id").to_owned()
}

/// The cells of job `name`'s row in the table `status` printed (`out`): JOB, NEXT RUN, LAST
/// RUN, RECENT, PING, SYNC, REMOTE.
fn table_row(out: &Output, name: &str) -> Vec<String> {
    assert!(out.status.success(), "{out:?}");
    let cells = crate::util::table_row(&String::from_utf8_lossy(&out.stdout), name);
    assert_eq!(cells.len(), 7, "{cells:?}");
    cells
}

fn emulator_with_check() -> Background {
    let emulator = Background::start_with(EmulatorOptions {
        fixtures: Fixtures::default(),
        ..EmulatorOptions::default()
    });
    emulator
        .add_heartbeat_check(&json!({"id": "c1", "name": "check c1",
            "heartbeat": {"period": 1, "periodUnit": "days", "grace": 1,
                          "graceUnit": "hours", "pingToken": "c1000000-0000-4000-8000-0000000000c1"}}))
        .expect("add check");
    emulator
}

#[test]
fn status_metrics_and_remote_view_follow_real_runs_and_hide_secrets() {
    let emulator = emulator_with_check();
    let key = emulator.api_key().to_owned();
    let home = Home::new();
    let jobs = format!(
        "[[jobs]]\nname = \"good\"\nschedule = \"*/1 * * * * *\"\n\
         shell = \"echo key={key} token=c1000000-0000-4000-8000-0000000000c1 url={base}/c1000000-0000-4000-8000-0000000000c1; echo done\"\ncheck_id = \"c1\"\n\
         [jobs.check]\nperiod = \"1m\"\n\n\
         [[jobs]]\nname = \"bad\"\nschedule = \"*/1 * * * * *\"\nshell = \"echo oops; exit 3\"\n",
        base = emulator.base_url()
    );
    home.write(
        Some(&emulator),
        &format!(
            "listen = \"{}\"\ntoken = \"{TOKEN}\"",
            home.socket().display()
        ),
        &jobs,
    );
    let daemon = home.daemon(&key);
    let endpoint = home.endpoint();
    // A run of each, a ping accepted, and the check's event recorded by the service.
    let doc = daemon.until(
        "both jobs ran and the remote stats appeared",
        Duration::from_secs(15),
        || {
            let doc = status_doc(&endpoint, true);
            let good = job(&doc, "good");
            let done = good["last_ping"]["result"] == "accepted"
                && good["remote"]["heartbeat"]["state"] == "available"
                && job(&doc, "bad")["last_run"].is_object();
            done.then_some(doc)
        },
    );
    // Within 60 s the remote view comes from the cache: no further API request.
    let before = api_fetches(&emulator);
    status_doc(&endpoint, false);
    status_doc(&endpoint, false);
    assert_eq!(api_fetches(&emulator), before, "cached for 60 s");
    assert_eq!(doc["version"], env!("CARGO_PKG_VERSION"));
    assert!(doc["config"]["path"]
        .as_str()
        .expect("path")
        .ends_with("config.toml"));
    let good = job(&doc, "good");
    assert_eq!(good["kind"], "shell");
    assert_eq!(good["schedule"], "*/1 * * * * *");
    assert_eq!(good["timezone"], "UTC");
    assert_eq!(good["check_id"], "c1");
    assert!(good["next_run"].is_string());
    assert_eq!(good["last_run"]["outcome"], "success", "{good}");
    assert_eq!(good["last_run"]["exit_code"], 0);
    assert_eq!(good["last_run"]["timed_out"], false);
    assert!(good["last_run"]["output_tail"]
        .as_str()
        .expect("tail")
        .contains("done"));
    assert_eq!(good["last_ping"]["detail"], "HTTP 200");
    assert_eq!(good["sync"]["state"], "in_sync");
    let remote = &good["remote"];
    assert_eq!(remote["state"], "available", "{remote}");
    assert_eq!(remote["check_status"]["checkId"], "c1");
    assert_eq!(remote["check_status"]["hasFailures"], false);
    assert!(
        remote["heartbeat"]["success_ratio_24h"].is_number(),
        "{remote}"
    );
    assert!(remote["heartbeat"]["latest_event"]["id"].is_string());
    let bad = job(&doc, "bad");
    assert_eq!(bad["last_run"]["outcome"], "failed");
    assert_eq!(bad["last_run"]["exit_code"], 3);
    assert!(bad["last_run"]["output_tail"]
        .as_str()
        .expect("tail")
        .contains("oops"));
    assert!(bad["last_ping"].is_null());
    assert_eq!(bad["remote"]["state"], "unavailable");

    // Metrics parse and count what happened.
    // Counters are kept by an after-run hook that runs after the run's record is visible
    // (other hooks, such as sync's file update, may come first): poll until both jobs count.
    let metrics = daemon.until("both runs counted", Duration::from_secs(5), || {
        let metrics = get(&endpoint, "/metrics");
        assert_eq!(metrics.status, 200);
        let counted = |job: &str| {
            metrics.body.contains(&format!(
                "heartbeat_agent_run_duration_seconds_count{{job=\"{job}\"}}"
            ))
        };
        let pinged = sample(
            &parse_metrics(&metrics.body),
            "heartbeat_agent_pings_total",
            &[("job", "good"), ("result", "accepted")],
        )
        .is_some_and(|n| n >= 1.0);
        (counted("good") && counted("bad") && pinged).then_some(metrics)
    });
    let samples = parse_metrics(&metrics.body);
    let at_least_one = |name: &str, labels: &[(&str, &str)]| {
        assert!(
            sample(&samples, name, labels).is_some_and(|n| n >= 1.0),
            "{name} {labels:?}:\n{}",
            metrics.body
        );
    };
    at_least_one(
        "heartbeat_agent_runs_total",
        &[("job", "good"), ("outcome", "success")],
    );
    at_least_one(
        "heartbeat_agent_runs_total",
        &[("job", "bad"), ("outcome", "failed")],
    );
    at_least_one(
        "heartbeat_agent_pings_total",
        &[("job", "good"), ("result", "accepted")],
    );
    at_least_one(
        "heartbeat_agent_run_duration_seconds_count",
        &[("job", "bad")],
    );
    assert!(sample(
        &samples,
        "heartbeat_agent_last_success_timestamp_seconds",
        &[("job", "good")]
    )
    .is_some());
    assert!(sample(
        &samples,
        "heartbeat_agent_api_requests_total",
        &[("operation", "list_check_statuses"), ("status", "200")]
    )
    .is_some());
    assert_eq!(
        sample(&samples, "heartbeat_agent_build_info", &[]),
        Some(1.0)
    );
    promtool(&metrics.body);

    // The CLI: table and JSON; neither (nor the endpoint) shows a secret.
    let table = home.output(
        &["status", "--url", &home.socket().display().to_string()],
        &key,
    );
    assert!(
        table.status.success(),
        "{}",
        String::from_utf8_lossy(&table.stderr)
    );
    let table = String::from_utf8(table.stdout).expect("utf-8");
    assert!(table.starts_with("JOB "), "{table}");
    let good_line = table
        .lines()
        .find(|l| l.starts_with("good "))
        .expect("good row");
    assert!(
        good_line.contains("success")
            && good_line.contains("in_sync")
            && good_line.contains("up 100%"),
        "the service's success ratio is a percentage (not multiplied again), whole: {table}"
    );
    assert!(
        !table.contains('\x1b'),
        "no colour off a terminal: {table:?}"
    );
    let json = home.output(&["status", "--json", "--job", "bad"], &key);
    assert!(json.status.success());
    let json: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(json["jobs"].as_array().map(Vec::len), Some(1));
    assert_eq!(json["jobs"][0]["last_run"]["exit_code"], 3);
    let unknown = home.output(&["status", "--job", "nope"], &key);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no job named \"nope\""));
    let everything = format!(
        "{}{}{}",
        get(&endpoint, "/status").body,
        metrics.body,
        table
    );
    for secret in [key.as_str(), "c1000000-0000-4000-8000-0000000000c1"] {
        assert!(
            !everything.contains(secret),
            "{secret} shown in:\n{everything}"
        );
    }
    assert!(
        everything.contains("key=[redacted]"),
        "the job's output is kept, scrubbed"
    );

    // The API goes down: the remote view says so; liveness does not care.
    let mut down = Fault::new(FaultKind::Status).listener(Listener::Api);
    down.status = Some(503);
    emulator.add_fault(down);
    let doc = status_doc(&endpoint, true);
    let remote = &job(&doc, "good")["remote"];
    assert_eq!(remote["state"], "unavailable", "{remote}");
    assert!(
        remote["reason"].as_str().expect("reason").contains("503"),
        "{remote}"
    );
    assert_eq!(get(&endpoint, "/healthz").status, 200);
    // Connections closed without an answer. (The emulator is not shut down: its freed port
    // could go to another test's server, which the daemon's pings would then reach.)
    emulator.add_fault(Fault::new(FaultKind::Drop).listener(Listener::Api));
    let doc = status_doc(&endpoint, true);
    let remote = &job(&doc, "good")["remote"];
    assert_eq!(remote["state"], "unavailable", "{remote}");
    assert!(
        remote["reason"]
            .as_str()
            .expect("reason")
            .starts_with("the API is unavailable"),
        "{remote}"
    );
    assert_eq!(get(&endpoint, "/healthz").status, 200);
    assert_eq!(get(&endpoint, "/readyz").status, 200);
    let health = home.output(&["health"], &key);
    assert_eq!(
        health.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&health.stderr)
    );
    drop(daemon); // before the emulator (declared earlier, dropped later)
    let health = home.output(&["health"], &key);
    assert_eq!(health.status.code(), Some(1));
}

#[test]
fn trigger_needs_the_token_and_follows_the_overlap_rule() {
    let home = Home::new();
    let marker = home.path("ran");
    let jobs = format!(
        "[[jobs]]\nname = \"manual\"\nschedule = \"0 0 1 1 *\"\nshell = \"echo x >> {}; sleep 2\"\n\n\
         [[jobs]]\nname = \"elsewhere\"\nschedule = \"0 0 1 1 *\"\n",
        marker.display()
    );
    home.write(None, &listen_with_token(&home), &jobs);
    let daemon = home.daemon("");
    let endpoint = home.endpoint();
    let anonymous = endpoint
        .request("POST", "/jobs/manual/run", None, SECOND)
        .expect("request");
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    let wrong = endpoint
        .request("POST", "/jobs/manual/run", Some("guess"), SECOND)
        .expect("request");
    assert_eq!(wrong.status, 401);
    assert!(!marker.exists(), "no run without the token");
    let started = home.output(&["trigger", "manual"], "");
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    assert!(String::from_utf8_lossy(&started.stderr).contains("started"));
    daemon.until(
        "the triggered run wrote its marker",
        Duration::from_secs(5),
        || marker.exists().then_some(()),
    );
    // Still running (sleep 2), overlap "skip": refused.
    let busy = home.output(&["trigger", "manual"], "");
    assert_eq!(busy.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&busy.stderr).contains("HTTP 409"),
        "{}",
        String::from_utf8_lossy(&busy.stderr)
    );
    let unknown = home.output(&["trigger", "nope"], "");
    assert_eq!(unknown.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("HTTP 404"));
    let external = endpoint
        .request("POST", "/jobs/elsewhere/run", Some(TOKEN), SECOND)
        .expect("request");
    assert_eq!(external.status, 409, "{}", external.body);
    let doc = status_doc(&endpoint, false);
    assert_eq!(job(&doc, "manual")["running"], 1);
    assert_eq!(job(&doc, "elsewhere")["kind"], "external");
    assert_eq!(job(&doc, "elsewhere")["remote"]["state"], "unavailable");
    daemon.until("the run ended", Duration::from_secs(5), || {
        let doc = status_doc(&endpoint, false);
        (job(&doc, "manual")["last_run"]["outcome"] == "success").then_some(())
    });
    let lines = std::fs::read_to_string(&marker).expect("marker");
    assert_eq!(lines.lines().count(), 1, "one run only");
}

/// The daemon on `home`'s config, whose `[status]` listens on 127.0.0.1:`port` (see
/// [`start_daemon`]).
fn tcp_daemon(home: &Home, port: u16, key: &str, wrapper: &[&str]) -> Daemon {
    let endpoint = Endpoint::parse(&format!("http://127.0.0.1:{port}")).expect("url");
    start_daemon(home, key, wrapper, &endpoint)
}

/// `GET /v1/check-statuses` requests the emulator received: one per remote view fetched.
fn api_fetches(emulator: &Background) -> usize {
    emulator
        .requests()
        .iter()
        .filter(|r| r.path == "/v1/check-statuses")
        .count()
}

#[test]
fn without_a_token_triggers_are_off_and_tcp_works() {
    let home = Home::new();
    let port = free_port();
    home.write(
        None,
        &format!("listen = \"127.0.0.1:{port}\""),
        "[[jobs]]\nname = \"j\"\nschedule = \"0 0 1 1 *\"\ncommand = [\"true\"]\n",
    );
    let _daemon = tcp_daemon(&home, port, "", &[]);
    let endpoint = Endpoint::parse(&format!("http://127.0.0.1:{port}")).expect("url");
    let refused = endpoint
        .request("POST", "/jobs/j/run", Some("x"), SECOND)
        .expect("request");
    assert_eq!(refused.status, 403);
    assert!(
        refused.body.contains("set [status] token"),
        "{}",
        refused.body
    );
    let health = home.output(
        &["health", "--url", &format!("http://127.0.0.1:{port}")],
        "",
    );
    assert_eq!(health.status.code(), Some(0));
    let doc = status_doc(&endpoint, false);
    assert_eq!(
        job(&doc, "j")["remote"]["reason"],
        "the job is not bound to a check (check_id)"
    );
}

#[test]
fn a_non_loopback_bind_without_a_token_is_a_config_error() {
    let home = Home::new();
    home.write(None, "listen = \"0.0.0.0:9465\"", "");
    let out = home.output(&["daemon"], "");
    assert_eq!(out.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "config.toml:7:10: [status]: key `listen`: 0.0.0.0:9465 is not a loopback address"
        ),
        "{stderr}"
    );
    let check = home.output(&["config", "check"], "");
    assert_eq!(check.status.code(), Some(78));
}

#[test]
fn a_short_token_on_a_network_bind_is_a_config_error_naming_its_place() {
    let home = Home::new();
    home.write(None, "listen = \"0.0.0.0:9465\"\ntoken = \"7\"", "");
    for args in [&["config", "check"][..], &["daemon"][..]] {
        let out = home.output(args, "");
        assert_eq!(out.status.code(), Some(78), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(
                "config.toml:8:9: [status]: key `token`: the token is 1 character, too short for \
                 0.0.0.0:9465, which is not a loopback address"
            ),
            "{stderr}"
        );
        assert!(stderr.contains("use at least 16 characters"), "{stderr}");
    }
    // Loopback keeps the short token (only the local machine can guess), a long one passes.
    home.write(None, "listen = \"127.0.0.1:9465\"\ntoken = \"7\"", "");
    assert_eq!(home.output(&["config", "check"], "").status.code(), Some(0));
    home.write(
        None,
        &format!("listen = \"0.0.0.0:9465\"\ntoken = \"{TOKEN}\""),
        "",
    );
    assert_eq!(home.output(&["config", "check"], "").status.code(), Some(0));
}

#[test]
fn health_is_1_when_nothing_listens() {
    let home = Home::new();
    let out = home.output(
        &["health", "--url", &home.socket().display().to_string()],
        "",
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach the status endpoint"));
}
