//! `heartbeat-agent sync` and the sync engine against the emulator: exact PUT bodies, no PUT
//! when nothing changed, the ping token kept, the learned ping URL, faults, deactivation.

use std::path::PathBuf;
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use heartbeat_agent::api::{ApiClient, ApiClientConfig, Quota, RateLimiter};
use heartbeat_agent::config::Config;
use heartbeat_agent::emulator::{EmulatorOptions, Fault, FaultKind, Fixtures};
use heartbeat_agent::net::RetryPolicy;
use heartbeat_agent::redact::Secret;
use heartbeat_agent::sync;
use serde_json::{json, Value};

use crate::util::{self, emulator::Background, Home};

/// A temporary home with a config file and a state directory, next to an emulator holding the
/// checks `ids` (token `<id>-token`).
struct Setup {
    emulator: Background,
    home: Home,
}

impl Setup {
    fn new(ids: &[&str]) -> Self {
        let emulator = Background::start_with(EmulatorOptions {
            fixtures: Fixtures::default(),
            ..EmulatorOptions::default()
        });
        for id in ids {
            emulator
                .add_heartbeat_check(&json!({"id": id, "name": format!("check {id}"),
                    "heartbeat": {"period": 1, "periodUnit": "days", "grace": 1,
                                  "graceUnit": "hours", "pingToken": crate::util::emulator::token_for(id)}}))
                .unwrap();
        }
        Setup {
            emulator,
            home: Home::new(),
        }
    }

    fn state_dir(&self) -> PathBuf {
        self.home.state_dir()
    }

    fn config_path(&self) -> PathBuf {
        self.home.config_path()
    }

    /// Writes the config: `[agent]`/`[api]` pointing at the emulator, then `jobs`.
    fn write_config(&self, jobs: &str) {
        let text = format!(
            "[agent]\nstate_dir = \"{}\"\n\n[api]\nbase_url = \"{}\"\naccount_id = \"{}\"\n\
             api_key_env = \"EMULATOR_KEY\"\n\n{jobs}",
            self.state_dir().display(),
            self.emulator.base_url(),
            self.emulator.account()
        );
        self.home.write_config(&text);
    }

    fn agent(&self, args: &[&str]) -> Output {
        self.home
            .agent()
            .arg("--config")
            .arg(self.config_path())
            .args(args)
            .env("EMULATOR_KEY", self.emulator.api_key())
            .output()
            .unwrap()
    }

