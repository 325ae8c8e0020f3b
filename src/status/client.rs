//! A tiny blocking HTTP/1.1 client for the `status`, `health`, `trigger`, `pause` and
//! `resume` commands: one request per connection, over TCP or a unix socket, no TLS (the endpoint is local). Kept
//! small on purpose: `health` runs as an exec probe in images without a shell.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use crate::config::Listen;

/// Where the endpoint is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `http://host:port`, with an optional path prefix.
    Tcp {
        /// `host:port`.
        authority: String,
        /// A path prefix (`""` or `/prefix`).
        prefix: String,
    },
    /// A unix socket.
    Unix(PathBuf),
}

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// `--url` is not usable.
    #[error("{0:?} is not an endpoint URL: use http://HOST:PORT or a unix socket path")]
    BadUrl(String),
    /// Connecting, writing or reading failed.
    #[error("cannot reach the status endpoint at {endpoint}: {source}; is the daemon running with this [status] listen?")]
    Io {
        /// The endpoint as given.
        endpoint: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The answer is not HTTP.
    #[error("the status endpoint at {0} sent an answer that is not HTTP")]
    Malformed(String),
}

/// An answer: status code and body.
#[derive(Debug, Clone)]
pub struct StatusAnswer {
    /// The HTTP status.
    pub status: u16,
    /// The body, as text.
    pub body: String,
    /// The config the answering daemon runs (its `Heartbeat-Agent-Config` header), if said.
    pub config: Option<String>,
    /// The answering daemon's id (its `Heartbeat-Agent-Daemon` header), if said.
    pub daemon: Option<String>,
}

impl Endpoint {
    /// `--url`: `http://HOST:PORT[/prefix]`, `unix:PATH` or a path.
    pub fn parse(url: &str) -> Result<Endpoint, ClientError> {
        if let Some(rest) = url.strip_prefix("http://") {
            let (authority, prefix) = match rest.find('/') {
                Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
                None => (rest, ""),
            };
            if authority.is_empty() || !authority.contains(':') {
                return Err(ClientError::BadUrl(url.to_owned()));
            }
            return Ok(Endpoint::Tcp {
                authority: authority.to_owned(),
                prefix: prefix.to_owned(),
            });
        }
        if url.contains("://") {
            return Err(ClientError::BadUrl(url.to_owned()));
        }
        match crate::config::status::parse_listen(url) {
            Some(Listen::Unix(path)) => Ok(Endpoint::Unix(path)),
            _ => Err(ClientError::BadUrl(url.to_owned())),
        }
    }

    /// The endpoint a daemon listening on `listen` serves (`0.0.0.0` is reached on loopback).
    pub(crate) fn from_listen(listen: &Listen) -> Endpoint {
        match listen {
            Listen::Tcp(addr) => {
                let mut addr = *addr;
                if addr.ip().is_unspecified() {
                    addr.set_ip(if addr.is_ipv4() {
                        std::net::Ipv4Addr::LOCALHOST.into()
                    } else {
                        std::net::Ipv6Addr::LOCALHOST.into()
                    });
                }
                Endpoint::Tcp {
                    authority: addr.to_string(),
                    prefix: String::new(),
                }
            }
            Listen::Unix(path) => Endpoint::Unix(path.clone()),
        }
    }

    /// The endpoint as the user would write it (`http://127.0.0.1:9465` or the socket path).
    pub fn shown(&self) -> String {
        match self {
            Endpoint::Tcp { authority, prefix } => format!("http://{authority}{prefix}"),
            Endpoint::Unix(path) => path.display().to_string(),
        }
    }

