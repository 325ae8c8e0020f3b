//! The shapes the service takes and answers, as its published schema and official clients show
//! them: read-only fields ignored, UUID ping tokens, the incident trigger's required severity,
//! alert settings from the published value sets, the events list's `limit` and time window, and
//! the documented bot list; and where the published schema differs from the seed spec (a
//! group's `alertSettings` never `null`, a check's `created_at` a date-time).

use super::*;

const SERVICE: &str = "123e4567-e89b-12d3-a456-426614174000";

fn check_path() -> String {
    format!("/v1/checks/heartbeat/{CHECK}")
}

/// A refused PUT left the check as it was.
fn unchanged(api: &Api, before: &Value) {
    assert_eq!(
        api.emulator.heartbeat_check(CHECK).as_ref(),
        Some(before),
        "a refused PUT changed the check"
    );
}

#[tokio::test]
async fn read_only_and_unmodelled_fields_are_ignored() {
    let api = start().await;
    let (status, check) = api
        .call(
            "PUT",
            &check_path(),
            Some(json!({
                "id": "someone-else", "created_at": "2020-01-01", "updated_at": null,
                "createdAt": "2020-01-01T00:00:00Z", "alertChannels": {"email": []},
                "somethingNew": {"x": 1}, "checkType": "HEARTBEAT", "script": null,
                "aiAutoRepairEnabled": false, "intent": null,
                "heartbeat": {"period": 1, "periodUnit": "days", "grace": 1, "graceUnit": "hours",
                              "pingToken": null, "pingUrl": "https://elsewhere/x"}})),
        )
        .await;
    assert_eq!(status, 200, "{check}");
    assert_eq!(check["id"], CHECK);
    assert_ne!(check["created_at"], "2020-01-01");
    assert!(check.get("somethingNew").is_none() && check.get("createdAt").is_none());
    assert_eq!(
        check["heartbeat"]["pingToken"], TOKEN,
        "null keeps the token"
    );
    assert_eq!(
        check["heartbeat"]["pingUrl"],
        format!("{}/{TOKEN}", api.emulator.ping_url())
    );
    let before = api.emulator.heartbeat_check(CHECK).expect("exists");
    let (status, err) = api
        .call("PUT", &check_path(), Some(json!({"checkType": "API"})))
        .await;
    assert_eq!(status, 400);
    assert_eq!(err["message"], "\"checkType\" must be one of [HEARTBEAT]");
    unchanged(&api, &before);
}

#[tokio::test]
async fn ping_tokens_are_uuids_and_empty_or_null_keep_the_token() {
    let api = start().await;
    let hb = |token: Value| {
        json!({"heartbeat": {"period": 1, "periodUnit": "days", "grace": 1, "graceUnit": "hours",
                             "pingToken": token}})
    };
    for keep in [json!(""), Value::Null] {
        let (status, check) = api.call("PUT", &check_path(), Some(hb(keep))).await;
        assert_eq!(status, 200, "{check}");
        assert_eq!(check["heartbeat"]["pingToken"], TOKEN);
    }
    let before = api.emulator.heartbeat_check(CHECK).expect("exists");
    for bad in [
        json!("nightly-backup-token"),
        json!("123e4567-e89b-12d3-a456"),
    ] {
        let (status, err) = api.call("PUT", &check_path(), Some(hb(bad))).await;
        assert_eq!(status, 400);
        assert_eq!(
            err["message"],
            "\"heartbeat.pingToken\" must be a valid GUID"
        );
        unchanged(&api, &before);
    }
    assert_eq!(api.ping(TOKEN).await.0, 200, "the old token still pings");
    // A token the emulator hands out is a UUID (the second fixture check has none set).
    let statuses = api.call("GET", "/v1/check-statuses", None).await.1;
    let second = statuses[1]["checkId"].as_str().expect("id").to_owned();
    let (_, check) = api
        .call(
            "PUT",
            &format!("/v1/checks/heartbeat/{second}"),
            Some(json!({"activated": true})),
        )
        .await;
    let token = check["heartbeat"]["pingToken"].as_str().expect("token");
    assert_eq!(token.len(), 36, "{token}");
    assert!(
        token.split('-').map(str::len).eq([8, 4, 4, 4, 12]),
        "{token}"
    );
    // A fixture with a token that is not a UUID is refused too.
    let err = api
        .emulator
        .add_heartbeat_check(&json!({"name": "x", "heartbeat": {"period": 1,
            "periodUnit": "days", "grace": 1, "graceUnit": "hours", "pingToken": "x-token"}}))
        .expect_err("not a UUID");
    assert_eq!(err.message, "\"heartbeat.pingToken\" must be a valid GUID");
}

