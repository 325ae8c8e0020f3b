//! Integration tests for `api`: the typed client and `heartbeat-agent api ...` against a real
//! HTTP server (axum on 127.0.0.1:0) that records every request and answers from a script.

use std::sync::Arc;
use std::time::Duration;

use heartbeat_agent::api::model::*;
use heartbeat_agent::api::{ApiClient, ApiClientConfig, ApiError, Operation, Quota, RateLimiter};
use heartbeat_agent::net::RetryPolicy;
use heartbeat_agent::redact::Secret;
use serde_json::{json, Value};

mod cli;
mod replies;
mod retries;

use crate::util::http::{FakeServer, Reply, Request};
use replies::{authorization, error_reply, reply};

pub(crate) const KEY: &str = "sk_test_9f8e7d6c5b4a";
pub(crate) const ACCOUNT: &str = "acc-1234";

/// A client of `server` with fast retries and its own rate limiter.
fn client(server: &FakeServer, retry: RetryPolicy) -> ApiClient {
    let mut config = ApiClientConfig::new(server.url(""), Secret::new(KEY));
    config.account_id = Some(ACCOUNT.into());
    config.retry = retry;
    config.request_timeout = Duration::from_secs(5);
    config.rate_limiter = Arc::new(RateLimiter::new(Quota::DEFAULT));
    ApiClient::new(config).unwrap()
}

fn fast_retries(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        base: Duration::from_millis(10),
        cap: Duration::from_millis(50),
        budget: Duration::from_secs(10),
    }
}

fn service(n: usize) -> Value {
    json!({"id": format!("svc-{n}"), "name": format!("Service {n}"), "accountId": ACCOUNT,
           "created_at": "2026-01-02", "updated_at": null})
}

fn maintenance() -> Value {
    json!({"id": "m1", "maintenanceWindowId": 5, "startsAt": "2026-06-01",
           "endsAt": "2026-06-02", "status": "scheduled", "created_at": "2026-05-01",
           "updated_at": "2026-05-02", "updates": []})
}

fn check_group() -> Value {
    json!({"id": 7, "name": "group", "activated": true, "concurrency": 3,
           "apiCheckDefaults": {}, "retryStrategy": "FALLBACK", "created_at": "2026-01-01"})
}

/// A canned successful answer for each operation's path.
pub(crate) fn canned(request: &Request) -> Reply {
    let path = request.path();
    let body = match (request.method.as_str(), path) {
        ("POST", "/v1/status-pages/services") => service(1),
        ("GET", "/v1/status-pages/services") => json!({"length": 1, "entries": [service(1)],
                                                       "nextId": null}),
        (_, p) if p.starts_with("/v1/maintenance-windows/") => maintenance(),
        ("PUT", p) if p.starts_with("/v1/checks/heartbeat/") => json!({
            "id": "hb-1", "name": "backup", "checkType": "HEARTBEAT",
            "heartbeat": {"period": 1, "periodUnit": "days", "grace": 1, "graceUnit": "hours",
                          "pingToken": "tok", "pingUrl": "http://ping.invalid/tok"}}),
        ("GET", "/v1/checks/hb-1") => json!({
            "id": "hb-1", "name": "backup", "checkType": "HEARTBEAT",
            "heartbeat": {"period": 1, "periodUnit": "days", "grace": 1, "graceUnit": "hours",
                          "pingToken": "tok", "pingUrl": "http://ping.invalid/tok"}}),
        ("GET", p) if p.starts_with("/v1/checks/heartbeats/") => json!({
            "event": {"id": "ev-1", "state": "SNOOZED", "timestamp": "2026-01-01T00:00:00Z",
                      "source": "host-a", "userAgent": "heartbeat-agent/0"},
            "stats": {"last24Hours": {"successRatio": {"previousPeriod": 1, "currentPeriod": 1},
                                      "totalEntitiesCurrentPeriod": 1},
                      "last7Days": {"successRatio": {"previousPeriod": 1, "currentPeriod": 1},
                                    "totalEntitiesCurrentPeriod": 3}}}),
        (_, p) if p.starts_with("/v1/check-groups/") || p.starts_with("/v2/check-groups/") => {
            check_group()
        }
        ("GET", "/v1/check-statuses") => json!([null, {"name": "a", "checkId": "c1",
                                                        "hasFailures": true}]),
        ("GET", p) if p.starts_with("/v1/test-session-error-groups/projects/") => json!([{
            "id": "g1", "environments": null, "errorHash": "h", "rawErrorMessage": null,
            "cleanedErrorMessage": "boom", "firstSeen": "2026-01-01T00:00:00Z",
            "lastSeen": "2026-01-02T00:00:00Z", "archivedUntilNextEvent": false,
            "pwtMetadata": null}]),
        ("DELETE", p) if p.starts_with("/v1/snippets/") => {
            return Reply {
                status: 204,
                headers: vec![],
                body: String::new(),
                delay: Duration::ZERO,
            }
        }
        _ => return error_reply(404, "Not Found", "Not Found", None),
    };
    reply(200, body)
}

