//! A small loopback HTTP/1.1 server for the tests: hands every request (method, path, headers,
//! body) to the test through a channel and answers as told: a status, a status after a delay,
//! a status with a JSON body, never (hang), or by closing the connection unanswered (drop). A
//! request is sent on the channel before it is answered, so once the client has its answer the
//! test holds the request without waiting; a test waiting for a request the agent sends on its
//! own receives with a timeout. [`refused_url`] gives a URL where nothing listens; [`exchange`]
//! sends one request written by hand (headers exactly as given) and reads the answer.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::Inbox;

/// How the server answers.
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

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The request target (path and query).
    pub path: String,
    /// Header names (lowercased) and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body (`Content-Length` bytes, up to 1 MiB).
    pub body: Vec<u8>,
}

impl Recorded {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the connection threads share.
#[derive(Debug)]
struct Shared {
    mode: Mutex<Mode>,
    /// Where each request goes, in arrival order (a clone per connection thread).
    requests: Sender<Recorded>,
    stopped: AtomicBool,
}

/// A running server on 127.0.0.1 (port 0); stops when dropped.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    inbox: Inbox<Recorded>,
}

impl Server {
    /// Starts a server answering in `mode`.
    pub fn start(mode: Mode) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let (sender, channel) = mpsc::channel();
        let shared = Arc::new(Shared {
            mode: Mutex::new(mode),
            requests: sender,
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
        Server {
            addr,
            shared,
            inbox: Inbox::new(channel),
        }
    }

    /// `http://127.0.0.1:PORT` + `path` (which starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Changes how later requests are answered.
    pub fn set_mode(&self, mode: Mode) {
        *self.shared.mode.lock().expect("mode lock") = mode;
    }

    /// Every request received so far, without waiting (the client has its answers).
    pub fn requests(&self) -> Vec<Recorded> {
        self.inbox.all()
    }

    /// Forgets the requests received so far.
    pub fn clear(&self) {
        self.inbox.clear();
    }

    /// Receives requests until `done(every request so far)` holds or `timeout` passed; returns
    /// whether it held. Wakes on each request, without polling.
    pub fn receive_until(&self, timeout: Duration, done: impl Fn(&[Recorded]) -> bool) -> bool {
        self.inbox.receive_until(timeout, done)
    }

    /// Receives until at least `n` requests arrived or `timeout` passed; returns them all.
    pub fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Recorded> {
        self.receive_until(timeout, |requests| requests.len() >= n);
        self.requests()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(stream: TcpStream, shared: &Shared) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.trim_end().split_once(':') {
            let name = name.trim().to_ascii_lowercase();
            if name == "content-length" {
                length = value.trim().parse().unwrap_or(0);
            }
            headers.push((name, value.trim().to_owned()));
        }
    }
    let mut body = vec![0u8; length.min(1 << 20)];
    let _ = reader.read_exact(&mut body);
    let mode = *shared.mode.lock().expect("mode lock");
    if mode == Mode::Drop {
        return;
    }
    let request = Recorded {
        method,
        path,
        headers,
        body,
    };
    // The test may have dropped the server (and its receiver) already: nobody to tell.
    let _ = shared.requests.send(request);
    let mut stream = reader.into_inner();
    match mode {
        Mode::Slow(ms) => {
            thread::sleep(Duration::from_millis(ms));
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
        Mode::Drop => {}
        Mode::Status(code) => {
            let body = format!("status {code}\n");
            let _ = write!(
                stream,
                "HTTP/1.1 {code} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
        Mode::Json(code, body) => {
            let _ = write!(
                stream,
                "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
        }
        Mode::RetryAfter(code, value) => {
            let _ = write!(
                stream,
                "HTTP/1.1 {code} X\r\nRetry-After: {value}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
        Mode::Hang => {
            while !shared.stopped.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// A URL on 127.0.0.1 where nothing listens (connections are refused).
pub fn refused_url(path: &str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    format!("http://{addr}{path}")
}

/// Sends `request_line` with `headers` (each `Name: value`, sent as given, then
/// `Connection: close`) to `authority` (`HOST:PORT`) on a new connection; returns the answer's
/// status and body.
pub fn exchange(authority: &str, request_line: &str, headers: &[&str]) -> (u16, String) {
    let mut stream = TcpStream::connect(authority).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .expect("read timeout");
    let mut request = format!("{request_line}\r\n");
    for header in headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    request.push_str("Connection: close\r\nContent-Length: 0\r\n\r\n");
    stream.write_all(request.as_bytes()).expect("write");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read the answer");
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"));
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}