#[tokio::test]
async fn trigger_incident_requires_a_severity_and_alert_settings_the_published_values() {
    let api = start().await;
    let incident = json!({"serviceId": SERVICE, "severity": "MAJOR", "name": "backup down",
                          "description": "no backup", "notifySubscribers": true});
    let (status, check) = api
        .call(
            "PUT",
            &check_path(),
            Some(json!({"triggerIncident": incident,
                        "alertSettings": {"escalationType": "TIME_BASED",
                                          "timeBasedEscalation": {"minutesFailingThreshold": 10},
                                          "reminders": {"amount": 100000, "interval": 15}}})),
        )
        .await;
    assert_eq!(status, 200, "{check}");
    assert_eq!(check["triggerIncident"], incident);
    assert_eq!(
        check["alertSettings"]["timeBasedEscalation"]["minutesFailingThreshold"],
        10
    );
    let before = api.emulator.heartbeat_check(CHECK).expect("exists");
    let mut no_severity = incident.clone();
    no_severity
        .as_object_mut()
        .expect("object")
        .remove("severity");
    let refused = [
        (
            json!({"triggerIncident": no_severity}),
            "\"triggerIncident.severity\" is required",
        ),
        (
            json!({"alertSettings": {"reminders": {"amount": 10}}}),
            "\"alertSettings.reminders.amount\" must be one of [0, 1, 2, 3, 4, 5, 100000]",
        ),
        (
            json!({"alertSettings": {"runBasedEscalation": {"failedRunThreshold": 6}}}),
            "\"alertSettings.runBasedEscalation.failedRunThreshold\" must be one of [1, 2, 3, 4, 5]",
        ),
    ];
    for (body, message) in refused {
        let (status, err) = api.call("PUT", &check_path(), Some(body)).await;
        assert_eq!((status, err["message"].as_str()), (400, Some(message)));
        unchanged(&api, &before);
    }
    let (_, check) = api
        .call("PUT", &check_path(), Some(json!({"triggerIncident": null})))
        .await;
    assert_eq!(check["triggerIncident"], Value::Null, "null clears it");
}

#[tokio::test]
async fn events_list_takes_a_limit_and_a_window_of_the_last_day_by_default() {
    let api = start().await;
    for _ in 0..12 {
        assert_eq!(api.ping(TOKEN).await.0, 200);
    }
    let api = &api;
    let t0 = api.emulator.now();
    let list = |query: &'static str| {
        let path = format!("/v1/checks/heartbeats/{CHECK}/events{query}");
        async move { api.call("GET", &path, None).await }
    };
    let (status, events) = list("").await;
    assert_eq!(status, 200, "{events}");
    assert_eq!(events[0]["events"].as_array().map(Vec::len), Some(10));
    assert_eq!(
        events[0]["stats"]["last24Hours"]["totalEntitiesCurrentPeriod"],
        12
    );
    assert_eq!(
        list("?limit=3").await.1[0]["events"]
            .as_array()
            .map(Vec::len),
        Some(3)
    );
    for (query, message) in [
        ("?limit=11", "\"limit\" must be less than or equal to 10"),
        ("?limit=0", "\"limit\" must be an integer from 1 to 10"),
        ("?limit=ten", "\"limit\" must be a number"),
        (
            "?startTime=yesterday",
            "\"startTime\" must be a date (YYYY-MM-DD) or an ISO 8601 date-time",
        ),
        (
            "?startTime=2026-01-02&endTime=2026-01-01",
            "\"endTime\" must not be before startTime",
        ),
    ] {
        let (status, err) = list(query).await;
        assert_eq!(
            (status, err["message"].as_str()),
            (400, Some(message)),
            "{query}"
        );
    }
    // A day and ten minutes later (still within the grace) the default window holds nothing; a
    // wider one holds them all.
    api.emulator
        .advance_clock(Duration::from_secs(24 * 3600 + 600));
    assert_eq!(list("").await.1[0]["events"], json!([]));
    let since = (api.emulator.now() - chrono::Duration::days(2)).to_rfc3339();
    let path = format!(
        "/v1/checks/heartbeats/{CHECK}/events?limit=10&startTime={}",
        since.replace('+', "%2B")
    );
    let (_, events) = api.call("GET", &path, None).await;
    assert_eq!(events[0]["events"].as_array().map(Vec::len), Some(10));
    // A date covers its whole day.
    let day = t0.date_naive();
    let path =
        format!("/v1/checks/heartbeats/{CHECK}/events?startTime={day}&endTime={day}&limit=1");
    let (_, events) = api.call("GET", &path, None).await;
    let first = chrono::DateTime::parse_from_rfc3339(
        events[0]["events"][0]["timestamp"]
            .as_str()
            .expect("an event"),
    )
    .expect("a timestamp");
    assert_eq!(first.date_naive(), day);
}

