//! Unit tests of sending: a loopback server answering canned responses.

use super::*;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Serves `answers` in turn (the last one repeats); counts requests.
async fn server(answers: Vec<&'static str>) -> (String, Arc<AtomicU32>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let count = Arc::new(AtomicU32::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let n = seen.fetch_add(1, Ordering::SeqCst) as usize;
            let answer = answers[n.min(answers.len() - 1)];
            let mut buf = [0u8; 2048];
            let _ = sock.read(&mut buf).await;
            let _ = sock.write_all(answer.as_bytes()).await;
        }
    });
    (format!("http://{addr}/secret-token"), count)
}

/// Pings through the environment's connections, as with no config.
fn sender() -> Sender {
    Sender::new(crate::net::Net::default())
}

fn budget(total_ms: u64) -> Budget {
    Budget {
        total: Duration::from_millis(total_ms),
        attempts: 3,
        connect_timeout: Duration::from_millis(500),
    }
}

/// A `GET` ping sent within `total_ms` to a server answering `answers`: the outcome, how many
/// requests the server got and how long the sending took.
async fn sent_to(answers: Vec<&'static str>, total_ms: u64) -> (PingOutcome, u32, Duration) {
    let (url, count) = server(answers).await;
    let ping = Ping::new(&url, PingMethod::Get, "host").expect("valid");
    let started = std::time::Instant::now();
    let outcome = send(&sender(), &ping, &budget(total_ms)).await;
    (outcome, count.load(Ordering::SeqCst), started.elapsed())
}

#[tokio::test]
async fn retries_server_errors_until_success() {
    let (url, count) = server(vec![
        "HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK",
    ])
    .await;
    let ping = Ping::new(&url, PingMethod::Get, "host").expect("valid");
    let outcome = send(&sender(), &ping, &budget(5000)).await;
    assert_eq!(
        outcome,
        PingOutcome::Delivered {
            status: 200,
            attempts: 2
        }
    );
    assert_eq!(count.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn client_errors_are_permanent_and_not_retried() {
    let (url, count) = server(vec!["HTTP/1.1 404 Not Found\r\n\r\n"]).await;
    let ping = Ping::new(&url, PingMethod::Post, "host").expect("valid");
    let outcome = send(&sender(), &ping, &budget(5000)).await;
    assert!(
        matches!(
            outcome,
            PingOutcome::Permanent {
                error: PingError::Status(404),
                attempts: 1
            }
        ),
        "{outcome:?}"
    );
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn refused_connection_is_retryable_within_budget() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/t", listener.local_addr().expect("addr"));
    drop(listener);
    let ping = Ping::new(&url, PingMethod::Get, "host").expect("valid");
    let started = std::time::Instant::now();
    let outcome = send(&sender(), &ping, &budget(1000)).await;
    assert!(started.elapsed() < Duration::from_millis(1500));
    assert!(
        matches!(
            outcome,
            PingOutcome::Retryable {
                error: PingError::Connect(_),
                attempts: 3,
                ..
            }
        ),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn a_retry_after_past_the_budget_ends_the_attempts_and_is_kept_for_later() {
    let busy = "HTTP/1.1 503 Busy\r\nRetry-After: 60\r\nContent-Length: 0\r\n\r\n";
    let (outcome, requests, took) = sent_to(vec![busy], 5000).await;
    // Not retried early against the service's wait: the outbox honours it instead.
    assert!(took < Duration::from_secs(2), "{took:?}");
    let kept = PingOutcome::Retryable {
        error: PingError::Status(503),
        attempts: 1,
        retry_after: Some(Duration::from_secs(60)),
    };
    assert_eq!((outcome, requests), (kept, 1));
}

#[tokio::test]
async fn a_retry_after_within_the_budget_is_waited_out_whole() {
    let slow_down = "HTTP/1.1 429 Slow down\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n";
    let ok = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    // One second is more than half of what is left of 1.5 s, and still waited out whole.
    let (outcome, requests, took) = sent_to(vec![slow_down, ok], 1500).await;
    assert!(took >= Duration::from_secs(1), "{took:?}");
    let delivered = PingOutcome::Delivered {
        status: 200,
        attempts: 2,
    };
    assert_eq!((outcome, requests), (delivered, 2));
}

#[test]
fn bad_urls_are_refused_without_showing_the_token() {
    for bad in ["not a url tok-123", "ftp://h/tok-123", "/relative/tok-123"] {
        let err = Ping::new(bad, PingMethod::Get, "h")
            .expect_err(bad)
            .to_string();
        assert!(!err.contains("tok-123"), "{err}");
    }
    assert!(Ping::new("http://h/t", PingMethod::Get, "a\nb").is_err());
}

#[tokio::test]
async fn redirects_are_followed_by_the_full_client() {
    let redirect =
        "HTTP/1.1 302 Found\r\nLocation: /moved\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    let (url, count) = server(vec![
        redirect,
        redirect,
        "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    ])
    .await;
    let ping = Ping::new(&url, PingMethod::Get, "host").expect("valid");
    let outcome = send(&sender(), &ping, &budget(5000)).await;
    assert_eq!(
        outcome,
        PingOutcome::Delivered {
            status: 200,
            attempts: 1
        }
    );
    // The built-in client's request, then the full client's and the redirected one.
    assert_eq!(count.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_redirect_to_another_host_carries_no_referer() {
    let target = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = target.local_addr().expect("addr").port();
    let seen = tokio::spawn(async move {
        let (mut sock, _) = target.accept().await.expect("accept");
        let mut buf = [0u8; 4096];
        let n = sock.read(&mut buf).await.unwrap_or(0);
        let _ = sock
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .await;
        String::from_utf8_lossy(&buf[..n]).to_lowercase()
    });
    let redirect: &'static str = Box::leak(
        format!("HTTP/1.1 302 Found\r\nLocation: http://localhost:{port}/landed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .into_boxed_str(),
    );
    let (url, _) = server(vec![redirect]).await;
    let ping = Ping::new(&url, PingMethod::Get, "host").expect("valid");
    let outcome = send(&sender(), &ping, &budget(5000)).await;
    assert!(
        matches!(outcome, PingOutcome::Delivered { status: 200, .. }),
        "{outcome:?}"
    );
    let head = seen.await.expect("the other host got the ping");
    assert!(!head.contains("referer"), "{head}");
    assert!(!head.contains("secret-token"), "{head}");
}

#[tokio::test]
async fn a_redirected_ping_reaches_the_first_address_once() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let lines = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = lines.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let n = sock.read(&mut buf).await.unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]).into_owned();
            let line = head.lines().next().unwrap_or_default().to_owned();
            let answer: &[u8] = if line.contains("/secret-token") {
                b"HTTP/1.1 302 Found\r\nLocation: /moved\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            } else {
                b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            };
            seen.lock().expect("lock").push(line);
            let _ = sock.write_all(answer).await;
        }
    });
    let ping = Ping::new(
        &format!("http://{addr}/secret-token"),
        PingMethod::Get,
        "host",
    )
    .expect("valid");
    let outcome = send(&sender(), &ping, &budget(5000)).await;
    assert!(
        matches!(outcome, PingOutcome::Delivered { status: 200, .. }),
        "{outcome:?}"
    );
    let lines = lines.lock().expect("lock").clone();
    assert_eq!(lines, ["GET /secret-token HTTP/1.1", "GET /moved HTTP/1.1"]);
}
