//! The typed client against the emulator: every operation round-trips through
//! `heartbeat_agent::api::ApiClient` and the in-process emulator (and `heartbeat-agent api`
//! through the binary), every error status the spec lists is produced by the emulator and
//! parsed into the right typed error, and no error or log output holds the API key.

mod cli;
mod faults;

use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDate;
use heartbeat_agent::api::model::*;
use heartbeat_agent::api::{ApiClient, ApiClientConfig, ApiError, Quota, RateLimiter};
use heartbeat_agent::emulator::{EmulatorHandle, EmulatorOptions, Fixtures, RateLimit};
use heartbeat_agent::net::RetryPolicy;
use heartbeat_agent::redact::Secret;
use serde_json::{json, Value};

use crate::util::emulator::{example_fixtures, start_with};

/// A key no test output may contain.
const KEY: &str = "sk_roundtrip_5e3a9d71c2";
/// The first heartbeat check of `config/emulator-fixtures.json` and its token.
const CHECK: &str = "7b3c1a52-0d5e-4f7a-9c1e-2f6d8b4a1001";
const TOKEN: &str = crate::util::emulator::FIXTURE_TOKEN;
/// The project of the example error groups.
const PROJECT: &str = "5f0c2f4e-8a51-4c7b-9f0a-3c2d1e0b9a77";

fn options(rate_limit: RateLimit) -> EmulatorOptions {
    EmulatorOptions {
        api_key: KEY.to_owned(),
        fixtures: example_fixtures(),
        rate_limit,
        ..EmulatorOptions::default()
    }
}

async fn emulator() -> EmulatorHandle {
    start_with(options(RateLimit::default())).await
}

/// A client of `emulator` with `key`, its own limiter and the given retries.
fn client_with(emulator: &EmulatorHandle, key: &str, retry: RetryPolicy) -> ApiClient {
    let mut config = ApiClientConfig::new(emulator.base_url(), Secret::new(key));
    config.account_id = Some(emulator.account().to_owned());
    config.retry = retry;
    config.request_timeout = Duration::from_secs(10);
    config.rate_limiter = Arc::new(RateLimiter::new(Quota::DEFAULT));
    ApiClient::new(config).expect("client builds")
}

fn client(emulator: &EmulatorHandle) -> ApiClient {
    client_with(emulator, KEY, RetryPolicy::none())
}

fn date(text: &str) -> NaiveDate {
    NaiveDate::parse_from_str(text, "%Y-%m-%d").expect("a date")
}

fn heartbeat_update(name: &str, period: u64, unit: TimeUnit) -> HeartbeatCheckUpdate {
    HeartbeatCheckUpdate {
        name: Some(name.into()),
        tags: Some(vec!["roundtrip".into()]),
        heartbeat: Some(HeartbeatSpec {
            period,
            period_unit: unit,
            grace: 10,
            grace_unit: TimeUnit::Minutes,
            ping_token: None,
        }),
        ..HeartbeatCheckUpdate::default()
    }
}

/// Pings `url` as the agent does; returns the answer's JSON (it carries the event id).
async fn ping(url: &str) -> Value {
    let answer = reqwest::Client::new()
        .get(url)
        .header("user-agent", "heartbeat-agent/roundtrip")
        .header("origin", "backup-host")
        .send()
        .await
        .expect("ping answered");
    assert_eq!(answer.status().as_u16(), 200);
    answer.json().await.expect("JSON ping answer")
}

