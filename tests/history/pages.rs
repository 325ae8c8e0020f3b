//! What a job's page costs when every run kept a MiB of output: the page shows each run's last
//! 4 KiB (the rest one link away), and eight readers at once, of the page or of the JSON list
//! of runs, and 32 of `/status`, keep the daemon's peak resident size under 64 MiB (its
//! `VmHWM`, read from /proc); 32 readers on 127.0.0.1 that wait before they read the runs
//! grow it by less than two answers, while `/healthz` and `/status` answer; a reader that never reads is cut off.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use heartbeat_agent::status::client::Endpoint;
use serde_json::Value;

use super::{history_json, runs};
use crate::util::daemon::Daemon;
use crate::util::http::free_port;
use crate::util::{peak_kib, Home};

const MIB: usize = 1024 * 1024;

fn get(endpoint: &Endpoint, path: &str) -> String {
    let answer = endpoint
        .request("GET", path, None, Duration::from_secs(60))
        .expect("request");
    assert_eq!(answer.status, 200, "{path}: {:.300}", answer.body);
    answer.body
}

/// The daemon on `home` with its endpoint on `listen` and job `big`, once `big` has run `n`
/// times, each printing a line of 1.1 MB (kept: `output_tail = "1MiB"`, `history = n`). Its
/// next run then waits without output until the daemon stops, so what is measured next is
/// what readers cost, not more runs (whose records a busy machine's low-priority history
/// writer may keep in memory a while).
fn big_runs(home: &Home, listen: &str, n: u64) -> Daemon {
    let count = home.path("runs-count");
    home.write_config(&format!(
        "[agent]\nstate_dir = \"{}\"\nshutdown_timeout = \"2s\"\n\n[status]\nlisten = \"{listen}\"\n\n\
         [[jobs]]\nname = \"big\"\nschedule = \"* * * * * *\"\noutput_tail = \"1MiB\"\n\
         history = {n}\ncommand = [\"sh\", \"-c\", \"n=$(cat {count} 2>/dev/null || echo 0); \
         if [ $n -ge {n} ]; then exec sleep 1000; fi; echo $((n+1)) > {count}; \
         head -c 1100000 /dev/zero | tr '\\\\0' x; echo; echo done\"]\n",
        home.path("state").display(),
        count = count.display(),
    ));
    let daemon = Daemon::on(home).terminate_on_drop().start();
    daemon.until(
        &format!("{n} runs in the history"),
        Duration::from_secs(90),
        || {
            let doc = history_json(home, &["big", "--limit", "1"]);
            (runs(&doc).first()?["seq"].as_u64()? >= n).then_some(())
        },
    );
    daemon
}

/// `readers` threads reading `path` `times` each, all at once; the longest answer.
fn read_at_once(endpoint: &Endpoint, path: &str, readers: usize, times: usize) -> usize {
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..readers)
            .map(|_| {
                scope.spawn(|| {
                    (0..times)
                        .map(|_| get(endpoint, path).len())
                        .max()
                        .unwrap_or(0)
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("a reader"))
            .max()
            .unwrap_or(0)
    })
}

