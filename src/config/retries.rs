//! Stage two for `retries`, `retry_delay` and `retry_delay_max` (in `[defaults]` and per job):
//! each value checked (a count from 0 to [`MAX_RETRIES`], delays up to [`MAX_RETRY_DELAY`],
//! `retry_delay` not above `retry_delay_max`), merged key by key over `[defaults]`, and, once
//! the job is built, a warning when its worst-case run (every attempt to its `timeout` and
//! every wait at its cap) is longer than the shortest gap of its schedule.

use std::time::Duration;

use toml::Spanned;

use super::parse::RawJobEntry;
use super::raw::{RawDuration, RawSettings};
use super::values::{At, Checker};
use super::Job;
use crate::retries::{Retries, MAX_RETRIES, MAX_RETRY_DELAY};
use crate::watch::human_duration;

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
        job.retries.describe_worst_case(job.timeout),
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