/// The status, error and message of an API error, or a panic naming what came instead.
fn api_error(err: &ApiError) -> (u16, &str, &str, Option<&Value>) {
    match err {
        ApiError::Api {
            status,
            error,
            message,
            attributes,
            ..
        } => (*status, error, message, attributes.as_deref()),
        ApiError::RateLimited {
            error,
            message,
            attributes,
            ..
        } => (429, error, message, attributes.as_deref()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn assert_no_key(err: &ApiError) {
    let text = format!("{err} {err:?}");
    assert!(!text.contains(KEY), "the key leaked: {text}");
}

#[tokio::test]
async fn every_operation_round_trips_through_the_typed_client() {
    let emulator = emulator().await;
    let extra = Fixtures::parse(r#"{"checkStatuses": [null]}"#, "test").expect("valid");
    emulator.load_fixtures(&extra).expect("loads");
    let api = client(&emulator);

    let created = api
        .create_status_page_service(&CreateStatusPageService {
            name: "Billing".into(),
        })
        .await
        .expect("create service");
    assert_eq!(
        (created.name.as_str(), created.account_id.as_str()),
        ("Billing", emulator.account())
    );
    assert_eq!(created.created_at, emulator.now().date_naive());
    assert_eq!(created.updated_at, None);
    let page = api
        .list_status_page_services(&ListStatusPageServices {
            limit: Some(2),
            ..ListStatusPageServices::default()
        })
        .await
        .expect("list services");
    assert_eq!(page.length, 2);
    assert_eq!(page.next_id.as_deref(), Some(created.id.as_str()));

    let maintenance = api
        .get_maintenance(7, "m-2026-12-01")
        .await
        .expect("get maintenance");
    assert_eq!(
        (maintenance.starts_at, maintenance.ends_at),
        (date("2026-12-01"), date("2026-12-02"))
    );
    let dates = MaintenanceDates {
        starts_at: Some(date("2026-12-03")),
        ends_at: Some(date("2026-12-05")),
    };
    let moved = api
        .update_maintenance_dates(7, "m-2026-12-01", &dates)
        .await
        .expect("patch dates");
    assert_eq!(moved.starts_at, date("2026-12-03"));
    let update = moved.updates.last().expect("an update entry");
    assert_eq!(update.previous_starts_at, Some(date("2026-12-01")));
    assert_eq!(update.previous_ends_at, Some(date("2026-12-02")));
    assert_eq!(update.date_adjustments.as_ref(), Some(&dates));

    let mut body = heartbeat_update("nightly backup", 1, TimeUnit::Days);
    body.description = Some(Some("round trip".into()));
    body.alert_settings = Some(AlertSettings {
        escalation_type: Some("RUN_BASED".into()),
        reminders: Some(Reminders {
            amount: Some(2),
            interval: Some(5),
        }),
        ..AlertSettings::default()
    });
    let check = api
        .update_heartbeat_check(CHECK, &body, Some(false))
        .await
        .expect("put heartbeat");
    assert_eq!(check.id, CHECK);
    assert_eq!(check.check_type, Some(CheckType::Heartbeat));
    assert_eq!(check.heartbeat.period, Some(1));
    assert_eq!(check.heartbeat.period_unit, Some(TimeUnit::Days));
    assert_eq!(
        check.heartbeat.ping_token.as_deref(),
        Some(TOKEN),
        "token kept"
    );
    let ping_url = check.heartbeat.ping_url.clone().expect("pingUrl");
    assert_eq!(ping_url, format!("{}/{TOKEN}", emulator.ping_url()));
    assert_eq!(check.alert_settings, body.alert_settings);
    assert!(check.updated_at.is_some());

    let event_id = ping(&ping_url).await["eventId"]
        .as_str()
        .expect("eventId")
        .to_owned();
    let event = api
        .get_heartbeat_event(CHECK, &event_id)
        .await
        .expect("get event");
    assert_eq!(event.event.id, event_id);
    assert_eq!(event.event.state, Some(EventState::Received));
    let lists = api
        .list_heartbeat_events(CHECK, &EventsWindow::default())
        .await
        .expect("events list");
    assert_eq!(lists.len(), 1);
    assert_eq!(lists[0].events[0].id, event_id);

    let group = api.get_check_group(42).await.expect("get group");
    assert_eq!((group.id, group.concurrency), (42, 2));
    let Some(RetryStrategySetting::Strategy(strategy)) = &group.retry_strategy else {
        panic!("the fixture group has a strategy object: {group:?}");
    };
    assert_eq!(strategy.max_retries, Some(2));
    let update = CheckGroupUpdate {
        name: "batch".into(),
        locations: Some(vec![Location::EuWest1]),
        retry_strategy: Some(RetryStrategySetting::Fallback),
        api_check_defaults: Some(ApiCheckDefaults {
            url: Some("https://api.example.com".into()),
            headers: vec![KeyValue {
                key: "x".into(),
                value: "y".into(),
            }],
            ..ApiCheckDefaults::default()
        }),
        ..CheckGroupUpdate::default()
    };
    let group = api
        .update_check_group(42, &update, Some(true))
        .await
        .expect("put group");
    assert_eq!(group.retry_strategy, Some(RetryStrategySetting::Fallback));
    assert_eq!(group.concurrency, 3, "fields not sent take their defaults");
    assert_eq!(group.locations, vec![Location::EuWest1]);
    assert_eq!(group.api_check_defaults.headers.len(), 1);
    assert!(group.updated_at.is_some());

    let statuses = api.list_check_statuses().await.expect("statuses");
    assert_eq!(statuses.len(), 3, "two checks and the fixture's null");
    assert!(statuses[2].is_none());
    let first = statuses[0].as_ref().expect("a status");
    assert_eq!(
        (first.check_id.as_deref(), first.has_failures),
        (Some(CHECK), false)
    );

    let groups = api.list_error_groups(PROJECT).await.expect("error groups");
    assert_eq!(groups[0].cleaned_error_message, "Timeout <n>ms exceeded");
    assert_eq!(groups[0].project_id.as_deref(), Some(PROJECT));
    assert!(groups[0].last_seen > groups[0].first_seen);

    api.delete_snippet(11).await.expect("delete snippet");
    let gone = api.delete_snippet(11).await.expect_err("deleted twice");
    assert!(gone.is_not_found(), "{gone}");
    for request in emulator.requests() {
        let content_type = request.headers.get("content-type").map(String::as_str);
        let expected = (!request.body.is_empty()).then_some("application/json");
        assert_eq!(
            content_type, expected,
            "{} {}",
            request.method, request.path
        );
    }
    let operations: Vec<String> = emulator
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(
        operations.len(),
        14,
        "one request per call (13 API calls and a ping), no retries: {operations:?}"
    );
}

#[tokio::test]
async fn each_listed_error_status_becomes_its_typed_error() {
    let emulator = emulator().await;
    let wrong_key = client_with(&emulator, "sk_wrong_key_0000", RetryPolicy::none());
    let err = wrong_key.list_check_statuses().await.expect_err("401");
    let (status, error, message, attributes) = api_error(&err);
    assert_eq!((status, error, message), (401, "Unauthorized", "Bad Token"));
    assert!(attributes.is_some_and(Value::is_object), "{err:?}");
    assert!(err.is_auth());
    assert!(!err.to_string().contains("sk_wrong_key_0000"), "{err}");

    let mut config = ApiClientConfig::new(emulator.base_url(), Secret::new(KEY));
    config.account_id = Some("another-account".into());
    config.retry = RetryPolicy::none();
    let other_account = ApiClient::new(config).expect("client");
    let err = other_account.get_check_group(42).await.expect_err("403");
    assert_eq!(api_error(&err), (403, "Forbidden", "Forbidden", None));

    let api = client(&emulator);
    for err in [
        api.get_check_group(999).await.expect_err("404 group"),
        api.get_maintenance(7, "nope")
            .await
            .expect_err("404 maint."),
        api.get_heartbeat_event(CHECK, "nope")
            .await
            .expect_err("404"),
        api.list_heartbeat_events("nope", &EventsWindow::default())
            .await
            .expect_err("404"),
    ] {
        assert_eq!(api_error(&err), (404, "Not Found", "Not Found", None));
        assert_no_key(&err);
    }

    let bad_group = CheckGroupUpdate {
        name: "g".into(),
        concurrency: Some(0),
        ..CheckGroupUpdate::default()
    };
    let err = api
        .update_check_group(42, &bad_group, None)
        .await
        .expect_err("400");
    let (status, error, message, _) = api_error(&err);
    assert_eq!((status, error), (400, "Bad Request"));
    assert!(message.starts_with("\"concurrency\""), "{message}");
    let mut long = heartbeat_update("x", 1, TimeUnit::Hours);
    long.description = Some(Some("d".repeat(501)));
    let err = api
        .update_heartbeat_check(CHECK, &long, None)
        .await
        .expect_err("400");
    assert!(api_error(&err).2.starts_with("\"description\""), "{err}");
    let short = heartbeat_update("x", 29, TimeUnit::Seconds);
    let err = api
        .update_heartbeat_check(CHECK, &short, None)
        .await
        .expect_err("400");
    assert!(
        api_error(&err).2.starts_with("\"heartbeat.period\""),
        "{err}"
    );
    let err = api
        .list_status_page_services(&ListStatusPageServices {
            limit: Some(101),
            ..ListStatusPageServices::default()
        })
        .await
        .expect_err("400");
    assert!(api_error(&err).2.starts_with("\"limit\""), "{err}");
    assert_no_key(&err);

    // 400, 401, 403 and 404 are never retried, even by a client that retries.
    let retrying = |key: &str| {
        let policy = RetryPolicy {
            max_attempts: 4,
            base: Duration::from_millis(1),
            cap: Duration::from_millis(2),
            budget: Duration::from_secs(5),
        };
        client_with(&emulator, key, policy)
    };
    let before = emulator.requests().len();
    retrying(KEY).get_check_group(999).await.expect_err("404");
    retrying("sk_wrong_key_0000")
        .get_check_group(42)
        .await
        .expect_err("401");
    retrying(KEY)
        .update_check_group(42, &bad_group, None)
        .await
        .expect_err("400");
    assert_eq!(emulator.requests().len() - before, 3, "one attempt each");
}

#[tokio::test]
async fn pagination_walks_every_page() {
    let emulator = emulator().await;
    let services: Vec<Value> = (0..45)
        .map(|i| json!({"name": format!("s{i:02}")}))
        .collect();
    let more = Fixtures::parse(&json!({"statusPageServices": services}).to_string(), "test")
        .expect("valid");
    emulator.load_fixtures(&more).expect("loads");
    let api = client(&emulator);
    let all = api
        .list_all_status_page_services(Some(20))
        .await
        .expect("every page");
    let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
    let mut expected = vec!["API".to_owned(), "Dashboard".to_owned()];
    expected.extend((0..45).map(|i| format!("s{i:02}")));
    assert_eq!(names, expected);
    let pages = emulator
        .requests()
        .iter()
        .filter(|r| r.path == "/v1/status-pages/services")
        .count();
    assert_eq!(pages, 3, "47 services in pages of 20");
}

#[tokio::test]
async fn ping_flow_events_failing_state_and_unknown_states() {
    let emulator = emulator().await;
    let api = client(&emulator);
    let added = emulator
        .add_heartbeat_check(&json!({"id": "hb-flow", "name": "flow"}))
        .expect("added");
    assert_eq!(added["id"], "hb-flow");
    let check = api
        .update_heartbeat_check(
            "hb-flow",
            &heartbeat_update("flow", 1, TimeUnit::Hours),
            None,
        )
        .await
        .expect("put");
    let answer = ping(check.heartbeat.ping_url.as_deref().expect("pingUrl")).await;
    let event_id = answer["eventId"].as_str().expect("eventId");
    let event = api
        .get_heartbeat_event("hb-flow", event_id)
        .await
        .expect("event");
    assert_eq!(event.event.state, Some(EventState::Received));
    assert_eq!(event.event.source.as_deref(), Some("backup-host"));
    assert_eq!(
        event.event.user_agent.as_deref(),
        Some("heartbeat-agent/roundtrip")
    );
    let day = event.stats.last_24_hours.as_ref().expect("stats");
    assert_eq!(day.total_entities_current_period, 1);
    assert_eq!(day.success_ratio.current_period, Some(100.0));

    // Period 1 hour + grace 10 minutes pass without a ping, and the few seconds (5) between
    // the end of the grace and the failing mark.
    emulator.advance_clock(Duration::from_secs(3600 + 600 + 6));
    let statuses = api.list_check_statuses().await.expect("statuses");
    let status = statuses
        .iter()
        .flatten()
        .find(|s| s.check_id.as_deref() == Some("hb-flow"))
        .expect("the check's status");
    assert!(status.has_failures);
    let list = api
        .list_heartbeat_events("hb-flow", &EventsWindow::default())
        .await
        .expect("events");
    let failing = &list[0].events[0];
    assert_eq!(failing.state, Some(EventState::Failing));
    let fetched = api
        .get_heartbeat_event("hb-flow", &failing.id)
        .await
        .expect("failing event");
    assert_eq!(fetched.event.state, Some(EventState::Failing));
    assert_eq!(
        fetched
            .stats
            .last_24_hours
            .as_ref()
            .expect("stats")
            .success_ratio
            .current_period,
        Some(50.0)
    );

    // Through the admin API, as a test in another language would.
    let admin = format!(
        "{}/_emulator/heartbeat-checks/hb-flow/events",
        emulator.base_url()
    );
    let answer = reqwest::Client::new()
        .post(&admin)
        .json(&json!({"state": "PAUSED", "source": "admin"}))
        .send()
        .await
        .expect("admin answered");
    assert_eq!(answer.status().as_u16(), 201);
    let injected: Value = answer.json().await.expect("the event");
    let id = injected["id"].as_str().expect("id");
    let unknown = api.get_heartbeat_event("hb-flow", id).await.expect("event");
    assert_eq!(
        unknown.event.state,
        Some(EventState::Other("PAUSED".into()))
    );
    assert_eq!(
        unknown.event.state.as_ref().map(EventState::as_str),
        Some("PAUSED")
    );
}
