//! The admin API (faults, recorded requests, fixtures, reset) and the OpenAPI document checked
//! against real answers.

use super::*;

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
    let err = fixtures_refused(doc).await;
    assert!(
        err.starts_with("fixtures: checkGroups[0] 1: \"locations[0]\" must be one of"),
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
        ("GET", format!("/v1/checks/{CHECK}"), None),
        ("GET", "/v1/checks/nope".into(), None),
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
        (
            "PUT",
            "/v2/check-groups/42".into(),
            Some(json!({"name": "g", "alertSettings": null})),
        ),
        ("GET", "/v1/check-groups/42".into(), None),
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
        (
            "POST",
            "/v1/checks/heartbeat".into(),
            Some(json!({"name": "made", "tags": ["t"],
                        "heartbeat": {"period": 1, "periodUnit": "days", "grace": 1, "graceUnit": "hours"}})),
        ),
        (
            "POST",
            "/v1/checks/heartbeat".into(),
            Some(json!({"name": "no heartbeat"})),
        ),
        ("GET", "/v1/checks?tag=t&checkType=HEARTBEAT".into(), None),
        ("GET", "/v1/checks?limit=0".into(), None),
        ("DELETE", "/v1/checks/nope".into(), None),
        ("DELETE", format!("/v1/checks/{CHECK}"), None),
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
    let forbidden = api
        .http
        .get(&url)
        .bearer_auth(api.emulator.api_key())
        .header("x-service-account", "someone-else")
        .send()
        .await
        .expect("answered");
    let (status, answer) = read(forbidden).await;
    checker
        .check("GET", "/v1/check-statuses", status, &answer)
        .expect("403 documented");
    let (status, answer) = api
        .raw(
            "GET",
            &format!("{}/openapi.json", api.emulator.base_url()),
            None,
        )
        .await;
    checker
        .check("GET", "/openapi.json", status, &answer)
        .expect("the document documents itself");
    let (status, answer) = api.ping(TOKEN).await;
    checker
        .check("GET", &format!("/{TOKEN}"), status, &answer)
        .expect("ping answer documented");
    let ping_url = format!("{}/{TOKEN}", api.emulator.ping_url());
    for method in ["POST", "PUT", "PATCH", "DELETE"] {
        let (status, answer) = api.raw(method, &ping_url, None).await;
        checker
            .check(method, &format!("/{TOKEN}"), status, &answer)
            .unwrap_or_else(|err| panic!("{method} ping -> {status}: {err}"));
    }
    let limited = start_with("1/60".parse().expect("valid")).await;
    limited.call("GET", "/v1/check-statuses", None).await;
    let (status, answer) = limited.call("GET", "/v1/check-statuses", None).await;
    assert_eq!(status, 429);
    checker
        .check("GET", "/v1/check-statuses", status, &answer)
        .expect("429 documented");
    assert_eq!(
        checker.uncovered(),
        Vec::<String>::new(),
        "operations never checked"
    );
    checker
        .check("GET", "/v1/check-groups/1", 200, &json!({"name": "no id"}))
        .expect_err("the checker must notice a missing required field");
}
