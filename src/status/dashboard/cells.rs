//! What the dashboard's cells say of a job, each state in the word of the one state model
//! ([`crate::status::state`]) and coloured by its tone: the summary of every job's state
//! ([`summary`]), the last run ([`last`]), the strip of the last outcomes ([`strip`]), the
//! service's view of the check ([`remote`]), the check's state ([`sync`]) and a pause
//! ([`paused`]). Times are absolute (UTC) with their distance from now in
//! [`crate::duration::one_unit`], durations in [`crate::duration::human_duration`] (as
//! `history` writes them). Every text not of this file goes through [`esc`].

use std::fmt::Write;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::html::{class, esc, tone_class};
use crate::duration::{human_duration, one_unit};
use crate::status::doc::{Heartbeat, JobDoc, Remote, RunDoc};
use crate::status::state::{self, CheckFacts, ServiceState, Tone};

/// A time as `2026-11-26 05:49:50Z (12s ago)`, relative to `now`.
pub(super) fn when(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = (at - now).num_seconds();
    let span = one_unit(secs.unsigned_abs());
    let rel = if secs >= 0 {
        format!("in {span}")
    } else {
        format!("{span} ago")
    };
    format!("{} ({rel})", at.format("%Y-%m-%d %H:%M:%SZ"))
}

/// A run's duration as `history` writes it (`250ms`, `45s`, `1m30s`).
pub(super) fn took(duration_ms: u64) -> String {
    human_duration(Duration::from_millis(duration_ms))
}

/// The summary line of `jobs`: how many there are, then how many in each state
/// ([`state::job_word`]), the bad ones first: `3 jobs: 1 failed, 1 paused, 1 success`.
pub(super) fn summary(jobs: &[JobDoc]) -> String {
    let mut counts: Vec<(&str, Tone, usize)> = Vec::new();
    for job in jobs {
        let (word, tone) = state::job_word(job);
        match counts.iter_mut().find(|(w, _, _)| *w == word) {
            Some((_, _, n)) => *n += 1,
            None => counts.push((word, tone, 1)),
        }
    }
    let rank = |tone: Tone| match tone {
        Tone::Bad => 0,
        Tone::Warn => 1,
        Tone::Good => 2,
        Tone::Plain => 3,
    };
    counts.sort_by(|a, b| rank(a.1).cmp(&rank(b.1)).then(a.0.cmp(b.0)));
    let noun = if jobs.len() == 1 { "job" } else { "jobs" };
    let mut out = format!("<p class=\"summary\" id=\"summary\">{} {noun}", jobs.len());
    for (i, (word, tone, n)) in counts.iter().enumerate() {
        out.push_str(if i == 0 { ": " } else { ", " });
        let _ = write!(
            out,
            "<span class=\"{}\" data-state=\"{}\">{n} {}</span>",
            tone_class(*tone),
            esc(word),
            esc(word)
        );
    }
    out.push_str("</p>");
    out
}

/// The strip of the last outcomes (oldest first), each mark titled with its word.
pub(super) fn strip(recent: &[String]) -> String {
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

/// The service's view of the job's check: its state's word ([`ServiceState::of_doc`]:
/// `no_check` for a job bound to none, `unknown` for a check not read), then the 24 h success
/// ratio or that it was never pinged; titled with why it is unknown or missing.
pub(super) fn remote(job: &JobDoc) -> String {
    let service = ServiceState::of_doc(job);
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
        Remote::Unavailable { reason } => (Some(reason), String::new()),
    };
    let title = title.map(|t| esc(t)).unwrap_or_default();
    format!(
        "<span class=\"{}\" title=\"{title}\">{}</span>{beat}",
        tone_class(service.tone()),
        service.as_str()
    )
}

/// The check's state ([`state::sync_cell`]: the word, or the fields drifted), titled with
/// sync's last error.
pub(super) fn sync(job: &JobDoc) -> String {
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

/// The job's pause: its word, until when, and its reason; nothing when it is not paused.
pub(super) fn paused(job: &JobDoc, now: DateTime<Utc>) -> String {
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
pub(super) fn last(run: Option<&RunDoc>) -> (String, String) {
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
                took(run.duration_ms),
            )
        }
        None => (
            format!("<span class=\"none\">{}</span>", state::NEVER),
            String::new(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A job of a `/status` document: never ran, no check, `with` merged in.
    fn job(name: &str, with: serde_json::Value) -> JobDoc {
        let mut doc = json!({"name": name, "kind": "shell", "enabled": true,
            "schedule": "0 3 * * *", "timezone": "UTC", "overlap": "skip", "check_id": null,
            "last_run": null, "last_ping": null, "last_skipped": null, "next_run": null,
            "outbox_pending": 0, "paused": null, "recent": [], "running": 0, "runs": 0,
            "skipped": 0, "sync": null, "remote": {"state": "unavailable",
            "reason": "the job is not bound to a check (check_id)"}});
        for (key, value) in with.as_object().expect("an object") {
            doc[key] = value.clone();
        }
        serde_json::from_value(doc).expect("a job of /status")
    }

    fn ran(outcome: &str) -> serde_json::Value {
        json!({"last_run": {"scheduled": "2026-11-26T03:00:00Z",
            "started": "2026-11-26T03:00:00Z", "ended": "2026-11-26T03:00:01Z",
            "duration_ms": 1000, "outcome": outcome, "exit_code": 3, "signal": null,
            "timed_out": false, "stopped": false, "reason": null, "output_tail": ""}})
    }

    #[test]
    fn the_summary_counts_each_job_once_in_the_words_of_the_state_model_bad_first() {
        let jobs = [
            job("a", ran("success")),
            job("b", ran("failed")),
            job("c", ran("success")),
            job("d", json!({})),
            job("e", json!({"enabled": false})),
            job(
                "f",
                json!({"paused": {"state": "paused", "since": "2026-11-26T03:00:00Z",
                "until": null, "reason": "<deploy>", "stop_jobs": false}}),
            ),
        ];
        let html = summary(&jobs);
        let text: String = html
            .split('<')
            .filter_map(|piece| piece.split_once('>').map(|(_, text)| text))
            .collect();
        assert_eq!(
            text,
            "6 jobs: 1 failed, 1 paused, 2 success, 1 disabled, 1 never"
        );
        assert!(html.contains("<span class=\"failed\" data-state=\"failed\">1 failed</span>"));
        assert!(!html.contains("deploy"), "a pause's reason is not a state");
        assert_eq!(summary(&jobs[..1]), "<p class=\"summary\" id=\"summary\">1 job: <span class=\"success\" data-state=\"success\">1 success</span></p>");
    }

    #[test]
    fn a_job_without_a_check_says_no_check_and_one_not_read_says_unknown() {
        assert!(remote(&job("a", json!({}))).contains(">no_check</span>"));
        let unread = job(
            "b",
            json!({"check_id": "c1", "remote": {"state": "unavailable", "reason": "not fetched"}}),
        );
        let cell = remote(&unread);
        assert!(
            cell.contains(">unknown</span>") && cell.contains("title=\"not fetched\""),
            "{cell}"
        );
    }
}
