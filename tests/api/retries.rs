//! The typed client's retries against the scripted server: 5xx and 429 retried up to
//! `max_attempts`, client errors never, `Retry-After` in seconds or as an HTTP date honoured
//! within the budget, and a create repeated only when it surely did not reach the server.

use std::sync::Arc;
use std::time::{Duration, Instant};

use heartbeat_agent::api::model::*;
use heartbeat_agent::api::{ApiClient, ApiClientConfig, ApiError, Quota, RateLimiter};
use heartbeat_agent::redact::Secret;
use serde_json::json;

use crate::util::http::{refused_url, FakeServer, Reply};

use super::{canned, client, error_reply, fast_retries, KEY};

#[tokio::test]
async fn server_errors_and_429_are_retried_until_success() {
    let server = FakeServer::scripted(|request, before| match before {
        0 => error_reply(500, "Internal Server Error", "boom", None),
        1 => error_reply(503, "Service Unavailable", "later", None),
        2 => error_reply(
            429,
            "Too Many Requests",
            "Too Many Requests",
            Some(json!({})),
        ),
        _ => canned(request),
    });
    let api = client(&server, fast_retries(4));
    let statuses = api.list_check_statuses().await.unwrap();
    assert_eq!(statuses.len(), 2);
    assert_eq!(server.requests().len(), 4);
    assert_eq!(api.rate_limiter().stats().acquired, 4);
}

#[tokio::test]
async fn retries_stop_at_max_attempts_with_the_last_error() {
    let server = FakeServer::scripted(|_, _| error_reply(502, "Bad Gateway", "down", None));
    let api = client(&server, fast_retries(3));
    let err = api.get_check_group(1).await.unwrap_err();
    assert_eq!(err.status(), Some(502));
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn client_errors_are_never_retried() {
    for status in [400, 401, 403, 404] {
        let server = FakeServer::scripted(move |_, _| error_reply(status, "Nope", "no", None));
        let api = client(&server, fast_retries(4));
        let err = api.get_maintenance(1, "m").await.unwrap_err();
        assert_eq!(err.status(), Some(status));
        assert_eq!(server.requests().len(), 1, "status {status} was retried");
    }
}

/// The server answers 429 with `retry_after` once, then succeeds.
async fn elapsed_with_retry_after(
    retry_after: impl Fn() -> String + Send + Sync + 'static,
) -> Duration {
    let server = FakeServer::scripted(move |request, before| {
        if before == 0 {
            let mut answer = error_reply(429, "Too Many Requests", "slow down", Some(json!({})));
            answer.headers.push(("retry-after", retry_after()));
            answer
        } else {
            canned(request)
        }
    });
    let api = client(&server, fast_retries(3));
    let started = Instant::now();
    api.get_check_group(7).await.unwrap();
    assert_eq!(server.requests().len(), 2);
    started.elapsed()
}

#[tokio::test]
async fn retry_after_in_seconds_is_honoured() {
    let elapsed = elapsed_with_retry_after(|| "1".into()).await;
    // The backoff alone would be at most 10 ms.
    assert!(elapsed >= Duration::from_millis(1000), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
}

#[tokio::test]
async fn retry_after_as_http_date_is_honoured() {
    let elapsed = elapsed_with_retry_after(|| {
        httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(2))
    })
    .await;
    // HTTP dates have whole seconds: the wait is between 1 and 2 s.
    assert!(elapsed >= Duration::from_millis(900), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(4), "{elapsed:?}");
}

#[tokio::test]
async fn a_retry_after_beyond_the_budget_ends_the_call() {
    let server = FakeServer::scripted(|_, _| {
        let mut answer = error_reply(429, "Too Many Requests", "slow down", None);
        answer.headers.push(("retry-after", "3600".into()));
        answer
    });
    let api = client(&server, fast_retries(5));
    let started = Instant::now();
    match api.list_check_statuses().await.unwrap_err() {
        ApiError::RateLimited { retry_after, .. } => {
            assert_eq!(retry_after, Some(Duration::from_secs(3600)));
        }
        other => panic!("expected rate limited, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(server.requests().len(), 1);
}

/// A server that answers only after `delay`, and a client that gives up after 200 ms.
fn slow_server_and_client(delay: Duration) -> (FakeServer, ApiClient) {
    let server = FakeServer::scripted(move |request, _| Reply {
        delay,
        ..canned(request)
    });
    let mut config = ApiClientConfig::new(server.url(""), Secret::new(KEY));
    config.retry = fast_retries(3);
    config.request_timeout = Duration::from_millis(200);
    config.rate_limiter = Arc::new(RateLimiter::new(Quota::DEFAULT));
    let api = ApiClient::new(config).unwrap();
    (server, api)
}

#[tokio::test]
async fn a_create_that_timed_out_is_not_repeated() {
    let (server, api) = slow_server_and_client(Duration::from_millis(600));
    let body = CreateStatusPageService { name: "API".into() };
    match api.create_status_page_service(&body).await.unwrap_err() {
        ApiError::Transport {
            timed_out: true,
            not_sent: false,
            ..
        } => {}
        other => panic!("expected a timeout, got {other:?}"),
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(server.requests().len(), 1, "the POST was sent twice");
    // The same timeout on an idempotent GET is retried.
    api.get_check_group(7).await.unwrap_err();
    assert_eq!(server.requests().len(), 4);
}

#[tokio::test]
async fn a_create_is_repeated_after_429() {
    let server = FakeServer::scripted(|request, before| {
        if before == 0 {
            error_reply(429, "Too Many Requests", "Too Many Requests", None)
        } else {
            canned(request)
        }
    });
    let api = client(&server, fast_retries(3));
    let body = CreateStatusPageService { name: "API".into() };
    assert_eq!(
        api.create_status_page_service(&body).await.unwrap().id,
        "svc-1"
    );
    assert_eq!(server.requests().len(), 2);
    let server_error =
        FakeServer::scripted(|_, _| error_reply(500, "Internal Server Error", "", None));
    let api = client(&server_error, fast_retries(3));
    api.create_status_page_service(&body).await.unwrap_err();
    assert_eq!(
        server_error.requests().len(),
        1,
        "a 500 may have created it: no retry"
    );
}

#[tokio::test]
async fn a_create_is_repeated_after_a_connect_failure() {
    let mut config = ApiClientConfig::new(refused_url(""), Secret::new(KEY));
    config.retry = fast_retries(3);
    config.rate_limiter = Arc::new(RateLimiter::new(Quota::DEFAULT));
    let api = ApiClient::new(config).unwrap();
    let body = CreateStatusPageService { name: "API".into() };
    let err = api.create_status_page_service(&body).await.unwrap_err();
    assert!(
        matches!(err, ApiError::Transport { not_sent: true, .. }),
        "{err:?}"
    );
    assert_eq!(
        api.rate_limiter().stats().acquired,
        3,
        "every attempt was made"
    );
    let text = format!("{err} {err:?}");
    assert!(text.contains("POST /v1/status-pages/services"), "{text}");
    assert!(!text.contains(KEY));
}
