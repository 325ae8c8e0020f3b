//! Whether a job bound to a check can get a heartbeat within the service's limits (period 30 s
//! to 365 days, grace up to 365 days): an explicit value outside them, a schedule that fires
//! more often than every 30 s, or one with gaps longer than period plus grace allow.

use chrono::{DateTime, Utc};

use super::{CheckDuration, Job};
use crate::api::model::limits::{describe, MAX_GRACE, MAX_PERIOD, MIN_PERIOD};
use crate::schedule::{cadence, long_gap};

/// Why `job` (bound to a check) cannot get a heartbeat within the service's limits, for
/// `config check`; `None` when it can. `now` anchors the look-ahead.
pub(crate) fn limit_problem(job: &Job, now: DateTime<Utc>) -> Option<String> {
    if let CheckDuration::Fixed(grace) = job.check.grace {
        if grace > MAX_GRACE {
            return Some(format!(
                "grace {} is longer than the service's limit of 365 days",
                describe(grace)
            ));
        }
    }
    if let CheckDuration::Fixed(period) = job.check.period {
        if period < MIN_PERIOD || period > MAX_PERIOD {
            return Some(format!(
                "period {} is outside the service's limits of 30 seconds to 365 days",
                describe(period)
            ));
        }
        return None;
    }
    // Only a schedule with a seconds field or `@every` can fire more often than every 30 s;
    // measuring its whole cadence is worth it there (an `@every` one costs nothing). For the
    // rest only the longest gap matters, and a few `next_after` probes find it: config loading
    // (every `run` reads the config) stays cheap.
    let longest = if job.schedule.has_seconds() || job.schedule.every().is_some() {
        let Some(cadence) = cadence(&job.schedule, job.timezone, now) else {
            return Some(no_fire_times(job));
        };
        if cadence.longest < MIN_PERIOD {
            return Some(format!(
                "schedule \"{}\" fires every {}, more often than the heartbeat period limit of \
                 30 seconds allows",
                job.schedule,
                describe(cadence.longest)
            ));
        }
        cadence.longest
    } else {
        match long_gap(&job.schedule, job.timezone, now) {
            Some(gap) => gap,
            None => return Some(no_fire_times(job)),
        }
    };
    if longest > MAX_PERIOD + MAX_GRACE {
        return Some(format!(
            "schedule \"{}\" has gaps of {}, longer than the heartbeat limit of 365 days \
             period plus 365 days grace",
            job.schedule,
            describe(longest)
        ));
    }
    None
}

fn no_fire_times(job: &Job) -> String {
    format!(
        "schedule \"{}\" has no fire times, so period = \"auto\" cannot be derived",
        job.schedule
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::Config;

    /// The first job of a config holding `job` (lines of a `[[jobs]]` table with a check id).
    fn job(lines: &str) -> Job {
        let text = format!("[[jobs]]\nname = \"j\"\ncheck_id = \"c1\"\n{lines}\n");
        let loaded = Config::from_text(Path::new("/test.toml"), &text).unwrap();
        (*loaded.config.jobs[0]).clone()
    }

    #[test]
    fn limits_name_the_problem() {
        let text = "[[jobs]]\nname = \"j\"\ncheck_id = \"c\"\nschedule = \"*/10 * * * * *\"\n";
        let err = Config::from_text(Path::new("/t.toml"), text).unwrap_err();
        assert_eq!(
            err.to_string(),
            "/t.toml:4:12: job \"j\": key `schedule`: schedule \"*/10 * * * * *\" fires every 10 \
             seconds, more often than the heartbeat period limit of 30 seconds allows; hint: \
             heartbeat periods are 30 seconds to 365 days (grace up to 365 days more); change the \
             schedule or set [jobs.check] period, or use `ping_url` instead"
        );
    }

    #[test]
    fn every_below_30_seconds_is_refused_for_a_check_and_from_30_seconds_on_accepted() {
        let text = "[[jobs]]\nname = \"j\"\ncheck_id = \"c\"\nschedule = \"@every 10s\"\n";
        let err = Config::from_text(Path::new("/t.toml"), text).unwrap_err();
        assert_eq!(
            err.to_string(),
            "/t.toml:4:12: job \"j\": key `schedule`: schedule \"@every 10s\" fires every 10 \
             seconds, more often than the heartbeat period limit of 30 seconds allows; hint: \
             heartbeat periods are 30 seconds to 365 days (grace up to 365 days more); change the \
             schedule or set [jobs.check] period, or use `ping_url` instead"
        );
        let now: DateTime<Utc> = "2026-11-20T09:00:00Z".parse().expect("time");
        for fine in ["@every 30s", "@every 90s", "@every 365d"] {
            let fine_job = job(&format!("schedule = \"{fine}\""));
            assert_eq!(limit_problem(&fine_job, now), None, "{fine}");
        }
    }

    #[test]
    fn leap_day_schedules_exceed_the_longest_gap_and_yearly_ones_do_not() {
        let now: DateTime<Utc> = "2026-11-20T09:00:00Z".parse().expect("time");
        // Loading refuses the schedule with an auto period (that is the check under test), so load
        // it with a fixed period and switch back to auto.
        let mut leap = job("schedule = \"0 0 29 2 *\"\n[jobs.check]\nperiod = \"1d\"");
        std::sync::Arc::make_mut(&mut leap.check).period = CheckDuration::Auto;
        let problem = limit_problem(&leap, now).expect("a four-year gap is over the limit");
        assert!(
            problem.contains("has gaps of 1") && problem.contains("days"),
            "{problem}"
        );
        // Inside the gap already: the gap that started at the last leap day still counts.
        let inside: DateTime<Utc> = "2029-01-01T00:00:00Z".parse().expect("time");
        assert!(limit_problem(&leap, inside).is_some());
        for fine in ["@yearly", "0 9 * * 1-5", "*/5 * * * *", "0 0 1 1,7 *"] {
            let fine_job = job(&format!("schedule = \"{fine}\""));
            assert_eq!(limit_problem(&fine_job, now), None, "{fine}");
        }
    }
}
