//! A minimal HTTP/1.1 client for pings: one request with `Connection: close`, the status line
//! and a few headers read back ([`crate::response_head`]), the body drained up to a cap and then
//! ignored. `http://` over TCP, `https://` over a rustls stream (tokio-rustls) made with the
//! connections' own TLS configuration ([`crate::net::Net::tls_connector`]: the same trust store
//! and verifier as every reqwest client), the exchange the same, generic over the stream.
//!
//! It exists for start-up cost: `run` pings once per process, and a general client with its
//! connection pool costs more than the request. For `https://` the cost is memory above all:
//! reqwest, hyper and hyper-rustls are code pages `run` otherwise never touches, and each first
//! touch of one maps the 64 KiB around it: through reqwest an https `run` peaked at 6.28 MiB
//! (resident code 2.8 MiB), over tokio-rustls at 5.80 MiB (2.3 MiB; medians of 11, an http
//! `run` 4.4 MiB). What is left above http is rustls and ring themselves. Host names are resolved with the system resolver; IP literals are used as
//! they are (no lookup).
//!
//! Timeouts: each address gets `connect_timeout` to accept the TCP connection, the TLS handshake
//! `connect_timeout` more, and the whole attempt ends by its deadline. A refused server
//! certificate is worded by [`crate::net::Net::refused_certificate`], as reqwest's refusals are;
//! any other failed handshake is a connection failure carrying rustls' words, as through
//! reqwest. The daemon's pings do not keep connections open between pings; they share the
//! TLS session cache of the one configuration, so a later handshake to the same host resumes.

use std::net::SocketAddr;
use std::time::Duration;

use reqwest::Url;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::client::TlsStream;

use crate::net::Net;

use super::{Ping, PingAnswer, PingError, PingMethod};

/// The most of a response head (status line and headers) that is read.
const MAX_HEAD: usize = 16 * 1024;
/// The most of a body that is drained before closing.
const MAX_BODY: usize = 64 * 1024;
/// How long draining the body may take once the status is known.
const DRAIN_TIME: Duration = Duration::from_millis(500);

/// Sends `ping` (`http://` or `https://`, through `net`'s TLS configuration) and reads the
/// answer's status (and a redirect's `Location`), all by `deadline`; calls `leaving` once
/// connected (for `https://`, once the handshake is done), just before the request is written.
pub(super) async fn request(
    ping: &Ping,
    net: &Net,
    connect_timeout: Duration,
    deadline: Instant,
    leaving: &(dyn Fn() + Sync),
) -> Result<(PingAnswer, Option<String>), PingError> {
    if ping.url.scheme() == "https" {
        let stream =
            tokio::time::timeout_at(deadline, connect_tls(net, &ping.url, connect_timeout))
                .await
                .map_err(|_| PingError::Timeout)??;
        exchange(stream, ping, deadline, leaving).await
    } else {
        let stream = tokio::time::timeout_at(deadline, connect(&ping.url, connect_timeout))
            .await
            .map_err(|_| PingError::Timeout)??;
        exchange(stream, ping, deadline, leaving).await
    }
}

/// The request written to `stream` and the answer read back, by `deadline`.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    ping: &Ping,
    deadline: Instant,
    leaving: &(dyn Fn() + Sync),
) -> Result<(PingAnswer, Option<String>), PingError> {
    leaving();
    let head = request_head(ping);
    let exchange = async {
        let body = ping.body().unwrap_or_default();
        let request = [head.as_bytes(), body.as_bytes()].concat();
        stream
            .write_all(&request)
            .await
            .map_err(|e| PingError::Connect(format!("sending the request: {e}")))?;
        stream
            .flush()
            .await
            .map_err(|e| PingError::Connect(format!("sending the request: {e}")))?;
        read_answer(&mut stream).await
    };
    tokio::time::timeout_at(deadline, exchange)
        .await
        .map_err(|_| PingError::Timeout)?
}

/// A TCP connection to `url`'s host with a TLS session on it, the server's certificate
/// verified for the host's name (or IP address) by `net`'s verifier.
async fn connect_tls(
    net: &Net,
    url: &Url,
    connect_timeout: Duration,
) -> Result<TlsStream<TcpStream>, PingError> {
    let host = url.host_str().unwrap_or_default();
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    let name = rustls::pki_types::ServerName::try_from(literal.to_owned())
        .map_err(|e| PingError::Connect(e.to_string()))?;
    let connector = net.tls_connector();
    let tcp = connect(url, connect_timeout).await?;
    match tokio::time::timeout(connect_timeout, connector.connect(name, tcp)).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(err)) => Err(match net.refused_certificate(host, &err) {
            Some(detail) => PingError::Certificate {
                host: host.to_owned(),
                detail,
            },
            None => PingError::Connect(err.to_string()),
        }),
        Err(_) => Err(PingError::Timeout),
    }
}

