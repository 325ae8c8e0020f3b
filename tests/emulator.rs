//! Integration tests for `emulator`: the in-process emulator over real sockets (reqwest), and the
//! `heartbeat-agent emulator` binary.

mod binary;
mod schema;

use std::time::{Duration, Instant};

use heartbeat_agent::emulator::{
    Emulator, EmulatorHandle, EmulatorOptions, Fault, FaultKind, Fixtures, RateLimit,
};
use serde_json::{json, Value};

const CHECK: &str = "7b3c1a52-0d5e-4f7a-9c1e-2f6d8b4a1001";
const TOKEN: &str = "nightly-backup-token";
const PROJECT: &str = "5f0c2f4e-8a51-4c7b-9f0a-3c2d1e0b9a77";

fn example_fixtures() -> Fixtures {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/config/emulator-fixtures.json");
    Fixtures::from_file(std::path::Path::new(path)).expect("the example fixtures are valid")
}

async fn start_with(rate_limit: RateLimit) -> Api {
    let options = EmulatorOptions {
        fixtures: example_fixtures(),
        rate_limit,
        ..EmulatorOptions::default()
    };
    let emulator = Emulator::start(options).await.expect("emulator starts");
    Api {
        http: reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client builds"),
        emulator,
    }
}

async fn start() -> Api {
    start_with(RateLimit::default()).await
}

/// A test client of one emulator.
struct Api {
    http: reqwest::Client,
    emulator: EmulatorHandle,
}

impl Api {
    /// An authenticated API call; returns status and JSON body (`null` when empty).
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let url = format!("{}{path}", self.emulator.base_url());
        let request = self
            .http
            .request(method.parse().expect("valid method"), url)
            .bearer_auth(self.emulator.api_key())
            .header("x-service-account", self.emulator.account());
        let request = match body {
            Some(body) => request.json(&body),
            None => request,
        };
        read(request.send().await.expect("request answered")).await
    }

    /// An unauthenticated request to any URL.
    async fn raw(&self, method: &str, url: &str, body: Option<Value>) -> (u16, Value) {
        let request = self.http.request(method.parse().expect("method"), url);
        let request = match body {
            Some(body) => request.json(&body),
            None => request,
        };
        read(request.send().await.expect("request answered")).await
    }

    fn admin(&self, path: &str) -> String {
        format!("{}/_emulator{path}", self.emulator.base_url())
    }

    async fn ping(&self, token: &str) -> (u16, Value) {
        let url = format!("{}/{token}", self.emulator.ping_url());
        let request = self
            .http
            .get(url)
            .header("user-agent", "heartbeat-agent/test")
            .header("origin", "backup-host");
        read(request.send().await.expect("ping answered")).await
    }
}

async fn read(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.expect("body read");
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("JSON body, got {text:?}"))
    };
    (status, body)
}

fn heartbeat_body(period: u64, unit: &str) -> Value {
    json!({"script": "", "name": "nightly backup", "tags": ["a"],
           "heartbeat": {"period": period, "periodUnit": unit, "grace": 10, "graceUnit": "minutes"}})
}

