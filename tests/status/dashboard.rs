//! The dashboard (`GET /`, `GET /jobs/{name}`) as a person sees it: headless Chromium loads it
//! from a real daemon running passing, failing and timed-out jobs, takes screenshots (kept
//! under target/test-artifacts/) and the test reads the DOM Chromium built: each job, its last
//! outcome, a failed run marked failed, output escaped, no secret, and no Content-Security-
//! Policy violation reported by the browser. On a non-loopback bind the pages need the token:
//! the bearer header or the cookie of the login form, which refuses forms from other sites.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use heartbeat_agent::status::client::Endpoint;

use super::{emulator_with_check, free_port, job, status_doc, tcp_daemon, StatusHome, TOKEN};
use crate::util::http::{exchange_with_body, RawAnswer};
use crate::util::{require, runs, Home};

const PING_TOKEN: &str = "c1000000-0000-4000-8000-0000000000c1";

/// Where the screenshots are kept: target/test-artifacts/.
fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target/tmp has a parent")
        .join("test-artifacts");
    std::fs::create_dir_all(&dir).expect("create target/test-artifacts");
    dir
}

/// Runs headless Chromium with `args` (its profile in `home`), killed after 60 s; returns
/// its stdout and stderr.
fn chromium(home: &Home, args: &[&str]) -> (String, String) {
    let profile = home.path("chromium-profile");
    let mut child = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .args(["--enable-logging=stderr", "--v=0", "--no-first-run"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .env("HOME", home.root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait for chromium").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium {args:?} did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut out = String::new();
    let mut err = String::new();
    let _ = child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out);
    let _ = child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err);
    (out, err)
}

/// The DOM Chromium built from `url` (a page that breaks its CSP fails the test).
fn dom(home: &Home, url: &str) -> String {
    let (dom, log) = chromium(home, &["--dump-dom", url]);
    assert!(dom.contains("</html>"), "no DOM for {url}: {log}");
    assert!(
        !log.contains("Content Security Policy"),
        "{url} breaks its own Content-Security-Policy: {log}"
    );
    dom
}

/// Takes a screenshot of `url` at `size` (`W,H`) into target/test-artifacts/`name`.
fn screenshot(home: &Home, url: &str, size: &str, name: &str) -> PathBuf {
    let file = artifacts().join(name);
    let _ = std::fs::remove_file(&file);
    let (_, log) = chromium(
        home,
        &[
            &format!("--screenshot={}", file.display()),
            &format!("--window-size={size}"),
            url,
        ],
    );
    let png = std::fs::read(&file).unwrap_or_else(|e| panic!("no screenshot {name}: {e}: {log}"));
    assert!(png.starts_with(b"\x89PNG") && png.len() > 5_000, "{name}");
    file
}

/// The start tag of the element whose attributes hold `marker` (as Chromium serialized it).
fn tag<'a>(dom: &'a str, marker: &str) -> &'a str {
    let at = dom
        .find(marker)
        .unwrap_or_else(|| panic!("no element with {marker} in the DOM:\n{dom}"));
    let start = dom[..at].rfind('<').expect("a tag start");
    let end = at + dom[at..].find('>').expect("a tag end");
    &dom[start..=end]
}

/// The elements (start tag to the next start tag of the same name) whose tags hold `marker`.
fn rows<'a>(dom: &'a str, marker: &str) -> Vec<&'a str> {
    dom.match_indices(marker)
        .map(|(at, _)| {
            let start = dom[..at].rfind("<tr").expect("a row");
            let end = dom[at..].find("</tr>").map_or(dom.len(), |e| at + e);
            &dom[start..end]
        })
        .collect()
}

