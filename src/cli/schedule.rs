//! `heartbeat-agent schedule 'EXPR' [--tz ZONE] [--from RFC3339] [--count N]`: previews the fire
//! times of a schedule (crontab(5) or `@every`) with the same code the daemon uses.

use std::io::Write;

use crate::schedule::Zone;
use chrono::{DateTime, SecondsFormat, Utc};
use clap::Args;

use super::{print_error, GlobalArgs};
use crate::exit;
use crate::schedule::Schedule;

/// Print the next fire times of a cron schedule.
///
/// One RFC 3339 time with the zone's offset per line, strictly after --from. `@reboot` has no
/// fire times: it runs once per boot of the machine. `@every DURATION` fires on multiples of
/// the interval since the Unix epoch, the same instants in every zone.
#[derive(Debug, Args)]
pub struct ScheduleArgs {
    /// The schedule expression, as in crontab(5): 5 fields, 6 with a leading seconds field, or
    /// a macro such as @daily; or @every DURATION (1s to 365d, e.g. "@every 90s")
    #[arg(value_name = "EXPR")]
    pub expr: String,

    /// The time zone the schedule is read in (IANA name, e.g. Europe/Berlin) [default: the zone
    /// $TZ names, else UTC]
    #[arg(long, value_name = "ZONE")]
    pub tz: Option<String>,

    /// Print fire times strictly after this moment (RFC 3339, e.g. 2026-03-29T00:00:00+01:00)
    /// [default: now]
    #[arg(long, value_name = "RFC3339")]
    pub from: Option<String>,

    /// How many fire times to print
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub count: usize,
}

/// Prints the fire times; exit 2 for a bad expression, zone or time.
pub fn run(args: ScheduleArgs, _global: &GlobalArgs) -> u8 {
    match fire_times(&args, Utc::now()) {
        Ok(lines) => {
            let mut out = std::io::stdout().lock();
            for line in lines {
                // A closed pipe (`| head -1`) is not an error worth reporting.
                if writeln!(out, "{line}").is_err() {
                    break;
                }
            }
            exit::OK
        }
        Err(Problem::Reboot) => {
            print_error(
                "@reboot has no fire times: it runs once per boot of the machine (the daemon \
                 remembers the boot id in its state directory), not on a clock",
            );
            exit::OK
        }
        Err(Problem::Invalid(message)) => {
            print_error(message);
            exit::USAGE
        }
    }
}

/// Why no times are printed.
enum Problem {
    /// The schedule is `@reboot`.
    Reboot,
    /// A bad argument, with the message for the user.
    Invalid(String),
}

/// The lines to print, given the current time.
fn fire_times(args: &ScheduleArgs, now: DateTime<Utc>) -> Result<Vec<String>, Problem> {
    let schedule = Schedule::parse(&args.expr).map_err(|e| Problem::Invalid(e.message))?;
    let tz: Zone = match &args.tz {
        Some(name) => name.parse().map_err(|_| {
            Problem::Invalid(format!(
                "unknown time zone \"{name}\" in --tz: expected an IANA name such as UTC, \
                 Europe/Berlin or America/New_York"
            ))
        })?,
        None => {
            let env = std::env::var(crate::schedule::TZ_ENV).ok();
            crate::schedule::zone_from_tz(env.as_deref())
                .map_err(|m| Problem::Invalid(format!("{m}: pass --tz ZONE, or fix or unset TZ")))?
        }
    };
    let from = match &args.from {
        None => now,
        Some(text) => DateTime::parse_from_rfc3339(text)
            .map_err(|_| {
                Problem::Invalid(format!(
                    "invalid --from \"{text}\": expected an RFC 3339 time with an offset, such \
                     as 2026-03-29T00:00:00+01:00 or 2026-03-28T23:00:00Z"
                ))
            })?
            .with_timezone(&Utc),
    };
    if schedule.is_reboot() {
        return Err(Problem::Reboot);
    }
    Ok(schedule
        .fire_times(from, tz)
        .take(args.count)
        .map(|t| tz.local(t).to_rfc3339_opts(SecondsFormat::Secs, false))
        .collect())
}