#[tokio::test]
async fn every_operation_answers_with_fixture_data() {
    let api = start().await;
    let (status, created) = api
        .call(
            "POST",
            "/v1/status-pages/services",
            Some(json!({"name": "Billing"})),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["name"], "Billing");
    assert_eq!(created["accountId"], api.emulator.account());
    let (_, list) = api.call("GET", "/v1/status-pages/services", None).await;
    let names: Vec<&str> = list["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["API", "Dashboard", "Billing"]);

    let path = "/v1/maintenance-windows/7/maintenances/m-2026-12-01";
    let (status, maintenance) = api.call("GET", path, None).await;
    assert_eq!(
        (status, &maintenance["startsAt"]),
        (200, &json!("2026-12-01"))
    );
    let patch = json!({"startsAt": "2026-12-03", "endsAt": "2026-12-04"});
    let (status, patched) = api.call("PATCH", path, Some(patch)).await;
    assert_eq!(status, 200, "{patched}");
    let update = &patched["updates"][0];
    assert_eq!(update["previousStartsAt"], "2026-12-01");
    assert_eq!(update["previousEndsAt"], "2026-12-02");
    assert_eq!(
        update["dateAdjustments"],
        json!({"startsAt": "2026-12-03", "endsAt": "2026-12-04"})
    );
    assert_eq!(patched["startsAt"], "2026-12-03");

    let (status, group) = api.call("GET", "/v1/check-groups/42", None).await;
    assert_eq!((status, &group["concurrency"]), (200, &json!(2)));
    assert_eq!(group["retryStrategy"]["maxRetries"], 2);
    let body = json!({"name": "batch", "retryStrategy": "FALLBACK"});
    let (status, group) = api
        .call(
            "PUT",
            "/v2/check-groups/42?autoAssignAlerts=false",
            Some(body),
        )
        .await;
    assert_eq!(status, 200, "{group}");
    assert_eq!(group["retryStrategy"], "FALLBACK");
    assert_eq!(
        group["concurrency"], 3,
        "fields not sent return to their defaults"
    );
    assert_eq!(group["id"], 42);

    let (status, statuses) = api.call("GET", "/v1/check-statuses", None).await;
    assert_eq!(status, 200);
    assert_eq!(
        statuses.as_array().expect("array").len(),
        2,
        "one per heartbeat check"
    );
    assert_eq!(statuses[0]["checkId"], CHECK);
    assert_eq!(statuses[0]["hasFailures"], false);

    let (status, groups) = api
        .call(
            "GET",
            &format!("/v1/test-session-error-groups/projects/{PROJECT}"),
            None,
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(groups[0]["cleanedErrorMessage"], "Timeout <n>ms exceeded");
    assert_eq!(groups[0]["projectId"], PROJECT);

    assert_eq!(
        api.call("DELETE", "/v1/snippets/11", None).await,
        (204, Value::Null)
    );
    assert_eq!(api.call("DELETE", "/v1/snippets/11", None).await.0, 404);
}

#[tokio::test]
async fn auth_and_missing_resources_get_the_spec_error_bodies() {
    let api = start().await;
    let url = format!("{}/v1/check-statuses", api.emulator.base_url());
    let unauthorized = json!({"statusCode": 401, "error": "Unauthorized", "message": "Bad Token", "attributes": {}});
    assert_eq!(
        api.raw("GET", &url, None).await,
        (401, unauthorized.clone())
    );
    let wrong = api
        .http
        .get(&url)
        .bearer_auth("wrong")
        .send()
        .await
        .expect("answered");
    assert_eq!(read(wrong).await, (401, unauthorized));
    let forbidden = api
        .http
        .get(&url)
        .bearer_auth(api.emulator.api_key())
        .header("x-service-account", "someone-else")
        .send()
        .await
        .expect("answered");
    assert_eq!(
        read(forbidden).await,
        (
            403,
            json!({"statusCode": 403, "error": "Forbidden", "message": "Forbidden"})
        )
    );
    let not_found = json!({"statusCode": 404, "error": "Not Found", "message": "Not Found"});
    for path in [
        "/v1/check-groups/999",
        "/v1/maintenance-windows/7/maintenances/nope",
        "/v1/checks/heartbeats/nope/events/x",
        "/v1/nothing-here",
        "/v1/test-session-error-groups/projects/00000000-0000-4000-8000-000000000000",
    ] {
        assert_eq!(
            api.call("GET", path, None).await,
            (404, not_found.clone()),
            "{path}"
        );
    }
    let (status, body) = api
        .call(
            "PUT",
            "/v1/checks/heartbeat/unknown",
            Some(heartbeat_body(1, "hours")),
        )
        .await;
    assert_eq!((status, body), (404, not_found));
    let (status, body) = api.call("DELETE", "/v1/check-statuses", None).await;
    assert_eq!(
        (status, &body["error"]),
        (405, &json!("Method Not Allowed"))
    );
}

#[tokio::test]
async fn rate_limit_answers_429_and_refused_requests_count() {
    let api = start_with("3/60".parse().expect("valid")).await;
    for _ in 0..3 {
        assert_eq!(api.call("GET", "/v1/check-statuses", None).await.0, 200);
    }
    let (status, body) = api.call("GET", "/v1/check-statuses", None).await;
    assert_eq!(status, 429);
    assert_eq!(body["error"], "Too Many Requests");
    assert_eq!(body["statusCode"], 429);
    assert_eq!(body["attributes"]["limit"], 3);
    // Another key is not limited by this one; a bad key gets 401, never 429.
    let url = format!("{}/v1/check-statuses", api.emulator.base_url());
    assert_eq!(api.raw("GET", &url, None).await.0, 401);
    api.emulator.advance_clock(Duration::from_secs(61));
    assert_eq!(api.call("GET", "/v1/check-statuses", None).await.0, 200);
}

#[tokio::test]
async fn invalid_bodies_get_400_naming_the_field() {
    let api = start().await;
    let check_path = format!("/v1/checks/heartbeat/{CHECK}");
    let raw = api
        .http
        .put(format!(
            "{}/v1/checks/heartbeat/{CHECK}",
            api.emulator.base_url()
        ))
        .bearer_auth(api.emulator.api_key())
        .body("{not json")
        .send()
        .await
        .expect("answered");
    assert_eq!(
        read(raw).await,
        (
            400,
            json!({"statusCode": 400, "error": "Bad Request",
        "message": "Invalid request payload JSON format"})
        )
    );
    let with = |key: &str, value: Value| {
        let mut body = heartbeat_body(1, "days");
        body[key] = value;
        body
    };
    let envs: Vec<Value> = (0..101)
        .map(|i| json!({"key": format!("K{i}"), "value": "v"}))
        .collect();
    let cases = [
        (json!({"name": "x"}), "\"script\" is required"),
        (
            with("description", json!("x".repeat(501))),
            "\"description\" length must be less than or equal to 500",
        ),
        (
            with("environmentVariables", json!(envs)),
            "\"environmentVariables\" must contain less than or equal to 100 items",
        ),
        (
            with("groupOrder", json!(-1)),
            "\"groupOrder\" must be greater than or equal to 0",
        ),
        (
            with("frequencyOffset", json!(0)),
            "\"frequencyOffset\" must be greater than or equal to 1",
        ),
        (
            with("degradedResponseTime", json!(300001)),
            "\"degradedResponseTime\" must be less than or equal to 300000",
        ),
        (
            with("maxResponseTime", json!(-1)),
            "\"maxResponseTime\" must be greater than or equal to 0",
        ),
        (
            with("locations", json!(["mars-1"])),
            "\"locations[0]\" must be one of",
        ),
        (
            with("runtimeId", json!("1999.01")),
            "\"runtimeId\" must be one of",
        ),
        (
            with("activated", json!("yes")),
            "\"activated\" must be a boolean",
        ),
        (with("bogus", json!(1)), "\"bogus\" is not allowed"),
        (
            heartbeat_body(29, "seconds"),
            "\"heartbeat.period\" must be between 30 seconds and 365 days",
        ),
        (
            heartbeat_body(366, "days"),
            "\"heartbeat.period\" must be between",
        ),
        (
            heartbeat_body(1, "weeks"),
            "\"heartbeat.periodUnit\" must be one of [seconds, minutes, hours, days]",
        ),
        (
            with(
                "heartbeat",
                json!({"period": 1, "periodUnit": "days", "grace": 366, "graceUnit": "days"}),
            ),
            "\"heartbeat.grace\" must be between 0 seconds and 365 days",
        ),
    ];
    for (body, expected) in cases {
        let (status, answer) = api.call("PUT", &check_path, Some(body)).await;
        assert_eq!(status, 400, "{answer}");
        assert_eq!(answer["error"], "Bad Request");
        let message = answer["message"].as_str().expect("message");
        assert!(
            message.starts_with(expected),
            "{message:?} should start with {expected:?}"
        );
    }
    let (status, answer) = api
        .call(
            "PUT",
            "/v2/check-groups/42",
            Some(json!({"name": "g", "concurrency": 0})),
        )
        .await;
    assert_eq!(
        (status, answer["message"].as_str()),
        (
            400,
            Some("\"concurrency\" must be greater than or equal to 1")
        )
    );
    let (status, answer) = api
        .call(
            "PUT",
            "/v2/check-groups/42",
            Some(json!({"name": "g", "retryStrategy": "SOMETIMES"})),
        )
        .await;
    assert_eq!(
        (status, answer["message"].as_str()),
        (
            400,
            Some("\"retryStrategy\" must be an object or \"FALLBACK\"")
        )
    );
    let (status, answer) = api
        .call("POST", "/v1/status-pages/services", Some(json!({})))
        .await;
    assert_eq!(
        (status, answer["message"].as_str()),
        (400, Some("\"name\" is required"))
    );
    let path = "/v1/maintenance-windows/7/maintenances/m-2026-12-01";
    let (status, answer) = api
        .call("PATCH", path, Some(json!({"startsAt": "tomorrow"})))
        .await;
    assert_eq!(
        (status, answer["message"].as_str()),
        (
            400,
            Some("\"startsAt\" must be a date in YYYY-MM-DD format")
        )
    );
    let (status, answer) = api.call("GET", "/v1/check-groups/abc", None).await;
    assert_eq!(
        (status, answer["message"].as_str()),
        (400, Some("\"id\" must be a number"))
    );
}

#[tokio::test]
async fn pagination_walks_every_page_in_a_stable_order() {
    let api = start().await;
    for i in 0..43 {
        let (status, _) = api
            .call(
                "POST",
                "/v1/status-pages/services",
                Some(json!({"name": format!("svc{i}")})),
            )
            .await;
        assert_eq!(status, 200);
    }
    let (_, default_page) = api.call("GET", "/v1/status-pages/services", None).await;
    assert_eq!(default_page["length"], 20);
    let mut names = Vec::new();
    let mut path = "/v1/status-pages/services?limit=10".to_owned();
    let mut pages = 0;
    loop {
        let (status, page) = api.call("GET", &path, None).await;
        assert_eq!(status, 200, "{page}");
        pages += 1;
        for entry in page["entries"].as_array().expect("entries") {
            names.push(entry["name"].as_str().expect("name").to_owned());
        }
        match page["nextId"].as_str() {
            Some(next) => path = format!("/v1/status-pages/services?limit=10&nextId={next}"),
            None => break,
        }
    }
    assert_eq!(pages, 5);
    let mut expected = vec!["API".to_owned(), "Dashboard".to_owned()];
    expected.extend((0..43).map(|i| format!("svc{i}")));
    assert_eq!(names, expected);
    let (_, all) = api
        .call("GET", "/v1/status-pages/services?paginated=false", None)
        .await;
    assert_eq!(all["entries"].as_array().expect("entries").len(), 45);
    assert_eq!(all["nextId"], Value::Null);
    for bad in ["limit=0", "limit=101", "paginated=maybe", "nextId=nope"] {
        let (status, body) = api
            .call("GET", &format!("/v1/status-pages/services?{bad}"), None)
            .await;
        let field = bad.split('=').next().expect("name");
        assert_eq!(status, 400, "{bad}");
        assert!(body["message"]
            .as_str()
            .expect("message")
            .starts_with(&format!("\"{field}\"")));
    }
}

#[tokio::test]
async fn put_replaces_the_definition_and_keeps_the_token() {
    let api = start().await;
    let mut body = heartbeat_body(2, "hours");
    body["muted"] = json!(true);
    body["description"] = json!("nightly");
    let (status, check) = api
        .call("PUT", &format!("/v1/checks/heartbeat/{CHECK}"), Some(body))
        .await;
    assert_eq!(status, 200, "{check}");
    assert_eq!(check["heartbeat"]["pingToken"], TOKEN);
    assert_eq!(
        check["heartbeat"]["pingUrl"],
        format!("{}/{TOKEN}", api.emulator.ping_url())
    );
    assert_eq!(check["heartbeat"]["period"], 2);
    assert_eq!(check["muted"], true);
    assert_eq!(check["checkType"], "HEARTBEAT");
    // A second PUT without muted, tags or description: they return to their defaults.
    let (_, check) = api
        .call(
            "PUT",
            &format!("/v1/checks/heartbeat/{CHECK}"),
            Some(json!({"script": ""})),
        )
        .await;
    assert_eq!(check["muted"], false);
    assert_eq!(check["tags"], json!([]));
    assert_eq!(check["description"], Value::Null);
    assert_eq!(
        check["name"], "nightly backup",
        "the name has no default and is kept"
    );
    assert_eq!(check["heartbeat"]["periodUnit"], "days");
    assert_eq!(check["heartbeat"]["pingToken"], TOKEN);
    // A sent token replaces the old one: the old URL stops working.
    let mut body = heartbeat_body(1, "hours");
    body["heartbeat"]["pingToken"] = json!("fresh-token");
    let (_, check) = api
        .call("PUT", &format!("/v1/checks/heartbeat/{CHECK}"), Some(body))
        .await;
    assert_eq!(check["heartbeat"]["pingToken"], "fresh-token");
    assert_eq!(api.ping(TOKEN).await.0, 404);
    assert_eq!(api.ping("fresh-token").await.0, 200);
}

#[tokio::test]
async fn pings_become_events_with_statistics() {
    let api = start().await;
    let (status, first) = api.ping(TOKEN).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["state"], "RECEIVED");
    let event_id = first["eventId"].as_str().expect("event id").to_owned();
    let referer = api
        .http
        .post(format!("{}/{TOKEN}", api.emulator.ping_url()))
        .header("referer", "https://ci.example.com/job/1")
        .header("user-agent", "curl/8")
        .send()
        .await
        .expect("answered");
    let (_, second) = read(referer).await;
    assert_eq!(
        second["state"], "EARLY",
        "a ping right after the previous one is early"
    );

    let path = format!("/v1/checks/heartbeats/{CHECK}/events/{event_id}");
    let (status, event) = api.call("GET", &path, None).await;
    assert_eq!(status, 200, "{event}");
    assert_eq!(event["event"]["source"], "backup-host");
    assert_eq!(event["event"]["userAgent"], "heartbeat-agent/test");
    assert_eq!(
        event["stats"]["last24Hours"]["totalEntitiesCurrentPeriod"],
        2
    );
    assert_eq!(
        event["stats"]["last7Days"]["successRatio"]["currentPeriod"],
        100.0
    );

    let (_, events) = api
        .call(
            "GET",
            &format!("/v1/checks/heartbeats/{CHECK}/events"),
            None,
        )
        .await;
    assert_eq!(events["length"], 2);
    assert_eq!(
        events["entries"][0]["source"], "https://ci.example.com/job/1",
        "newest first"
    );
    assert_eq!(events["entries"][1]["id"], event_id.as_str());

    let bot = api
        .http
        .get(format!("{}/{TOKEN}", api.emulator.ping_url()))
        .header("user-agent", "Slackbot-LinkExpanding 1.0")
        .send()
        .await
        .expect("answered");
    assert_eq!(read(bot).await.1["ignored"], true);
    let (_, events) = api
        .call(
            "GET",
            &format!("/v1/checks/heartbeats/{CHECK}/events"),
            None,
        )
        .await;
    assert_eq!(events["length"], 2, "bot pings are not recorded as events");

    for method in ["PUT", "PATCH", "DELETE"] {
        let url = format!("{}/{TOKEN}", api.emulator.ping_url());
        let (status, body) = api.raw(method, &url, None).await;
        assert_eq!(
            (status, &body["statusCode"]),
            (405, &json!(405)),
            "{method}"
        );
    }
    let (status, body) = api.ping("no-such-token").await;
    assert_eq!((status, &body["error"]), (404, &json!("Not Found")));
}

#[tokio::test]
async fn silence_past_period_and_grace_fails_the_check() {
    let api = start().await;
    assert_eq!(api.ping(TOKEN).await.0, 200);
    let statuses = api.call("GET", "/v1/check-statuses", None).await.1;
    assert_eq!(statuses[0]["hasFailures"], false);
    // Period 1 day + grace 30 minutes, moved through the admin API.
    let (status, clock) = api
        .raw(
            "POST",
            &api.admin("/clock/advance"),
            Some(json!({"seconds": 86400 + 1800 + 1})),
        )
        .await;
    assert_eq!(status, 200, "{clock}");
    let statuses = api.call("GET", "/v1/check-statuses", None).await.1;
    assert_eq!(statuses[0]["checkId"], CHECK);
    assert_eq!(statuses[0]["hasFailures"], true);
    assert_eq!(
        statuses[1]["hasFailures"], false,
        "a check never pinged is not armed"
    );
    let (_, events) = api
        .call(
            "GET",
            &format!("/v1/checks/heartbeats/{CHECK}/events"),
            None,
        )
        .await;
    assert_eq!(events["entries"][0]["state"], "FAILING");
    let failing_id = events["entries"][0]["id"].as_str().expect("id").to_owned();
    let (_, event) = api
        .call(
            "GET",
            &format!("/v1/checks/heartbeats/{CHECK}/events/{failing_id}"),
            None,
        )
        .await;
    // Only the FAILING event is in the last 24 hours; the first ping is in the day before.
    assert_eq!(
        event["stats"]["last24Hours"]["successRatio"]["currentPeriod"],
        0.0
    );
    assert_eq!(
        event["stats"]["last24Hours"]["successRatio"]["previousPeriod"],
        100.0
    );
    assert_eq!(
        event["stats"]["last7Days"]["successRatio"]["currentPeriod"],
        50.0
    );
    let (_, late) = api.ping(TOKEN).await;
    assert_eq!(late["state"], "LATE");
    let statuses = api.call("GET", "/v1/check-statuses", None).await.1;
    assert_eq!(
        statuses[0]["hasFailures"], false,
        "a ping recovers the check"
    );
}

#[tokio::test]
async fn injected_faults_apply_per_route_and_clear() {
    let api = start().await;
    let fault = json!({"kind": "status", "status": 503, "path": "/v1/check-statuses"});
    let (status, created) = api.raw("POST", &api.admin("/faults"), Some(fault)).await;
    assert_eq!(status, 201, "{created}");
    let (status, body) = api.call("GET", "/v1/check-statuses", None).await;
    assert_eq!(
        (status, &body["error"]),
        (503, &json!("Service Unavailable"))
    );
    assert_eq!(
        api.call("GET", "/v1/check-groups/42", None).await.0,
        200,
        "other routes unaffected"
    );
    assert_eq!(api.raw("DELETE", &api.admin("/faults"), None).await.0, 204);
    assert_eq!(api.call("GET", "/v1/check-statuses", None).await.0, 200);

    let id = api
        .emulator
        .add_fault(Fault::new(FaultKind::RateLimit).path("/v1/*").times(1));
    let mut storm =
        Fault::new(FaultKind::RateLimit).listener(heartbeat_agent::emulator::Listener::Ping);
    storm.retry_after = Some(json!(7));
    api.emulator.add_fault(storm);
    let response = api
        .http
        .get(format!("{}/v1/check-statuses", api.emulator.base_url()))
        .bearer_auth(api.emulator.api_key())
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status().as_u16(), 429);
    assert!(response.headers().get("retry-after").is_none());
    assert!(
        !api.emulator.remove_fault(id),
        "a fault for one request expires after it"
    );
    let response = api
        .http
        .get(format!("{}/{TOKEN}", api.emulator.ping_url()))
        .send()
        .await
        .expect("answered");
    assert_eq!(response.headers()["retry-after"], "7");
    api.emulator.clear_faults();

    api.emulator.add_fault(
        Fault::new(FaultKind::Drop)
            .path("/v1/check-statuses")
            .times(1),
    );
    let url = format!("{}/v1/check-statuses", api.emulator.base_url());
    let dropped = api
        .http
        .get(&url)
        .bearer_auth(api.emulator.api_key())
        .send()
        .await;
    assert!(
        dropped.is_err(),
        "the connection is closed without an answer"
    );

    let mut slow = Fault::new(FaultKind::Latency)
        .path("/v1/check-statuses")
        .times(1);
    slow.latency_ms = 300;
    api.emulator.add_fault(slow);
    let started = Instant::now();
    assert_eq!(api.call("GET", "/v1/check-statuses", None).await.0, 200);
    assert!(started.elapsed() >= Duration::from_millis(300));

    api.emulator.add_fault(
        Fault::new(FaultKind::Hang)
            .path("/v1/check-statuses")
            .times(1),
    );
    let hung = api
        .http
        .get(&url)
        .bearer_auth(api.emulator.api_key())
        .timeout(Duration::from_millis(300))
        .send()
        .await;
    assert!(hung.expect_err("no answer").is_timeout());
    assert_eq!(api.call("GET", "/v1/check-statuses", None).await.0, 200);
}