/// What a reader sees in the cell `label` (`sync`, `check`, `last run`...) of job `name`'s row
/// of the overview `html`: its text, tags removed, entities decoded, spaces collapsed.
pub(super) fn cell_text(html: &str, name: &str, label: &str) -> String {
    let row = rows(html, &format!("data-job=\"{name}\""))
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no row of {name}:\n{html}"));
    let marker = format!("<td data-label=\"{label}\"");
    let start = row
        .find(&marker)
        .unwrap_or_else(|| panic!("no {label} cell in the row of {name}: {row}"));
    let cell = &row[start..];
    let cell = &cell[..cell.find("</td>").unwrap_or(cell.len())];
    let mut text = String::new();
    let mut in_tag = false;
    for c in cell.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    let text = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn the_dashboard_in_chromium_shows_each_job_and_marks_failed_runs() {
    if !require(
        runs("chromium", &["--version"]),
        "chromium",
        "bash scripts/test-tools.sh installs Debian's chromium as root",
    ) {
        return;
    }
    let emulator = emulator_with_check();
    let key = emulator.api_key().to_owned();
    let home = Home::new();
    let port = free_port();
    let jobs = format!(
        "[[jobs]]\nname = \"backup\"\nschedule = \"*/2 * * * * *\"\ncheck_id = \"c1\"\n\
         shell = \"echo backed up 42 files\"\n[jobs.check]\nperiod = \"1m\"\n\n\
         [[jobs]]\nname = \"report\"\nschedule = \"*/2 * * * * *\"\n\
         shell = \"echo 'token {TOKEN} key '$LEAK' <script>alert(1)</script>'; exit 3\"\n\
         env = {{ LEAK = \"{key}\" }}\n\n\
         [[jobs]]\nname = \"slow-sync\"\nschedule = \"*/2 * * * * *\"\ntimeout = \"1s\"\n\
         command = [\"sleep\", \"30\"]\n"
    );
    home.write(
        Some(&emulator),
        &format!("listen = \"127.0.0.1:{port}\"\ntoken = \"{TOKEN}\""),
        &jobs,
    );
    let daemon = tcp_daemon(&home, port, &key, &[]);
    let endpoint = Endpoint::parse(&format!("http://127.0.0.1:{port}")).expect("url");
    daemon.until("each job ran twice", Duration::from_secs(30), || {
        let doc = status_doc(&endpoint, false);
        ["backup", "report", "slow-sync"]
            .iter()
            .all(|name| {
                job(&doc, name)["recent"]
                    .as_array()
                    .is_some_and(|r| r.len() >= 2)
            })
            .then_some(())
    });
    let base = format!("http://127.0.0.1:{port}");
    let overview = dom(&home, &format!("{base}/"));
    for (name, outcome) in [
        ("backup", "success"),
        ("report", "failed"),
        ("slow-sync", "timed_out"),
    ] {
        let row = tag(&overview, &format!("data-job=\"{name}\""));
        assert!(
            row.contains(&format!("data-last=\"{outcome}\"")),
            "{name}: {row}"
        );
        let cells = rows(&overview, &format!("data-job=\"{name}\""));
        assert!(
            cells[0].contains(&format!("class=\"outcome {outcome}\"")),
            "{name}: {}",
            cells[0]
        );
        assert!(
            cells[0].contains("<svg class=\"spark\""),
            "{name} has no sparkline: {}",
            cells[0]
        );
        assert!(
            cells[0].contains(&format!("href=\"/jobs/{name}\"")),
            "{}",
            cells[0]
        );
    }
    let page = dom(&home, &format!("{base}/jobs/report"));
    let failed = rows(&page, "data-outcome=\"failed\"");
    assert!(failed.len() >= 2, "the failed runs are not marked: {page}");
    assert!(
        failed[0].contains("failed (exit 3)") && failed[0].contains("&lt;script&gt;alert(1)"),
        "{}",
        failed[0]
    );
    for dom in [&overview, &page] {
        assert!(
            !dom.contains("<script"),
            "a script got into the page: {dom}"
        );
        for secret in [TOKEN, key.as_str(), PING_TOKEN] {
            assert!(!dom.contains(secret), "{secret} is in the page: {dom}");
        }
    }
    let wide = screenshot(&home, &format!("{base}/"), "1280,900", "dashboard-1280.png");
    screenshot(&home, &format!("{base}/"), "390,844", "dashboard-phone.png");
    screenshot(
        &home,
        &format!("{base}/jobs/report"),
        "390,844",
        "dashboard-job-phone.png",
    );
    eprintln!("screenshot: {}", wide.display());
}

/// Sends `method path` to 127.0.0.1:`port` with `headers` and `body` (a form when given);
/// the answer's head in lower case.
fn send(port: u16, method: &str, path: &str, headers: &[&str], body: &str) -> RawAnswer {
    let host = format!("Host: 127.0.0.1:{port}");
    let mut all = vec![host.as_str()];
    all.extend_from_slice(headers);
    if !body.is_empty() {
        all.push("Content-Type: application/x-www-form-urlencoded");
    }
    let line = format!("{method} {path} HTTP/1.1");
    let mut answer = exchange_with_body(&format!("127.0.0.1:{port}"), &line, &all, body);
    answer.head = answer.head.to_ascii_lowercase();
    answer
}

#[test]
fn on_a_non_loopback_bind_the_pages_need_the_token_or_the_login_cookie() {
    let home = Home::new();
    let port = free_port();
    home.write(
        None,
        &format!("listen = \"0.0.0.0:{port}\"\ntoken = \"{TOKEN}\""),
        "[[jobs]]\nname = \"nightly\"\nschedule = \"0 3 * * *\"\ncommand = [\"true\"]\n",
    );
    let _daemon = tcp_daemon(&home, port, "", &[]);

    let anonymous = send(port, "GET", "/", &[], "");
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    assert!(
        anonymous.body.contains("action=\"/login\""),
        "{}",
        anonymous.body
    );
    assert!(!anonymous.body.contains("nightly"), "{}", anonymous.body);
    assert!(
        anonymous
            .head
            .contains("content-security-policy: default-src 'none'; style-src 'sha256-"),
        "{}",
        anonymous.head
    );
    let job_page = send(port, "GET", "/jobs/nightly", &[], "");
    assert_eq!(job_page.status, 401);
    assert!(!job_page.body.contains("0 3 * * *"), "{}", job_page.body);

    let bearer = format!("Authorization: Bearer {TOKEN}");
    let proxied = send(port, "GET", "/", &[&bearer], "");
    assert_eq!(proxied.status, 200);
    assert!(
        proxied.body.contains("data-job=\"nightly\""),
        "{}",
        proxied.body
    );
    assert!(!proxied.body.contains(TOKEN));

    let form = format!("token={TOKEN}");
    let wrong = send(port, "POST", "/login", &[], "token=guess");
    assert_eq!(wrong.status, 401);
    assert!(wrong.body.contains("wrong token"), "{}", wrong.body);
    assert!(!wrong.head.contains("set-cookie"), "{}", wrong.head);
    for foreign in ["Origin: http://evil.example", "Sec-Fetch-Site: cross-site"] {
        let refused = send(port, "POST", "/login", &[foreign], &form);
        assert_eq!(refused.status, 403, "{foreign}: {}", refused.body);
        assert!(!refused.head.contains("set-cookie"), "{}", refused.head);
    }
    let origin = format!("Origin: http://127.0.0.1:{port}");
    let login = send(
        port,
        "POST",
        "/login",
        &[&origin, "Sec-Fetch-Site: same-origin"],
        &form,
    );
    assert_eq!(login.status, 303, "{}", login.body);
    let set_cookie = login
        .head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .unwrap_or_else(|| panic!("no cookie: {}", login.head));
    assert!(
        set_cookie.contains("httponly") && set_cookie.contains("samesite=strict"),
        "{set_cookie}"
    );
    assert!(
        !set_cookie.contains(&TOKEN.to_ascii_lowercase()),
        "{set_cookie}"
    );
    let session = set_cookie.split(';').next().expect("name=value");
    let cookie = format!("Cookie: other=1; {session}");
    let overview = send(port, "GET", "/", &[&cookie], "");
    assert_eq!(overview.status, 200, "{}", overview.body);
    assert!(overview.body.contains("data-job=\"nightly\""));
    let page = send(port, "GET", "/jobs/nightly", &[&cookie], "");
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("<h1>nightly</h1>"), "{}", page.body);
    let forged = send(port, "GET", "/", &[&format!("{cookie}0")], "");
    assert_eq!(forged.status, 401);
    // The JSON routes keep their own rule: the cookie is not a bearer token.
    let json = send(port, "GET", "/status", &[&cookie], "");
    assert_eq!(json.status, 401);
}
