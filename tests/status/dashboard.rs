//! The dashboard (`GET /`, `GET /jobs/{name}`) as a person sees it: headless Chromium loads it
//! from a real daemon with a day of passing, failing and timed-out runs (the earlier ones made
//! by `run --job` under libfaketime), takes screenshots (kept under target/test-artifacts/; with
//! `HEARTBEAT_AGENT_DOCS_SCREENSHOT=1` the overview also replaces docs/dashboard.png) and the
//! test reads the DOM Chromium built: the summary's counts, each job's last outcome, its
//! timeline's marks (one per run, of its outcome, at its hour), the durations' axis (one unit,
//! labels evenly apart from 0), the legend, a failed run marked failed, output escaped, no
//! secret, no console message and no Content-Security-Policy violation reported by the
//! browser; the schedules' lines are measured in Chromium on a copy of the page. On a non-loopback bind the pages need the token:
//! the bearer header or the cookie of the login form, which refuses forms from other sites.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use heartbeat_agent::status::client::Endpoint;

use super::day::{Seeded, SEEDED};
use super::{free_port, tcp_daemon, StatusHome, TOKEN};
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
    assert!(
        !log.contains(":CONSOLE"),
        "{url} wrote to the browser's console: {log}"
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

/// The text a reader sees in `html` (tags removed, entities decoded, spaces collapsed).
fn text_of(html: &str) -> String {
    let mut text = String::new();
    let mut in_tag = false;
    for c in html.chars() {
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

/// The element `<name ...>...</name>` (not nested in one of its kind) whose start tag holds
/// `marker`.
fn element<'a>(dom: &'a str, name: &str, marker: &str) -> &'a str {
    let at = dom
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker} in the DOM:\n{dom}"));
    let start = dom[..at].rfind(&format!("<{name}")).expect("a start tag");
    let close = format!("</{name}>");
    let end = dom[at..]
        .find(&close)
        .map_or(dom.len(), |e| at + e + close.len());
    &dom[start..end]
}

/// The numbers of an SVG's elements of class `class` (`#12 failed at ...` titles).
fn seqs(svg: &str, class: &str) -> Vec<u64> {
    svg.match_indices(&format!("class=\"{class}"))
        .filter_map(|(at, _)| {
            let title = &svg[at..];
            let title = &title[title.find("<title>#")? + 8..];
            title[..title.find(' ')?].parse().ok()
        })
        .collect()
}

