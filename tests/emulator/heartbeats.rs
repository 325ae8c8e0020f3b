//! Heartbeat checks end to end: PUT merge semantics, pings turning into events and
//! statistics, and the emulator's clock driving the service's timer (a silent check fails
//! again every period + grace, a ping a few seconds late is `LATE`, a new period restarts the
//! timer when saved).

use super::*;

#[tokio::test]
async fn put_merges_into_the_definition_and_keeps_the_token() {
    let api = start().await;
    let path = format!("/v1/checks/heartbeat/{CHECK}");
    let mut body = heartbeat_body(2, "hours");
    body["muted"] = json!(true);
    body["description"] = json!("nightly");
    let (status, check) = api.call("PUT", &path, Some(body)).await;
    assert_eq!(status, 200, "{check}");
    assert_eq!(check["heartbeat"]["pingToken"], TOKEN);
    assert_eq!(
        check["heartbeat"]["pingUrl"],
        format!("{}/{TOKEN}", api.emulator.ping_url())
    );
    assert_eq!(check["heartbeat"]["period"], 2);
    assert_eq!(check["muted"], true);
    assert_eq!(check["checkType"], "HEARTBEAT");
    // A PUT that sends only `activated`: every other field keeps its value (the service's PUT
    // acts like PATCH), `script` is not required.
    let (status, check) = api
        .call("PUT", &path, Some(json!({"activated": true})))
        .await;
    assert_eq!(status, 200, "{check}");
    assert_eq!(check["muted"], true);
    assert_eq!(check["tags"], json!(["a"]));
    assert_eq!(check["description"], "nightly");
    assert_eq!(check["name"], "nightly backup");
    assert_eq!(check["heartbeat"]["period"], 2);
    assert_eq!(check["heartbeat"]["periodUnit"], "hours");
    assert_eq!(check["heartbeat"]["pingToken"], TOKEN);
    // An explicit null clears a nullable field; `[]` clears the tags.
    let (_, check) = api
        .call(
            "PUT",
            &path,
            Some(json!({"description": null, "tags": [], "muted": false})),
        )
        .await;
    assert_eq!(check["description"], Value::Null);
    assert_eq!(check["tags"], json!([]));
    assert_eq!(check["muted"], false);
    assert_eq!(check["heartbeat"]["period"], 2, "the heartbeat is kept");
    // null on a field that is not nullable is refused, and nothing changes.
    let (status, err) = api.call("PUT", &path, Some(json!({"muted": null}))).await;
    assert_eq!(
        (status, err["message"].as_str()),
        (400, Some("\"muted\" must not be null"))
    );
    // A sent token replaces the old one: the old URL stops working.
    let fresh = crate::util::emulator::token_for("fresh");
    let mut body = heartbeat_body(1, "hours");
    body["heartbeat"]["pingToken"] = json!(fresh);
    let (_, check) = api.call("PUT", &path, Some(body)).await;
    assert_eq!(check["heartbeat"]["pingToken"], fresh.as_str());
    assert_eq!(api.ping(TOKEN).await.0, 404);
    assert_eq!(api.ping(&fresh).await.0, 200);
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
    assert_eq!(events[0]["events"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        events[0]["stats"]["last24Hours"]["totalEntitiesCurrentPeriod"],
        2
    );
    assert_eq!(
        events[0]["events"][0]["source"], "https://ci.example.com/job/1",
        "newest first"
    );
    assert_eq!(events[0]["events"][1]["id"], event_id.as_str());

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
    assert_eq!(
        events[0]["events"].as_array().map(Vec::len),
        Some(2),
        "bot pings are not recorded as events"
    );

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
    // Period 1 day + grace 30 minutes, moved through the admin API: the check is marked
    // failing a few seconds (the LATE window, 5 s) after the end of the grace.
    let (status, clock) = api
        .raw(
            "POST",
            &api.admin("/clock/advance"),
            Some(json!({"seconds": 86400 + 1800 + 6})),
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
    assert_eq!(events[0]["events"][0]["state"], "FAILING");
    let failing_id = events[0]["events"][0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
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
    // The alert restarted the timer at the failing mark: a ping now is judged against it.
    let (_, recovery) = api.ping(TOKEN).await;
    assert_eq!(recovery["state"], "EARLY", "{recovery}");
    let statuses = api.call("GET", "/v1/check-statuses", None).await.1;
    assert_eq!(
        statuses[0]["hasFailures"], false,
        "a ping recovers the check"
    );
    // A ping in the few seconds after the grace, before the failing mark, is LATE.
    api.emulator
        .advance_clock(std::time::Duration::from_secs(86400 + 1800 + 2));
    let (_, late) = api.ping(TOKEN).await;
    assert_eq!(late["state"], "LATE", "{late}");
    assert_eq!(
        failing_events(&api).await.len(),
        1,
        "a LATE ping is no failure"
    );
}

/// The timestamps of the check's `FAILING` events, newest first.
async fn failing_events(api: &Api) -> Vec<String> {
    // The whole history, whatever window the list applies by default.
    let path = format!("/v1/checks/heartbeats/{CHECK}/events?startTime=2000-01-01");
    let (_, events) = api.call("GET", &path, None).await;
    let list = events[0]["events"].as_array().cloned().unwrap_or_default();
    list.iter()
        .filter(|e| e["state"] == "FAILING")
        .map(|e| e["timestamp"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn parse_time(text: &Value) -> chrono::DateTime<chrono::Utc> {
    let text = text.as_str().expect("a timestamp");
    chrono::DateTime::parse_from_rfc3339(text)
        .expect("RFC 3339")
        .with_timezone(&chrono::Utc)
}

#[tokio::test]
async fn silence_fails_again_every_period_and_grace_after_an_alert() {
    let api = start().await;
    assert_eq!(api.ping(TOKEN).await.0, 200);
    let day = 86_400 + 1_800 + 5;
    api.emulator
        .advance_clock(std::time::Duration::from_secs(3 * day + 1));
    let failing = failing_events(&api).await;
    assert_eq!(
        failing.len(),
        3,
        "one alert per restarted timer: {failing:?}"
    );
    let times: Vec<_> = failing.iter().map(|t| parse_time(&json!(t))).collect();
    for pair in times.windows(2) {
        assert_eq!(
            pair[0] - pair[1],
            chrono::Duration::seconds(day as i64),
            "each deadline is the previous mark + period + grace: {failing:?}"
        );
    }
}

#[tokio::test]
async fn a_new_period_restarts_the_timer_when_the_check_is_saved() {
    let api = start().await;
    assert_eq!(api.ping(TOKEN).await.0, 200);
    let hours = |n: u64| std::time::Duration::from_secs(n * 3600);
    api.emulator.advance_clock(hours(23));
    let path = format!("/v1/checks/heartbeat/{CHECK}");
    let (status, saved) = api
        .call("PUT", &path, Some(heartbeat_body(2, "days")))
        .await;
    assert_eq!(status, 200, "{saved}");
    let saved_at = parse_time(&saved["updated_at"]);
    // The old deadline (1 day + 30 min after the ping) passes without a failure ...
    api.emulator.advance_clock(hours(25));
    assert!(
        failing_events(&api).await.is_empty(),
        "the save restarted the timer"
    );
    // ... the new one is the save + 2 days + 10 minutes.
    api.emulator.advance_clock(hours(24));
    let failing = failing_events(&api).await;
    assert_eq!(failing.len(), 1, "{failing:?}");
    let expected = saved_at + chrono::Duration::minutes(2 * 24 * 60 + 10);
    assert_eq!(parse_time(&json!(failing[0])), expected);
    // The same period again (in other units) restarts nothing.
    let (_, pinged) = api.ping(TOKEN).await;
    assert_eq!(pinged["state"], "EARLY", "{pinged}");
    api.emulator.advance_clock(hours(40));
    let (status, _) = api
        .call("PUT", &path, Some(heartbeat_body(48, "hours")))
        .await;
    assert_eq!(status, 200);
    api.emulator.advance_clock(hours(9));
    assert_eq!(
        failing_events(&api).await.len(),
        2,
        "48 hours is 2 days: no restart"
    );
}