async fn connect(url: &Url, connect_timeout: Duration) -> Result<TcpStream, PingError> {
    let port = url.port_or_known_default().unwrap_or(80);
    let host = url.host_str().unwrap_or_default();
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = match literal.parse::<std::net::IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| PingError::Connect(format!("cannot resolve host {host}: {e}")))?
            .collect(),
    };
    let mut last = PingError::Connect("the host has no address".to_owned());
    for addr in addrs {
        match tokio::time::timeout(connect_timeout, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                // One small write: no point in waiting for more.
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Ok(Err(err)) => last = PingError::Connect(err.to_string()),
            Err(_) => last = PingError::Timeout,
        }
    }
    Err(last)
}

fn request_head(ping: &Ping) -> String {
    let url = &ping.url;
    let mut target = url.path().to_owned();
    if let Some(query) = url.query() {
        target.push('?');
        target.push_str(query);
    }
    let host = url.host_str().unwrap_or_default();
    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    let mut length = match (ping.body(), ping.method) {
        (Some(body), _) => format!(
            "Content-Type: {}\r\nContent-Length: {}\r\n",
            ping.body_type(),
            body.len()
        ),
        (None, PingMethod::Post | PingMethod::Put) => "Content-Length: 0\r\n".to_owned(),
        (None, PingMethod::Get) => String::new(),
    };
    // Names and values were checked as header-safe when the config was loaded (and again
    // when read back from the outbox).
    for (name, value) in ping.headers() {
        length.push_str(&format!("{name}: {}\r\n", value.expose()));
    }
    format!(
        "{method} {target} HTTP/1.1\r\nHost: {host}{port}\r\nUser-Agent: {agent}\r\n\
         Origin: {origin}\r\nAccept: */*\r\n{length}Connection: close\r\n\r\n",
        method = ping.method.as_str(),
        agent = crate::user_agent(),
        origin = ping.source,
    )
}

async fn read_answer<S: AsyncRead + Unpin>(
    stream: &mut S,
) -> Result<(PingAnswer, Option<String>), PingError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|e| PingError::Connect(format!("reading the response: {e}")))?;
        if n == 0 {
            return Err(PingError::Protocol(
                "connection closed before a complete response head".to_owned(),
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some((answer, head_len, length, location)) = parse_head(&buf)? {
            let already = buf.len() - head_len;
            drain(stream, length.map(|l| l.saturating_sub(already))).await;
            return Ok((answer, location));
        }
        if buf.len() >= MAX_HEAD {
            return Err(PingError::Protocol("response head too large".to_owned()));
        }
    }
}

/// The answer in the response head at the start of `buf`, the head's length and the
/// Content-Length and `Location`; `None` while the head is incomplete.
type Head = (PingAnswer, usize, Option<usize>, Option<String>);
fn parse_head(buf: &[u8]) -> Result<Option<Head>, PingError> {
    let Some(head) = crate::response_head::parse(buf)
        .map_err(|err| PingError::Protocol(format!("not an HTTP/1.x response: {err}")))?
    else {
        return Ok(None);
    };
    let retry_after = head
        .retry_after
        .and_then(|v| crate::backoff::retry_after(v, std::time::SystemTime::now()));
    let answer = PingAnswer {
        status: head.status,
        retry_after,
    };
    let location = head.location.map(str::to_owned);
    Ok(Some((answer, head.len, head.content_length, location)))
}

/// Reads and drops the body (up to [`MAX_BODY`] and [`DRAIN_TIME`]) so the server sees a clean
/// close; errors do not matter any more, the status is known.
async fn drain<S: AsyncRead + Unpin>(stream: &mut S, remaining: Option<usize>) {
    let mut left = remaining.unwrap_or(MAX_BODY).min(MAX_BODY);
    let work = async {
        let mut chunk = [0u8; 4096];
        while left > 0 {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIME, work).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_has_the_required_headers() {
        let ping =
            Ping::new("http://127.0.0.1:8080/tok?x=1", PingMethod::Post, "web1").expect("valid");
        let head = request_head(&ping);
        assert!(
            head.starts_with("POST /tok?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"),
            "{head}"
        );
        assert!(head.contains(&format!("User-Agent: {}\r\n", crate::user_agent())));
        assert!(head.contains("Origin: web1\r\n"));
        assert!(head.contains("Content-Length: 0\r\n"));
        assert!(head.ends_with("Connection: close\r\n\r\n"));
        let with_body = ping.with_body("tail\n".to_owned());
        let head = request_head(&with_body);
        assert!(head.contains("Content-Length: 5\r\n"), "{head}");
        assert!(
            head.contains("Content-Type: text/plain; charset=utf-8\r\n"),
            "{head}"
        );
    }

    #[test]
    fn parses_status_and_headers() {
        let head = b"HTTP/1.1 429 Too Many\r\nRetry-After: 7\r\ncontent-length: 12\r\n\r\n";
        let (answer, head_len, length, _) = parse_head(head).expect("parses").expect("complete");
        assert_eq!(answer.status, 429);
        assert_eq!(answer.retry_after, Some(Duration::from_secs(7)));
        assert_eq!(length, Some(12));
        assert_eq!(head_len, head.len());
        assert!(parse_head(&head[..20]).expect("a valid start").is_none());
        assert!(parse_head(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
    }
}
