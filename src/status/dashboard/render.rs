//! The dashboard's HTML: the overview of every job ([`overview`]), one job's page with its
//! history ([`job_page`]) and the login form ([`login`]), written by hand into a `String`.
//!
//! Every text that is not a literal of this file goes through [`esc`] (job names, schedules,
//! output tails, reasons, pause reasons, errors, node names): there is no other way into the
//! page. The style is one `<style>` element, [`CSS`], allowed by its SHA-256 hash in the
//! Content-Security-Policy ([`csp`]); the page has no `style` attribute, no script and no
//! external asset, so `default-src 'none'` holds. Sparklines are inline SVG drawn with
//! presentation attributes. It refreshes itself every 30 s with `<meta http-equiv="refresh">`,
//! which needs no JavaScript. Every state (a run's, a check's, the service's) is said with the
//! word of the one state model ([`crate::status::state`]) and coloured by its tone.

use std::fmt::Write;
use std::sync::OnceLock;

use base64::Engine;
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use crate::history::Run;
use crate::status::doc::{Heartbeat, JobDoc, Remote, RunDoc, StatusDoc};
use crate::status::state::{self, CheckFacts, ServiceState, Tone};

/// The page's only style sheet (dark and light by `prefers-color-scheme`; rows turn into
/// blocks on a narrow screen).
const CSS: &str = "\
:root{color-scheme:light dark;--bg:#fff;--fg:#1b1f24;--mute:#5b6570;--line:#d6dbe0;--card:#f5f7f9;\
--ok:#1a7f37;--bad:#cf222e;--warn:#9a6700;--idle:#6e7781}\
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--mute:#8d96a0;--line:#30363d;\
--card:#161b22;--ok:#3fb950;--bad:#f85149;--warn:#d29922;--idle:#8b949e}}\
*{box-sizing:border-box}\
body{margin:0;padding:1rem;background:var(--bg);color:var(--fg);\
font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif}\
h1{font-size:1.3rem;margin:0 0 .3rem}h2{font-size:1.1rem;margin:1.2rem 0 .5rem}\
a{color:inherit}header p,.mute{color:var(--mute)}header p{margin:.2rem 0}\
table{border-collapse:collapse;width:100%}\
th,td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}\
th{font-weight:600;color:var(--mute);white-space:nowrap}\
td.num{text-align:right;font-variant-numeric:tabular-nums}td.nowrap{white-space:nowrap}\
.outcome{font-weight:600}.success,.o.success{color:var(--ok)}\
.failed,.timed_out,.signaled,.unhealthy,.o.failed,.o.timed_out,.o.signaled,.o.unhealthy{color:var(--bad)}\
.not_started,.stopped,.o.not_started,.o.stopped,.paused{color:var(--warn)}\
.none{color:var(--idle)}\
.strip{font-family:ui-monospace,monospace;letter-spacing:1px;white-space:nowrap}\
svg.spark polyline{fill:none;stroke:var(--mute);stroke-width:1.5}\
svg.spark circle.bad{fill:var(--bad)}svg.spark circle.ok{fill:var(--ok)}\
pre{margin:.3rem 0 0;padding:.5rem;background:var(--card);border-radius:4px;overflow-x:auto;\
white-space:pre-wrap;word-break:break-all;max-height:16rem}\
form.login{max-width:22rem;padding:1rem;background:var(--card);border-radius:6px}\
form input{width:100%;padding:.4rem;margin:.3rem 0 .6rem;font:inherit}\
form button{padding:.4rem 1rem;font:inherit}.error{color:var(--bad)}\
@media (max-width:760px){table.jobs thead,table.runs thead{display:none}\
table.jobs tr,table.runs tr{display:block;padding:.5rem 0;border-bottom:1px solid var(--line)}\
table.jobs td,table.runs td{display:block;border:0;padding:.1rem 0}\
table.jobs td[data-label]::before,table.runs td[data-label]::before{content:attr(data-label) ': ';\
color:var(--mute)}td.num{text-align:left}}";

/// The Content-Security-Policy of every page: nothing loads, only [`CSS`] applies, forms post
/// to this endpoint only, and no other site may frame the page.
pub(super) fn csp() -> &'static str {
    static CSP: OnceLock<String> = OnceLock::new();
    CSP.get_or_init(|| {
        let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(CSS));
        format!(
            "default-src 'none'; style-src 'sha256-{hash}'; img-src 'none'; form-action 'self'; \
             frame-ancestors 'none'; base-uri 'none'"
        )
    })
}

