//! The demo's table: one row per job with its last run, its ping, its sync state and what the
//! emulator saw, redrawn every second on a terminal (a line per change otherwise), made by a
//! background task of the embedded daemon that also ends the demo after `--duration`. Its
//! words (a run's outcome, a ping's result, the check's state, the service's) are those of
//! every view: [`crate::status::state`].

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use super::CheckIds;
use crate::api::ApiClient;
use crate::config::{Config, JobAction};
use crate::daemon::{Context, Controller, DaemonView, JobView, Request, Task};
use crate::run_end::RunEnd;
use crate::status::state::{self, CheckFacts, CheckState, MissingBy, ServiceState, Tone};
use crate::sync::SyncStatus;

/// How often the table is refreshed (and the emulator asked for its view).
const REFRESH: Duration = Duration::from_secs(1);

/// The background task that shows the table while the daemon runs, and ends the demo after
/// `duration` by asking the daemon to stop through `controller`.
pub(super) fn table_task(
    view: View,
    duration: Option<Duration>,
    controller: Controller,
    where_: super::Where,
) -> Task {
    Box::new(move |context: Context, cancel: CancellationToken| {
        Box::pin(async move {
            *view.daemon.lock().unwrap_or_else(|e| e.into_inner()) = Some(context.view.clone());
            let stop_at = duration.map(|d| tokio::time::Instant::now() + d);
            let mut tick = tokio::time::interval(REFRESH);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut shown: BTreeMap<String, String> = BTreeMap::new();
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return,
                    _ = tick.tick() => {}
                }
                let config = Arc::clone(&context.config.borrow());
                let rows = view.rows(&config).await;
                if view.live {
                    // Home, clear the screen, then the table.
                    crate::logging::write_out(&format!(
                        "\x1b[H\x1b[2J{}",
                        render(&rows, Utc::now(), true)
                    ));
                    crate::logging::write_out(&format!(
                        "{LEGEND}\n{}Ctrl-C stops the demo\n",
                        where_.lines()
                    ));
                } else {
                    for row in &rows {
                        let line = row.change_line();
                        if shown.get(&row.job) != Some(&line) {
                            crate::logging::write_out(&format!("{line}\n"));
                            shown.insert(row.job.clone(), line);
                        }
                    }
                }
                let _ = std::io::stdout().flush();
                if stop_at.is_some_and(|at| tokio::time::Instant::now() >= at) {
                    // The same orderly shutdown as Ctrl-C.
                    let _ = controller.send(Request::Stop { by: "demo" });
                    return;
                }
            }
        })
    })
}

/// What the table is made from.
#[derive(Clone)]
pub(super) struct View {
    /// Per-job sync state, from the reconciler.
    pub(super) sync: SyncStatus,
    /// A client of the emulator, for its view of each check.
    pub(super) client: ApiClient,
    /// The demo's checks by name (to show checks by id).
    pub(super) checks: CheckIds,
    /// Whether stdout is a terminal (redraw) or not (a line per change).
    pub(super) live: bool,
    /// The daemon's view of its jobs, handed over by the table task once the daemon runs.
    pub(super) daemon: Arc<Mutex<Option<DaemonView>>>,
    /// The demo's state directory, where sync records the checks it creates.
    pub(super) state_dir: std::path::PathBuf,
}

/// One job's row.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Row {
    job: String,
    /// When the last run ended and how (`None` before the first).
    last_run: Option<(DateTime<Utc>, String)>,
    /// When the last ping was sent and what came of it.
    ping: Option<(DateTime<Utc>, String)>,
    sync: String,
    emulator: Service,
}

impl View {
    /// The rows of every job of `config`.
    pub(super) async fn rows(&self, config: &Config) -> Vec<Row> {
        let daemon = self
            .daemon
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let failing = self.failing_checks().await;
        let mut rows = Vec::new();
        for job in &config.jobs {
            let job_state = daemon.as_ref().and_then(|d| d.job(&job.name));
            // The check's state by the one model: sync's, unless the job's ping was answered 404.
            let status = self.sync.get(&job.name).filter(|_| job.has_synced_check());
            let sync_state = status.as_ref().map(|s| CheckState::from(s.state));
            let check = crate::sync::created::bound_check(&self.state_dir, job);
            let ping_404 = job_state
                .as_ref()
                .and_then(|s| s.last_ping.as_ref())
                .zip(check.as_deref())
                .is_some_and(|(p, id)| {
                    let answer = (p.at, p.accepted, p.status);
                    state::ping_says_gone(&self.state_dir, &job.name, id, answer)
                });
            let facts = CheckFacts {
                sync: sync_state,
                missing: MissingBy::first(ping_404, sync_state, false),
                owned_by: None,
            };
            let drift = status.as_ref().map_or(&[][..], |s| s.drift.as_slice());
            let sync = state::sync_cell(facts.state(), drift).0;
            // The job's check: its `check_id`, or the one sync created for `create = true`.
            let emulator = match check {
                Some(_) if facts.state() == Some(CheckState::Missing) => Service {
                    alarm: true,
                    text: ServiceState::Missing.as_str().to_owned(),
                },
                Some(id) => self.emulator_view(&id, failing.get(&id)).await,
                None => Service {
                    alarm: false,
                    text: if job.check.create {
                        "no check yet"
                    } else {
                        "-"
                    }
                    .to_owned(),
                },
            };
            rows.push(Row {
                job: job.name.clone(),
                last_run: job_state.as_ref().and_then(|s| last_run(s, &job.action)),
                ping: job_state.and_then(|s| s.last_ping).map(|p| {
                    let verdict = match (p.accepted, p.queued) {
                        (true, _) => state::PING_ACCEPTED,
                        (false, true) => state::PING_QUEUED,
                        (false, false) => state::PING_FAILED,
                    };
                    (p.at, format!("{verdict} {}", p.detail))
                }),
                sync,
                emulator,
            });
        }
        rows
    }

