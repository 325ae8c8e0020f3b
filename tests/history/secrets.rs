//! No secret leaves through a run's record: a secret cut in half by the output tail is scrubbed
//! whole (the daemon's and `run --job`'s history and fail bodies, every cut position), and a
//! ping token a run printed before sync learned it is scrubbed when the record is served; and a
//! secret across the 4 KiB pieces of a long output line is scrubbed in the daemon's log.

use std::time::Duration;

use heartbeat_agent::status::client::Endpoint;
use serde_json::Value;

use super::{agent, history_json, runs};
use crate::util::daemon::Daemon;
use crate::util::emulator::{token_for, Background};
use crate::util::http::{refused_url, FakeServer, Mode};
use crate::util::Home;

const KEY: &str = "hb-cut-secret-key-0123456789abcdef";

/// Every last line length from 0 to 40: with a 40-byte tail, the cut falls before the key,
/// at each of its characters, and after it.
const CUTS: usize = 41;

/// The first 12 characters of `secret` that `text` holds, if any.
fn leaked<'a>(text: &str, secret: &'a str) -> Option<&'a str> {
    (0..=secret.len() - 12)
        .map(|at| &secret[at..at + 12])
        .find(|piece| text.contains(piece))
}

fn get(endpoint: &Endpoint, path: &str) -> String {
    let answer = endpoint
        .request("GET", path, None, Duration::from_secs(20))
        .expect("request");
    assert_eq!(answer.status, 200, "{path}: {}", answer.body);
    answer.body
}

#[test]
fn a_secret_cut_by_the_output_tail_keeps_no_12_characters_at_any_cut() {
    let home = Home::new();
    let host = FakeServer::start(Mode::Status(200));
    let mut text = format!(
        "[agent]\nstate_dir = \"{}\"\nshutdown_timeout = \"2s\"\n\n[api]\napi_key_env = \"HB_KEY\"\n\n",
        home.path("state").display()
    );
    for cut in 0..CUTS {
        text.push_str(&format!(
            "[[jobs]]\nname = \"cut{cut}\"\nschedule = \"* * * * * *\"\noutput_tail = \"40B\"\n\
             fail_url = \"{}\"\nfail_body = \"output_tail\"\n\
             command = [\"sh\", \"-c\", \"echo key=$HB_LEAK; head -c {cut} /dev/zero | tr '\\\\0' x; echo; exit 1\"]\n\
             env = {{ HB_LEAK = \"{KEY}\" }}\n\n",
            host.url(&format!("/fail/cut{cut}")),
        ));
    }
    home.write_config(&text);
    let daemon = Daemon::on(&home)
        .env("HB_KEY", KEY)
        .terminate_on_drop()
        .start();
    daemon.until("a run of every job", Duration::from_secs(60), || {
        let doc = history_json(&home, &["--limit", "1"]);
        let jobs = doc["jobs"].as_array().cloned().unwrap_or_default();
        (jobs.len() == CUTS && jobs.iter().all(|j| !runs(j).is_empty())).then_some(())
    });
    daemon.stop();
    let from_daemon = host.requests().len();
    for cut in 0..CUTS {
        let out = home
            .agent()
            .arg("--config")
            .arg(home.config_path())
            .args(["run", "--job", &format!("cut{cut}")])
            .env("HB_KEY", KEY)
            .output()
            .expect("run --job");
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // `run` passes the output through untouched: the key is the job's to print.
        assert!(String::from_utf8_lossy(&out.stdout).contains(KEY));
    }
    let requests = host.requests();
    assert!(
        from_daemon >= CUTS && requests.len() >= from_daemon + CUTS,
        "a fail ping from each job's daemon run and run --job: {} and {}",
        from_daemon,
        requests.len()
    );
    for request in &requests {
        let body = request.text();
        assert!(
            leaked(&body, KEY).is_none(),
            "{}: the fail body keeps {:?} of the key: {body:?}",
            request.path(),
            leaked(&body, KEY)
        );
        let cut: usize = request.path()["/fail/cut".len()..].parse().expect("a cut");
        let last = format!("{}\n", "x".repeat(cut));
        let last = &last[last.len().saturating_sub(40)..];
        assert!(body.ends_with(last), "{}: {body:?}", request.path());
        assert!(body.len() <= 40, "{}: {body:?}", request.path());
    }
    let doc = history_json(&home, &["--limit", "100"]);
    let mut seen = 0;
    for job in doc["jobs"].as_array().expect("jobs") {
        for run in runs(job) {
            let tail = run["output_tail"].as_str().expect("a tail");
            assert!(
                leaked(tail, KEY).is_none(),
                "{}: the history keeps {:?} of the key: {tail:?}",
                job["job"],
                leaked(tail, KEY)
            );
            seen += 1;
        }
    }
    assert!(seen >= 2 * CUTS, "{seen} runs in the history");
    // A cut before the key shows it redacted whole.
    let short = runs(&history_json(&home, &["cut0", "--limit", "1"]))[0]["output_tail"].clone();
    assert_eq!(short, Value::from("key=[redacted]\n\n"), "{short}");
}