#[test]
fn a_jobs_page_of_twenty_runs_of_a_mib_is_small_and_eight_readers_keep_the_daemon_small() {
    let home = Home::new();
    let socket = home.path("status.sock");
    let daemon = big_runs(&home, &socket.display().to_string(), 20);
    let endpoint = Endpoint::Unix(socket);
    let before = peak_kib(daemon.pid());
    let page = get(&endpoint, "/jobs/big");
    assert_eq!(
        page.matches("<tr class=\"run\"").count(),
        20,
        "twenty runs shown"
    );
    assert!(page.len() <= 4 * MIB, "the page is {} bytes", page.len());
    let link = page
        .find("/jobs/big/runs/")
        .expect("a link to a run's whole output");
    let seq: String = page[link + "/jobs/big/runs/".len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let run: Value =
        serde_json::from_str(&get(&endpoint, &format!("/jobs/big/runs/{seq}"))).expect("JSON");
    assert_eq!(
        run["seq"].as_u64(),
        seq.parse().ok(),
        "{:.300}",
        run.to_string()
    );
    let tail = run["output_tail"].as_str().expect("a tail");
    assert!(
        tail.len() >= MIB && tail.ends_with("x\ndone\n"),
        "{}",
        tail.len()
    );
    let longest = read_at_once(&endpoint, "/jobs/big", 8, 3);
    let pages = peak_kib(daemon.pid());
    eprintln!(
        "page {} bytes (longest {longest}); daemon peak {} KiB before the readers, {} KiB after \
         eight readers of /jobs/big",
        page.len(),
        before,
        pages
    );
    assert!(longest <= 4 * MIB, "a page of {longest} bytes");
    assert!(
        pages < 64 * 1024,
        "eight readers took the daemon to {pages} KiB (before: {before} KiB)"
    );
    let json = read_at_once(&endpoint, "/jobs/big/runs", 8, 1);
    let after = peak_kib(daemon.pid());
    eprintln!("/jobs/big/runs {json} bytes; daemon peak {after} KiB after eight readers of it");
    assert!(
        json >= 20 * MIB,
        "the JSON has every run's whole tail: {json} bytes"
    );
    assert!(
        after < 64 * 1024,
        "eight readers of the JSON took the daemon to {after} KiB"
    );
    // `/status` holds the job's last output tail (1 MiB): its readers take turns too.
    let status = read_at_once(&endpoint, "/status", 32, 2);
    let statuses = peak_kib(daemon.pid());
    eprintln!("/status {status} bytes; daemon peak {statuses} KiB after 32 readers of it");
    assert!(status >= MIB, "/status has the last tail: {status} bytes");
    assert!(
        statuses < 64 * 1024,
        "32 readers of /status took the daemon to {statuses} KiB"
    );
    daemon.stop();
}

/// A whole HTTP/1.1 answer read from a raw connection: status code, `Content-Length` and body.
struct Raw {
    status: u16,
    length: Option<usize>,
    body: Vec<u8>,
}

/// Sends `GET path` (with `Connection: close`) on a new connection to 127.0.0.1:`port`.
fn ask(port: u16, path: &str) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).expect("send");
    stream
}

/// Reads what `stream` gives until it ends (or is reset) and splits it.
fn answer(mut stream: TcpStream) -> Raw {
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .expect("timeout");
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 256 * 1024];
    while let Ok(n @ 1..) = stream.read(&mut chunk) {
        bytes.extend_from_slice(&chunk[..n]);
    }
    let end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an answer head");
    let head = String::from_utf8_lossy(&bytes[..end]).to_lowercase();
    let status = head[9..12].parse().expect("a status code");
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse().expect("a length"));
    Raw {
        status,
        length,
        body: bytes[end + 4..].to_vec(),
    }
}