    /// `hasFailures` of every check, by id (empty when the emulator cannot be asked).
    async fn failing_checks(&self) -> BTreeMap<String, bool> {
        let statuses = self.client.list_check_statuses().await.unwrap_or_default();
        statuses
            .into_iter()
            .flatten()
            .filter_map(|s| Some((s.check_id?, s.has_failures)))
            .collect()
    }

    /// The service's (the emulator's) view of check `id`: an alarm first when it is failing,
    /// then how many pings it counted in the last 24 hours (its own count, not the length of
    /// the at most 10 events the list answers) and what its last event says.
    async fn emulator_view(&self, id: &str, failing: Option<&bool>) -> Service {
        let lists = match self
            .client
            .list_heartbeat_events(id, &crate::api::model::EventsWindow::default())
            .await
        {
            Ok(lists) => lists,
            Err(err) => {
                let name = self
                    .checks
                    .iter()
                    .find(|(_, check)| check.as_str() == id)
                    .map_or(id, |(name, _)| name.as_str());
                return Service {
                    alarm: false,
                    text: format!("cannot ask for {name} ({err})"),
                };
            }
        };
        let listed = lists.iter().map(|l| l.events.len()).sum::<usize>() as u64;
        let counted = lists
            .iter()
            .filter_map(|l| l.stats.as_ref()?.last_24_hours.as_ref())
            .map(|day| day.total_entities_current_period)
            .max();
        let count = counted.unwrap_or(listed);
        let noun = if count == 1 { "event" } else { "events" };
        let last = lists
            .iter()
            .flat_map(|l| &l.events)
            .next()
            .and_then(|e| e.state.as_ref())
            .map(|s| last_state(s.as_str()));
        let service = ServiceState::listed(failing.copied());
        let (alarm, verdict) = (service.tone() == Tone::Bad, service.as_str());
        let text = match last {
            Some(last) => format!("{verdict}, {count} {noun}, last {last}"),
            None => format!("{verdict}, no events"),
        };
        Service { alarm, text }
    }
}

/// An event state as the table shows it: `EARLY` (a ping before the period was over) is a
/// passing ping as much as `RECEIVED`, so it says so (the legend explains it); the others are
/// shown as the service names them.
fn last_state(state: &str) -> String {
    match state {
        "EARLY" => "EARLY (ok)".to_owned(),
        other => other.to_owned(),
    }
}

/// The service's view of a job's check, as the table shows it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Service {
    /// Whether the check is failing: the row is marked (and coloured on a terminal).
    alarm: bool,
    /// What the service says, in words.
    text: String,
}

/// How the job's last run ended, or that one is running now.
fn last_run(job: &JobView, action: &JobAction) -> Option<(DateTime<Utc>, String)> {
    let record = match job.last_run.as_deref() {
        Some(record) => record,
        None if job.running > 0 => return Some((Utc::now(), state::RUNNING.to_owned())),
        None => return None,
    };
    let phrase = state::run_phrase(
        record.outcome.as_str(),
        record.end.exit_code(),
        record.end.signal(),
        record.attempts,
    );
    let outcome = match &record.end {
        RunEnd::NotStarted { reason, .. } | RunEnd::Probed { reason, .. } if !record.success() => {
            format!("{phrase}: {reason}")
        }
        _ => phrase,
    };
    let runs = job.runs;
    let kind = if matches!(action, JobAction::Watch(_)) {
        "probe"
    } else {
        "run"
    };
    Some((record.ended, format!("{kind} {runs}: {outcome}")))
}

impl Row {
    /// The row as one line without ages, so it changes only when something happened.
    fn change_line(&self) -> String {
        let at = |t: &DateTime<Utc>| t.format("%H:%M:%S").to_string();
        let run = self
            .last_run
            .as_ref()
            .map_or("no run yet".to_owned(), |(t, what)| {
                format!("{what} at {}", at(t))
            });
        let ping = self
            .ping
            .as_ref()
            .map_or("not pinged".to_owned(), |(t, what)| {
                format!("{what} at {}", at(t))
            });
        format!(
            "{}: {run}; ping {ping}; sync {}; service {}",
            self.job, self.sync, self.emulator.text
        )
    }
}