#[test]
fn a_ping_token_printed_before_the_first_sync_is_scrubbed_when_served() {
    let token = token_for("records-early");
    let emulator = Background::with_checks(&[("c1", &token)]);
    let home = Home::new();
    let socket = home.path("status.sock");
    home.write_config(&format!(
        "[agent]\nstate_dir = \"{state}\"\nshutdown_timeout = \"2s\"\nsync_jitter = \"0s\"\n\n\
         [status]\nlisten = \"{socket}\"\n\n\
         [api]\nbase_url = \"{base}\"\nping_base_url = \"{base}\"\naccount_id = \"{account}\"\n\
         api_key_env = \"EMULATOR_KEY\"\n\n\
         [[jobs]]\nname = \"beat\"\nschedule = \"@daily\"\ncheck_id = \"c1\"\n\
         command = [\"sh\", \"-c\", \"echo my token is {token}\"]\n\
         fail_url = \"{fail}\"\nfail_body = \"output_tail\"\n[jobs.check]\nperiod = \"1d\"\n",
        state = home.path("state").display(),
        socket = socket.display(),
        base = emulator.base_url(),
        account = emulator.account(),
        fail = refused_url("/fail"),
    ));
    // Before any sync the agent does not know the token: the record keeps it as printed.
    let out = home
        .agent()
        .arg("--config")
        .arg(home.config_path())
        .args(["run", "--job", "beat"])
        .env("EMULATOR_KEY", emulator.api_key())
        .output()
        .expect("run --job");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = home.path("state").join("history/beat/runs.jsonl");
    let written = std::fs::read_to_string(&file).expect("the job's history");
    assert!(written.contains(&token), "the record as written: {written}");
    // The daemon's first sync learns the check's ping URL, token and all.
    let daemon = Daemon::on(&home)
        .env("EMULATOR_KEY", emulator.api_key())
        .terminate_on_drop()
        .start();
    let sync_state = home.path("state").join("sync/beat.json");
    daemon.until(
        "sync to learn the ping URL",
        Duration::from_secs(20),
        || {
            std::fs::read_to_string(&sync_state)
                .ok()
                .filter(|text| text.contains(&token))
        },
    );
    let endpoint = Endpoint::Unix(socket);
    for path in ["/jobs/beat", "/jobs/beat/runs", "/jobs/beat/runs/1"] {
        let body = get(&endpoint, path);
        assert!(!body.contains(&token), "{path} serves the token: {body}");
        assert!(body.contains("my token is [redacted]"), "{path}: {body}");
    }
    daemon.stop();
    // `history` reads the files knowing what sync learned.
    for args in [&["history", "beat"][..], &["history", "--json", "beat"][..]] {
        let out = agent(&home, args);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!text.contains(&token), "{args:?} shows the token: {text}");
        assert!(text.contains("my token is [redacted]"), "{args:?}: {text}");
    }
}

/// Where the key starts in the long line of job `long{i}`: across the 4 KiB boundaries of the
/// daemon's log of overlong lines, 1 byte, 17 bytes and all but 1 byte of it before each.
const LONG_LINE_STARTS: [usize; 3] = [1, 17, KEY.len() - 1];

/// The 10 KiB line job `long{i}` prints: `x`s with the key across 4096 and 8192.
fn long_line(before: usize) -> String {
    let mut line = String::new();
    for boundary in [4096, 8192] {
        line.push_str(&"x".repeat(boundary - before - line.len()));
        line.push_str(KEY);
    }
    line.push_str(&"y".repeat(10 * 1024 - line.len()));
    line
}

#[test]
fn a_secret_across_the_pieces_of_a_long_output_line_is_scrubbed_in_the_log_and_the_history() {
    let home = Home::new();
    let mut text = format!(
        "[agent]\nstate_dir = \"{}\"\nshutdown_timeout = \"2s\"\n\n[api]\napi_key_env = \"HB_KEY\"\n\n",
        home.path("state").display()
    );
    for (i, before) in LONG_LINE_STARTS.iter().enumerate() {
        text.push_str(&format!(
            "[[jobs]]\nname = \"long{i}\"\nschedule = \"* * * * * *\"\noutput_tail = \"16KiB\"\n\
             command = [\"sh\", \"-c\", \"printf '%s\\\\n' \\\"$HB_LINE\\\"\"]\n\
             env = {{ HB_LINE = \"{}\" }}\n\n",
            long_line(*before),
        ));
    }
    home.write_config(&text);
    let daemon = Daemon::on(&home)
        .env("HB_KEY", KEY)
        .terminate_on_drop()
        .start();
    daemon.until("a run of every job", Duration::from_secs(60), || {
        let doc = history_json(&home, &["--limit", "1"]);
        let jobs = doc["jobs"].as_array().cloned().unwrap_or_default();
        (jobs.len() == LONG_LINE_STARTS.len() && jobs.iter().all(|j| !runs(j).is_empty()))
            .then_some(())
    });
    let log = daemon.stop();
    for (i, before) in LONG_LINE_STARTS.iter().enumerate() {
        let job = format!("long{i}");
        let pieces: Vec<&str> = log
            .iter()
            .filter(|l| l["message"] == "output" && l["job"] == job.as_str())
            .filter_map(|l| l["line"].as_str())
            .collect();
        assert!(pieces.len() >= 3, "{job}: the line in pieces: {pieces:?}");
        for piece in &pieces {
            assert!(
                leaked(piece, KEY).is_none(),
                "{job} (the key {before} bytes before a boundary): the log keeps {:?} of the \
                 key in a piece of {} bytes",
                leaked(piece, KEY),
                piece.len()
            );
        }
        // The pieces of one run, joined, are the line with each key replaced whole.
        let whole = long_line(*before).replace(KEY, "[redacted]");
        let joined = pieces.concat();
        assert!(
            joined.contains(&whole),
            "{job}: the pieces joined are not the line scrubbed: {} bytes",
            joined.len()
        );
        let doc = history_json(&home, &[&job, "--limit", "100"]);
        for run in runs(&doc) {
            let tail = run["output_tail"].as_str().expect("a tail");
            assert!(
                leaked(tail, KEY).is_none(),
                "{job}: the history keeps the key"
            );
            assert_eq!(tail, format!("{whole}\n"), "{job}: the history's tail");
        }
    }
}
