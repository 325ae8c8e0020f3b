//! The human table of `heartbeat-agent status`: one line per job with its next run, last run
//! (age and result), last ping, the check's state and what the service thinks (failing, 24 h
//! success ratio), in the words of the one state model ([`super::state`]). It is laid out for
//! [`WIDTH`] columns: the RECENT strip keeps as many of the newest outcomes as the other
//! cells leave room for (at least one), a ping's age is told only when it is older than the
//! last run, and the service's ratio is a whole percentage. Colour (ANSI) only when asked; the
//! caller decides (terminal, `NO_COLOR`). Every cell
//! and line goes through [`printable`]: a job name, a pause reason, a node or leader name read
//! from etcd or an etcd error cannot forge a row or drive the terminal.

use chrono::{DateTime, TimeDelta, Utc};

use super::doc::{Heartbeat, JobDoc, Remote, StatusDoc};
use super::state::{self, CheckFacts, ServiceState, Tone};
use crate::duration::one_unit;
use crate::logging::printable;

const HEADERS: [&str; 7] = [
    "JOB", "NEXT RUN", "LAST RUN", "RECENT", "PING", "SYNC", "REMOTE",
];

/// The width the table is laid out for: a terminal's default, counted in characters.
pub(crate) const WIDTH: usize = 80;

/// The column of the RECENT strip.
const RECENT: usize = 3;

/// Cuts each row's RECENT strip to its newest outcomes so that the widest row fits in
/// [`WIDTH`] columns (two spaces between cells), keeping at least one.
fn fit(rows: &mut [[(String, Tone); 7]]) {
    let mut widths = HEADERS.map(str::len);
    for row in rows.iter() {
        for (width, (text, _)) in widths.iter_mut().zip(row) {
            *width = (*width).max(text.chars().count());
        }
    }
    let others: usize = widths
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != RECENT)
        .map(|(_, w)| w)
        .sum();
    let room = WIDTH
        .saturating_sub(others + 2 * (HEADERS.len() - 1))
        .max(1);
    for row in rows {
        let strip = &mut row[RECENT].0;
        let len = strip.chars().count();
        if len > room {
            *strip = strip.chars().skip(len - room).collect();
        }
    }
}

/// The table for `doc` (ages relative to its `generated_at`), with a header line; `ascii`
/// draws the RECENT strip with `+ x -` instead of `✓ ✗ ·`.
pub(crate) fn render(doc: &StatusDoc, color: bool, ascii: bool) -> String {
    let mut rows: Vec<[(String, Tone); 7]> = doc
        .jobs
        .iter()
        .map(|j| {
            row(j, doc.generated_at, ascii)
                .map(|(text, tone)| (printable(&text).into_owned(), tone))
        })
        .collect();
    fit(&mut rows);
    let mut widths = HEADERS.map(str::len);
    for row in &rows {
        for (width, (text, _)) in widths.iter_mut().zip(row) {
            *width = (*width).max(text.chars().count());
        }
    }
    let mut out = String::new();
    if let Some(cluster) = &doc.cluster {
        let leader = cluster.leader.as_deref().unwrap_or("unknown");
        out.push_str(&format!(
            "cluster: node {} is {} (leader: {})\n",
            printable(&cluster.node),
            cluster.role.as_str(),
            printable(leader)
        ));
    }
    let header: Vec<(String, Tone)> = HEADERS
        .iter()
        .map(|h| ((*h).to_owned(), Tone::Plain))
        .collect();
    line(&mut out, &header, &widths, false);
    for row in &rows {
        line(&mut out, row, &widths, color);
    }
    if let Some(etcd) = &doc.etcd {
        out.push_str(&etcd_line(etcd, &doc.jobs));
    }
    for job in &doc.jobs {
        if let Some(owner) = &job.owned_by {
            out.push_str(&printable(&format!(
                "job \"{}\": its check is owned by another agent ({owner}): not pinged nor changed",
                job.name
            )));
            out.push('\n');
        }
    }
    out
}

/// In a cluster: whether etcd answers and this agent holds its lease, the claims, the last
/// etcd error.
fn etcd_line(etcd: &super::doc::EtcdDoc, jobs: &[JobDoc]) -> String {
    let reachable = match etcd.reachable {
        Some(true) => "reachable",
        Some(false) => "UNREACHABLE",
        None => "not asked yet",
    };
    let lease = if etcd.lease_held {
        "lease held"
    } else {
        "no lease"
    };
    let sum = |f: fn(&super::doc::JobClusterDoc) -> u64| -> u64 {
        jobs.iter().filter_map(|j| j.cluster.as_ref()).map(f).sum()
    };
    let (won, lost, skipped) = (
        sum(|c| c.claims_won),
        sum(|c| c.claims_lost),
        sum(|c| c.claims_unavailable),
    );
    let mut line = format!(
        "etcd: {reachable}, {lease}; claims won {won}, lost {lost}, unavailable {skipped} \
         (on_unavailable = \"{}\")\n",
        etcd.on_unavailable
    );
    if let Some(identity) = &etcd.identity {
        line.insert_str(
            line.len() - 1,
            &format!(
                "; node {}, identity {}",
                printable(&etcd.node),
                printable(identity)
            ),
        );
    }
    if let (Some(false), Some(error)) = (etcd.reachable, &etcd.last_error) {
        line.push_str(&format!("etcd error: {}\n", printable(error)));
    }
    line
}

