//! A loopback ping host for the outbox tests whose behaviour can change while it runs: drop
//! every connection (the host is "down"), answer a status, or answer 200 after a delay. It
//! records the path of every request it read, in arrival order.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How the host answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Close each connection after reading the request, without an answer.
    Drop,
    /// Answer this status.
    Status(u16),
    /// Answer 200 after this many milliseconds.
    Slow(u64),
}

#[derive(Debug)]
struct Shared {
    behaviour: Mutex<Behaviour>,
    paths: Mutex<Vec<String>>,
}

/// A running host on 127.0.0.1 (port 0); its threads end with the test process.
#[derive(Debug, Clone)]
pub struct PingHost {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl PingHost {
    /// Starts a host behaving as `behaviour`.
    pub fn start(behaviour: Behaviour) -> PingHost {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared {
            behaviour: Mutex::new(behaviour),
            paths: Mutex::new(Vec::new()),
        });
        let state = shared.clone();
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = state.clone();
                thread::spawn(move || serve(stream, &state));
            }
        });
        PingHost { addr, shared }
    }

    /// `http://127.0.0.1:PORT/path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{path}", self.addr)
    }

    /// Changes how later requests are answered.
    pub fn set(&self, behaviour: Behaviour) {
        *self.shared.behaviour.lock().expect("lock") = behaviour;
    }

    /// Paths of every request read so far (without the leading `/`).
    pub fn paths(&self) -> Vec<String> {
        self.shared.paths.lock().expect("lock").clone()
    }

    /// How many requests for `path` arrived.
    pub fn count(&self, path: &str) -> usize {
        self.paths().iter().filter(|p| *p == path).count()
    }

    /// Forgets the recorded paths.
    pub fn clear(&self) {
        self.shared.paths.lock().expect("lock").clear();
    }

    /// Polls until `done(paths)` or `timeout`; returns whether it became true.
    pub fn wait_until(&self, timeout: Duration, done: impl Fn(&[String]) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if done(&self.paths()) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
}

fn serve(stream: TcpStream, shared: &Shared) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
            break;
        }
    }
    let path = line.split_whitespace().nth(1).unwrap_or_default();
    let path = path.trim_start_matches('/').to_owned();
    let behaviour = *shared.behaviour.lock().expect("lock");
    if behaviour == Behaviour::Drop {
        return;
    }
    shared.paths.lock().expect("lock").push(path);
    let code = match behaviour {
        Behaviour::Slow(ms) => {
            thread::sleep(Duration::from_millis(ms));
            200
        }
        Behaviour::Status(code) => code,
        Behaviour::Drop => return,
    };
    let mut stream = reader.into_inner();
    let _ = write!(
        stream,
        "HTTP/1.1 {code} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
}
