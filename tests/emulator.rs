//! Integration tests for `emulator`: the in-process emulator over real sockets (reqwest), and the
//! `heartbeat-agent emulator` binary.

mod admin;
mod binary;
mod create;
mod heartbeats;
mod operations;
mod published;
mod read_only;
mod schema;
mod shapes;

use std::time::{Duration, Instant};

use heartbeat_agent::emulator::{
    Emulator, EmulatorHandle, EmulatorOptions, Fault, FaultKind, Fixtures, RateLimit,
};

use crate::util::emulator::{example_fixtures, start_with as start_emulator};
use serde_json::{json, Value};

const CHECK: &str = "7b3c1a52-0d5e-4f7a-9c1e-2f6d8b4a1001";
const TOKEN: &str = crate::util::emulator::FIXTURE_TOKEN;
const PROJECT: &str = "5f0c2f4e-8a51-4c7b-9f0a-3c2d1e0b9a77";

async fn start_with(rate_limit: RateLimit) -> Api {
    start_options(EmulatorOptions {
        fixtures: example_fixtures(),
        rate_limit,
        ..EmulatorOptions::default()
    })
    .await
}

/// A test client of an emulator started with `options`.
async fn start_options(options: EmulatorOptions) -> Api {
    let emulator = start_emulator(options).await;
    Api {
        http: reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client builds"),
        emulator,
    }
}

async fn start() -> Api {
    start_with(RateLimit::default()).await
}

/// A test client of one emulator.
struct Api {
    http: reqwest::Client,
    emulator: EmulatorHandle,
}

impl Api {
    /// An authenticated API call; returns status and JSON body (`null` when empty).
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let url = format!("{}{path}", self.emulator.base_url());
        let request = self
            .http
            .request(method.parse().expect("valid method"), url)
            .bearer_auth(self.emulator.api_key())
            .header("x-service-account", self.emulator.account());
        let request = match body {
            Some(body) => request.json(&body),
            None => request,
        };
        read(request.send().await.expect("request answered")).await
    }

    /// An unauthenticated request to any URL.
    async fn raw(&self, method: &str, url: &str, body: Option<Value>) -> (u16, Value) {
        let request = self.http.request(method.parse().expect("method"), url);
        let request = match body {
            Some(body) => request.json(&body),
            None => request,
        };
        read(request.send().await.expect("request answered")).await
    }

    fn admin(&self, path: &str) -> String {
        format!("{}/_emulator{path}", self.emulator.base_url())
    }

    async fn ping(&self, token: &str) -> (u16, Value) {
        let url = format!("{}/{token}", self.emulator.ping_url());
        let request = self
            .http
            .get(url)
            .header("user-agent", "heartbeat-agent/test")
            .header("origin", "backup-host");
        read(request.send().await.expect("ping answered")).await
    }
}

async fn read(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.expect("body read");
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("JSON body, got {text:?}"))
    };
    (status, body)
}

/// The error of an emulator started with the fixtures `doc`, which must be refused.
async fn fixtures_refused(doc: &str) -> String {
    let fixtures = Fixtures::parse(doc, "test").expect("shape is fine");
    let options = EmulatorOptions {
        fixtures,
        ..EmulatorOptions::default()
    };
    Emulator::start(options)
        .await
        .expect_err("fixtures that must be refused")
        .to_string()
}

fn heartbeat_body(period: u64, unit: &str) -> Value {
    json!({"script": "", "name": "nightly backup", "tags": ["a"],
           "heartbeat": {"period": period, "periodUnit": unit, "grace": 10, "graceUnit": "minutes"}})
}
