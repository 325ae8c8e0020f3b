//! What the API client refuses: redirects to another origin and answers over [`MAX_BODY`].
//!
//! reqwest follows redirects itself and, on a move to another host, drops only `Authorization`:
//! the account header (a default header) would follow, and reqwest adds a `Referer` by default.
//! The API base URL names the one service the key belongs to, so the client turns `Referer` off
//! and follows a redirect only within the same origin (scheme, host, port); a 3xx to elsewhere
//! comes back as an error status. Answers are read by [`crate::net::read_body`] with the cap
//! [`MAX_BODY`].

use reqwest::redirect::{Attempt, Policy};

/// The largest answer read (16 MiB); the spec's largest page is far below.
pub(crate) const MAX_BODY: usize = 16 << 20;

/// Redirects reqwest may follow: same origin, at most 10 hops.
pub(crate) fn redirect_policy() -> Policy {
    Policy::custom(|attempt: Attempt| {
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if attempt.previous().len() > 10 || !same_origin {
            attempt.stop()
        } else {
            attempt.follow()
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use crate::api::{ApiClient, ApiClientConfig, ApiError};
    use crate::net::RetryPolicy;
    use crate::redact::Secret;

    /// A server on `host`:0 that answers every request with `answer(port)` and records the
    /// request heads it received.
    async fn server(
        host: &str,
        answer: impl Fn(u16) -> Vec<u8> + Send + Sync + 'static,
    ) -> (u16, Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind((host, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = heads.clone();
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 8192];
                let mut head = Vec::new();
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = socket.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    head.extend_from_slice(&buf[..n]);
                }
                seen.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&head).to_lowercase());
                let _ = socket.write_all(&answer(port)).await;
                let _ = socket.shutdown().await;
            }
        });
        (port, heads)
    }

    fn client(base: String) -> ApiClient {
        let mut config = ApiClientConfig::new(base, Secret::new("key-123"));
        config.account_id = Some("acct-9".into());
        config.retry = RetryPolicy::none();
        ApiClient::new(config).unwrap()
    }

    #[tokio::test]
    async fn api_redirect_to_another_host_carries_no_key_account_or_referer() {
        let (other, other_heads) = server("127.0.0.1", |_| {
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}".to_vec()
        })
        .await;
        let (port, heads) = server("127.0.0.1", move |_| {
            format!(
                "HTTP/1.1 302 Found\r\nlocation: http://localhost:{other}/x\r\ncontent-length: 0\r\n\r\n"
            )
            .into_bytes()
        })
        .await;
        let err = client(format!("http://127.0.0.1:{port}"))
            .get_check_group(7)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("302"), "{err}");
        assert_eq!(heads.lock().unwrap().len(), 1);
        assert!(heads.lock().unwrap()[0].contains("x-service-account: acct-9"));
        // Nothing reached the other host: neither the key, the account nor a Referer.
        assert!(other_heads.lock().unwrap().is_empty(), "{other_heads:?}");
    }

    #[tokio::test]
    async fn api_redirect_within_the_same_origin_is_followed_without_referer() {
        let (port, heads) = server("127.0.0.1", |port| {
            format!(
                "HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:{port}/moved\r\ncontent-length: 0\r\n\r\n"
            )
            .into_bytes()
        })
        .await;
        let _ = client(format!("http://127.0.0.1:{port}"))
            .get_check_group(7)
            .await;
        let heads = heads.lock().unwrap();
        assert!(heads.len() > 1, "the same-origin redirect was not followed");
        assert!(heads.iter().all(|h| !h.contains("referer:")), "{heads:?}");
    }

    #[tokio::test]
    async fn api_answer_over_the_limit_is_refused_with_a_clear_error() {
        // 20 MiB of body, announced by length and, on a second server, unannounced (close-delimited).
        for announced in [true, false] {
            let (port, _) = server("127.0.0.1", move |_| {
                let mut answer = if announced {
                    format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", 20 << 20)
                } else {
                    "HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n".to_owned()
                }
                .into_bytes();
                answer.resize(answer.len() + (20 << 20), b' ');
                answer
            })
            .await;
            let err = client(format!("http://127.0.0.1:{port}"))
                .get_check_group(7)
                .await
                .unwrap_err();
            let text = err.to_string();
            assert!(text.contains("larger than 16 MiB"), "{text}");
            assert!(!text.contains("key-123"), "{text}");
            assert!(matches!(err, ApiError::Transport { .. }), "{err:?}");
        }
    }
}