    /// Sends `method path` (with the bearer `token`) and reads the whole answer.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        timeout: Duration,
    ) -> Result<StatusAnswer, ClientError> {
        self.send(method, path, token, None, timeout)
    }

    /// `POST path` with a JSON `body` (with the bearer `token`); reads the whole answer.
    pub fn post_json(
        &self,
        path: &str,
        token: Option<&str>,
        body: &str,
        timeout: Duration,
    ) -> Result<StatusAnswer, ClientError> {
        self.send("POST", path, token, Some(body), timeout)
    }

    fn send(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
        timeout: Duration,
    ) -> Result<StatusAnswer, ClientError> {
        let io = |source| ClientError::Io {
            endpoint: self.shown(),
            source,
        };
        let (host, full_path) = match self {
            Endpoint::Tcp { authority, prefix } => (authority.as_str(), format!("{prefix}{path}")),
            Endpoint::Unix(_) => ("localhost", path.to_owned()),
        };
        let mut head = format!(
            "{method} {full_path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\nUser-Agent: {}\r\n",
            body.map_or(0, str::len),
            crate::user_agent()
        );
        if body.is_some() {
            head.push_str("Content-Type: application/json\r\n");
        }
        if let Some(token) = token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        head.push_str("\r\n");
        head.push_str(body.unwrap_or_default());
        let raw = match self {
            Endpoint::Tcp { authority, .. } => {
                let addr = authority
                    .to_socket_addrs()
                    .map_err(io)?
                    .next()
                    .ok_or_else(|| ClientError::BadUrl(self.shown()))?;
                let stream = TcpStream::connect_timeout(&addr, timeout).map_err(io)?;
                exchange(stream, &head, timeout).map_err(io)?
            }
            Endpoint::Unix(path) => {
                let stream = UnixStream::connect(path).map_err(io)?;
                exchange(stream, &head, timeout).map_err(io)?
            }
        };
        parse_answer(&raw).ok_or_else(|| ClientError::Malformed(self.shown()))
    }
}

/// The socket operations both stream types share.
trait Stream: Read + Write {
    fn set_timeouts(&self, timeout: Duration) -> std::io::Result<()>;
}

impl Stream for TcpStream {
    fn set_timeouts(&self, timeout: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(timeout))?;
        self.set_write_timeout(Some(timeout))
    }
}

impl Stream for UnixStream {
    fn set_timeouts(&self, timeout: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(timeout))?;
        self.set_write_timeout(Some(timeout))
    }
}

fn exchange(mut stream: impl Stream, head: &str, timeout: Duration) -> std::io::Result<Vec<u8>> {
    stream.set_timeouts(timeout)?;
    stream.write_all(head.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    Ok(raw)
}

/// Status line and headers ([`crate::response_head`]), then the body (plain or chunked).
fn parse_answer(raw: &[u8]) -> Option<StatusAnswer> {
    let head = crate::response_head::parse(raw).ok()??;
    let body = &raw[head.len..];
    let body = if head.chunked {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    Some(StatusAnswer {
        status: head.status,
        body: String::from_utf8_lossy(&body).into_owned(),
        config: head.agent_config.map(str::to_owned),
        daemon: head.agent_daemon.map(str::to_owned),
    })
}

/// The data of a chunked body, up to its last (empty) chunk.
fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let httparse::Status::Complete((start, size)) = httparse::parse_chunk_size(body).ok()?
        else {
            return None;
        };
        let size = usize::try_from(size).ok()?;
        body = &body[start..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size.checked_add(2)?..)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_answers() {
        assert_eq!(
            Endpoint::parse("http://127.0.0.1:9465/").expect("url"),
            Endpoint::Tcp {
                authority: "127.0.0.1:9465".into(),
                prefix: String::new()
            }
        );
        assert_eq!(
            Endpoint::parse("/run/hb.sock").expect("path"),
            Endpoint::Unix("/run/hb.sock".into())
        );
        assert!(Endpoint::parse("https://x:1").is_err());
        let plain =
            parse_answer(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").expect("answer");
        assert_eq!((plain.status, plain.body.as_str()), (200, "ok"));
        let chunked = parse_answer(
            b"HTTP/1.1 503 X\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n1\r\nc\r\n0\r\n\r\n",
        )
        .expect("answer");
        assert_eq!((chunked.status, chunked.body.as_str()), (503, "abc"));
    }
}
