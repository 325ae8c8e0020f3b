//! `[jobs.check]` `alert_settings` and `trigger_incident`: read into the API's shapes and checked
//! against what the service accepts, so a value it would refuse is a `config check` error with
//! its place (file:line:col) instead of a failed sync. The value sets live in
//! [`crate::api::model::limits`], shared with the emulator.
//!
//! `trigger_incident` needs `service_id` (a UUID), `name` and `severity` (the service requires
//! all five fields of the object; `description` defaults to `""` and `notify_subscribers` to
//! `false` when not set, so the config need not repeat them).

use toml::Spanned;

use super::raw::{RawAlertSettings, RawTriggerIncident};
use super::values::{At, Checker};
use crate::api::model::limits::{self, list};
use crate::api::model::{
    AlertSettings, ParallelRunFailureThreshold, Reminders, RunBasedEscalation, TimeBasedEscalation,
    TriggerIncident,
};

/// `alert_settings`, every value checked against the service's sets (`None` when one is not).
pub(super) fn alert_settings(
    check: &mut Checker,
    context: &str,
    raw: &RawAlertSettings,
) -> Option<AlertSettings> {
    let mut ok = true;
    let mut number = |key: &'static str, value: &Option<Spanned<u32>>, allowed: &[u32]| {
        let value = value.as_ref()?;
        if !allowed.contains(value.get_ref()) {
            ok = false;
            check.error(
                Some(value.span()),
                At { context, key },
                format!("{} is not a value the service accepts", value.get_ref()),
                Some(format!("one of {}", list(allowed))),
            );
        }
        Some(*value.get_ref())
    };
    let run_based = raw
        .run_based_escalation
        .as_ref()
        .map(|r| RunBasedEscalation {
            failed_run_threshold: number(
                "check.alert_settings.run_based_escalation.failed_run_threshold",
                &r.failed_run_threshold,
                limits::FAILED_RUN_THRESHOLDS,
            ),
        });
    let time_based = raw
        .time_based_escalation
        .as_ref()
        .map(|t| TimeBasedEscalation {
            minutes_failing_threshold: number(
                "check.alert_settings.time_based_escalation.minutes_failing_threshold",
                &t.minutes_failing_threshold,
                limits::MINUTES_FAILING_THRESHOLDS,
            ),
        });
    let reminders = raw.reminders.as_ref().map(|r| Reminders {
        amount: number(
            "check.alert_settings.reminders.amount",
            &r.amount,
            limits::REMINDER_AMOUNTS,
        ),
        interval: number(
            "check.alert_settings.reminders.interval",
            &r.interval,
            limits::REMINDER_INTERVALS,
        ),
    });
    let parallel = raw.parallel_run_failure_threshold.as_ref().map(|p| {
        let percentage = p.percentage.as_ref().map(|value| {
            let n = *value.get_ref();
            let whole = n.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&n);
            if !(whole && limits::FAILURE_PERCENTAGES.contains(&(n as u32))) {
                ok = false;
                check.error(
                    Some(value.span()),
                    At {
                        context,
                        key: "check.alert_settings.parallel_run_failure_threshold.percentage",
                    },
                    format!("{n} is not a value the service accepts"),
                    Some(format!("one of {}", list(limits::FAILURE_PERCENTAGES))),
                );
            }
            n
        });
        ParallelRunFailureThreshold {
            enabled: p.enabled,
            percentage,
        }
    });
    let escalation_type = one_of(
        check,
        At {
            context,
            key: "check.alert_settings.escalation_type",
        },
        &raw.escalation_type,
        limits::ESCALATION_TYPES,
        &mut ok,
    );
    ok.then_some(AlertSettings {
        escalation_type,
        run_based_escalation: run_based,
        time_based_escalation: time_based,
        reminders,
        parallel_run_failure_threshold: parallel,
    })
}

/// `trigger_incident`: `service_id`, `name` and `severity` required and valid (`None` when not).
pub(super) fn trigger_incident(
    check: &mut Checker,
    context: &str,
    raw: &Spanned<RawTriggerIncident>,
) -> Option<TriggerIncident> {
    let table = raw.get_ref();
    let mut ok = true;
    let mut required = |key: &'static str, value: &Option<Spanned<String>>, example: &str| {
        if value.is_none() {
            ok = false;
            check.error(
                Some(raw.span()),
                At { context, key },
                "missing: the service requires it for an incident trigger",
                Some(format!("add {example}")),
            );
        }
    };
    required(
        "check.trigger_incident.service_id",
        &table.service_id,
        "service_id = \"<status page service id, a UUID>\"",
    );
    required(
        "check.trigger_incident.name",
        &table.name,
        "name = \"backup missing\"",
    );
    required(
        "check.trigger_incident.severity",
        &table.severity,
        "severity = \"MAJOR\" (one of CRITICAL, MAJOR, MEDIUM, MINOR)",
    );
    if let Some(id) = &table.service_id {
        if !limits::is_uuid(id.get_ref()) {
            ok = false;
            check.error(
                Some(id.span()),
                At {
                    context,
                    key: "check.trigger_incident.service_id",
                },
                format!(
                    "{:?} is not a status page service id: the service expects a UUID",
                    id.get_ref()
                ),
                Some(
                    "copy the service's id (8-4-4-4-12 hex digits) from the status page settings"
                        .to_owned(),
                ),
            );
        }
    }
    let severity = one_of(
        check,
        At {
            context,
            key: "check.trigger_incident.severity",
        },
        &table.severity,
        limits::SEVERITIES,
        &mut ok,
    );
    let text = |value: &Option<Spanned<String>>| value.as_ref().map(|v| v.get_ref().clone());
    ok.then(|| TriggerIncident {
        service_id: text(&table.service_id),
        severity,
        name: text(&table.name),
        description: Some(table.description.clone().unwrap_or_default()),
        notify_subscribers: Some(table.notify_subscribers.unwrap_or(false)),
    })
}

/// A text out of `allowed`, or an error at its place.
fn one_of(
    check: &mut Checker,
    at: At<'_>,
    value: &Option<Spanned<String>>,
    allowed: &[&str],
    ok: &mut bool,
) -> Option<String> {
    let value = value.as_ref()?;
    if !allowed.contains(&value.get_ref().as_str()) {
        *ok = false;
        check.error(
            Some(value.span()),
            at,
            format!("{:?} is not a value the service accepts", value.get_ref()),
            Some(format!("one of {}", allowed.join(", "))),
        );
    }
    Some(value.get_ref().clone())
}
