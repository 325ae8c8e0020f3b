//! Stage two for `retries`, `retry_delay` and `retry_delay_max` (in `[defaults]` and per job):
//! each value checked (a count from 0 to [`MAX_RETRIES`], delays up to [`MAX_RETRY_DELAY`],
//! `retry_delay` not above `retry_delay_max`), merged key by key over `[defaults]`, and, once
//! the job is built, a warning when its worst-case run (every attempt to its `timeout` and
//! every wait at its cap) is longer than the shortest gap of its schedule, with that worst case
//! in words ([`describe_worst_case`]).

use std::time::Duration;

use toml::Spanned;

use super::parse::RawJobEntry;
use super::raw::{RawDuration, RawSettings};
use super::values::{At, Checker};
use super::Job;
use crate::duration::human_duration;
use crate::retries::{Retries, MAX_RETRIES, MAX_RETRY_DELAY};

/// The three keys as one table gives them: `None` means "not set here".
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct RetrySettings {
    retries: Option<u32>,
    delay: Option<Duration>,
    delay_max: Option<Duration>,
}

/// Validates the retry keys of `[defaults]` or of one job.
pub(super) fn settings(check: &mut Checker, context: &str, raw: &RawSettings) -> RetrySettings {
    let at = |key| At { context, key };
    let settings = RetrySettings {
        retries: count(check, at("retries"), &raw.retries),
        delay: delay(check, at("retry_delay"), &raw.retry_delay),
        delay_max: delay(check, at("retry_delay_max"), &raw.retry_delay_max),
    };
    if let (Some(delay), Some(max), Some(value)) =
        (settings.delay, settings.delay_max, &raw.retry_delay)
    {
        if delay > max {
            order_error(check, at("retry_delay"), value, delay, max);
        }
    }
    settings
}

fn count(check: &mut Checker, at: At<'_>, raw: &Option<Spanned<i64>>) -> Option<u32> {
    let value = raw.as_ref()?;
    let n = *value.get_ref();
    match u32::try_from(n) {
        Ok(n) if n <= MAX_RETRIES => Some(n),
        _ => {
            let message = if n < 0 {
                format!("retries = {n} is negative: it counts the attempts after the first")
            } else {
                format!("retries = {n} is more than the {MAX_RETRIES} a run may make")
            };
            let hint = "0 (the default) runs each fire once; for example: retries = 3".to_owned();
            check.error(Some(value.span()), at, message, Some(hint));
            None
        }
    }
}

fn delay(check: &mut Checker, at: At<'_>, raw: &Option<Spanned<RawDuration>>) -> Option<Duration> {
    let parsed = check.duration(at, raw)?;
    if parsed > MAX_RETRY_DELAY {
        let span = raw.as_ref().map(Spanned::span);
        check.error(
            span,
            at,
            format!(
                "{} {} is longer than a day: a wait that long belongs to the next fire, \
                 not to this run",
                at.key,
                human_duration(parsed)
            ),
            Some(format!(
                "give at most \"1d\", for example: {} = \"5m\"",
                at.key
            )),
        );
        return None;
    }
    Some(parsed)
}

fn order_error(
    check: &mut Checker,
    at: At<'_>,
    value: &Spanned<RawDuration>,
    delay: Duration,
    max: Duration,
) {
    check.error(
        Some(value.span()),
        at,
        format!(
            "retry_delay {} is longer than retry_delay_max {}: the first wait would \
             already be over its cap",
            human_duration(delay),
            human_duration(max)
        ),
        Some("make retry_delay at most retry_delay_max, or raise retry_delay_max".to_owned()),
    );
}

