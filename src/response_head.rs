//! The head of an HTTP/1.1 response (status line and headers), read with `httparse` for the two
//! clients that speak HTTP/1.1 themselves: ping's fast path (`ping/http1.rs`) and the status
//! client (`status/client.rs`).
//!
//! Only what those clients act on is kept: the status, where the head ends, `Content-Length`,
//! `Retry-After`, `Location`, whether the body is chunked and the status endpoint's
//! `Heartbeat-Agent-Config` and `Heartbeat-Agent-Daemon`. Header lines that are not valid are skipped,
//! as a lenient client does. The header slots live on the stack; only a head with more headers
//! than that is parsed a second time, with slots on the heap.

use httparse::{Header, ParserConfig, Response, Status, EMPTY_HEADER};

/// The status endpoint's header naming the config its daemon runs (`crate::status::owner`).
pub(crate) const AGENT_CONFIG: &str = "heartbeat-agent-config";

/// The status endpoint's header carrying its daemon's id (`crate::status::owner`).
pub(crate) const AGENT_DAEMON: &str = "heartbeat-agent-daemon";

/// Header slots on the stack: more than any ping host or the status endpoint sends.
const STACK_HEADERS: usize = 32;

/// What a client needs of a complete response head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ResponseHead<'a> {
    /// The status code.
    pub status: u16,
    /// The head's length in bytes, the blank line included: the body starts here.
    pub len: usize,
    /// `Content-Length`, when given and a number (the last one counts).
    pub content_length: Option<usize>,
    /// The raw `Retry-After` value, when given as text (the last one counts); see
    /// [`crate::backoff::retry_after`].
    pub retry_after: Option<&'a str>,
    /// The raw `Location` value, when given as text (the last one counts).
    pub location: Option<&'a str>,
    /// Whether a `Transfer-Encoding` header names `chunked`.
    pub chunked: bool,
    /// The status endpoint's `Heartbeat-Agent-Config` (the config its daemon runs), as text.
    pub agent_config: Option<&'a str>,
    /// The status endpoint's `Heartbeat-Agent-Daemon` (its daemon's id), as text.
    pub agent_daemon: Option<&'a str>,
}

/// Parses the head at the start of `buf`: `Ok(None)` while it is incomplete (read more), an
/// error when `buf` is not the start of an HTTP/1.x response.
pub(crate) fn parse(buf: &[u8]) -> Result<Option<ResponseHead<'_>>, httparse::Error> {
    let mut headers = [EMPTY_HEADER; STACK_HEADERS];
    match parse_into(buf, &mut headers) {
        Err(httparse::Error::TooManyHeaders) => {
            // Every header line takes at least three bytes (`a:\n`).
            let mut headers = vec![EMPTY_HEADER; buf.len() / 3 + 1];
            parse_into(buf, &mut headers)
        }
        parsed => parsed,
    }
}

fn parse_into<'b>(
    buf: &'b [u8],
    headers: &mut [Header<'b>],
) -> Result<Option<ResponseHead<'b>>, httparse::Error> {
    let mut response = Response::new(headers);
    let len = match ParserConfig::default()
        .ignore_invalid_headers_in_responses(true)
        .parse_response(&mut response, buf)?
    {
        Status::Complete(len) => len,
        Status::Partial => return Ok(None),
    };
    let status = response.code.ok_or(httparse::Error::Status)?;
    let mut head = ResponseHead {
        status,
        len,
        content_length: None,
        retry_after: None,
        location: None,
        chunked: false,
        agent_config: None,
        agent_daemon: None,
    };
    for header in response.headers.iter() {
        let name = header.name;
        if name.eq_ignore_ascii_case("content-length") {
            head.content_length = text(header.value).and_then(|v| v.parse().ok());
        } else if name.eq_ignore_ascii_case("retry-after") {
            head.retry_after = text(header.value);
        } else if name.eq_ignore_ascii_case("location") {
            head.location = text(header.value);
        } else if name.eq_ignore_ascii_case(AGENT_CONFIG) {
            head.agent_config = text(header.value);
        } else if name.eq_ignore_ascii_case(AGENT_DAEMON) {
            head.agent_daemon = text(header.value);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            head.chunked |= header
                .value
                .windows(b"chunked".len())
                .any(|w| w.eq_ignore_ascii_case(b"chunked"));
        }
    }
    Ok(Some(head))
}

/// A header value as trimmed text, when it is UTF-8.
fn text(value: &[u8]) -> Option<&str> {
    std::str::from_utf8(value).ok().map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_status_length_retry_after_and_chunking() {
        let raw = b"HTTP/1.1 429 Too Many\r\nRetry-After: 7 \r\ncontent-length: 12\r\n\r\nbody";
        let head = parse(raw).expect("valid").expect("complete");
        assert_eq!(head.status, 429);
        assert_eq!(head.len, raw.len() - 4);
        assert_eq!(head.content_length, Some(12));
        assert_eq!(head.retry_after, Some("7"));
        assert!(!head.chunked);
        let chunked = parse(b"HTTP/1.0 200\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n")
            .expect("valid")
            .expect("complete");
        assert_eq!((chunked.status, chunked.chunked), (200, true));
        let owned = parse(
            b"HTTP/1.1 200 OK\r\nHeartbeat-Agent-Config: /c.toml\r\nheartbeat-agent-daemon: 0a1b \r\n\r\n",
        )
        .expect("valid")
        .expect("complete");
        assert_eq!(
            (owned.agent_config, owned.agent_daemon),
            (Some("/c.toml"), Some("0a1b"))
        );
    }

    #[test]
    fn an_incomplete_head_asks_for_more_and_junk_is_an_error() {
        assert_eq!(parse(b"HTTP/1.1 200 OK\r\nContent-Le"), Ok(None));
        assert_eq!(parse(b""), Ok(None));
        assert!(parse(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
        assert!(parse(b"HTTP/1.1 2000 OK\r\n\r\n").is_err());
    }

    #[test]
    fn invalid_header_lines_are_skipped() {
        let head = parse(b"HTTP/1.1 204 No Content\r\nnot a header\r\nContent-Length: 0\r\n\r\n")
            .expect("valid")
            .expect("complete");
        assert_eq!((head.status, head.content_length), (204, Some(0)));
    }

    #[test]
    fn many_headers_are_read_past_the_stack_slots() {
        let mut raw = b"HTTP/1.1 503 Busy\r\n".to_vec();
        for i in 0..200 {
            raw.extend_from_slice(format!("X-Filler-{i}: {i}\r\n").as_bytes());
        }
        raw.extend_from_slice(b"Retry-After: 30\r\n\r\n");
        let head = parse(&raw).expect("valid").expect("complete");
        assert_eq!((head.status, head.retry_after), (503, Some("30")));
        assert_eq!(head.len, raw.len());
    }
}
