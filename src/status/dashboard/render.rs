//! The dashboard's pages, written by hand into a `String`: the overview of every job
//! ([`overview`]: a summary of their states, then a row per job with its last 24 hours), one
//! job's page ([`job_page`]: its state, its last 24 hours, its runs' durations and its history
//! with output tails) and the login form ([`login`]). The frame and the one escape are
//! [`super::html`], the cells [`super::cells`], the charts [`super::charts`]. It refreshes
//! itself every 30 s with `<meta http-equiv="refresh">`, which needs no JavaScript.

use std::fmt::Write;
use std::sync::Arc;

use super::cells::{last, paused, remote, strip, summary, sync, took, when};
use super::charts::{durations, legend, timeline, Mark};
use super::html::{class, esc, head, segment, FOOT};
use crate::history::Run;
use crate::status::doc::{JobDoc, StatusDoc};
use crate::status::state;

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
        crate::duration::one_unit(doc.uptime_secs),
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

/// The schedule and its time zone, kept on one line.
fn schedule(job: &JobDoc) -> String {
    format!(
        "<span class=\"schedule nowrap\">{} <span class=\"mute\">{}</span></span>",
        esc(&job.schedule),
        esc(&job.timezone)
    )
}

/// The overview: the summary, then every job, `marks` holding each job's runs of the last 24
/// hours (oldest first) and how many at most were read, in the order of `doc.jobs`.
pub(super) fn overview(doc: &StatusDoc, marks: &[(Arc<[Mark]>, usize)]) -> String {
    let now = doc.generated_at;
    let mut out = head("heartbeat-agent", true);
    out.push_str(&header(doc));
    out.push_str("<main>");
    out.push_str(&summary(&doc.jobs));
    out.push_str(&legend());
    let cluster = doc.cluster.is_some();
    out.push_str(
        "<table class=\"jobs\"><thead><tr><th>job</th><th>schedule</th><th>next run</th>\
         <th>last run</th><th>duration</th><th>last runs</th><th>last 24 h (UTC)</th>\
         <th>check</th><th>sync</th><th>outbox</th>",
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
        let check = state::CheckFacts::of_doc(job)
            .state()
            .map_or("none", state::CheckState::as_str);
        let _ = write!(
            out,
            "<tr class=\"job\" data-job=\"{name}\" data-last=\"{last_outcome}\" \
             data-check=\"{check}\">\
             <td data-label=\"job\"><a href=\"/jobs/{href}\">{name}</a>{activity} {paused}</td>\
             <td data-label=\"schedule\">{schedule}</td>\
             <td data-label=\"next run\" class=\"nowrap\">{next}</td>\
             <td data-label=\"last run\">{outcome}</td>\
             <td data-label=\"duration\" class=\"num\">{took}</td>\
             <td data-label=\"last runs\">{strip}</td>\
             <td data-label=\"last 24 h\">{timeline}</td>\
             <td data-label=\"check\">{remote}</td>\
             <td data-label=\"sync\">{sync}</td>\
             <td data-label=\"outbox\" class=\"num\">{outbox}</td>",
            name = esc(&job.name),
            href = segment(&job.name),
            paused = paused(job, now),
            schedule = schedule(job),
            strip = strip(&job.recent),
            timeline = marks.get(i).map_or_else(
                || timeline(&job.name, &[], 0, now),
                |(marks, read)| timeline(&job.name, marks, *read, now)
            ),
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

/// A run's final ping: its kind and result, and whether it waits in the outbox.
fn ping(run: &Run) -> String {
    match &run.ping {
        Some(p) => {
            let cls = if p.result == state::PING_ACCEPTED {
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
    }
}

/// A run's output tail on the page, with a link to the whole of it when it was cut.
fn tail(job: &JobDoc, shown: &Shown) -> String {
    let run = &shown.run;
    if run.run.output_tail.is_empty() {
        "<span class=\"none\">no output</span>".to_owned()
    } else if shown.cut > 0 {
        format!(
            "<div class=\"mute\">{} bytes before: <a href=\"/jobs/{href}/runs/{seq}\">the \
             whole tail</a></div><pre>{}</pre>",
            shown.cut,
            esc(&run.run.output_tail),
            href = segment(&job.name),
            seq = run.seq,
        )
    } else {
        format!("<pre>{}</pre>", esc(&run.run.output_tail))
    }
}

/// One job's page: its state (as on the overview), its last 24 hours, its runs' durations and
/// its history, newest first, with each run's output tail.
pub(super) fn job_page(doc: &StatusDoc, job: &JobDoc, runs: &[Shown], read: usize) -> String {
    let now = doc.generated_at;
    let mut out = head(&format!("{} · heartbeat-agent", job.name), true);
    let (outcome, took_last) = last(job.last_run.as_ref());
    let _ = write!(
        out,
        "<header><p><a href=\"/\">← all jobs</a></p><h1>{name}</h1>\
         <p>{kind} · {schedule} · overlap {overlap} · next run {next}</p>\
         <p>last run {outcome} {took_last} · {strip} {paused}</p>\
         <p>check: {remote} · sync: {sync} · outbox: {outbox} waiting</p></header>",
        name = esc(&job.name),
        kind = esc(&job.kind),
        schedule = schedule(job),
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
    let marks: Vec<Mark> = runs
        .iter()
        .rev()
        .map(|shown| Mark::of(&shown.run))
        .collect();
    let _ = write!(
        out,
        "<main>{legend}<h2>last 24 hours (UTC)</h2>{timeline}<h2>durations</h2>{durations}\
         <h2>history</h2>",
        legend = legend(),
        timeline = timeline(&job.name, &marks, read, now),
        durations = durations(&job.name, &marks),
    );
    out.push_str(
        "<table class=\"runs\"><thead><tr><th>#</th><th>scheduled</th><th>outcome</th>\
         <th>duration</th><th>attempts</th><th>ping</th><th>node</th><th>output</th></tr>\
         </thead><tbody>",
    );
    for shown in runs {
        let run = &shown.run;
        let (outcome, _) = last(Some(&run.run));
        let reason = run
            .run
            .reason
            .as_deref()
            .map(|r| format!("<div class=\"mute\">{}</div>", esc(r)))
            .unwrap_or_default();
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
            took = took(run.run.duration_ms),
            attempts = run.run.attempts,
            ping = ping(run),
            node = run.node.as_deref().map_or_else(|| "–".to_owned(), esc),
            tail = tail(job, shown),
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

/// The page of a job the config does not name.
pub(super) fn no_such_job(name: &str) -> String {
    format!(
        "{}<p>No job named \"{}\" in the config. <a href=\"/\">All jobs</a></p>{FOOT}",
        head("no such job · heartbeat-agent", false),
        esc(name)
    )
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