/// A job's own retry keys over `[defaults]`, key by key; a `retry_delay` above
/// `retry_delay_max` when one comes from each table is reported at the job's key.
pub(super) fn merge(
    check: &mut Checker,
    entry: &RawJobEntry,
    own: RetrySettings,
    defaults: RetrySettings,
) -> Retries {
    let delay = own.delay.or(defaults.delay);
    let delay_max = own.delay_max.or(defaults.delay_max);
    let mixed = own.delay.is_some() != own.delay_max.is_some();
    if let (true, Some(d), Some(m)) = (mixed, delay, delay_max) {
        let raw = &entry.settings.raw;
        let at = At {
            context: &entry.context,
            key: if own.delay.is_some() {
                "retry_delay"
            } else {
                "retry_delay_max"
            },
        };
        if let (true, Some(value)) = (
            d > m,
            raw.retry_delay.as_ref().or(raw.retry_delay_max.as_ref()),
        ) {
            order_error(check, at, value, d, m);
        }
    }
    Retries::new(
        own.retries.or(defaults.retries).unwrap_or(0),
        delay,
        delay_max,
    )
}

/// How many of the schedule's coming gaps are looked at for the shortest one.
const GAPS: usize = 50;

/// Warns when `job`'s worst-case run is longer than the shortest of its schedule's coming
/// gaps: the next fire would find it still running.
pub(super) fn fit(check: &mut Checker, entry: &RawJobEntry, job: &Job) {
    if job.retries.retries == 0 {
        return;
    }
    let worst = job.retries.worst_case(job.timeout);
    let Some(period) = shortest_gap(job) else {
        return;
    };
    if worst <= period {
        return;
    }
    let span = entry
        .settings
        .raw
        .retries
        .as_ref()
        .map(Spanned::span)
        .or(entry.job.span.clone());
    let message = format!(
        "with retries = {} a run can take up to {} ({}), longer than the {} between fires \
         of schedule \"{}\": the next fire would find it still running (overlap = \"{}\")",
        job.retries.retries,
        human_duration(worst),
        describe_worst_case(&job.retries, job.timeout),
        human_duration(period),
        job.schedule,
        job.overlap.as_str()
    );
    let hint = "lower retries, retry_delay_max or timeout, or fire less often".to_owned();
    check.warn(
        span,
        At {
            context: &entry.context,
            key: "retries",
        },
        message,
        Some(hint),
    );
}

/// `4 attempts × timeout 10m + waits up to 1m10s`: the worst case of `retries`, for messages.
pub(super) fn describe_worst_case(retries: &Retries, timeout: Option<Duration>) -> String {
    let waits = human_duration(retries.longest_delays());
    match timeout {
        Some(timeout) => format!(
            "{} attempts × timeout {} + waits up to {waits}",
            retries.attempts(),
            human_duration(timeout)
        ),
        None => format!("{} attempts + waits up to {waits}", retries.attempts()),
    }
}