#[tokio::test]
async fn every_operation_sends_its_method_path_and_auth_headers() {
    let server = FakeServer::scripted(|request, _| canned(request));
    let api = client(&server, RetryPolicy::none());
    let date = |d: &str| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").unwrap();

    let created = api
        .create_status_page_service(&CreateStatusPageService { name: "API".into() })
        .await
        .unwrap();
    assert_eq!(created.id, "svc-1");
    let page = api
        .list_status_page_services(&ListStatusPageServices {
            limit: Some(5),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.entries.len(), 1);
    assert_eq!(api.get_maintenance(5, "m 1/x").await.unwrap().id, "m1");
    let dates = MaintenanceDates {
        starts_at: Some(date("2026-07-01")),
        ends_at: Some(date("2026-07-03")),
    };
    api.update_maintenance_dates(5, "m1", &dates).await.unwrap();
    let update = HeartbeatCheckUpdate {
        name: Some("backup".into()),
        heartbeat: Some(HeartbeatSpec {
            period: 1,
            period_unit: TimeUnit::Days,
            grace: 1,
            grace_unit: TimeUnit::Hours,
            ping_token: None,
        }),
        ..Default::default()
    };
    let check = api
        .update_heartbeat_check("hb-1", &update, Some(false))
        .await
        .unwrap();
    assert_eq!(
        check.heartbeat.ping_url.as_deref(),
        Some("http://ping.invalid/tok")
    );
    let event = api.get_heartbeat_event("hb-1", "ev-1").await.unwrap();
    assert_eq!(event.event.state, Some(EventState::Other("SNOOZED".into())));
    assert_eq!(api.get_check_group(7).await.unwrap().id, 7);
    let group_update = CheckGroupUpdate {
        name: "group".into(),
        retry_strategy: Some(RetryStrategySetting::Fallback),
        ..Default::default()
    };
    let group = api
        .update_check_group(7, &group_update, None)
        .await
        .unwrap();
    assert_eq!(group.retry_strategy, Some(RetryStrategySetting::Fallback));
    let statuses = api.list_check_statuses().await.unwrap();
    assert!(statuses[0].is_none() && statuses[1].as_ref().unwrap().has_failures);
    assert_eq!(api.list_error_groups("p-1").await.unwrap()[0].id, "g1");
    api.delete_snippet(3).await.unwrap();

    let seen = server.requests();
    let targets: Vec<String> = seen
        .iter()
        .map(|s| format!("{} {}?{}", s.method, s.path(), s.query()))
        .collect();
    assert_eq!(
        targets,
        [
            "POST /v1/status-pages/services?",
            "GET /v1/status-pages/services?limit=5",
            "GET /v1/maintenance-windows/5/maintenances/m%201%2Fx?",
            "PATCH /v1/maintenance-windows/5/maintenances/m1?",
            "PUT /v1/checks/heartbeat/hb-1?autoAssignAlerts=false",
            "GET /v1/checks/heartbeats/hb-1/events/ev-1?",
            "GET /v1/check-groups/7?",
            "PUT /v2/check-groups/7?",
            "GET /v1/check-statuses?",
            "GET /v1/test-session-error-groups/projects/p-1?",
            "DELETE /v1/snippets/3?",
        ]
    );
    for request in &seen {
        assert_eq!(
            request.header("authorization"),
            Some(&*format!("Bearer {KEY}"))
        );
        assert_eq!(request.header("x-service-account"), Some(ACCOUNT));
        assert!(request
            .header("user-agent")
            .unwrap_or_default()
            .starts_with("heartbeat-agent/"));
    }
    let bodies: Vec<Value> = seen
        .iter()
        .filter(|s| !s.body.is_empty())
        .map(|s| serde_json::from_str(&s.text()).unwrap())
        .collect();
    assert_eq!(bodies[0], json!({"name": "API"}));
    assert_eq!(
        bodies[1],
        json!({"startsAt": "2026-07-01", "endsAt": "2026-07-03"})
    );
    assert_eq!(bodies[2]["heartbeat"]["periodUnit"], "days");
    assert_eq!(
        bodies[3],
        json!({"name": "group", "retryStrategy": "FALLBACK"})
    );
    assert_eq!(seen[0].header("content-type"), Some("application/json"));
}

#[tokio::test]
async fn listed_error_statuses_become_typed_errors() {
    let server = FakeServer::scripted(|request, _| match request.path() {
        "/v1/check-groups/401" => error_reply(
            401,
            "Unauthorized",
            "Bad Token",
            Some(json!({"reason": "expired"})),
        ),
        "/v1/check-groups/403" => error_reply(403, "Forbidden", "Forbidden", None),
        "/v1/check-groups/404" => error_reply(404, "Not Found", "Not Found", None),
        _ => error_reply(
            429,
            "Too Many Requests",
            "Too Many Requests",
            Some(json!({"limit": 600})),
        ),
    });
    let api = client(&server, RetryPolicy::none());
    match api.get_check_group(401).await.unwrap_err() {
        ApiError::Api {
            status: 401,
            error,
            message,
            attributes,
            request,
        } => {
            assert_eq!(
                (error.as_str(), message.as_str()),
                ("Unauthorized", "Bad Token")
            );
            assert_eq!(attributes.as_deref(), Some(&json!({"reason": "expired"})));
            assert_eq!(request.target, "GET /v1/check-groups/401");
        }
        other => panic!("expected a 401 api error, got {other:?}"),
    }
    let forbidden = api.get_check_group(403).await.unwrap_err();
    assert!(forbidden.is_auth());
    assert_eq!(
        forbidden.to_string(),
        "api error 403 Forbidden: Forbidden (GET /v1/check-groups/403)"
    );
    let missing = api.get_check_group(404).await.unwrap_err();
    assert!(missing.is_not_found());
    assert!(matches!(
        missing,
        ApiError::Api {
            attributes: None,
            ..
        }
    ));
    match api.get_check_group(429).await.unwrap_err() {
        ApiError::RateLimited {
            error, attributes, ..
        } => {
            assert_eq!(error, "Too Many Requests");
            assert_eq!(attributes.as_deref(), Some(&json!({"limit": 600})));
        }
        other => panic!("expected rate limited, got {other:?}"),
    }
    assert_eq!(
        server.requests().len(),
        4,
        "no retries with RetryPolicy::none"
    );
}

#[tokio::test]
async fn the_key_never_appears_in_errors() {
    // A hostile server echoes the credentials into every part of its error answers.
    let server = FakeServer::scripted(|request, _| {
        let echo = authorization(request);
        match request.path() {
            "/v1/check-groups/1" => error_reply(401, &echo, &echo, Some(json!({"got": echo}))),
            "/v1/check-groups/2" => Reply {
                status: 502,
                headers: vec![],
                body: format!("<html>proxy saw {echo}</html>"),
                delay: Duration::ZERO,
            },
            _ => reply(200, json!({"id": echo})),
        }
    });
    let api = client(&server, RetryPolicy::none());
    let mut texts = vec![format!("{api:?}")];
    for id in [1, 2, 3] {
        let err = api.get_check_group(id).await.unwrap_err();
        texts.push(format!("{err} / {err:?}"));
    }
    for text in &texts {
        assert!(!text.contains(KEY), "key leaked: {text}");
    }
    assert!(texts[2].contains("502") && texts[2].contains("proxy saw Bearer [redacted]"));
}

#[tokio::test]
async fn malformed_answers_are_decode_errors_naming_the_operation() {
    let server = FakeServer::scripted(|request, _| match request.path() {
        "/v1/check-groups/1" => Reply {
            status: 200,
            headers: vec![],
            body: "{not json".into(),
            delay: Duration::ZERO,
        },
        _ => reply(200, json!({"id": "seven", "name": "g"})),
    });
    let api = client(&server, fast_retries(3));
    for id in [1, 2] {
        match api.get_check_group(id).await.unwrap_err() {
            ApiError::Decode {
                operation, status, ..
            } => {
                assert_eq!(operation, Operation::GetCheckGroup);
                assert_eq!(status, 200);
            }
            other => panic!("expected a decode error, got {other:?}"),
        }
    }
    let err = api.get_check_group(2).await.unwrap_err().to_string();
    assert!(
        err.starts_with("unexpected answer to get_check_group (200): invalid type"),
        "{err}"
    );
    assert_eq!(server.requests().len(), 3, "decode errors are not retried");
}

#[tokio::test]
async fn an_error_body_that_is_not_json_keeps_a_short_excerpt() {
    let server = FakeServer::scripted(|_, _| Reply {
        status: 404,
        headers: vec![],
        body: format!("<html>\n<h1>no such page</h1>{}</html>", "x".repeat(5000)),
        delay: Duration::ZERO,
    });
    let api = client(&server, RetryPolicy::none());
    match api.delete_snippet(9).await.unwrap_err() {
        ApiError::Api {
            status: 404,
            error,
            message,
            ..
        } => {
            assert_eq!(error, "Not Found");
            assert!(
                message.starts_with("<html> <h1>no such page</h1>"),
                "{message}"
            );
            assert!(message.chars().count() < 300);
        }
        other => panic!("expected a 404, got {other:?}"),
    }
}

#[tokio::test]
async fn list_all_follows_next_id_and_a_base_path_prefix_is_kept() {
    let server = FakeServer::scripted(|request, _| {
        assert_eq!(request.path(), "/prefix/v1/status-pages/services");
        match request.query() {
            "limit=2" => json_page(&[1, 2], Some("c2")),
            "limit=2&nextId=c2" => json_page(&[3, 4], Some("c4")),
            _ => json_page(&[5], None),
        }
    });
    let mut config = ApiClientConfig::new(server.url("/prefix/"), Secret::new(KEY));
    config.rate_limiter = Arc::new(RateLimiter::new(Quota::DEFAULT));
    let api = ApiClient::new(config).unwrap();
    let all = api.list_all_status_page_services(Some(2)).await.unwrap();
    let ids: Vec<&str> = all.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["svc-1", "svc-2", "svc-3", "svc-4", "svc-5"]);
    assert_eq!(server.requests().len(), 3);
}

