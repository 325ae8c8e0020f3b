//! `heartbeat-agent schedule 'EXPR' [--tz ZONE] [--from RFC3339] [--count N]`.

use clap::Args;

use super::GlobalArgs;

/// Print the next fire times of a cron schedule.
#[derive(Debug, Args)]
pub struct ScheduleArgs {
    /// The schedule expression, as in crontab(5)
    pub expr: String,
}

/// Prints the fire times.
pub fn run(_args: ScheduleArgs, _global: &GlobalArgs) -> u8 {
    super::exit::OK
}
