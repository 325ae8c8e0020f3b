//! The fake HTTP server of the tests, [`FakeServer`]: HTTP/1.1 on 127.0.0.1 (port 0), one
//! request per connection. It hands every request it receives (method, target, headers, body)
//! to the test through a channel and keeps them for later reads, and answers as told: in a
//! [`Mode`] (a status, a status after a delay, a status with a JSON body or a `Retry-After`,
//! never (hang), or by closing the connection unanswered (drop)), or from a script that sees
//! each request and how many came before it ([`FakeServer::scripted`]). A request is sent on
//! the channel before it is answered, so once the client has its answer the test holds the
//! request without waiting; a test waiting for a request the agent sends on its own receives
//! with a timeout. [`refused_url`] gives a URL where nothing listens; [`exchange`] sends one
//! request written by hand (headers exactly as given) and reads the answer.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::Inbox;

/// How the server answers every request (see [`FakeServer::scripted`] for answers that
/// depend on the request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Answer with this status and a short body.
    Status(u16),
    /// Read the request, record it, then never answer (until the server is dropped).
    Hang,
    /// Read the request and close the connection without an answer (the host is "down"); the
    /// request is not recorded, since as far as the client knows it never arrived.
    Drop,
    /// Answer 200 after this many milliseconds.
    Slow(u64),
    /// Answer this status with this `Retry-After` value.
    RetryAfter(u16, &'static str),
    /// Answer this status with this JSON body.
    Json(u16, &'static str),
}

/// An answer written by a script: status, headers, body, and a delay before answering.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    /// Sent as given; `content-type` is `text/plain; charset=utf-8` unless set here.
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
    pub delay: Duration,
}

/// What answers a request in [`FakeServer::scripted`]: the request, and how many requests
/// came before it.
type Script = dyn Fn(&Request, usize) -> Reply + Send + Sync;

/// How the server answers: a [`Mode`] (which the test may change) or a script.
#[derive(Clone)]
enum Answer {
    Mode(Mode),
    Script(Arc<Script>),
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The request target as sent: the path and the query, if any.
    pub target: String,
    /// Header names (lowercased) and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body (`Content-Length` bytes or the chunks, up to 1 MiB).
    pub body: Vec<u8>,
}

impl Request {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The target's path (before any `?`).
    pub fn path(&self) -> &str {
        self.target.split_once('?').map_or(&self.target, |(p, _)| p)
    }

    /// The target's query (after the `?`), or `""`.
    pub fn query(&self) -> &str {
        self.target.split_once('?').map_or("", |(_, q)| q)
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// What the connection threads share.
struct Shared {
    answer: Mutex<Answer>,
    /// Where each request goes, with how many went before it (counted under the same lock,
    /// so the count matches the order on the channel).
    requests: Mutex<(usize, Sender<Request>)>,
    stopped: AtomicBool,
}

/// A running server on 127.0.0.1 (port 0); stops when dropped.
pub struct FakeServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    inbox: Inbox<Request>,
}

impl std::fmt::Debug for FakeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl FakeServer {
    /// Starts a server answering in `mode`.
    pub fn start(mode: Mode) -> FakeServer {
        FakeServer::answering(Answer::Mode(mode))
    }

    /// Starts a server answering `script(request, how many requests came before it)`.
    pub fn scripted(
        script: impl Fn(&Request, usize) -> Reply + Send + Sync + 'static,
    ) -> FakeServer {
        FakeServer::answering(Answer::Script(Arc::new(script)))
    }