/// A page of services `ns` with cursor `next`.
pub(crate) fn json_page(ns: &[usize], next: Option<&str>) -> Reply {
    let entries: Vec<Value> = ns.iter().map(|n| service(*n)).collect();
    reply(
        200,
        json!({"length": entries.len(), "entries": entries, "nextId": next}),
    )
}

#[test]
fn a_bad_base_url_is_a_setup_error() {
    for url in ["ftp://example.com", "not a url", "mailto:a@b"] {
        let err = ApiClient::new(ApiClientConfig::new(url, Secret::new(KEY))).unwrap_err();
        assert!(matches!(err, ApiError::Setup(_)), "{url}: {err:?}");
        assert!(err.to_string().contains("not an http(s) URL"), "{err}");
    }
}

/// The service's published schema requires only `event.id`, and lets `last24Hours` and
/// `last7Days` be `null`: the client decodes every such answer, and the events list sends the
/// window it asks for.
#[tokio::test]
async fn the_client_decodes_the_nullable_shapes_the_service_may_send() {
    let server = FakeServer::scripted(|request, _| match request.path() {
        "/v1/checks/heartbeats/hb-1/events" => reply(
            200,
            json!([{"events": [{"id": "e1"}, {"id": "e2", "state": null, "timestamp": null,
                                "source": null, "userAgent": null}],
                    "stats": {"last24Hours": null, "last7Days": null}}]),
        ),
        "/v1/checks/heartbeats/hb-1/events/e1" => reply(
            200,
            json!({"event": {"id": "e1"},
                   "stats": {"last24Hours": {"successRatio": {"currentPeriod": 99.5}},
                             "last7Days": null}}),
        ),
        "/v1/checks/heartbeats/hb-1/events/e2" => reply(200, json!({"event": {"id": "e2"}})),
        _ => error_reply(404, "Not Found", "Not Found", None),
    });
    let api = client(&server, RetryPolicy::none());
    let start = chrono::DateTime::parse_from_rfc3339("2026-11-24T10:00:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    let lists = api
        .list_heartbeat_events("hb-1", &EventsWindow::newest_since(start))
        .await
        .expect("a list with bare events and null statistics decodes");
    assert_eq!(lists[0].events.len(), 2);
    assert_eq!(lists[0].events[1].state, None);
    let stats = lists[0].stats.as_ref().expect("stats");
    assert_eq!((&stats.last_24_hours, &stats.last_7_days), (&None, &None));
    let seen = server.requests();
    assert_eq!(
        seen[0].query(),
        "limit=1&startTime=2026-11-24T10%3A00%3A00.000Z"
    );
    let event = api.get_heartbeat_event("hb-1", "e1").await.unwrap();
    assert_eq!(event.event.timestamp, None);
    let day = event.stats.last_24_hours.expect("present");
    assert_eq!(day.success_ratio.current_period, Some(99.5));
    assert_eq!(day.success_ratio.previous_period, None);
    assert_eq!(day.total_entities_current_period, 0);
    let bare = api.get_heartbeat_event("hb-1", "e2").await.unwrap();
    assert_eq!(bare.stats, HeartbeatStats::default());
    assert_eq!(
        api.list_heartbeat_events("hb-1", &EventsWindow::default())
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(server.requests()[3].query(), "", "no window: nothing sent");
}