#[tokio::test]
async fn only_the_documented_bots_are_ignored() {
    let api = start().await;
    let api = &api;
    let ping_as = |agent: &'static str| {
        let url = format!("{}/{TOKEN}", api.emulator.ping_url());
        let request = api.http.get(url).header("user-agent", agent);
        async move { read(request.send().await.expect("answered")).await.1 }
    };
    for bot in [
        "TelegramBot (like TwitterBot)",
        "LinkedInBot/1.0",
        "WhatsApp/2.23",
    ] {
        assert_eq!(ping_as(bot).await["ignored"], true, "{bot}");
    }
    for agent in [
        "Dependabot/1.0",
        "my-backup-bot/1.0",
        "facebookexternalhit/1.1",
    ] {
        let answer = ping_as(agent).await;
        assert!(answer["eventId"].is_string(), "{agent}: {answer}");
    }
    assert_eq!(api.emulator.pings().len(), 6);
    let path = format!("/v1/checks/heartbeats/{CHECK}/events");
    let events = api.call("GET", &path, None).await.1;
    assert_eq!(events[0]["events"].as_array().map(Vec::len), Some(3));
}

/// Where the published schema differs from the seed spec, answers follow the published one: a
/// group `PUT` with `alertSettings: null` is read back with the schema's default settings (its
/// answers never hold `null` there), a heartbeat check's `created_at` is a date-time in the
/// `PUT` answer and the check read (`GET /v1/checks/{id}`), a check status's a date.
#[tokio::test]
async fn answers_follow_the_published_schema_where_the_seed_spec_differs() {
    let api = start().await;
    let body = json!({"name": "g", "alertSettings": null});
    let (status, put) = api.call("PUT", "/v2/check-groups/42", Some(body)).await;
    assert_eq!(status, 200, "{put}");
    let (status, group) = api.call("GET", "/v1/check-groups/42", None).await;
    assert_eq!(status, 200, "{group}");
    for answer in [&put, &group] {
        assert_eq!(
            answer["alertSettings"],
            json!({"escalationType": "RUN_BASED", "runBasedEscalation": {"failedRunThreshold": 1},
                   "reminders": {"amount": 0, "interval": 5},
                   "parallelRunFailureThreshold": {"enabled": false, "percentage": 10}}),
            "{answer}"
        );
    }
    let (status, put) = api
        .call("PUT", &check_path(), Some(heartbeat_body(1, "days")))
        .await;
    assert_eq!(status, 200, "{put}");
    let (status, read) = api.call("GET", &format!("/v1/checks/{CHECK}"), None).await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read, put, "the read answers the check the PUT answered");
    let created = put["created_at"].as_str().expect("created_at");
    assert!(
        chrono::DateTime::parse_from_rfc3339(created).is_ok(),
        "created_at {created:?} is not a date-time"
    );
    let (_, statuses) = api.call("GET", "/v1/check-statuses", None).await;
    let status_of = statuses
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["checkId"] == CHECK)
        .expect("the check's status");
    assert_eq!(status_of["created_at"], created[..10], "{status_of}");
    let (status, missing) = api.call("GET", "/v1/checks/nope", None).await;
    assert_eq!((status, &missing["error"]), (404, &json!("Not Found")));
}
