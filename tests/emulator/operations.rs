//! Every API operation against the in-process emulator: happy paths with the example fixtures,
//! the spec's error bodies, the rate limit, validation and pagination.

use super::*;

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
        (json!({"name": ""}), "\"name\" is not allowed to be empty"),
        (with("script", json!(7)), "\"script\" must be a string"),
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
        (
            with(
                "heartbeat",
                json!({"period": 1, "periodUnit": "days", "grace": 1}),
            ),
            "\"heartbeat.graceUnit\" is required",
        ),
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
async fn a_body_that_is_not_json_by_its_content_type_gets_415() {
    let api = start().await;
    let url = format!("{}/v1/status-pages/services", api.emulator.base_url());
    let send = |content_type: Option<&'static str>| {
        let mut request = api
            .http
            .post(&url)
            .bearer_auth(api.emulator.api_key())
            .body(r#"{"name": "x"}"#);
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        async move { read(request.send().await.expect("answered")).await }
    };
    let (status, body) = send(Some("text/plain")).await;
    assert_eq!(
        (status, body),
        (
            415,
            json!({"statusCode": 415, "error": "Unsupported Media Type",
                   "message": "Unsupported Media Type"})
        )
    );
    assert_eq!(send(Some("application/json; charset=utf-8")).await.0, 200);
    assert_eq!(send(None).await.0, 200, "no header: read as JSON");
}