    fn answering(answer: Answer) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let (sender, channel) = mpsc::channel();
        let shared = Arc::new(Shared {
            answer: Mutex::new(answer),
            requests: Mutex::new((0, sender)),
            stopped: AtomicBool::new(false),
        });
        let state = shared.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                if state.stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let state = state.clone();
                thread::spawn(move || serve(stream, &state));
            }
        });
        FakeServer {
            addr,
            shared,
            inbox: Inbox::new(channel),
        }
    }

    /// `http://127.0.0.1:PORT` + `path` (which starts with `/`, or is empty).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Changes how later requests are answered.
    pub fn set_mode(&self, mode: Mode) {
        *self.shared.answer.lock().expect("answer lock") = Answer::Mode(mode);
    }

    /// Every request received so far, in arrival order, without waiting (the client has its
    /// answers).
    pub fn requests(&self) -> Vec<Request> {
        self.inbox.all()
    }

    /// Forgets the requests received so far.
    pub fn clear(&self) {
        self.inbox.clear();
    }

    /// Receives requests until `done(every request so far)` holds or `timeout` passed; returns
    /// whether it held. Wakes on each request, without polling.
    pub fn receive_until(&self, timeout: Duration, done: impl Fn(&[Request]) -> bool) -> bool {
        self.inbox.receive_until(timeout, done)
    }

    /// Receives until at least `n` requests arrived or `timeout` passed; returns them all.
    pub fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Request> {
        self.receive_until(timeout, |requests| requests.len() >= n);
        self.requests()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Reads one request from `stream`, records it and answers it.
fn serve(stream: TcpStream, shared: &Shared) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(stream);
    let Some(request) = read_request(&mut reader) else {
        return;
    };
    let answer = shared.answer.lock().expect("answer lock").clone();
    if matches!(answer, Answer::Mode(Mode::Drop)) {
        return;
    }
    let before = {
        let mut requests = shared.requests.lock().expect("requests lock");
        let before = requests.0;
        requests.0 += 1;
        // The test may have dropped the server (and its receiver) already: nobody to tell.
        let _ = requests.1.send(request.clone());
        before
    };
    let mut stream = reader.into_inner();
    match answer {
        Answer::Script(script) => {
            let reply = script(&request, before);
            thread::sleep(reply.delay);
            write_reply(&mut stream, &reply);
        }
        Answer::Mode(Mode::Slow(ms)) => {
            thread::sleep(Duration::from_millis(ms));
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
        Answer::Mode(Mode::Drop) => {}
        Answer::Mode(Mode::Status(code)) => {
            let body = format!("status {code}\n");
            let _ = write!(
                stream,
                "HTTP/1.1 {code} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
        Answer::Mode(Mode::Json(code, body)) => {
            let _ = write!(
                stream,
                "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
        }
        Answer::Mode(Mode::RetryAfter(code, value)) => {
            let _ = write!(
                stream,
                "HTTP/1.1 {code} X\r\nRetry-After: {value}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
        Answer::Mode(Mode::Hang) => {
            while !shared.stopped.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// The request line, headers and body of one request; `None` when the client sent nothing.
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.trim_end().split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let mut request = Request {
        method,
        target,
        headers,
        body: Vec::new(),
    };
    request.body = if request
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        read_chunks(reader)
    } else {
        let length: usize = request
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; length.min(1 << 20)];
        let _ = reader.read_exact(&mut body);
        body
    };
    Some(request)
}

/// A chunked body, up to 1 MiB.
fn read_chunks(reader: &mut BufReader<TcpStream>) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        if reader.read_line(&mut size).unwrap_or(0) == 0 {
            return body;
        }
        let size = size.trim().split(';').next().unwrap_or_default();
        let Ok(size) = usize::from_str_radix(size, 16) else {
            return body;
        };
        if size == 0 || body.len() + size > 1 << 20 {
            return body;
        }
        let mut chunk = vec![0u8; size + 2];
        if reader.read_exact(&mut chunk).is_err() {
            return body;
        }
        body.extend_from_slice(&chunk[..size]);
    }
}

/// Writes `reply` with its status's reason phrase, its headers, a `content-type` unless it has
/// one, and the length.
fn write_reply(stream: &mut TcpStream, reply: &Reply) {
    let reason = axum::http::StatusCode::from_u16(reply.status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("X");
    let mut head = format!("HTTP/1.1 {} {reason}\r\n", reply.status);
    if !reply
        .headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
    {
        head.push_str("content-type: text/plain; charset=utf-8\r\n");
    }
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "content-length: {}\r\nconnection: close\r\n\r\n",
        reply.body.len()
    ));
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(reply.body.as_bytes());
}

/// A URL on 127.0.0.1 where nothing listens (connections are refused).
///
/// The port stays taken for the rest of the test's process: a socket is bound to it and never
/// listens, so a connection is refused, and no server of a test running beside this one can
/// be given the same port (a listener bound to port 0 and dropped, as this once did, handed
/// its port to the next test's emulator, which then received this test's pings).
pub fn refused_url(path: &str) -> String {
    format!("http://127.0.0.1:{}{path}", refused_port())
}

/// A free TCP port on 127.0.0.1 at the time of asking (bound, then released for a server the
/// test starts: the daemon's endpoint, an etcd member).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A port on 127.0.0.1 bound by this process and never listened on (see [`refused_url`]).
pub fn refused_port() -> u16 {
    // SAFETY: plain socket calls on a new descriptor and local structures; the descriptor is
    // deliberately left open until the process ends.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let bound = libc::bind(fd, std::ptr::from_ref(&addr).cast(), len);
        assert_eq!(bound, 0, "bind: {}", std::io::Error::last_os_error());
        let mut got: libc::sockaddr_in = std::mem::zeroed();
        let mut got_len = len;
        let named = libc::getsockname(fd, std::ptr::from_mut(&mut got).cast(), &mut got_len);
        assert_eq!(named, 0, "getsockname: {}", std::io::Error::last_os_error());
        u16::from_be(got.sin_port)
    }
}

/// Sends `request_line` with `headers` (each `Name: value`, sent as given, then
/// `Connection: close`) to `authority` (`HOST:PORT`) on a new connection; returns the answer's
/// status and body.
pub fn exchange(authority: &str, request_line: &str, headers: &[&str]) -> (u16, String) {
    let answer = exchange_with_body(authority, request_line, headers, "");
    (answer.status, answer.body)
}

/// An answer read by [`exchange_with_body`].
pub struct RawAnswer {
    /// The status code.
    pub status: u16,
    /// The status line and headers, as received.
    pub head: String,
    /// The body.
    pub body: String,
}

/// [`exchange`] with a request `body` (its `Content-Length` added) and the answer's head.
pub fn exchange_with_body(
    authority: &str,
    request_line: &str,
    headers: &[&str],
    body: &str,
) -> RawAnswer {
    let mut stream = TcpStream::connect(authority).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .expect("read timeout");
    let mut request = format!("{request_line}\r\n");
    for header in headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    request.push_str(&format!(
        "Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    stream.write_all(request.as_bytes()).expect("write");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read the answer");
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"));
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    RawAnswer {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}
