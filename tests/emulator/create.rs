//! The check operations the real service publishes outside the spec: `POST
//! /v1/checks/heartbeat` (201, 402 at the account's check limit), `GET /v1/checks` (tag and type
//! filters, `page`/`limit`) and `DELETE /v1/checks/{id}`, as the emulator serves them.

use super::*;

async fn start_limited(max_checks: Option<usize>) -> Api {
    start_options(EmulatorOptions {
        fixtures: example_fixtures(),
        max_checks,
        ..EmulatorOptions::default()
    })
    .await
}

fn create_body(name: &str, tags: &[&str]) -> Value {
    json!({"name": name, "tags": tags, "id": "ignored-read-only",
           "heartbeat": {"period": 1, "periodUnit": "hours", "grace": 5, "graceUnit": "minutes"}})
}

#[tokio::test]
async fn a_created_check_answers_201_pings_and_is_listed_by_its_tag() {
    let api = start_limited(None).await;
    let (status, created) = api
        .call(
            "POST",
            "/v1/checks/heartbeat?autoAssignAlerts=false",
            Some(create_body("made", &["heartbeat-agent:host-a/made"])),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().expect("an id").to_owned();
    assert_ne!(id, "ignored-read-only", "read-only keys are ignored");
    assert_eq!(created["checkType"], "HEARTBEAT");
    assert_eq!(created["heartbeat"]["period"], 1);
    let token = created["heartbeat"]["pingToken"].as_str().expect("token");
    let (status, _) = api.ping(token).await;
    assert_eq!(status, 200, "the new check's token pings");

    let tag = "/v1/checks?tag=heartbeat-agent%3Ahost-a%2Fmade&checkType=HEARTBEAT";
    let (status, listed) = api.call("GET", tag, None).await;
    assert_eq!(status, 200, "{listed}");
    let ids: Vec<&str> = listed
        .as_array()
        .expect("an array")
        .iter()
        .map(|c| c["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, [id.as_str()], "only the tagged check");
    let (_, other_type) = api.call("GET", "/v1/checks?checkType=API", None).await;
    assert_eq!(other_type, json!([]));
    let (_, all) = api.call("GET", "/v1/checks", None).await;
    assert_eq!(
        all.as_array().expect("array").len(),
        3,
        "2 fixtures + new: {all}"
    );

    let (status, _) = api.call("DELETE", &format!("/v1/checks/{id}"), None).await;
    assert_eq!(status, 204);
    let (status, _) = api.call("DELETE", &format!("/v1/checks/{id}"), None).await;
    assert_eq!(status, 404, "deleted once");
    let (_, listed) = api.call("GET", tag, None).await;
    assert_eq!(listed, json!([]));
}

#[tokio::test]
async fn the_checks_list_pages_oldest_first() {
    let api = start_limited(None).await;
    for i in 0..5 {
        let body = create_body(&format!("c{i}"), &["paged"]);
        let (status, answer) = api.call("POST", "/v1/checks/heartbeat", Some(body)).await;
        assert_eq!(status, 201, "{answer}");
        api.emulator.advance_clock(Duration::from_secs(1));
    }
    let mut names = Vec::new();
    for page in 1..=3 {
        let path = format!("/v1/checks?tag=paged&tag=other&limit=2&page={page}");
        let (status, listed) = api.call("GET", &path, None).await;
        assert_eq!(status, 200, "{listed}");
        let listed = listed.as_array().expect("array").clone();
        assert!(listed.len() <= 2);
        names.extend(
            listed
                .iter()
                .map(|c| c["name"].as_str().expect("name").to_owned()),
        );
    }
    assert_eq!(names, ["c0", "c1", "c2", "c3", "c4"]);
    for bad in ["limit=0", "limit=101", "page=0", "checkType=NOPE"] {
        let (status, answer) = api.call("GET", &format!("/v1/checks?{bad}"), None).await;
        assert_eq!(status, 400, "{bad}: {answer}");
    }
}

#[tokio::test]
async fn creating_refuses_bad_bodies_and_answers_402_at_the_limit() {
    let api = start_limited(Some(3)).await;
    let no_heartbeat = json!({"name": "x"});
    let (status, answer) = api
        .call("POST", "/v1/checks/heartbeat", Some(no_heartbeat))
        .await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer["message"]
        .as_str()
        .expect("message")
        .contains("heartbeat"));
    let empty_tag = create_body("x", &[""]);
    let (status, answer) = api
        .call("POST", "/v1/checks/heartbeat", Some(empty_tag))
        .await;
    assert_eq!(status, 400, "{answer}");
    let (status, answer) = api
        .call(
            "POST",
            "/v1/checks/heartbeat",
            Some(create_body("second", &[])),
        )
        .await;
    assert_eq!(
        status, 201,
        "the 2 fixture checks and this one make 3: {answer}"
    );
    let (status, answer) = api
        .call(
            "POST",
            "/v1/checks/heartbeat",
            Some(create_body("third", &[])),
        )
        .await;
    assert_eq!(status, 402, "{answer}");
    assert_eq!(answer["error"], "Payment Required");
    let (status, _) = api
        .call("PUT", "/v1/checks/heartbeat", Some(json!({})))
        .await;
    assert_eq!(status, 405, "the create path takes POST only");
}
