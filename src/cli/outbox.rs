//! `heartbeat-agent outbox [list|flush|purge]`: show and manage the pings waiting in the outbox
//! (see `docs/outbox.md`). Targets are shown redacted, never with their token.

use std::io::Write;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::{context, print_error, GlobalArgs};
use crate::duration::two_units;
use crate::exit;
use crate::ping::outbox::{self, Listed, Outbox, PassOptions, Stats};
use crate::ping::Budget;

/// Show and manage pending pings (tokens redacted).
#[derive(Debug, Args)]
pub struct OutboxArgs {
    /// What to do [default: list]
    #[command(subcommand)]
    pub command: Option<OutboxCommand>,
}

/// The `outbox` subcommands.
#[derive(Debug, Subcommand)]
pub enum OutboxCommand {
    /// List pending pings: target (redacted), job, age, attempts, next attempt; then the counters
    List {
        /// Print one JSON document instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Deliver pending pings now; exit 0 when nothing is left pending, 1 otherwise
    Flush {
        /// Time for the whole flush, all pings in parallel
        #[arg(long, value_parser = crate::duration::parse, default_value = "30s", value_name = "DUR")]
        timeout: Duration,
    },
    /// Delete every pending ping and say how many
    Purge,
}

/// Runs an `outbox` subcommand; returns the exit code.
pub fn run(args: OutboxArgs, global: &GlobalArgs) -> u8 {
    let resolved = context::Lenient::resolve(global, None, None);
    let outbox = resolved.outbox();
    match args.command.unwrap_or(OutboxCommand::List { json: false }) {
        OutboxCommand::List { json } => list(&outbox, json),
        OutboxCommand::Flush { timeout } => flush(&resolved.pings(), &outbox, timeout),
        OutboxCommand::Purge => match outbox.purge() {
            Ok(purged) => {
                crate::logging::write_out(&format!(
                    "purged {purged} pending ping(s) from {}\n",
                    outbox.dir().display()
                ));
                exit::OK
            }
            Err(err) => failure(err),
        },
    }
}

fn failure(err: impl std::fmt::Display) -> u8 {
    print_error(err);
    exit::FAILURE
}

fn list(outbox: &Outbox, json: bool) -> u8 {
    let entries = match outbox.list() {
        Ok(entries) => entries,
        Err(err) => return failure(err),
    };
    let stats = outbox.stats();
    let text = if json {
        let document = serde_json::json!({
            "dir": outbox.dir(),
            "entries": entries,
            "stats": stats,
        });
        format!("{document:#}\n")
    } else {
        table(outbox, &entries, &stats)
    };
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => exit::OK,
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => exit::OK,
        Err(err) => failure(format!("cannot write the list: {err}")),
    }
}

fn table(outbox: &Outbox, entries: &[Listed], stats: &Stats) -> String {
    let mut text = if entries.is_empty() {
        format!("no pending pings in {}\n", outbox.dir().display())
    } else {
        let mut rows = vec![[
            "TARGET".to_owned(),
            "JOB".to_owned(),
            "AGE".to_owned(),
            "ATTEMPTS".to_owned(),
            "NEXT ATTEMPT".to_owned(),
            "LAST ERROR".to_owned(),
        ]];
        for entry in entries {
            let next = match (entry.in_flight_pid, entry.died_sender_pid) {
                (Some(pid), _) => format!("in flight (pid {pid})"),
                (None, Some(_)) => "pending (its sender died)".to_owned(),
                (None, None) if entry.next_attempt_secs > 0 => {
                    format!("in {}", two_units(entry.next_attempt_secs))
                }
                (None, None) => "now".to_owned(),
            };
            rows.push([
                entry.target.clone(),
                entry.job.clone().unwrap_or_else(|| "-".to_owned()),
                two_units(entry.age_secs),
                entry.attempts.to_string(),
                next,
                entry.last_error.clone().unwrap_or_else(|| "-".to_owned()),
            ]);
        }
        align(&rows)
    };
    text.push_str(&format!(
        "queued {}, coalesced {}, delivered {}, dropped after a failed run {}, dropped as too old {}, \
         dropped over the limit {}, refused {}, unreadable {}, purged {}, sent again unanswered \
         {}\n",
        stats.queued,
        stats.coalesced,
        stats.delivered,
        stats.dropped_failed_run,
        stats.dropped_expired,
        stats.dropped_overflow,
        stats.permanent,
        stats.corrupt,
        stats.purged,
        stats.recovered
    ));
    text
}

fn align(rows: &[[String; 6]]) -> String {
    let mut widths = [0usize; 6];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        text.push_str(cells.join("  ").trim_end());
        text.push('\n');
    }
    text
}

fn flush(sender: &crate::ping::Sender, outbox: &Outbox, timeout: Duration) -> u8 {
    let options = PassOptions {
        budget: Budget {
            total: timeout,
            ..Budget::default()
        },
        honour_retry_after: false,
        skip: None,
    };
    let runtime = match context::runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    match runtime.block_on(outbox::deliver_pending(sender, outbox, &options)) {
        Ok(report) => {
            crate::logging::write_out(&format!(
                "delivered {}, failed {}, refused {}, still pending {}\n",
                report.delivered, report.failed, report.permanent, report.remaining
            ));
            if report.remaining == 0 {
                exit::OK
            } else {
                exit::FAILURE
            }
        }
        Err(err) => failure(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_as_people_write_them() {
        assert_eq!(two_units(5), "5s");
        assert_eq!(two_units(95), "1m35s");
        assert_eq!(two_units(7300), "2h1m");
    }
}
