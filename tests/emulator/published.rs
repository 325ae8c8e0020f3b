//! What fuzzing the emulator against the service's published schema found
//! (`scripts/schemathesis.sh --published`): inputs that schema allows and the emulator refused
//! (`null` for a heartbeat check's `request`, `sslCheckDomain` and an environment variable's
//! `value`; a group's `url` and `basicAuth`; `locked` on a header; an assertion's `property` and
//! `regex`), and a group's assertions, which were echoed with any `source` and `comparison`
//! although the schema's answers hold only values of its sets; and fixtures that would seed
//! answers it forbids. Every answer is also checked against the emulator's own document.

use super::*;

/// The emulator's own OpenAPI document, as it serves it.
async fn own_document(api: &Api) -> schema::Checker {
    let url = format!("{}/openapi.json", api.emulator.base_url());
    let (status, doc) = api.raw("GET", &url, None).await;
    assert_eq!(status, 200, "{doc}");
    schema::Checker::new(doc)
}

#[tokio::test]
async fn nulls_and_fields_the_published_schema_allows_are_taken() {
    let api = start().await;
    let checker = own_document(&api).await;
    let check_path = format!("/v1/checks/heartbeat/{CHECK}");
    let body = json!({"request": null, "sslCheckDomain": null,
                      "environmentVariables": [{"key": "TOKEN", "value": null}]});
    let (status, check) = api.call("PUT", &check_path, Some(body)).await;
    assert_eq!(status, 200, "{check}");
    checker
        .check("PUT", &check_path, status, &check)
        .unwrap_or_else(|e| panic!("{e}"));

    let group = json!({"name": "g", "apiCheckDefaults": {
        "url": null, "basicAuth": null,
        "headers": [{"key": "Cache-Control", "value": "no-store", "locked": true}],
        "queryParameters": [{"key": "page", "value": "1", "locked": false}],
        "assertions": [{"source": "JSON_BODY", "comparison": "EQUALS", "property": "$.ok",
                        "target": "true", "regex": null}]}});
    let (status, put) = api.call("PUT", "/v2/check-groups/42", Some(group)).await;
    assert_eq!(status, 200, "{put}");
    let (status, read) = api.call("GET", "/v1/check-groups/42", None).await;
    assert_eq!(status, 200, "{read}");
    for (method, path, answer) in [
        ("PUT", "/v2/check-groups/42", &put),
        ("GET", "/v1/check-groups/42", &read),
    ] {
        checker
            .check(method, path, 200, answer)
            .unwrap_or_else(|e| panic!("{e}"));
        let defaults = &answer["apiCheckDefaults"];
        assert_eq!(defaults["url"], Value::Null, "{answer}");
        assert_eq!(defaults["basicAuth"], Value::Null, "{answer}");
        assert_eq!(defaults["headers"][0]["locked"], true, "{answer}");
        assert_eq!(
            defaults["assertions"][0],
            json!({"source": "JSON_BODY", "comparison": "EQUALS", "property": "$.ok",
                   "target": "true", "regex": null}),
            "{answer}"
        );
    }
}

#[tokio::test]
async fn group_assertions_keep_to_the_published_value_sets() {
    let api = start().await;
    let (_, before) = api.call("GET", "/v1/check-groups/42", None).await;
    for (field, assertion, allowed) in [
        (
            "source",
            json!({"source": "BOGUS", "comparison": "EQUALS"}),
            "STATUS_CODE, JSON_BODY, HEADERS, TEXT_BODY, RESPONSE_TIME",
        ),
        (
            "comparison",
            json!({"source": "STATUS_CODE", "comparison": "ROUGHLY"}),
            "EQUALS, NOT_EQUALS, HAS_KEY, NOT_HAS_KEY, HAS_VALUE, NOT_HAS_VALUE, IS_EMPTY, \
             NOT_EMPTY, GREATER_THAN, LESS_THAN, CONTAINS, NOT_CONTAINS, IS_NULL, NOT_NULL",
        ),
    ] {
        let body = json!({"name": "g", "apiCheckDefaults": {"assertions": [assertion]}});
        let (status, err) = api.call("PUT", "/v2/check-groups/42", Some(body)).await;
        assert_eq!(status, 400, "{err}");
        assert_eq!(
            err["message"],
            format!("\"apiCheckDefaults.assertions[0].{field}\" must be one of [{allowed}]")
        );
    }
    let (_, after) = api.call("GET", "/v1/check-groups/42", None).await;
    assert_eq!(after, before, "a refused PUT changed the group");
}

#[tokio::test]
async fn a_check_intent_keeps_to_the_published_shape() {
    let api = start().await;
    let path = format!("/v1/checks/heartbeat/{CHECK}");
    let before = api
        .emulator
        .heartbeat_check(CHECK)
        .expect("the fixture check");
    let many: Vec<String> = (0..21).map(|i| format!("outcome {i}")).collect();
    for (intent, message) in [
        (json!({}), "\"intent.goal\" is required".to_owned()),
        (
            json!({"goal": "backups", "extra": 1}),
            "\"intent.extra\" is not allowed".to_owned(),
        ),
        (
            json!({"goal": "backups", "mustPreserve": [""]}),
            "\"intent.mustPreserve[0]\" is not allowed to be empty".to_owned(),
        ),
        (
            json!({"goal": "backups", "requiredOutcomes": many}),
            "\"intent.requiredOutcomes\" must contain less than or equal to 20 items".to_owned(),
        ),
    ] {
        let (status, err) = api
            .call("PUT", &path, Some(json!({"intent": intent})))
            .await;
        assert_eq!(
            (status, err["message"].as_str()),
            (400, Some(message.as_str())),
            "{err}"
        );
    }
    assert_eq!(api.emulator.heartbeat_check(CHECK).as_ref(), Some(&before));
    let intent = json!({"goal": "backups run nightly", "requiredOutcomes": ["a dump exists"],
                        "mustPreserve": ["the schedule"]});
    let (status, check) = api
        .call("PUT", &path, Some(json!({"intent": intent})))
        .await;
    assert_eq!(status, 200, "{check}");
    assert_eq!(check["intent"], intent);
    own_document(&api)
        .await
        .check("PUT", &path, status, &check)
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Fixtures cannot seed answers the published schema forbids: a maintenance update without the
/// fields it requires, or a webhook alert channel with a method outside its set.
#[tokio::test]
async fn fixtures_cannot_seed_answers_the_published_schema_forbids() {
    for (doc, expected) in [
        (
            r#"{"maintenances": [{"id": "m1", "maintenanceWindowId": 7, "startsAt": "2026-12-01",
                "endsAt": "2026-12-02", "updates": [{"id": "u1"}]}]}"#,
            "\"updates[0].maintenanceWindowId\" is required",
        ),
        (
            r#"{"heartbeatChecks": [{"id": "7b3c1a52-0d5e-4f7a-9c1e-2f6d8b4a1009", "name": "c",
                "alertChannels": {"webhook": [{"url": "https://hooks.example", "method": "BREW"}]}}]}"#,
            "\"alertChannels.webhook[0].method\" must be one of [GET, POST, PUT, HEAD, DELETE, PATCH]",
        ),
    ] {
        let err = fixtures_refused(doc).await;
        assert!(err.contains(expected), "{err}");
    }
}
