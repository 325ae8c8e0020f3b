//! Unit tests of `validate.rs`.

use super::*;

fn message(result: Result<Value, ApiError>) -> String {
    result.expect_err("must be refused").message
}

#[test]
fn heartbeat_bounds_name_the_field() {
    let hb = |v: Value| check("heartbeat", Kind::Heartbeat, &v);
    let ok = json!({"period": 30, "periodUnit": "seconds", "grace": 0, "graceUnit": "days"});
    assert!(hb(ok).is_ok());
    let short = json!({"period": 29, "periodUnit": "seconds", "grace": 0, "graceUnit": "days"});
    assert!(message(hb(short)).starts_with("\"heartbeat.period\" must be between"));
    let long = json!({"period": 366, "periodUnit": "days", "grace": 0, "graceUnit": "days"});
    assert!(message(hb(long)).starts_with("\"heartbeat.period\""));
    let grace = json!({"period": 1, "periodUnit": "days", "grace": 366, "graceUnit": "days"});
    assert!(message(hb(grace)).starts_with("\"heartbeat.grace\""));
    let unit = json!({"period": 1, "periodUnit": "weeks", "grace": 0, "graceUnit": "days"});
    assert!(message(hb(unit)).starts_with("\"heartbeat.periodUnit\" must be one of"));
    let missing = json!({"period": 1, "periodUnit": "days", "grace": 0});
    assert_eq!(message(hb(missing)), "\"heartbeat.graceUnit\" is required");
}

#[test]
fn normalize_fills_defaults_and_refuses_unknown_keys() {
    let table = [
        Field::required("name", NON_EMPTY),
        Field::new("muted", Kind::Bool, json!(false)),
    ];
    let body = json!({"name": "x"});
    let out = normalize(body.as_object().expect("object"), &table, "", false).expect("valid");
    assert_eq!(Value::Object(out), json!({"name": "x", "muted": false}));
    let body = json!({"name": "x", "bogus": 1});
    let err =
        normalize(body.as_object().expect("object"), &table, "", false).expect_err("unknown key");
    assert_eq!(err.message, "\"bogus\" is not allowed");
}

#[test]
fn env_vars_are_capped() {
    let vars: Vec<Value> = (0..101)
        .map(|i| json!({"key": format!("K{i}"), "value": "v"}))
        .collect();
    let err = message(check("environmentVariables", Kind::EnvVars, &json!(vars)));
    assert!(err.contains("less than or equal to 100 items"), "{err}");
}

#[test]
fn whole_numbers_come_back_without_a_fraction() {
    let id = check("alertChannelId", INT, &json!(3.0)).expect("a whole number");
    assert!(id.is_i64(), "{id}");
    let ratio = check(
        "percentage",
        Kind::Num {
            integer: false,
            min: None,
            max: None,
        },
        &json!(2.5),
    );
    assert_eq!(ratio.expect("valid"), json!(2.5));
}

#[test]
fn uuids_are_recognised() {
    assert!(is_uuid("123e4567-e89b-12d3-a456-426614174000"));
    assert!(!is_uuid("123e4567-e89b-12d3-a456"));
    assert!(!is_uuid("not-a-uuid"));
}

#[test]
fn malformed_json_is_a_400() {
    assert_eq!(
        parse_object(b"{nope").expect_err("bad").message,
        "Invalid request payload JSON format"
    );
    assert!(parse_object(b"[1]").is_err());
}
