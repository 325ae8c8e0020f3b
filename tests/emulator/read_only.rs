//! What real clients send back on update: the answer of a read, read-only fields included, sent
//! as the update of every update operation the emulator serves (the heartbeat check `PUT`, the
//! check group `PUT`, the maintenance `PATCH`), to the emulator binary. The service ignores the
//! read-only fields (docs/emulator.md, "Read-only fields"); unknown fields stay refused where
//! they were.

use serde_json::{json, Value};

use crate::util::emulator::Process;

/// What a client that kept an old read sends back: the read with its read-only fields changed,
/// and the camelCase `createdAt`/`updatedAt` the official Go SDK adds to every update.
fn stale(read: &Value, read_only: &[&str]) -> Value {
    let mut body = read.clone();
    for key in read_only {
        body[*key] = json!("2001-02-03");
    }
    body["createdAt"] = json!("2001-02-03T04:05:06Z");
    body["updatedAt"] = json!("2001-02-03T04:05:06Z");
    body
}

/// `answer` and `read` agree on every key but `except`.
fn assert_same_but(answer: &Value, read: &Value, except: &[&str]) {
    let strip = |value: &Value| {
        let mut object = value.as_object().expect("an object").clone();
        for key in except {
            object.remove(*key);
        }
        object
    };
    assert_eq!(strip(answer), strip(read), "answer {answer}\nread {read}");
}

#[test]
fn a_heartbeat_check_read_and_sent_back_as_its_put_keeps_its_read_only_fields() {
    let emulator = Process::start();
    let path = format!("/v1/checks/{}", super::CHECK);
    let (status, read) = emulator.call("GET", &path, None);
    assert_eq!(status, 200, "{read}");
    let mut body = stale(&read, &["id", "created_at", "updated_at"]);
    body["alertChannels"] = json!({"email": [{"address": "sent@example.com"}]});
    let put = format!("/v1/checks/heartbeat/{}", super::CHECK);
    let (status, answer) = emulator.call("PUT", &put, Some(&body));
    assert_eq!(status, 200, "{answer}");
    assert_same_but(&answer, &read, &["updated_at"]);
    assert_ne!(answer["updated_at"], json!("2001-02-03"));
    let (status, again) = emulator.call("GET", &path, None);
    assert_eq!(status, 200);
    assert_eq!(again, answer, "the read after the PUT is its answer");
    let (status, _) = emulator.call("GET", "/v1/checks/2001-02-03", None);
    assert_eq!(status, 404, "a sent id creates nothing");
}

#[test]
fn a_check_group_read_and_sent_back_as_its_put_keeps_its_read_only_fields() {
    let emulator = Process::start();
    let (status, read) = emulator.call("GET", "/v1/check-groups/42", None);
    assert_eq!(status, 200, "{read}");
    let mut body = stale(&read, &["created_at", "updated_at"]);
    body["id"] = json!(43);
    body["projectBindings"] = json!([]);
    let (status, answer) = emulator.call("PUT", "/v2/check-groups/42", Some(&body));
    assert_eq!(status, 200, "{answer}");
    assert_same_but(&answer, &read, &["updated_at"]);
    assert!(
        answer["updated_at"].as_str().is_some_and(|t| t.len() > 10),
        "the service sets updated_at: {answer}"
    );
    let (status, again) = emulator.call("GET", "/v1/check-groups/42", None);
    assert_eq!((status, &again), (200, &answer));
    let (status, none) = emulator.call("GET", "/v1/check-groups/43", None);
    assert_eq!(status, 404, "a sent id creates nothing: {none}");

    // A key that is neither in the request nor in the answer is still refused, and nothing
    // of the body is kept.
    body["name"] = json!("renamed");
    body["bogus"] = json!(1);
    let (status, refused) = emulator.call("PUT", "/v2/check-groups/42", Some(&body));
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["message"], json!("\"bogus\" is not allowed"));
    let (_, after) = emulator.call("GET", "/v1/check-groups/42", None);
    assert_eq!(after, answer, "a refused PUT changes nothing");
}

#[test]
fn a_maintenance_read_and_sent_back_as_its_patch_keeps_its_read_only_fields() {
    let emulator = Process::start();
    let path = "/v1/maintenance-windows/7/maintenances/m-2026-12-01";
    let (status, read) = emulator.call("GET", path, None);
    assert_eq!(status, 200, "{read}");
    let mut body = stale(&read, &["id", "status", "created_at", "updated_at"]);
    body["maintenanceWindowId"] = json!(8);
    body["updates"] = json!([]);
    body["endsAt"] = json!("2026-12-03");
    let (status, answer) = emulator.call("PATCH", path, Some(&body));
    assert_eq!(status, 200, "{answer}");
    assert_same_but(&answer, &read, &["updated_at", "updates", "endsAt"]);
    assert_eq!(
        answer["endsAt"],
        json!("2026-12-03"),
        "the writable field is applied"
    );
    let updates = answer["updates"].as_array().expect("updates");
    assert_eq!(updates.len(), 1, "the PATCH's own entry only: {answer}");
    assert_eq!(updates[0]["previousEndsAt"], json!("2026-12-02"));
    assert_ne!(answer["updated_at"], json!("2001-02-03"));

    body["bogus"] = json!(1);
    let (status, refused) = emulator.call("PATCH", path, Some(&body));
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["message"], json!("\"bogus\" is not allowed"));
    let (_, after) = emulator.call("GET", path, None);
    assert_eq!(after, answer, "a refused PATCH changes nothing");
}