/// What the SERVICE column says, under the table.
pub(super) const LEGEND: &str =
    "service: the check's state (up, failing), its events in 24h and the last one\n\
(EARLY: a ping before the period ended, fine). !! marks a failing check.\n";

/// The widest the table gets: a common terminal's width.
const WIDTH: usize = 80;

/// The table: per job, one line with its last run, ping and sync, columns padded to the
/// widest cell, then the service's view of its check on a line of its own; the widest cells are
/// cut (ending in `…`) until every line fits [`WIDTH`] columns. A failing check is marked: `!!`
/// in front of its alarm, and on a terminal (`colour`) the job's two lines in bold red.
pub(super) fn render(rows: &[Row], now: DateTime<Utc>, colour: bool) -> String {
    let age = |t: &DateTime<Utc>| {
        let secs = (now - *t).num_seconds().max(0);
        format!("{secs}s ago")
    };
    let mut cells = vec![[
        "JOB".to_owned(),
        "LAST RUN".to_owned(),
        "PING".to_owned(),
        "SYNC".to_owned(),
    ]];
    for row in rows {
        cells.push([
            row.job.clone(),
            row.last_run
                .as_ref()
                .map_or("-".to_owned(), |(t, what)| format!("{what}, {}", age(t))),
            row.ping
                .as_ref()
                .map_or("not pinged".to_owned(), |(t, what)| {
                    format!("{what}, {}", age(t))
                }),
            row.sync.clone(),
        ]);
    }
    let mut widths = [0usize; 4];
    for line in &cells {
        for (width, cell) in widths.iter_mut().zip(line) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let gaps = 2 * (widths.len() - 1);
    while widths.iter().sum::<usize>() + gaps > WIDTH {
        let widest = widths.iter_mut().max().expect("four columns");
        *widest -= 1;
    }
    let line = |cells: &[String; 4]| {
        let mut text = String::new();
        for (cell, width) in cells.iter().zip(widths) {
            let _ = write!(text, "{:<width$}  ", cut(cell, width));
        }
        text.trim_end().to_owned()
    };
    let mut out = line(&cells[0]);
    out.push('\n');
    for (row, cells) in rows.iter().zip(&cells[1..]) {
        let marker = if row.emulator.alarm { "!! " } else { "" };
        let service = cut(&format!("  service: {marker}{}", row.emulator.text), WIDTH);
        let lines = format!("{}\n{service}", line(cells));
        if row.emulator.alarm && colour {
            for text in lines.lines() {
                let _ = writeln!(out, "\x1b[1;31m{text}\x1b[0m");
            }
        } else {
            out.push_str(&lines);
            out.push('\n');
        }
    }
    out
}

/// `cell` cut to `width` characters, its last one `…` when cut.
fn cut(cell: &str, width: usize) -> String {
    if cell.chars().count() <= width {
        return cell.to_owned();
    }
    let mut text: String = cell.chars().take(width.saturating_sub(1)).collect();
    text.push('…');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(job: &str, now: DateTime<Utc>, alarm: bool) -> Row {
        Row {
            job: job.into(),
            last_run: Some((now - chrono::TimeDelta::seconds(3), "run 2: success".into())),
            ping: None,
            sync: "in_sync".into(),
            emulator: Service {
                alarm,
                text: if alarm {
                    "failing, 1 event, last FAILING".into()
                } else {
                    "up, 60 events, last EARLY (ok)".into()
                },
            },
        }
    }

    #[test]
    fn the_table_fits_80_columns_and_marks_an_alarm() {
        let now = Utc::now();
        let rows = vec![row("backup", now, false), row("slow-export", now, true)];
        let table = render(&rows, now, false);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 5, "{table}");
        assert!(lines[0].starts_with("JOB          LAST RUN"), "{table}");
        assert!(lines[1].contains("run 2: success, 3s ago"), "{table}");
        assert!(lines[1].contains("not pinged"), "{table}");
        assert_eq!(lines[2], "  service: up, 60 events, last EARLY (ok)");
        assert_eq!(lines[4], "  service: !! failing, 1 event, last FAILING");
        assert!(!table.contains('\x1b'), "{table}");
        for line in &lines {
            assert!(line.chars().count() <= WIDTH, "{line:?}");
        }
        let coloured = render(&rows, now, true);
        for alarm in coloured.lines().skip(3) {
            assert!(
                alarm.starts_with("\x1b[1;31m") && alarm.ends_with("\x1b[0m"),
                "{alarm:?}"
            );
        }
        for plain in coloured.lines().take(3) {
            assert!(!plain.contains('\x1b'), "{plain:?}");
        }
        for line in LEGEND.lines() {
            assert!(line.chars().count() <= WIDTH, "{line:?}");
        }
        let line = rows[0].change_line();
        assert!(line.starts_with("backup: run 2: success at "), "{line}");
        assert!(!line.contains("ago"), "{line}");
    }
}