#[tokio::test]
async fn admin_api_records_requests_without_the_key_and_resets() {
    let api = start().await;
    api.call(
        "POST",
        "/v1/status-pages/services",
        Some(json!({"name": "x"})),
    )
    .await;
    api.ping(TOKEN).await;
    let (_, requests) = api
        .raw("GET", &api.admin("/requests?listener=api"), None)
        .await;
    let request = &requests[0];
    assert_eq!(
        (request["method"].as_str(), request["path"].as_str()),
        (Some("POST"), Some("/v1/status-pages/services"))
    );
    assert_eq!(request["status"], 200);
    assert_eq!(
        request["headers"]["x-service-account"],
        api.emulator.account()
    );
    assert!(request["headers"].get("authorization").is_none());
    assert!(!requests.to_string().contains(api.emulator.api_key()));
    let (_, pings) = api.raw("GET", &api.admin("/pings"), None).await;
    assert_eq!(pings[0]["headers"]["origin"], "backup-host");
    assert_eq!(api.emulator.pings().len(), 1);

    let (status, created) = api.raw("POST", &api.admin("/heartbeat-checks"),
        Some(json!({"name": "made by a test", "heartbeat": {"period": 30, "periodUnit": "seconds", "grace": 0, "graceUnit": "seconds"}}))).await;
    assert_eq!(status, 201, "{created}");
    let url = created["heartbeat"]["pingUrl"].as_str().expect("ping url");
    assert_eq!(api.raw("GET", url, None).await.0, 200);
    let (status, err) = api
        .raw(
            "POST",
            &api.admin("/heartbeat-checks"),
            Some(json!({"name": "x", "heartbeat": {"period": 1}})),
        )
        .await;
    assert_eq!(
        (status, err["message"].as_str()),
        (400, Some("\"heartbeat.periodUnit\" is required"))
    );
    let (status, err) = api
        .raw(
            "POST",
            &api.admin("/fixtures"),
            Some(json!({"snippets": [{"name": "no id"}]})),
        )
        .await;
    assert_eq!(
        (status, err["message"].as_str()),
        (
            400,
            Some("fixtures: snippets[0] \"no id\": \"id\" is required")
        )
    );

    assert_eq!(api.raw("POST", &api.admin("/reset"), None).await.0, 204);
    assert!(api.emulator.requests().is_empty());
    assert_eq!(
        api.call("GET", "/v1/check-statuses", None)
            .await
            .1
            .as_array()
            .map(Vec::len),
        Some(2)
    );
}