/// How many lines each element of class `schedule` takes in Chromium at `width` pixels, and
/// how wide the page is and its window (headless Chromium's is at least 500 px): the page's HTML and style, loaded from a file with a measuring script
/// added (the page itself allows no script), its answers written into the DOM.
fn schedule_lines(home: &Home, html: &str, width: u32) -> (Vec<usize>, (u32, u32)) {
    let script = "<script>document.body.dataset.lines=[...document.querySelectorAll('.schedule')]\
        .map(s=>{const r=document.createRange();r.selectNodeContents(s);\
        return new Set([...r.getClientRects()].map(x=>Math.round(x.bottom))).size}).join(',');\
        document.body.dataset.wide=document.documentElement.scrollWidth+','+innerWidth;</script></body>";
    let file = home.path(&format!("measured-{width}.html"));
    std::fs::write(&file, html.replace("</body>", script)).expect("write the copy");
    let (dom, log) = chromium(
        home,
        &[
            &format!("--window-size={width},900"),
            "--dump-dom",
            &format!("file://{}", file.display()),
        ],
    );
    let lines = dom
        .split_once("data-lines=\"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .unwrap_or_else(|| panic!("no measure at {width}px: {log}"))
        .0;
    let wide = dom
        .split_once("data-wide=\"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .and_then(|(w, _)| w.split_once(','))
        .and_then(|(page, window)| Some((page.parse().ok()?, window.parse().ok()?)))
        .unwrap_or_else(|| panic!("no width at {width}px: {log}"));
    let lines = lines
        .split(',')
        .map(|n| n.parse().expect("a count"))
        .collect();
    (lines, wide)
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
    let Some(seeded) = Seeded::start() else {
        return;
    };
    let (home, key, base) = (&seeded.home, seeded.key.as_str(), seeded.base());
    let overview = dom(home, &format!("{base}/"));
    assert_eq!(
        text_of(element(&overview, "p", "id=\"summary\"")),
        "3 jobs: 1 failed, 1 timed_out, 1 success",
        "the summary, bad first"
    );
    let legend = element(&overview, "ul", "id=\"legend\"");
    for outcome in [
        "success",
        "failed",
        "timed_out",
        "signaled",
        "not_started",
        "stopped",
        "unhealthy",
    ] {
        assert!(
            legend.contains(&format!("<rect class=\"mark {outcome}\"")),
            "{outcome} in the legend: {legend}"
        );
    }
    for (name, _, hours, outcome) in SEEDED {
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
            cells[0].contains(&format!("href=\"/jobs/{name}\"")),
            "{}",
            cells[0]
        );
        // The timeline: one mark per run of the day, each of its outcome, at its time.
        let svg = element(cells[0], "svg", "class=\"timeline\"");
        let all = seqs(svg, "mark ");
        let runs = hours.len() + 1;
        assert_eq!(all.len(), runs, "{name}'s marks: {svg}");
        assert_eq!(
            seqs(svg, &format!("mark {outcome}\"")).len(),
            runs,
            "{name}: {svg}"
        );
        assert_eq!(svg.matches("class=\"tick").count(), 24, "{name}: {svg}");
        assert!(svg.matches("class=\"hour\"").count() >= 3, "{svg}");
        let width: f64 = {
            let w = &svg[svg.find(" width=\"").expect("a width") + 8..];
            w[..w.find('"').expect("its end")]
                .parse()
                .expect("a number")
        };
        let x_of = |seq: u64| -> f64 {
            let at = svg.find(&format!("<title>#{seq} ")).expect("the mark");
            let x = &svg[svg[..at].rfind(" x=\"").expect("its x") + 4..];
            x[..x.find('"').expect("x's end")]
                .parse()
                .expect("a number")
        };
        for (i, ago) in hours.iter().enumerate() {
            let x = x_of(i as u64 + 1);
            let expected = (24.0 - f64::from(*ago)) / 24.0 * width;
            assert!(
                (x - expected).abs() < 3.0,
                "{name} #{}: x {x}, not {expected}",
                i + 1
            );
        }
        assert!(x_of(runs as u64) > width - 4.0, "{name}'s last run is now");
        assert!(
            text_of(cells[0]).contains(&format!(
                "{} Europe/Berlin",
                SEEDED.iter().find(|j| j.0 == name).expect("job").1
            )),
            "{}",
            cells[0]
        );
    }
    // The checks: c1's, read (up); none for the others, a word of its own.
    assert_eq!(
        cell_text(&overview, "backup", "check").split(' ').next(),
        Some("up")
    );
    assert_eq!(cell_text(&overview, "report", "check"), "no_check");

    // A job's page: its durations on one labelled axis in one unit.
    let endpoint = Endpoint::parse(&base).expect("url");
    for (name, _, hours, outcome) in SEEDED {
        let page = dom(home, &format!("{base}/jobs/{name}"));
        let svg = element(&page, "svg", "class=\"durations\"");
        let listed = endpoint
            .request(
                "GET",
                &format!("/jobs/{name}/runs"),
                None,
                Duration::from_secs(15),
            )
            .expect("runs");
        let listed: serde_json::Value = serde_json::from_str(&listed.body).expect("JSON");
        let longest = listed["runs"]
            .as_array()
            .expect("runs")
            .iter()
            .filter_map(|r| r["duration_ms"].as_u64())
            .max()
            .expect("a run");
        let unit = if longest.max(100) < 2000 { "ms" } else { "s" };
        assert!(
            svg.contains(&format!(">duration ({unit})</text>")),
            "{name}, longest {longest} ms: {svg}"
        );
        let labels: Vec<f64> = svg
            .match_indices("class=\"tick-label\"")
            .map(|(at, _)| {
                let text = &svg[at..];
                let text = &text[text.find('>').expect("text") + 1..];
                text[..text.find('<').expect("end")]
                    .parse()
                    .expect("a number")
            })
            .collect();
        assert!(labels.len() >= 3 && labels[0] == 0.0, "{name}: {labels:?}");
        let step = labels[1];
        assert!(
            labels.windows(2).all(|w| (w[1] - w[0] - step).abs() < 1e-9),
            "{name}: labels evenly apart: {labels:?}"
        );
        let scale = if unit == "ms" { 1.0 } else { 1000.0 };
        let top = labels[labels.len() - 1] * scale;
        assert!(
            top >= longest as f64 && top >= 100.0,
            "{name}: {labels:?} {longest}"
        );
        assert_eq!(
            seqs(svg, &format!("mark {outcome}\"")).len(),
            hours.len() + 1,
            "{name}: {svg}"
        );
        assert!(element(&page, "ul", "id=\"legend\"").contains("timed_out"));
        if name == "report" {
            let failed = rows(&page, "data-outcome=\"failed\"");
            assert_eq!(failed.len(), 3, "the failed runs are not marked: {page}");
            assert!(
                failed[0].contains("failed (exit 3)")
                    && failed[0].contains("&lt;script&gt;alert(1)"),
                "{}",
                failed[0]
            );
        }
        for secret in [TOKEN, key, PING_TOKEN] {
            assert!(!page.contains(secret), "{secret} is in the page: {page}");
        }
        assert!(
            !page.contains("<script"),
            "a script got into the page: {page}"
        );
    }
    assert!(!overview.contains("<script"), "a script got into the page");
    for secret in [TOKEN, key, PING_TOKEN] {
        assert!(!overview.contains(secret), "{secret} is in the page");
    }

    // A schedule with its time zone stays on one line, wide and narrow.
    let html = endpoint
        .request("GET", "/", None, Duration::from_secs(15))
        .expect("the overview")
        .body;
    std::fs::write(artifacts().join("dashboard.html"), &html).expect("keep the page");
    for width in [1280, 390] {
        let (lines, (wide, window)) = schedule_lines(home, &html, width);
        assert_eq!(
            lines,
            vec![1; SEEDED.len()],
            "the schedules' lines at {width}px"
        );
        assert!(
            wide <= window && window <= width.max(500),
            "the page is {wide}px wide in a {window}px window (asked {width}px)"
        );
    }

    let wide = screenshot(home, &format!("{base}/"), "1280,900", "dashboard-1280.png");
    screenshot(home, &format!("{base}/"), "390,844", "dashboard-phone.png");
    screenshot(
        home,
        &format!("{base}/jobs/report"),
        "1280,900",
        "dashboard-job.png",
    );
    eprintln!("screenshot: {}", wide.display());
    // `HEARTBEAT_AGENT_DOCS_SCREENSHOT=1` keeps the overview as the docs' picture.
    if std::env::var_os("HEARTBEAT_AGENT_DOCS_SCREENSHOT").is_some() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/dashboard.png");
        std::fs::copy(&wide, &docs).expect("copy the screenshot into docs/");
        eprintln!("screenshot: {}", docs.display());
    }
    drop(seeded);
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