fn line(out: &mut String, cells: &[(String, Tone)], widths: &[usize; 7], color: bool) {
    let last = cells.len() - 1;
    for (i, ((text, tone), width)) in cells.iter().zip(widths).enumerate() {
        let pad = if i == last {
            0
        } else {
            width - text.chars().count() + 2
        };
        let code = match tone {
            _ if !color => None,
            Tone::Plain => None,
            Tone::Good => Some("32"),
            Tone::Bad => Some("31"),
            Tone::Warn => Some("33"),
        };
        match code {
            Some(code) => out.push_str(&format!("\x1b[{code}m{text}\x1b[0m")),
            None => out.push_str(text),
        }
        out.push_str(&" ".repeat(pad));
    }
    out.push('\n');
}

fn row(job: &JobDoc, now: DateTime<Utc>, ascii: bool) -> [(String, Tone); 7] {
    let next = match (&job.next_run, job.enabled, job.kind.as_str()) {
        _ if job.paused.is_some() => paused(job, now),
        (_, false, _) => (state::DISABLED.to_owned(), Tone::Plain),
        (_, _, "external") => ("external".to_owned(), Tone::Plain),
        (Some(at), _, _) => (format!("in {}", span(*at - now)), Tone::Plain),
        (None, _, _) => ("-".to_owned(), Tone::Plain),
    };
    let last = match &job.last_run {
        _ if job.running > 0 => (state::RUNNING.to_owned(), Tone::Warn),
        None => (state::NEVER.to_owned(), Tone::Plain),
        Some(run) => {
            let what = state::run_phrase(&run.outcome, run.exit_code, run.signal, run.attempts);
            let ago = span(now - run.ended);
            (format!("{ago} ago {what}"), state::run_tone(&run.outcome))
        }
    };
    // In a cluster, a later fire that another agent ran shows where it ran.
    let last = match job
        .cluster
        .as_ref()
        .and_then(|c| c.last_ran_on.as_ref().zip(c.last_ran_fire))
    {
        Some((node, fire)) if job.last_run.as_ref().map_or(true, |r| r.scheduled < fire) => {
            (format!("{} ago on {node}", span(now - fire)), Tone::Plain)
        }
        _ => last,
    };
    let ping = match &job.last_ping {
        None => ("-".to_owned(), Tone::Plain),
        // The last run's own ping (sent after it ended) says no more than LAST RUN's age.
        Some(p)
            if p.result == "accepted" && job.last_run.as_ref().is_some_and(|r| p.at >= r.ended) =>
        {
            (state::PING_ACCEPTED.to_owned(), Tone::Good)
        }
        Some(p) if p.result == "accepted" => (
            format!("{} {} ago", state::PING_ACCEPTED, span(now - p.at)),
            Tone::Good,
        ),
        Some(_) if job.outbox_pending > 0 => (
            format!("{} ({})", state::PING_QUEUED, job.outbox_pending),
            Tone::Warn,
        ),
        Some(_) => (state::PING_FAILED.to_owned(), Tone::Bad),
    };
    let check = CheckFacts::of_doc(job).state();
    let drift = job.sync.as_ref().map_or(&[][..], |s| s.drift.as_slice());
    [
        (job.name.clone(), Tone::Plain),
        next,
        last,
        recent(&job.recent, ascii),
        ping,
        state::sync_cell(check, drift),
        remote(&job.remote, ServiceState::of_doc(job)),
    ]
}

/// The RECENT cell: the last runs' outcomes, oldest first (`✓✓✗✓`), `-` before any.
fn recent(outcomes: &[String], ascii: bool) -> (String, Tone) {
    match outcomes.last() {
        None => ("-".to_owned(), Tone::Plain),
        Some(last) => (
            crate::history::strip(outcomes, ascii),
            state::run_tone(last),
        ),
    }
}