    /// Bodies of the PUTs recorded so far, with their query strings.
    fn puts(&self) -> Vec<(String, Option<String>, Value)> {
        self.emulator
            .requests()
            .into_iter()
            .filter(|r| r.method == "PUT")
            .map(|r| (r.path, r.query, serde_json::from_str(&r.body).unwrap()))
            .collect()
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn job(name: &str, schedule: &str, check: &str, extra: &str) -> String {
    format!(
        "[[jobs]]\nname = \"{name}\"\nschedule = \"{schedule}\"\ncheck_id = \"{check}\"\n{extra}\n"
    )
}

#[test]
fn every_five_minutes_sends_the_complete_definition_once() {
    let setup = Setup::new(&["c5"]);
    setup.write_config(&job("five", "*/5 * * * *", "c5", ""));
    let first = setup.agent(&["sync"]);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let out = text(&first.stdout);
    assert!(out.starts_with("five (check c5): updated\n"), "{out}");
    // Nothing recorded yet: the check is read first, so the differences are the real ones.
    assert!(out.contains("  heartbeat.period: 1 -> 5\n"), "{out}");
    assert!(
        out.contains("  heartbeat.periodUnit: \"days\" -> \"minutes\"\n"),
        "{out}"
    );
    assert!(out.contains("  name: \"check c5\" -> \"five\"\n"), "{out}");
    assert!(
        !out.contains(&crate::util::emulator::token_for("c5")),
        "the token is a secret: {out}"
    );
    let puts = setup.puts();
    assert_eq!(puts.len(), 1);
    let (path, query, body) = &puts[0];
    assert_eq!(path, "/v1/checks/heartbeat/c5");
    assert_eq!(query.as_deref(), Some("autoAssignAlerts=true"));
    assert_eq!(
        body,
        &json!({"name": "five", "activated": true,
                "heartbeat": {"period": 5, "periodUnit": "minutes", "grace": 1,
                              "graceUnit": "minutes"}})
    );
    // The ping URL of the answer is learned, and it is the check's.
    let check = setup.emulator.heartbeat_check("c5").unwrap();
    let url = check["heartbeat"]["pingUrl"].as_str().unwrap().to_owned();
    assert!(
        url.ends_with(&format!("/{}", crate::util::emulator::token_for("c5"))),
        "{url}"
    );
    assert_eq!(
        sync::learned_ping_url(&setup.state_dir(), "five", "c5"),
        Some(url)
    );

    // A restart with the same config sends nothing.
    let second = setup.agent(&["sync"]);
    assert_eq!(second.status.code(), Some(0), "{}", text(&second.stderr));
    assert_eq!(text(&second.stdout), "five (check c5): in_sync\n");
    assert_eq!(setup.puts().len(), 1);
}

#[test]
fn a_config_change_is_sent_with_the_learned_token_and_the_url_keeps_working() {
    let setup = Setup::new(&["c1"]);
    setup.write_config(&job("backup", "0 3 * * *", "c1", ""));
    assert_eq!(setup.agent(&["sync"]).status.code(), Some(0));
    let check = "[jobs.check]\nname = \"Nightly backup\"\ntags = [\"prod\"]\nmuted = true\n\
                 description = \"pg_dump\"\nauto_assign_alerts = false\ngrace = \"2h\"\n\
                 alert_channel_subscriptions = [{ alert_channel_id = 7 }]\n";
    setup.write_config(&job("backup", "0 3 * * *", "c1", check));
    let dry = setup.agent(&["sync", "--dry-run"]);
    assert_eq!(dry.status.code(), Some(0), "{}", text(&dry.stderr));
    let out = text(&dry.stdout);
    assert!(
        out.contains("backup (check c1): would update (dry run: nothing sent)"),
        "{out}"
    );
    assert!(out.contains("  tags: (none) -> [\"prod\"]\n"), "{out}");
    assert!(out.contains("  heartbeat.grace: 1 -> 2\n"), "{out}");
    assert!(out.contains("  autoAssignAlerts: true -> false\n"), "{out}");
    assert_eq!(setup.puts().len(), 1, "--dry-run sends nothing");

    let changed = setup.agent(&["sync"]);
    assert_eq!(changed.status.code(), Some(0), "{}", text(&changed.stderr));
    let puts = setup.puts();
    assert_eq!(puts.len(), 2);
    assert_eq!(puts[1].1.as_deref(), Some("autoAssignAlerts=false"));
    assert_eq!(
        puts[1].2,
        json!({"name": "Nightly backup", "activated": true, "muted": true,
               "tags": ["prod"], "description": "pg_dump",
               "alertChannelSubscriptions": [{"alertChannelId": 7, "activated": true}],
               "heartbeat": {"period": 1, "periodUnit": "days", "grace": 2,
                             "graceUnit": "hours", "pingToken": crate::util::emulator::token_for("c1")}})
    );
    // The token never rotated: the learned URL still pings the check.
    let url = sync::learned_ping_url(&setup.state_dir(), "backup", "c1").unwrap();
    assert!(url.ends_with(&format!("/{}", crate::util::emulator::token_for("c1"))));
    let status = ping(&url);
    assert_eq!(status, 200);
    let pings = setup.emulator.pings();
    assert_eq!(pings.len(), 1);
    assert_eq!(
        pings[0].path,
        format!("/{}", crate::util::emulator::token_for("c1"))
    );
    // --force sends again although nothing differs.
    let forced = setup.agent(&["sync", "--force", "--json"]);
    assert_eq!(forced.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&forced.stdout).unwrap();
    assert_eq!(report["jobs"][0]["result"], "updated");
    assert_eq!(report["jobs"][0]["changes"], json!([]));
    assert_eq!(setup.puts().len(), 3);
}

fn ping(url: &str) -> u16 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async { reqwest::get(url).await.unwrap().status().as_u16() })
}

#[test]
fn removed_and_disabled_jobs_get_their_checks_deactivated() {
    let setup = Setup::new(&["a", "b"]);
    setup.write_config(&format!(
        "{}{}",
        job("keep", "@hourly", "a", ""),
        job("gone", "@hourly", "b", "")
    ));
    assert_eq!(setup.agent(&["sync"]).status.code(), Some(0));
    setup.write_config(&job("keep", "@hourly", "a", "enabled = false"));
    let dry = setup.agent(&["sync", "--dry-run"]);
    assert_eq!(
        text(&dry.stdout),
        "keep (check a): would update (dry run: nothing sent)\n  activated: true -> false\n\
         gone (check b, deactivate: the job left the config): would update (dry run: nothing \
         sent)\n  activated: true -> false\n"
    );
    assert_eq!(setup.puts().len(), 2);
    let done = setup.agent(&["sync"]);
    assert_eq!(done.status.code(), Some(0), "{}", text(&done.stderr));
    for id in ["a", "b"] {
        assert_eq!(
            setup.emulator.heartbeat_check(id).unwrap()["activated"],
            false
        );
    }
    let puts = setup.puts();
    assert_eq!(puts.len(), 4);
    assert_eq!(
        puts[3].2["heartbeat"]["pingToken"],
        crate::util::emulator::token_for("b").as_str()
    );
    // Deactivated once: nothing more to send.
    let again = setup.agent(&["sync"]);
    assert_eq!(setup.puts().len(), 4, "{}", text(&again.stdout));
}

