//! The typed client against the emulator's rate limit and faults: its 429 becomes a rate-limited
//! error, a fault's `Retry-After` is honoured, and dropped and hung requests are survived
//! without a POST sent twice.

use std::sync::Arc;
use std::time::{Duration, Instant};

use heartbeat_agent::api::model::*;
use heartbeat_agent::api::{ApiClient, ApiClientConfig, ApiError, Quota, RateLimiter};
use heartbeat_agent::emulator::{Fault, FaultKind};
use heartbeat_agent::net::RetryPolicy;
use heartbeat_agent::redact::Secret;
use serde_json::json;

use crate::util::emulator::start_with;

use super::{assert_no_key, client, client_with, emulator, options, KEY};

#[tokio::test]
async fn the_emulators_rate_limit_becomes_a_rate_limited_error() {
    let emulator = start_with(options("3/60".parse().expect("a rate limit"))).await;
    let api = client(&emulator);
    for _ in 0..3 {
        api.list_check_statuses().await.expect("within the limit");
    }
    let err = api.list_check_statuses().await.expect_err("429");
    let ApiError::RateLimited {
        error, attributes, ..
    } = &err
    else {
        panic!("expected RateLimited, got {err:?}");
    };
    assert_eq!(error, "Too Many Requests");
    assert_eq!(
        attributes.as_deref(),
        Some(&json!({"limit": 3, "windowSeconds": 60}))
    );
    assert_no_key(&err);
    // With retries, every attempt counts in the emulator's window and is refused again.
    let retrying = client_with(
        &emulator,
        KEY,
        RetryPolicy {
            max_attempts: 3,
            base: Duration::from_millis(5),
            cap: Duration::from_millis(10),
            budget: Duration::from_secs(5),
        },
    );
    let before = emulator.requests().len();
    let err = retrying.get_check_group(42).await.expect_err("still 429");
    assert_eq!(err.status(), Some(429));
    assert_eq!(emulator.requests().len() - before, 3, "three attempts");
}

#[tokio::test]
async fn retry_after_from_an_emulator_fault_is_honoured() {
    let emulator = emulator().await;
    emulator.add_fault({
        let mut fault = Fault::new(FaultKind::RateLimit)
            .path("/v1/check-groups/42")
            .times(1);
        fault.retry_after = Some(json!(1));
        fault
    });
    let api = client_with(
        &emulator,
        KEY,
        RetryPolicy {
            max_attempts: 3,
            base: Duration::from_millis(1),
            cap: Duration::from_millis(5),
            budget: Duration::from_secs(10),
        },
    );
    let started = Instant::now();
    let group = api.get_check_group(42).await.expect("the retry succeeds");
    let elapsed = started.elapsed();
    assert_eq!(group.id, 42);
    assert!(
        elapsed >= Duration::from_secs(1),
        "waited only {elapsed:?}, backoff alone would be <= 5 ms"
    );
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    let statuses: Vec<Option<u16>> = emulator.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [Some(429), Some(200)]);
}

#[tokio::test]
async fn the_client_survives_dropped_and_hung_requests_without_duplicating_a_post() {
    let emulator = emulator().await;
    let mut config = ApiClientConfig::new(emulator.base_url(), Secret::new(KEY));
    config.account_id = Some(emulator.account().to_owned());
    config.request_timeout = Duration::from_millis(300);
    config.rate_limiter = Arc::new(RateLimiter::new(Quota::DEFAULT));
    config.retry = RetryPolicy {
        max_attempts: 3,
        base: Duration::from_millis(1),
        cap: Duration::from_millis(5),
        budget: Duration::from_secs(5),
    };
    let api = ApiClient::new(config).expect("client");

    emulator.add_fault(
        Fault::new(FaultKind::Drop)
            .path("/v1/check-groups/42")
            .times(1),
    );
    assert_eq!(api.get_check_group(42).await.expect("retried").id, 42);
    emulator.add_fault(
        Fault::new(FaultKind::Hang)
            .path("/v1/check-statuses")
            .times(1),
    );
    assert!(
        api.list_check_statuses().await.is_ok(),
        "a hang times out, the retry answers"
    );

    emulator.add_fault(
        Fault::new(FaultKind::Hang)
            .path("/v1/status-pages/services")
            .method("POST")
            .times(1),
    );
    let body = CreateStatusPageService {
        name: "Once".into(),
    };
    let err = api
        .create_status_page_service(&body)
        .await
        .expect_err("a timed-out POST is not repeated");
    assert!(
        matches!(
            err,
            ApiError::Transport {
                timed_out: true,
                ..
            }
        ),
        "{err:?}"
    );
    assert_no_key(&err);
    let posts = emulator
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .count();
    assert_eq!(posts, 1, "no duplicate service");
    let attempts: Vec<Option<u16>> = emulator
        .requests()
        .iter()
        .filter(|r| r.method == "GET")
        .map(|r| r.status)
        .collect();
    assert_eq!(attempts, [None, Some(200), None, Some(200)]);
}
