//! The status endpoint against other local users: a flood of half-sent requests neither
//! exhausts the daemon's file descriptors nor stops its jobs, and the endpoint answers once the
//! flood is gone; on a loopback bind only `Host` values naming the loopback are answered (DNS
//! rebinding), a non-loopback bind is unchanged; `?refresh=1` without the token cannot spend
//! the API quota; the bearer scheme is read in any case.

use std::io::Read;
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use heartbeat_agent::status::client::Endpoint;

use super::{api_fetches, emulator_with_check, free_port, tcp_daemon, StatusHome, SECOND, TOKEN};
use crate::util::{self, Home};

/// One request to the endpoint on 127.0.0.1:`port` (see [`util::http::exchange`]).
fn raw(port: u16, request_line: &str, headers: &[&str]) -> (u16, String) {
    util::http::exchange(&format!("127.0.0.1:{port}"), request_line, headers)
}

/// Lines of the file at `path` (0 when it does not exist yet).
fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

/// Open file descriptors of process `pid`.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

/// Lets this test process hold `n` sockets at once (raises its soft limit to the hard one);
/// fails the test when the hard limit is too low to reproduce the flood.
fn allow_fds(n: u64) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    assert!(
        hard >= n,
        "this test needs {n} open files, the hard limit is {hard}: raise it (ulimit -Hn)"
    );
    if soft < n {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).expect("setrlimit");
    }
}

/// Connections that send half a request head and then nothing, all at once.
const FLOOD: usize = 1_100;

#[test]
fn a_flood_of_half_sent_requests_leaves_jobs_running_and_the_endpoint_answering() {
    allow_fds(FLOOD as u64 + 200);
    let home = Home::new();
    let port = free_port();
    let marker = home.path("ticks");
    home.write(
        None,
        &format!("listen = \"127.0.0.1:{port}\""),
        &format!(
            "[[jobs]]\nname = \"tick\"\nschedule = \"*/1 * * * * *\"\nshell = \"echo tick >> {}\"\n",
            marker.display()
        ),
    );
    // 256 descriptors: the flood alone would exhaust them if every connection were accepted.
    let daemon = tcp_daemon(&home, port, "", &["prlimit", "--nofile=256:256", "--"]);
    let pid = daemon.pid();
    daemon.until("the job ran", Duration::from_secs(5), || {
        (lines(&marker) > 0).then_some(())
    });
    let baseline = open_fds(pid);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let half = format!("GET /status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n");
    let flood = runtime.block_on(async {
        let mut attempts = tokio::task::JoinSet::new();
        for _ in 0..FLOOD {
            let half = half.clone();
            attempts.spawn(async move {
                use tokio::io::AsyncWriteExt;
                let connect = tokio::net::TcpStream::connect(("127.0.0.1", port));
                let mut stream = tokio::time::timeout(Duration::from_secs(3), connect)
                    .await
                    .ok()?
                    .ok()?;
                stream.write_all(half.as_bytes()).await.ok()?;
                stream.into_std().ok()
            });
        }
        let mut open = Vec::new();
        while let Some(result) = attempts.join_next().await {
            open.extend(result.expect("no panic"));
        }
        open
    });
    let connected = flood.len();
    assert!(connected >= 64, "only {connected} of {FLOOD} connected");

    // The flood holds on for longer than the header timeout (5 s): jobs go on, the daemon's
    // descriptors stay bounded, and the connections it took first are closed.
    let ticks = lines(&marker);
    let started = Instant::now();
    let mut most_fds = 0;
    while started.elapsed() < Duration::from_secs(7) {
        most_fds = most_fds.max(open_fds(pid));
        std::thread::sleep(Duration::from_millis(100));
    }
    // The streams are non-blocking: a read tells at once whether the endpoint closed them.
    let closed = flood
        .iter()
        .filter(|stream| {
            let mut byte = [0u8; 1];
            let mut stream: &TcpStream = stream;
            match stream.read(&mut byte) {
                Ok(0) => true,
                Ok(_) => false,
                Err(err) => err.kind() != std::io::ErrorKind::WouldBlock,
            }
        })
        .count();
    let ran = lines(&marker) - ticks;
    let log = daemon.text();
    eprintln!(
        "flood: {connected} of {FLOOD} connected; daemon fds {baseline} before, at most \
         {most_fds} during; {closed} closed by the endpoint after 7 s; {ran} runs meanwhile"
    );
    // 64 connections, plus up to 64 accepted and not read yet (docs/status.md).
    assert!(
        most_fds <= baseline + 128 + 16,
        "{most_fds} descriptors open (baseline {baseline})"
    );
    assert!(
        closed >= 64,
        "only {closed} stalled connections were closed"
    );
    assert!(ran >= 4, "only {ran} runs in 7 s of flood:\n{log}");
    assert!(!log.contains("Too many open files"), "{log}");

    drop(flood);
    drop(runtime);
    let endpoint = Endpoint::parse(&format!("http://127.0.0.1:{port}")).expect("url");
    let answer = daemon.until(
        "the endpoint answers after the flood",
        Duration::from_secs(10),
        || endpoint.request("GET", "/status", None, SECOND).ok(),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.body.contains("\"tick\""), "{}", answer.body);
}