#[test]
fn a_failed_put_exits_1_with_a_message_per_job() {
    let setup = Setup::new(&["c1"]);
    setup.write_config(&format!(
        "{}{}",
        job("good", "@daily", "c1", ""),
        job("typo", "@daily", "nope", "")
    ));
    let output = setup.agent(&["sync"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        text(&output.stderr).lines().last().unwrap(),
        "heartbeat-agent: job \"typo\": check nope: the service has no such check (404): it \
         was deleted, or check_id is wrong; recreate the check and set the job's check_id to \
         its id (not retried until the next re-assertion or reload)"
    );
    assert!(text(&output.stdout).contains("good (check c1): updated"));
    let unknown = setup.agent(&["sync", "--job", "other"]);
    assert_eq!(unknown.status.code(), Some(2));
    let only = setup.agent(&["sync", "--job", "good"]);
    assert_eq!(only.status.code(), Some(0));
    assert_eq!(text(&only.stdout), "good (check c1): in_sync\n");
}

/// With the API refusing connections, the first PUT spends its retry budget (up to 3.5 s) and
/// the rest of the pass is deferred at once, naming the API host: before, each of the 8 jobs
/// spent its own budget in turn (about 14 s on average).
#[test]
fn with_the_api_down_sync_gives_up_after_one_jobs_retries_naming_the_host() {
    let home = Home::new();
    let api = crate::util::http::refused_url("");
    let host = api.trim_start_matches("http://").to_owned();
    let jobs: String = (1..=8)
        .map(|i| job(&format!("job{i}"), "@daily", &format!("c{i}"), ""))
        .collect();
    home.write_config(&format!(
        "[agent]\nstate_dir = \"{}\"\n\n[api]\nbase_url = \"{api}\"\n\
         api_key_env = \"EMULATOR_KEY\"\n\n{jobs}",
        home.state_dir().display()
    ));
    let started = std::time::Instant::now();
    let output = home
        .agent()
        .arg("--config")
        .arg(home.config_path())
        .arg("sync")
        .env("EMULATOR_KEY", "sk_test_down")
        .output()
        .unwrap();
    let took = started.elapsed();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("heartbeat-agent: "))
        .collect();
    assert_eq!(lines.len(), 8, "one message per job: {stderr}");
    assert!(
        lines[0].starts_with(&format!(
            "heartbeat-agent: job \"job1\": check c1: the API at {host} did not answer: \
             connection failed"
        )),
        "{stderr}"
    );
    for (i, line) in lines.iter().enumerate().skip(1) {
        let n = i + 1;
        assert_eq!(
            *line,
            format!(
                "heartbeat-agent: job \"job{n}\": check c{n}: not sent: the API at {host} could \
                 not be reached earlier in this pass; it is retried later (run sync again once \
                 the API answers)"
            )
        );
    }
    // One job's budget (3 waits of at most 0.5 + 1 + 2 s) and the process's start.
    assert!(took < Duration::from_secs(6), "sync took {took:?}");
    // Nothing was recorded as accepted: the next sync sends every job again.
    assert!(sync::state::jobs(&home.state_dir()).is_empty());
}

