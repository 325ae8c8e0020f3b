//! What a job's page costs when every run kept a MiB of output: the page shows each run's last
//! 4 KiB (the rest one link away), and eight readers at once, of the page or of the JSON list
//! of runs, and 32 of `/status`, keep the daemon's peak resident size under 64 MiB (its
//! `VmHWM`, read from /proc).

use std::time::Duration;

use heartbeat_agent::status::client::Endpoint;
use serde_json::Value;

use super::{history_json, runs};
use crate::util::daemon::Daemon;
use crate::util::{peak_kib, Home};

const MIB: usize = 1024 * 1024;

fn get(endpoint: &Endpoint, path: &str) -> String {
    let answer = endpoint
        .request("GET", path, None, Duration::from_secs(60))
        .expect("request");
    assert_eq!(answer.status, 200, "{path}: {:.300}", answer.body);
    answer.body
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
    home.write_config(&format!(
        "[agent]\nstate_dir = \"{}\"\nshutdown_timeout = \"2s\"\n\n[status]\nlisten = \"{}\"\n\n\
         [[jobs]]\nname = \"big\"\nschedule = \"* * * * * *\"\noutput_tail = \"1MiB\"\n\
         history = 20\ncommand = [\"sh\", \"-c\", \"head -c 1100000 /dev/zero | tr '\\\\0' x; echo; echo done\"]\n",
        home.path("state").display(),
        socket.display(),
    ));
    let daemon = Daemon::on(&home).terminate_on_drop().start();
    daemon.until(
        "twenty runs in the history",
        Duration::from_secs(90),
        || {
            let doc = history_json(&home, &["big", "--limit", "1"]);
            (runs(&doc).first()?["seq"].as_u64()? >= 20).then_some(())
        },
    );
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