/// `text` with `&`, `<`, `>`, `"` and `'` escaped: safe in element content and in quoted
/// attribute values. The one way a text enters the page.
pub(super) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `name` as a URL path segment (percent-encoded but for unreserved characters).
fn segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn head(title: &str, refresh: bool) -> String {
    let refresh = if refresh {
        "<meta http-equiv=\"refresh\" content=\"30\">"
    } else {
        ""
    };
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">{refresh}\
         <title>{}</title><style>{CSS}</style></head><body>",
        esc(title)
    )
}

const FOOT: &str = "</body></html>";

/// A time as `2026-11-26 05:49:50Z (12s ago)`, relative to `now`.
fn when(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = (at - now).num_seconds();
    let rel = if secs >= 0 {
        format!("in {}", span(secs.unsigned_abs()))
    } else {
        format!("{} ago", span(secs.unsigned_abs()))
    };
    format!("{} ({rel})", at.format("%Y-%m-%d %H:%M:%SZ"))
}

fn span(secs: u64) -> String {
    match secs {
        0..=119 => format!("{secs}s"),
        120..=7199 => format!("{}m", secs / 60),
        7200..=172_799 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

/// A duration in milliseconds as `850ms`, `12.3s`, `4m05s`.
fn duration(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms}ms"),
        1000..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        _ => format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60),
    }
}

/// An outcome name as a CSS class (only the known names; anything else is `none`).
fn class(outcome: &str) -> &'static str {
    match outcome {
        "success" => "success",
        "failed" => "failed",
        "timed_out" => "timed_out",
        "signaled" => "signaled",
        "not_started" => "not_started",
        "stopped" => "stopped",
        "unhealthy" => "unhealthy",
        _ => "none",
    }
}

fn strip(recent: &[String]) -> String {
    let mut out = String::from("<span class=\"strip\">");
    for outcome in recent {
        let _ = write!(
            out,
            "<span class=\"o {}\" title=\"{}\">{}</span>",
            class(outcome),
            esc(outcome),
            crate::history::glyph(outcome, false)
        );
    }
    out.push_str("</span>");
    out
}

/// An inline SVG of `runs`' durations (oldest first), a dot per run coloured by its outcome.
fn sparkline(runs: &[(u64, bool)]) -> String {
    if runs.is_empty() {
        return String::from("<span class=\"none\">no history</span>");
    }
    let (w, h, pad) = (120.0_f64, 24.0_f64, 2.0_f64);
    let max = runs.iter().map(|r| r.0).max().unwrap_or(0).max(1) as f64;
    let step = if runs.len() > 1 {
        (w - 2.0 * pad) / (runs.len() - 1) as f64
    } else {
        0.0
    };
    let points: Vec<(f64, f64)> = runs
        .iter()
        .enumerate()
        .map(|(i, (ms, _))| {
            let x = pad + step * i as f64;
            let y = h - pad - (*ms as f64 / max) * (h - 2.0 * pad);
            (x, y)
        })
        .collect();
    let mut out = format!(
        "<svg class=\"spark\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\">\
         <title>durations of the last {} runs, longest {}</title><polyline points=\"",
        runs.len(),
        duration(max as u64)
    );
    for (x, y) in &points {
        let _ = write!(out, "{x:.1},{y:.1} ");
    }
    out.push_str("\"/>");
    for ((x, y), (_, ok)) in points.iter().zip(runs) {
        let cls = if *ok { "ok" } else { "bad" };
        let _ = write!(
            out,
            "<circle class=\"{cls}\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"2\"/>"
        );
    }
    out.push_str("</svg>");
    out
}

/// The CSS class of a state's tone: the colours of the outcomes.
fn tone_class(tone: Tone) -> &'static str {
    match tone {
        Tone::Good => "success",
        Tone::Bad => "failed",
        Tone::Warn => "paused",
        Tone::Plain => "none",
    }
}

/// The service's view of the job's check: its state's word ([`ServiceState`]; `-` as in the
/// table for a job bound to no check), then the 24 h success ratio or that it was never pinged.
fn remote(job: &JobDoc) -> String {
    let service = ServiceState::of(&job.remote, CheckFacts::of_doc(job).state());
    let (mut cls, mut word) = (tone_class(service.tone()), service.as_str());
    let (title, beat) = match &job.remote {
        _ if service == ServiceState::Missing => {
            (job.missing.as_ref().map(|m| &m.reason), String::new())
        }
        Remote::Available { heartbeat, .. } => match heartbeat {
            Heartbeat::Available {
                success_ratio_24h: Some(ratio),
                ..
            } => (None, format!(" · {ratio:.0}% 24h")),
            Heartbeat::NeverPinged { .. } => (None, " · never pinged".to_owned()),
            _ => (None, String::new()),
        },
        Remote::Unavailable { reason } => {
            if job.check_id.is_none() {
                (cls, word) = ("none", "-");
            }
            (Some(reason), String::new())
        }
    };
    let title = title.map(|t| esc(t)).unwrap_or_default();
    format!("<span class=\"{cls}\" title=\"{title}\">{word}</span>{beat}")
}