#[test]
fn sync_converges_through_a_429_storm_and_a_5xx_burst() {
    let setup = Setup::new(&["c1"]);
    setup.write_config(&job("j", "@daily", "c1", ""));
    let path = "/v1/checks/heartbeat/c1";
    let mut storm = Fault::new(FaultKind::RateLimit).path(path).times(2);
    storm.retry_after = Some(json!(0));
    setup.emulator.add_fault(storm);
    let mut burst = Fault::new(FaultKind::Status).path(path).times(1);
    burst.status = Some(503);
    setup.emulator.add_fault(burst);
    let output = setup.agent(&["sync"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let statuses: Vec<Option<u16>> = setup
        .emulator
        .requests()
        .iter()
        .filter(|r| r.method == "PUT")
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, [Some(429), Some(429), Some(503), Some(200)]);
}

#[test]
fn a_schedule_too_frequent_for_the_period_limit_is_a_config_error() {
    let setup = Setup::new(&[]);
    setup.write_config(&job("fast", "*/10 * * * * *", "c1", ""));
    for args in [&["config", "check"][..], &["sync"]] {
        let output = setup.agent(args);
        assert_eq!(output.status.code(), Some(78));
        let first = text(&output.stderr).lines().next().unwrap().to_owned();
        assert!(
            first.ends_with(
                ": job \"fast\": key `schedule`: schedule \"*/10 * * * * *\" fires every 10 \
                 seconds, more often than the heartbeat period limit of 30 seconds allows; \
                 hint: heartbeat periods are 30 seconds to 365 days (grace up to 365 days \
                 more); change the schedule or set [jobs.check] period, or use `ping_url` \
                 instead"
            ),
            "{first}"
        );
    }
    assert!(setup.puts().is_empty());
}

// ---- the engine, in process, with an injected `now` (used by `background` and `period`) ----

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

fn client(setup: &Setup, retry: RetryPolicy) -> ApiClient {
    let mut config = ApiClientConfig::new(
        setup.emulator.base_url(),
        Secret::new(setup.emulator.api_key().to_owned()),
    );
    config.retry = retry;
    config.rate_limiter = Arc::new(RateLimiter::new(Quota::DEFAULT));
    ApiClient::new(config).unwrap()
}

fn load(setup: &Setup) -> Config {
    Config::load(&setup.config_path()).unwrap().config
}

#[test]
fn once_the_api_keeps_answering_429_the_rest_of_the_pass_waits() {
    let setup = Setup::new(&["c1", "c2"]);
    setup.write_config(&format!(
        "{}{}",
        job("first", "@daily", "c1", ""),
        job("second", "@daily", "c2", "")
    ));
    let mut storm = Fault::new(FaultKind::RateLimit).times(100);
    storm.retry_after = Some(json!(0));
    let id = setup.emulator.add_fault(storm);
    let output = setup.agent(&["sync"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    let lines: Vec<&str> = stderr.lines().rev().take(2).collect();
    assert_eq!(
        lines,
        [
            "heartbeat-agent: job \"second\": check c2: not sent: the API kept answering 429 \
             (too many requests) this pass; it is retried later (run sync again)",
            "heartbeat-agent: job \"first\": check c1: cannot read it: api error 429 Too Many \
             Requests: Too Many Requests (GET /v1/checks/c1); retry after 0s",
        ]
    );
    // Only the first job's read was tried (the client's retries): no PUT, nothing for the
    // second.
    let requests = setup.emulator.requests();
    assert!(
        requests
            .iter()
            .all(|r| r.method == "GET" && r.path == "/v1/checks/c1"),
        "{requests:?}"
    );
    assert_eq!(requests.len(), 4, "the client's 4 attempts");
    assert!(text(&output.stdout).contains("second (check c2): deferred"));
    setup.emulator.remove_fault(id);
    let again = setup.agent(&["sync"]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
}

mod converge;
mod create;
mod drift;
mod ownership;
mod scale;
mod scope;

#[test]
fn run_and_ping_with_a_bound_job_use_the_learned_ping_url() {
    let setup = Setup::new(&["c1"]);
    setup.write_config(&job("backup", "0 3 * * *", "c1", ""));
    // Before any sync the URL is unknown: the command still runs, nothing is pinged.
    let before = setup.agent(&["run", "--job", "backup", "--", "true"]);
    assert_eq!(before.status.code(), Some(0), "{}", text(&before.stderr));
    assert!(text(&before.stderr).contains("no ping URL learned"));
    assert!(setup.emulator.pings().is_empty());
    assert_eq!(setup.agent(&["sync"]).status.code(), Some(0));
    let run = setup.agent(&["run", "--job", "backup", "--", "true"]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let ping = setup.agent(&["ping", "--job", "backup"]);
    assert_eq!(ping.status.code(), Some(0), "{}", text(&ping.stderr));
    let paths: Vec<String> = setup.emulator.pings().into_iter().map(|p| p.path).collect();
    let c1 = format!("/{}", crate::util::emulator::token_for("c1"));
    assert_eq!(paths, [c1.as_str(), c1.as_str()]);
    // Bound to another check now (not yet synced): the old check's URL is not used.
    setup.write_config(&job("backup", "0 3 * * *", "c2", ""));
    let moved = setup.agent(&["run", "--job", "backup", "--", "true"]);
    assert_eq!(moved.status.code(), Some(0));
    assert!(text(&moved.stderr).contains("no ping URL learned"));
    assert_eq!(setup.emulator.pings().len(), 2);
}

mod background;
mod period;
mod retries;
mod scenarios;
