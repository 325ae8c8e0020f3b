//! What the fake API ([`crate::util::http::FakeServer`], scripted) answers in the `api` tests:
//! a JSON body, or an error in the API's shape (`statusCode`, `error`, `message`,
//! `attributes`).

use std::time::Duration;

use serde_json::{json, Value};

use crate::util::http::{Reply, Request};

/// `body` as JSON with `status`.
pub fn reply(status: u16, body: Value) -> Reply {
    Reply {
        status,
        headers: vec![("content-type", "application/json".into())],
        body: body.to_string(),
        delay: Duration::ZERO,
    }
}

/// An error in the API's shape.
pub fn error_reply(status: u16, error: &str, message: &str, attributes: Option<Value>) -> Reply {
    let mut body = json!({"statusCode": status, "error": error, "message": message});
    if let Some(attributes) = attributes {
        body["attributes"] = attributes;
    }
    reply(status, body)
}

/// The `authorization` header `request` carried, or `""`: what a hostile server echoes back.
pub fn authorization(request: &Request) -> String {
    request
        .header("authorization")
        .unwrap_or_default()
        .to_owned()
}