/// The check's state ([`state::sync_cell`]: the word, or the fields drifted), titled with
/// sync's last error.
fn sync(job: &JobDoc) -> String {
    let drift = job.sync.as_ref().map_or(&[][..], |s| s.drift.as_slice());
    let (text, tone) = state::sync_cell(CheckFacts::of_doc(job).state(), drift);
    let title = job
        .sync
        .as_ref()
        .and_then(|s| s.last_error.as_deref())
        .map(esc)
        .unwrap_or_default();
    format!(
        "<span class=\"{}\" title=\"{title}\">{}</span>",
        tone_class(tone),
        esc(&text)
    )
}

fn paused(job: &JobDoc, now: DateTime<Utc>) -> String {
    match &job.paused {
        Some(p) => {
            let until = p.until.map_or_else(
                || "until resumed".to_owned(),
                |u| format!("until {}", when(u, now)),
            );
            let reason = p
                .reason
                .as_deref()
                .map(|r| format!(": {}", esc(r)))
                .unwrap_or_default();
            format!(
                "<span class=\"paused\">{} {until}{reason}</span>",
                esc(&p.state)
            )
        }
        None => String::new(),
    }
}

/// The last run's outcome (with exit code or signal) and duration.
fn last(run: Option<&RunDoc>) -> (String, String) {
    match run {
        Some(run) => {
            // Attempts have a column of their own on the job's page.
            let phrase = state::run_phrase(&run.outcome, run.exit_code, run.signal, 1);
            (
                format!(
                    "<span class=\"outcome {}\">{}</span>",
                    class(&run.outcome),
                    esc(&phrase)
                ),
                duration(run.duration_ms),
            )
        }
        None => (
            format!("<span class=\"none\">{}</span>", state::NEVER),
            String::new(),
        ),
    }
}

/// Durations and success of `runs` (newest first) for the sparkline, oldest first.
pub(super) fn spark_points<'a>(runs: impl DoubleEndedIterator<Item = &'a Run>) -> Vec<(u64, bool)> {
    runs.rev()
        .map(|r| (r.run.duration_ms, r.success()))
        .collect()
}

/// A run as a job's page shows it: its output cut to the page's share.
#[derive(Debug)]
pub(super) struct Shown {
    /// The run, its `output_tail` at most the page's share.
    pub run: Run,
    /// How many bytes of its recorded output tail were left out (shown at
    /// `/jobs/{name}/runs/{seq}`).
    pub cut: usize,
}

fn header(doc: &StatusDoc) -> String {
    let mut out = format!(
        "<header><h1>heartbeat-agent</h1><p>version {} · up {} · config {} · {}</p>",
        esc(&doc.version),
        span(doc.uptime_secs),
        esc(&doc.config.path),
        if doc.ready {
            "ready"
        } else {
            "waiting for the first sync"
        }
    );
    let outbox: usize = doc.jobs.iter().map(|j| j.outbox_pending).sum();
    let _ = write!(out, "<p id=\"outbox\">outbox: {outbox} pings waiting</p>");
    if let Some(cluster) = &doc.cluster {
        let _ = write!(
            out,
            "<p id=\"cluster\">cluster: this node {} is {}; leader {}</p>",
            esc(&cluster.node),
            esc(cluster.role.as_str()),
            cluster
                .leader
                .as_deref()
                .map_or_else(|| "unknown".to_owned(), esc)
        );
    }
    let failures: u64 = doc.persist_failures.values().sum();
    if failures > 0 {
        let _ = write!(
            out,
            "<p class=\"error\">{failures} writes under the state directory failed (see /status \
             persist_failures)</p>"
        );
    }
    out.push_str("</header>");
    out
}