/// The NEXT RUN cell of a paused job: `paused 25m left (deploy)`, `paused (deploy)` (until
/// `resume`), or `resuming` (the check's re-activation not accepted yet).
fn paused(job: &JobDoc, now: DateTime<Utc>) -> (String, Tone) {
    let Some(pause) = &job.paused else {
        return ("-".to_owned(), Tone::Plain);
    };
    if pause.state != "paused" {
        return ("resuming".to_owned(), Tone::Warn);
    }
    let mut text = match pause.until {
        Some(until) => format!("paused {} left", span(until - now)),
        None => "paused".to_owned(),
    };
    if let Some(reason) = &pause.reason {
        text.push_str(&format!(" ({reason})"));
    }
    (text, Tone::Warn)
}

/// The REMOTE cell: the service's state of the check ([`ServiceState`]: `no_check` for a job
/// bound to none, `unknown` for a check not read), then, when the service was read, the 24 h
/// success ratio and whether the check was pinged lately.
fn remote(remote: &Remote, service: ServiceState) -> (String, Tone) {
    let word = service.as_str();
    match remote {
        _ if matches!(service, ServiceState::Missing | ServiceState::NoCheck) => {
            (word.to_owned(), service.tone())
        }
        Remote::Unavailable { .. } => (word.to_owned(), service.tone()),
        Remote::Available {
            heartbeat,
            fetched_at,
            ..
        } => {
            // The service's success ratio is a percentage already (0 to 100).
            let ratio = match heartbeat {
                Heartbeat::Available {
                    success_ratio_24h: Some(r),
                    ..
                } => format!("{r:.0}%"),
                _ => "n/a".to_owned(),
            };
            let note = match heartbeat {
                Heartbeat::Available { latest_event, .. } => match latest_event.time {
                    Some(time) if *fetched_at - time > TimeDelta::hours(24) => {
                        format!(", last event {} ago", span(*fetched_at - time))
                    }
                    _ => String::new(),
                },
                Heartbeat::NeverPinged { .. } => ", never pinged".to_owned(),
                Heartbeat::Unavailable { .. } => String::new(),
            };
            (format!("{word} {ratio}{note}"), service.tone())
        }
    }
}

/// A short span in [`one_unit`] notation: `45s`, `12m`, `3h`, `2d` (negative spans show as
/// `0s`).
fn span(delta: TimeDelta) -> String {
    one_unit(u64::try_from(delta.num_seconds()).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_shows_the_percentage_and_tells_an_old_ping_from_none() {
        let fetched_at = Utc::now();
        let view = |heartbeat| Remote::Available {
            fetched_at,
            check_status: None,
            heartbeat,
        };
        let event = |hours_ago| super::super::doc::EventDoc {
            id: "e".into(),
            state: Some("RECEIVED".into()),
            time: Some(fetched_at - TimeDelta::hours(hours_ago)),
        };
        let available = |hours_ago| Heartbeat::Available {
            success_ratio_24h: Some(100.0),
            success_ratio_7d: Some(97.5),
            latest_event: event(hours_ago),
        };
        let listed = ServiceState::NotListed;
        assert_eq!(remote(&view(available(1)), listed).0, "not_listed 100%");
        assert_eq!(
            remote(&view(available(30)), listed).0,
            "not_listed 100%, last event 30h ago"
        );
        assert_eq!(
            remote(&view(Heartbeat::NeverPinged { searched_days: 365 }), listed).0,
            "not_listed n/a, never pinged"
        );
        assert_eq!(
            remote(&view(available(1)), ServiceState::Missing).0,
            "missing"
        );
        let unread = Remote::Unavailable {
            reason: "not fetched".into(),
        };
        assert_eq!(remote(&unread, ServiceState::Unknown).0, "unknown");
        assert_eq!(remote(&unread, ServiceState::NoCheck).0, "no_check");
    }

    #[test]
    fn the_strip_gives_way_so_a_row_fits_in_80_columns() {
        let cell = |text: &str| (text.to_owned(), Tone::Plain);
        let row = |name: &str| {
            [
                cell(name),
                cell("in 59s"),
                cell("59s ago failed (exit 3)"),
                cell(&"✓".repeat(19).chars().chain(['✗']).collect::<String>()),
                cell("accepted"),
                cell("in_sync"),
                cell("no_check"),
            ]
        };
        let mut rows = vec![row("backup"), row("logrotate")];
        fit(&mut rows);
        // 9 + 8 + 23 + 8 + 7 + 8 and 12 between the cells leave 5.
        assert_eq!(rows[0][RECENT].0, "✓✓✓✓✗");
        let mut long = vec![row(&"n".repeat(60))];
        fit(&mut long);
        assert_eq!(long[0][RECENT].0, "✗", "the newest outcome stays");
    }

    #[test]
    fn spans() {
        assert_eq!(span(TimeDelta::seconds(5)), "5s");
        assert_eq!(span(TimeDelta::seconds(600)), "10m");
        assert_eq!(span(TimeDelta::seconds(-3)), "0s");
        assert_eq!(span(TimeDelta::days(3)), "3d");
    }
}