/// How long `GET path` on 127.0.0.1:`port` took to answer 200 (fails after 10 s).
fn answered_in(port: u16, path: &str) -> Duration {
    let endpoint = Endpoint::parse(&format!("http://127.0.0.1:{port}")).expect("url");
    let asked = Instant::now();
    let answer = endpoint
        .request("GET", path, None, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{path} did not answer within 10 s: {e}"));
    assert_eq!(answer.status, 200, "{path}");
    asked.elapsed()
}

/// The longest of `/healthz` and `/status` answers, asked every 250 ms for `during`.
fn probes(port: u16, during: Duration) -> Duration {
    let until = Instant::now() + during;
    let mut longest = Duration::ZERO;
    while Instant::now() < until {
        longest = longest
            .max(answered_in(port, "/healthz"))
            .max(answered_in(port, "/status"));
        std::thread::sleep(Duration::from_millis(250));
    }
    longest
}

/// Readers that wait before they read.
const SLOW_READERS: usize = 32;

/// How long they wait.
const SLOW_FOR: Duration = Duration::from_secs(5);

/// The longest `/healthz` and `/status` may take meanwhile (a debug build on a busy machine;
/// they wait for no reader of the runs).
const PROBE_WITHIN: Duration = Duration::from_secs(5);

#[test]
fn slow_readers_of_the_runs_hold_two_answers_at_most_and_status_still_answers() {
    let home = Home::new();
    let port = free_port();
    let daemon = big_runs(&home, &format!("127.0.0.1:{port}"), 8);
    let before = peak_kib(daemon.pid());
    // Each asks at once and reads nothing for 5 s, then everything.
    let asked = Instant::now();
    let (answers, longest) = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..SLOW_READERS)
            .map(|_| {
                scope.spawn(move || {
                    let stream = ask(port, "/jobs/big/runs");
                    std::thread::sleep(SLOW_FOR.saturating_sub(asked.elapsed()));
                    answer(stream)
                })
            })
            .collect();
        let longest = probes(port, SLOW_FOR);
        let answers: Vec<Raw> = readers
            .into_iter()
            .map(|r| r.join().expect("a reader"))
            .collect();
        (answers, longest)
    });
    let all_read = asked.elapsed();
    let peak = peak_kib(daemon.pid());
    let size = answers.iter().map(|a| a.body.len()).max().unwrap_or(0);
    eprintln!(
        "{SLOW_READERS} slow readers of /jobs/big/runs ({size} bytes each) all read in {all_read:?}; \
         daemon peak {before} KiB before, {peak} KiB after; /healthz and /status meanwhile \
         answered within {longest:?}"
    );
    for raw in &answers {
        assert_eq!(raw.status, 200);
        assert_eq!(raw.length, Some(raw.body.len()), "a whole answer");
        let doc: Value = serde_json::from_slice(&raw.body).expect("the runs' JSON");
        assert_eq!(runs(&doc).len(), 8, "every kept run");
    }
    assert!(size >= 8 * MIB, "every run's whole tail: {size} bytes");
    // One answer at a time is made and sent (and the memory of one made before it may not be
    // given back yet): not one per reader.
    let answer_kib = (size / 1024) as u64;
    assert!(
        peak < 64 * 1024 && peak - before < 2 * answer_kib,
        "{SLOW_READERS} slow readers took the daemon to {peak} KiB (before: {before} KiB, an \
         answer {answer_kib} KiB)"
    );
    assert!(longest < PROBE_WITHIN, "a probe took {longest:?}");

    // A reader that never reads is cut off after the write stall (10 s), and then the next
    // reader gets its whole answer; `/healthz` and `/status` answer meanwhile.
    let stalled = ask(port, "/jobs/big/runs");
    std::thread::sleep(Duration::from_millis(500));
    let next_asked = Instant::now();
    let next = std::thread::spawn(move || answer(ask(port, "/jobs/big/runs")));
    let longest = probes(port, Duration::from_secs(5));
    let next = next.join().expect("the next reader");
    let waited = next_asked.elapsed();
    let cut = answer(stalled);
    let peak = peak_kib(daemon.pid());
    eprintln!(
        "a reader that read nothing was cut after {} of {:?} bytes; the next reader's whole \
         answer came after {waited:?}; probes meanwhile within {longest:?}; daemon peak {peak} KiB",
        cut.body.len(),
        cut.length
    );
    assert!(
        cut.length.is_some_and(|l| cut.body.len() < l),
        "the reader that read nothing was not cut: {} of {:?} bytes",
        cut.body.len(),
        cut.length
    );
    assert_eq!(
        next.length,
        Some(next.body.len()),
        "the next reader's whole answer"
    );
    assert!(
        waited >= Duration::from_secs(8) && waited < Duration::from_secs(60),
        "the next reader waited {waited:?} for the stalled one's turn"
    );
    assert!(longest < PROBE_WITHIN, "a probe took {longest:?}");
    assert!(peak < 64 * 1024, "the daemon took {peak} KiB");
    daemon.stop();
}