fn shortest_gap(job: &Job) -> Option<Duration> {
    let mut fire = job.schedule.next_after(chrono::Utc::now(), job.timezone)?;
    let mut shortest: Option<Duration> = None;
    for _ in 0..GAPS {
        let next = job.schedule.next_after(fire, job.timezone)?;
        let gap = (next - fire).to_std().ok()?;
        shortest = Some(shortest.map_or(gap, |s| s.min(gap)));
        fire = next;
    }
    shortest
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::Config;
    use super::*;

    const JOB: &str =
        "[[jobs]]\nname = \"backup\"\nschedule = \"0 * * * *\"\nping_url = \"http://p/t\"\n";

    fn problems(text: &str) -> Vec<String> {
        match Config::from_text(Path::new("c.toml"), text) {
            Ok(loaded) => panic!("expected problems, got {:?}", loaded.config.jobs),
            Err(err) => err.problems,
        }
    }

    fn load(text: &str) -> super::super::Loaded {
        Config::from_text(Path::new("c.toml"), text).expect("a valid config")
    }

    #[test]
    fn the_worst_case_is_described_by_its_parts() {
        let secs = Duration::from_secs;
        let retries = Retries::new(3, Some(secs(10)), Some(secs(30)));
        assert_eq!(
            describe_worst_case(&retries, Some(secs(600))),
            "4 attempts × timeout 10m + waits up to 1m"
        );
    }

    #[test]
    fn bad_counts_and_delays_point_at_the_value() {
        let text = format!(
            "[defaults]\nretries = -1\n\n{JOB}retries = 101\nretry_delay = \"2d\"\n\
             retry_delay_max = 30\n"
        );
        assert_eq!(
            problems(&text),
            [
                "c.toml:2:11: [defaults]: key `retries`: retries = -1 is negative: it counts \
                 the attempts after the first; hint: 0 (the default) runs each fire once; for \
                 example: retries = 3",
                "c.toml:8:11: job \"backup\": key `retries`: retries = 101 is more than the 100 \
                 a run may make; hint: 0 (the default) runs each fire once; for example: \
                 retries = 3",
                "c.toml:9:15: job \"backup\": key `retry_delay`: retry_delay 2d is longer than \
                 a day: a wait that long belongs to the next fire, not to this run; hint: give \
                 at most \"1d\", for example: retry_delay = \"5m\"",
                "c.toml:10:19: job \"backup\": key `retry_delay_max`: duration \"30\" has no \
                 unit: write \"30s\", \"30m\", \"30h\" or \"30d\"; hint: durations are quoted \
                 strings with a unit, for example: retry_delay_max = \"5m\"",
            ]
        );
    }

    #[test]
    fn a_delay_over_its_cap_is_an_error_in_either_table() {
        let over = |line: usize| {
            [format!(
                "c.toml:{line}:15: job \"backup\": key `retry_delay`: retry_delay 10m is longer \
                 than retry_delay_max 1m: the first wait would already be over its cap; hint: \
                 make retry_delay at most retry_delay_max, or raise retry_delay_max"
            )]
        };
        let same = format!("{JOB}retries = 2\nretry_delay = \"10m\"\nretry_delay_max = \"1m\"\n");
        assert_eq!(problems(&same), over(6));
        let mixed = format!("[defaults]\nretry_delay_max = \"1m\"\n\n{JOB}retry_delay = \"10m\"\n");
        assert_eq!(problems(&mixed), over(8));
        // A lone long delay raises the default cap instead.
        let lone = load(&format!("{JOB}retries = 1\nretry_delay = \"10m\"\n"));
        let retries = lone.config.jobs[0].retries;
        assert_eq!(
            (retries.retries, retries.delay, retries.delay_max),
            (1, Duration::from_secs(600), Duration::from_secs(600))
        );
    }

    #[test]
    fn defaults_apply_key_by_key() {
        let text = format!(
            "[defaults]\nretries = 2\nretry_delay = \"1s\"\n\n{JOB}retry_delay_max = \"4s\"\n\n\
             [[jobs]]\nname = \"plain\"\nschedule = \"0 * * * *\"\nping_url = \"http://p/u\"\n\
             retries = 0\n"
        );
        let loaded = load(&text);
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        let secs = Duration::from_secs;
        assert_eq!(
            loaded.config.jobs[0].retries,
            Retries::new(2, Some(secs(1)), Some(secs(4)))
        );
        assert_eq!(loaded.config.jobs[1].retries.retries, 0);
        assert_eq!(load(JOB).config.jobs[0].retries, Retries::default());
    }

    #[test]
    fn a_worst_case_longer_than_the_period_is_a_warning() {
        let text = format!("{JOB}timeout = \"20m\"\nretries = 2\nretry_delay = \"1m\"\n");
        assert_eq!(
            load(&text).warnings,
            [
                "c.toml:6:11: job \"backup\": key `retries`: with retries = 2 a run can take up \
              to 1h3m (3 attempts × timeout 20m + waits up to 3m), longer than the 1h between \
              fires of schedule \"0 * * * *\": the next fire would find it still running \
              (overlap = \"skip\"); hint: lower retries, retry_delay_max or timeout, or fire \
              less often"
            ]
        );
        let fits = format!("{JOB}timeout = \"15m\"\nretries = 2\nretry_delay = \"1m\"\n");
        assert!(load(&fits).warnings.is_empty());
    }
}