/// Slow clients (the flood above: 1,100 connections that send half a request head and then
/// nothing) must not keep probes out: `/healthz` and `/readyz` answer within a second, again
/// and again, for longer than the header timeout, while the daemon's descriptors stay bounded.
#[test]
fn slow_clients_do_not_starve_health_probes() {
    slow_clients_against_probes(false);
}

/// The same when each slow client comes back 50 ms after the endpoint closes it.
#[test]
fn slow_clients_that_keep_coming_back_do_not_starve_health_probes() {
    slow_clients_against_probes(true);
}

fn slow_clients_against_probes(come_back: bool) {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    allow_fds(FLOOD as u64 + 200);
    let home = Home::new();
    let port = free_port();
    home.write(
        None,
        &format!("listen = \"127.0.0.1:{port}\""),
        "[[jobs]]\nname = \"tick\"\nschedule = \"*/1 * * * * *\"\ncommand = [\"true\"]\n",
    );
    let daemon = tcp_daemon(&home, port, "", &["prlimit", "--nofile=256:256", "--"]);
    let pid = daemon.pid();
    let baseline = open_fds(pid);
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let attack = {
        let (stop, opened) = (Arc::clone(&stop), Arc::clone(&opened));
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            let half = format!("GET /status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n");
            runtime.block_on(async move {
                let mut clients = tokio::task::JoinSet::new();
                for _ in 0..FLOOD {
                    let (half, stop, opened) =
                        (half.clone(), Arc::clone(&stop), Arc::clone(&opened));
                    clients.spawn(async move {
                        use tokio::io::{AsyncReadExt, AsyncWriteExt};
                        while !stop.load(Ordering::Relaxed) {
                            let connect = tokio::net::TcpStream::connect(("127.0.0.1", port));
                            if let Ok(Ok(mut stream)) =
                                tokio::time::timeout(Duration::from_secs(3), connect).await
                            {
                                opened.fetch_add(1, Ordering::Relaxed);
                                if stream.write_all(half.as_bytes()).await.is_ok() {
                                    // Held until the endpoint closes it (or the attack ends).
                                    let mut byte = [0u8; 1];
                                    let _ = tokio::time::timeout(
                                        Duration::from_secs(10),
                                        stream.read(&mut byte),
                                    )
                                    .await;
                                }
                            }
                            if !come_back {
                                while !stop.load(Ordering::Relaxed) {
                                    tokio::time::sleep(Duration::from_millis(50)).await;
                                }
                            }
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    });
                }
                while clients.join_next().await.is_some() {}
            });
        })
    };
    // The flood is in place, then probes for longer than the header timeout (5 s).
    std::thread::sleep(Duration::from_secs(2));
    let endpoint = Endpoint::parse(&format!("http://127.0.0.1:{port}")).expect("url");
    let mut slowest = Duration::ZERO;
    let mut most_fds = 0;
    let mut failures = Vec::new();
    for i in 0..12 {
        let path = if i % 2 == 0 { "/healthz" } else { "/readyz" };
        let asked = Instant::now();
        match endpoint.request("GET", path, None, SECOND) {
            Ok(answer) if answer.status == 200 => slowest = slowest.max(asked.elapsed()),
            other => failures.push(format!(
                "{path} #{i}: {other:?} after {:?}",
                asked.elapsed()
            )),
        }
        most_fds = most_fds.max(open_fds(pid));
        std::thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, Ordering::Relaxed);
    let _ = attack.join();
    let connections = opened.load(Ordering::Relaxed);
    eprintln!(
        "slow clients (coming back: {come_back}): {FLOOD} clients opened {connections} \
         connections; 12 probes, the slowest answered in {slowest:?}; daemon fds {baseline} \
         before, at most {most_fds} during"
    );
    assert!(
        failures.is_empty(),
        "probes failed under the flood: {failures:#?}"
    );
    assert!(slowest < SECOND, "a probe took {slowest:?}");
    assert!(
        !come_back || connections > FLOOD,
        "the flood never came back: {connections} connections"
    );
    // 64 connections, plus up to 64 accepted and not read yet (docs/status.md).
    assert!(
        most_fds <= baseline + 128 + 16,
        "{most_fds} descriptors open (baseline {baseline})"
    );
    assert!(!daemon.text().contains("Too many open files"));
}