/// The overview: every job, `sparks` holding each job's durations (oldest first) in the
/// order of `doc.jobs`.
pub(super) fn overview(doc: &StatusDoc, sparks: &[Vec<(u64, bool)>]) -> String {
    let now = doc.generated_at;
    let mut out = head("heartbeat-agent", true);
    out.push_str(&header(doc));
    let cluster = doc.cluster.is_some();
    out.push_str(
        "<main><table class=\"jobs\"><thead><tr><th>job</th><th>schedule</th><th>next run</th>\
         <th>last run</th><th>duration</th><th>last runs</th><th>durations</th><th>check</th>\
         <th>sync</th><th>outbox</th>",
    );
    if cluster {
        out.push_str("<th>ran on</th>");
    }
    out.push_str("</tr></thead><tbody>");
    for (i, job) in doc.jobs.iter().enumerate() {
        let (outcome, took) = last(job.last_run.as_ref());
        let last_outcome = job.last_run.as_ref().map_or("none", |r| class(&r.outcome));
        let next = job
            .next_run
            .map_or_else(|| "–".to_owned(), |t| when(t, now));
        let activity = if !job.enabled {
            format!(" <span class=\"none\">{}</span>", state::DISABLED)
        } else if job.running > 0 {
            format!(" <span class=\"mute\">{}</span>", state::RUNNING)
        } else {
            String::new()
        };
        let check = CheckFacts::of_doc(job)
            .state()
            .map_or("none", state::CheckState::as_str);
        let _ = write!(
            out,
            "<tr class=\"job\" data-job=\"{name}\" data-last=\"{last_outcome}\" \
             data-check=\"{check}\">\
             <td data-label=\"job\"><a href=\"/jobs/{href}\">{name}</a>{activity} {paused}</td>\
             <td data-label=\"schedule\">{schedule} <span class=\"mute\">{tz}</span></td>\
             <td data-label=\"next run\" class=\"nowrap\">{next}</td>\
             <td data-label=\"last run\">{outcome}</td>\
             <td data-label=\"duration\" class=\"num\">{took}</td>\
             <td data-label=\"last runs\">{strip}</td>\
             <td data-label=\"durations\">{spark}</td>\
             <td data-label=\"check\">{remote}</td>\
             <td data-label=\"sync\">{sync}</td>\
             <td data-label=\"outbox\" class=\"num\">{outbox}</td>",
            name = esc(&job.name),
            href = segment(&job.name),
            paused = paused(job, now),
            schedule = esc(&job.schedule),
            tz = esc(&job.timezone),
            strip = strip(&job.recent),
            spark = sparkline(sparks.get(i).map_or(&[][..], Vec::as_slice)),
            remote = remote(job),
            sync = sync(job),
            outbox = job.outbox_pending,
        );
        if cluster {
            let on = job
                .cluster
                .as_ref()
                .and_then(|c| c.last_ran_on.as_deref())
                .map_or_else(|| "–".to_owned(), esc);
            let _ = write!(out, "<td data-label=\"ran on\">{on}</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    if doc.jobs.is_empty() {
        out.push_str("<p class=\"mute\">no jobs in the config</p>");
    }
    let _ = write!(
        out,
        "</main><footer><p class=\"mute\">generated {} · JSON: <a href=\"/status\">/status</a> · \
         refreshes every 30 s</p></footer>{FOOT}",
        now.format("%Y-%m-%d %H:%M:%SZ")
    );
    out
}

/// One job's page: its state (as on the overview) and its history, newest first, with each
/// run's output tail.
pub(super) fn job_page(doc: &StatusDoc, job: &JobDoc, runs: &[Shown]) -> String {
    let now = doc.generated_at;
    let mut out = head(&format!("{} · heartbeat-agent", job.name), true);
    let (outcome, took) = last(job.last_run.as_ref());
    let _ = write!(
        out,
        "<header><p><a href=\"/\">← all jobs</a></p><h1>{name}</h1>\
         <p>{kind} · {schedule} ({tz}) · overlap {overlap} · next run {next}</p>\
         <p>last run {outcome} {took} · {strip} {paused}</p>\
         <p>check: {remote} · sync: {sync} · outbox: {outbox} waiting</p></header>",
        name = esc(&job.name),
        kind = esc(&job.kind),
        schedule = esc(&job.schedule),
        tz = esc(&job.timezone),
        overlap = esc(&job.overlap),
        next = job
            .next_run
            .map_or_else(|| "–".to_owned(), |t| when(t, now)),
        strip = strip(&job.recent),
        paused = paused(job, now),
        remote = remote(job),
        sync = sync(job),
        outbox = job.outbox_pending,
    );
    let _ = write!(
        out,
        "<main><h2>history</h2>{}",
        sparkline(&spark_points(runs.iter().map(|shown| &shown.run)))
    );
    out.push_str(
        "<table class=\"runs\"><thead><tr><th>#</th><th>scheduled</th><th>outcome</th>\
         <th>duration</th><th>attempts</th><th>ping</th><th>node</th><th>output</th></tr>\
         </thead><tbody>",
    );
    for Shown { run, cut } in runs {
        let (outcome, took) = last(Some(&run.run));
        let ping = match &run.ping {
            Some(p) => {
                let cls = if p.result == "accepted" {
                    "success"
                } else {
                    "failed"
                };
                let queued = if p.outbox { " (in the outbox)" } else { "" };
                format!(
                    "<span class=\"{cls}\">{} {}</span>: {}{queued}",
                    esc(match p.kind {
                        crate::ping::PingKind::Success => "success ping",
                        crate::ping::PingKind::Start => "start ping",
                        crate::ping::PingKind::Fail => "fail ping",
                    }),
                    esc(&p.result),
                    esc(&p.detail)
                )
            }
            None => "<span class=\"none\">none</span>".to_owned(),
        };
        let reason = run
            .run
            .reason
            .as_deref()
            .map(|r| format!("<div class=\"mute\">{}</div>", esc(r)))
            .unwrap_or_default();
        let tail = if run.run.output_tail.is_empty() {
            "<span class=\"none\">no output</span>".to_owned()
        } else if *cut > 0 {
            format!(
                "<div class=\"mute\">{cut} bytes before: <a href=\"/jobs/{href}/runs/{seq}\">the \
                 whole tail</a></div><pre>{}</pre>",
                esc(&run.run.output_tail),
                href = segment(&job.name),
                seq = run.seq,
            )
        } else {
            format!("<pre>{}</pre>", esc(&run.run.output_tail))
        };
        let _ = write!(
            out,
            "<tr class=\"run\" data-seq=\"{seq}\" data-outcome=\"{cls}\">\
             <td data-label=\"#\">{seq}</td>\
             <td data-label=\"scheduled\">{scheduled}</td>\
             <td data-label=\"outcome\">{outcome}{reason}</td>\
             <td data-label=\"duration\" class=\"num\">{took}</td>\
             <td data-label=\"attempts\" class=\"num\">{attempts}</td>\
             <td data-label=\"ping\">{ping}</td>\
             <td data-label=\"node\">{node}</td>\
             <td data-label=\"output\">{tail}</td></tr>",
            seq = run.seq,
            cls = class(&run.run.outcome),
            scheduled = when(run.run.scheduled, now),
            attempts = run.run.attempts,
            node = run.node.as_deref().map_or_else(|| "–".to_owned(), esc),
        );
    }
    out.push_str("</tbody></table>");
    if runs.is_empty() {
        out.push_str("<p class=\"mute\">no runs recorded yet</p>");
    }
    let _ = write!(
        out,
        "</main><footer><p class=\"mute\">JSON: <a href=\"/jobs/{href}/runs\">/jobs/{name}/runs\
         </a></p></footer>{FOOT}",
        href = segment(&job.name),
        name = esc(&job.name)
    );
    out
}

/// The login form (`message`: why it is shown again, e.g. a wrong token).
pub(super) fn login(message: Option<&str>) -> String {
    let mut out = head("log in · heartbeat-agent", false);
    out.push_str("<h1>heartbeat-agent</h1>");
    if let Some(message) = message {
        let _ = write!(
            out,
            "<p class=\"error\" id=\"login-error\">{}</p>",
            esc(message)
        );
    }
    out.push_str(
        "<form class=\"login\" method=\"post\" action=\"/login\"><label for=\"token\">The \
         status endpoint's token (<code>[status] token</code>)</label>\
         <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" \
         required autofocus><button type=\"submit\">Log in</button></form>",
    );
    out.push_str(FOOT);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_special_character_is_escaped() {
        assert_eq!(
            esc("<script>alert(\"x\" & 'y')</script>"),
            "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;"
        );
        assert_eq!(segment("a b/c"), "a%20b%2Fc");
    }

    #[test]
    fn the_policy_allows_the_style_sheet_by_its_hash() {
        let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(CSS));
        assert!(csp().contains(&format!("style-src 'sha256-{hash}'")));
        assert!(csp().starts_with("default-src 'none'"));
        assert!(
            !CSS.contains("</"),
            "the style sheet cannot close its element"
        );
    }

    #[test]
    fn the_sparkline_has_a_dot_per_run() {
        let svg = sparkline(&[(100, true), (300, false), (200, true)]);
        assert_eq!(svg.matches("<circle").count(), 3);
        assert_eq!(svg.matches("class=\"bad\"").count(), 1);
        assert!(sparkline(&[]).contains("no history"));
    }
}