#[tokio::test]
async fn bad_fixtures_name_the_item() {
    let doc = r#"{"checkGroups": [{"id": 1, "name": "g", "locations": ["moon"]}]}"#;
    let fixtures = Fixtures::parse(doc, "test").expect("shape is fine");
    let options = EmulatorOptions {
        fixtures,
        ..EmulatorOptions::default()
    };
    let err = Emulator::start(options)
        .await
        .expect_err("invalid location");
    assert!(
        err.to_string()
            .starts_with("fixtures: checkGroups[0] 1: \"locations[0]\" must be one of"),
        "{err}"
    );
}

#[tokio::test]
async fn answers_match_the_openapi_document() {
    let api = start().await;
    let (status, doc) = api
        .raw(
            "GET",
            &format!("{}/openapi.json", api.emulator.base_url()),
            None,
        )
        .await;
    assert_eq!(status, 200);
    let checker = schema::Checker::new(doc);
    let event_id = api.ping(TOKEN).await.1["eventId"]
        .as_str()
        .expect("id")
        .to_owned();
    let calls: Vec<(&str, String, Option<Value>)> = vec![
        (
            "POST",
            "/v1/status-pages/services".into(),
            Some(json!({"name": "n"})),
        ),
        ("GET", "/v1/status-pages/services?limit=1".into(), None),
        (
            "GET",
            "/v1/maintenance-windows/7/maintenances/m-2026-12-01".into(),
            None,
        ),
        (
            "PATCH",
            "/v1/maintenance-windows/7/maintenances/m-2026-12-01".into(),
            Some(json!({"endsAt": "2026-12-05"})),
        ),
        (
            "PUT",
            format!("/v1/checks/heartbeat/{CHECK}"),
            Some(heartbeat_body(1, "days")),
        ),
        (
            "PUT",
            format!("/v1/checks/heartbeat/{CHECK}"),
            Some(json!({})),
        ),
        (
            "PUT",
            "/v1/checks/heartbeat/nope".into(),
            Some(heartbeat_body(1, "days")),
        ),
        (
            "GET",
            format!("/v1/checks/heartbeats/{CHECK}/events/{event_id}"),
            None,
        ),
        ("GET", format!("/v1/checks/heartbeats/{CHECK}/events"), None),
        ("GET", "/v1/checks/heartbeats/nope/events".into(), None),
        ("GET", "/v1/check-groups/42".into(), None),
        ("GET", "/v1/check-groups/43".into(), None),
        (
            "PUT",
            "/v2/check-groups/42".into(),
            Some(json!({"name": "g"})),
        ),
        (
            "PUT",
            "/v2/check-groups/42".into(),
            Some(json!({"concurrency": 1})),
        ),
        ("GET", "/v1/check-statuses".into(), None),
        (
            "GET",
            format!("/v1/test-session-error-groups/projects/{PROJECT}"),
            None,
        ),
        (
            "GET",
            "/v1/test-session-error-groups/projects/not-a-uuid".into(),
            None,
        ),
        ("DELETE", "/v1/snippets/11".into(), None),
        ("DELETE", "/v1/snippets/11".into(), None),
    ];
    for (method, path, body) in calls {
        let (status, answer) = api.call(method, &path, body).await;
        checker
            .check(method, &path, status, &answer)
            .unwrap_or_else(|err| panic!("{method} {path} -> {status}: {err}\n{answer}"));
    }
    let url = format!("{}/v1/check-statuses", api.emulator.base_url());
    let (status, answer) = api.raw("GET", &url, None).await;
    checker
        .check("GET", "/v1/check-statuses", status, &answer)
        .expect("401 documented");
    let (status, answer) = api.ping(TOKEN).await;
    checker
        .check("GET", &format!("/{TOKEN}"), status, &answer)
        .expect("ping answer documented");
    let ping_url = format!("{}/{TOKEN}", api.emulator.ping_url());
    let (status, answer) = api.raw("PUT", &ping_url, None).await;
    checker
        .check("PUT", &format!("/{TOKEN}"), status, &answer)
        .expect("405 documented");
    checker
        .check("GET", "/v1/check-groups/1", 200, &json!({"name": "no id"}))
        .expect_err("the checker must notice a missing required field");
}