#[test]
fn a_loopback_bind_answers_only_loopback_host_names() {
    let home = Home::new();
    let port = free_port();
    let marker = home.path("ran");
    home.write(
        None,
        &format!("listen = \"127.0.0.1:{port}\"\ntoken = \"{TOKEN}\""),
        &format!(
            "[[jobs]]\nname = \"j\"\nschedule = \"0 0 1 1 *\"\nshell = \"echo private-output; touch {}\"\n",
            marker.display()
        ),
    );
    let daemon = tcp_daemon(&home, port, "", &[]);
    let auth = format!("authorization: bearer {TOKEN}");
    for host in [
        format!("Host: 127.0.0.1:{port}"),
        format!("Host: localhost:{port}"),
        format!("Host: [::1]:{port}"),
    ] {
        let (status, body) = raw(port, "GET /healthz HTTP/1.1", &[&host]);
        assert_eq!(status, 200, "{host}: {body}");
    }
    // A page whose name was rebound to 127.0.0.1, a wrong port, no Host at all: refused.
    let rebound = format!("Host: rebound.example:{port}");
    for (head, host, shown) in [
        (
            "GET /status HTTP/1.1",
            rebound.as_str(),
            "Host \"rebound.example:",
        ),
        (
            "GET /status HTTP/1.1",
            "Host: localhost:1",
            "Host \"localhost:1\"",
        ),
        ("GET /status HTTP/1.0", "X-No-Host: 1", "no Host header"),
    ] {
        let (status, body) = raw(port, head, &[host]);
        assert_eq!(status, 421, "{host}: {body}");
        let doc: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let error = doc["error"].as_str().expect("an error");
        assert!(
            error.starts_with(shown)
                && error.contains(&format!(
                    "answers only Host 127.0.0.1:{port}, localhost:{port} or [::1]:{port}"
                )),
            "{error}"
        );
        assert!(!body.contains("private-output"), "{body}");
    }
    let (status, body) = raw(port, "POST /jobs/j/run HTTP/1.1", &[&rebound, &auth]);
    assert_eq!(status, 421, "{body}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(!marker.exists(), "a refused trigger ran the job");
    // The token's scheme in lower case is a bearer token all the same.
    let own = format!("Host: localhost:{port}");
    let (status, body) = raw(port, "POST /jobs/j/run HTTP/1.1", &[&own, &auth]);
    assert_eq!(status, 202, "{body}");
    daemon.until("the triggered run's output", Duration::from_secs(5), || {
        let (status, body) = raw(port, "GET /status HTTP/1.1", &[&own]);
        (status == 200 && body.contains("private-output")).then_some(())
    });
}

#[test]
fn a_non_loopback_bind_takes_any_host_with_the_token_in_any_case() {
    let home = Home::new();
    let port = free_port();
    home.write(
        None,
        &format!("listen = \"0.0.0.0:{port}\"\ntoken = \"{TOKEN}\""),
        "[[jobs]]\nname = \"j\"\nschedule = \"0 0 1 1 *\"\ncommand = [\"true\"]\n",
    );
    let _daemon = tcp_daemon(&home, port, "", &[]);
    let host = format!("Host: status.example.net:{port}");
    let (status, body) = raw(port, "GET /status HTTP/1.1", &[&host]);
    assert_eq!(status, 401, "{body}");
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let auth = format!("Authorization: {scheme} {TOKEN}");
        let (status, body) = raw(port, "GET /status HTTP/1.1", &[&host, &auth]);
        assert_eq!(status, 200, "{scheme}: {body}");
    }
    let (status, _) = raw(
        port,
        "GET /metrics HTTP/1.1",
        &[&host, &format!("Authorization: Basic {TOKEN}")],
    );
    assert_eq!(status, 401, "another scheme is no bearer token");
}

#[test]
fn refreshes_without_the_token_cannot_spend_the_api_quota() {
    let emulator = emulator_with_check();
    let key = emulator.api_key().to_owned();
    let home = Home::new();
    home.write(
        Some(&emulator),
        &format!(
            "listen = \"{}\"\ntoken = \"{TOKEN}\"",
            home.socket().display()
        ),
        "[[jobs]]\nname = \"j\"\nschedule = \"0 0 1 1 *\"\ncommand = [\"true\"]\ncheck_id = \"c1\"\n",
    );
    let _daemon = home.daemon(&key);
    let endpoint = home.endpoint();
    let fetches = || api_fetches(&emulator);
    let before = fetches();
    let started = Instant::now();
    for _ in 0..100 {
        let answer = endpoint
            .request("GET", "/status?refresh=1", None, SECOND * 15)
            .expect("request");
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert!(answer.body.contains("\"remote\""), "{}", answer.body);
    }
    let took = started.elapsed();
    let anonymous = fetches() - before;
    eprintln!("100 refreshes without the token in {took:?}: {anonymous} API fetches");
    // One fetch per 10 s at most: one, or two when the burst spans a 10 s boundary.
    let windows = took.as_secs() / 10 + 1;
    assert!(
        (1..=windows as usize).contains(&anonymous),
        "{anonymous} fetches for 100 refreshes in {took:?}"
    );
    // The token's holder refreshes whenever it asks.
    let before = fetches();
    for _ in 0..3 {
        let answer = endpoint
            .request("GET", "/status?refresh=1", Some(TOKEN), SECOND * 15)
            .expect("request");
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    assert_eq!(fetches() - before, 3);
}
