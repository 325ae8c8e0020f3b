//! Validating `[jobs.watch]`: the kind, the keys that kind takes (and no others), their
//! values and the kind's defaults (tcp timeout 5s; http status 200 and timeout 10s).

use std::time::Duration;

use toml::Spanned;

use super::jobs::missing;
use super::parse::Section;
use super::raw::RawWatch;
use super::values::{At, Checker};
use super::WatchSpec;

/// The keys each watch kind takes (besides `kind`), required ones first.
const WATCH_KINDS: [(&str, &[&str], usize); 7] = [
    ("process", &["pattern"], 1),
    ("file", &["path", "max_age"], 2),
    ("disk", &["path", "min_free"], 2),
    ("memory", &["max_used_percent"], 1),
    ("load", &["max_load1"], 1),
    ("tcp", &["address", "timeout"], 1),
    ("http", &["url", "expect_status", "timeout"], 1),
];

pub(super) fn watch_spec(
    check: &mut Checker,
    context: &str,
    watch: &Section<RawWatch>,
) -> Option<WatchSpec> {
    let raw = &watch.raw;
    let Some(kind) = &raw.kind else {
        if !watch.broken.contains("kind") {
            let hint = format!(
                "add kind = one of {}",
                WATCH_KINDS.map(|k| format!("\"{}\"", k.0)).join(", ")
            );
            check.error(
                watch.span.clone(),
                At {
                    context,
                    key: "watch.kind",
                },
                "missing required key",
                Some(hint),
            );
        }
        return None;
    };
    let Some((name, takes, required)) = WATCH_KINDS.iter().find(|k| k.0 == kind.get_ref()) else {
        let hint = format!(
            "use one of {}",
            WATCH_KINDS.map(|k| format!("\"{}\"", k.0)).join(", ")
        );
        check.error(
            Some(kind.span()),
            At {
                context,
                key: "watch.kind",
            },
            format!("unknown watch kind \"{}\"", kind.get_ref()),
            Some(hint),
        );
        return None;
    };
    let mut ok = true;
    for (key, span) in &watch.keys {
        if key != "kind" && !takes.contains(&key.as_str()) {
            let full = format!("watch.{key}");
            let hint = format!("a {name} watch takes: {}", takes.join(", "));
            check.error(
                span.clone(),
                At {
                    context,
                    key: &full,
                },
                format!("does not apply to a {name} watch"),
                Some(hint),
            );
            ok = false;
        }
    }
    for key in &takes[..*required] {
        if !watch.keys.iter().any(|(k, _)| k == key) && !watch.broken.contains(*key) {
            missing(check, watch.span.clone(), context, &format!("watch.{key}"));
            ok = false;
        }
    }
    let spec = watch_values(check, context, name, raw);
    spec.filter(|_| ok)
}

/// The values of a watch of `kind`; each present value is checked, so all problems show.
fn watch_values(
    check: &mut Checker,
    context: &str,
    kind: &str,
    raw: &RawWatch,
) -> Option<WatchSpec> {
    let at = |key| At { context, key };
    let pattern = check.non_empty(at("watch.pattern"), &raw.pattern);
    let path = check.path(at("watch.path"), &raw.path);
    let max_age = check.duration(at("watch.max_age"), &raw.max_age);
    let min_free = check.amount(at("watch.min_free"), &raw.min_free);
    let max_used_percent = check.percent(at("watch.max_used_percent"), &raw.max_used_percent);
    let max_load1 = load(check, at("watch.max_load1"), &raw.max_load1);
    let address = address(check, at("watch.address"), &raw.address);
    let timeout = check.duration(at("watch.timeout"), &raw.timeout);
    let url = check.http_url(at("watch.url"), &raw.url, true);
    let expect_status = status(check, at("watch.expect_status"), &raw.expect_status);
    Some(match kind {
        "process" => WatchSpec::Process { pattern: pattern? },
        "file" => WatchSpec::File {
            path: path?,
            max_age: max_age?,
        },
        "disk" => WatchSpec::Disk {
            path: path?,
            min_free: min_free?,
        },
        "memory" => WatchSpec::Memory {
            max_used_percent: max_used_percent?,
        },
        "load" => WatchSpec::Load {
            max_load1: max_load1?,
        },
        "tcp" => WatchSpec::Tcp {
            address: address?,
            timeout: timeout.unwrap_or(Duration::from_secs(5)),
        },
        _ => WatchSpec::Http {
            url: url?,
            expect_status: expect_status.unwrap_or(Some(200))?,
            timeout: timeout.unwrap_or(Duration::from_secs(10)),
        },
    })
}

fn load(check: &mut Checker, at: At<'_>, raw: &Option<Spanned<f64>>) -> Option<f64> {
    let value = raw.as_ref()?;
    let load = *value.get_ref();
    if load.is_finite() && load >= 0.0 {
        return Some(load);
    }
    check.error(
        Some(value.span()),
        at,
        format!("{load} is not a load average: expected a number of 0 or more"),
        Some("for example: max_load1 = 8.0".to_owned()),
    );
    None
}

fn address(check: &mut Checker, at: At<'_>, raw: &Option<Spanned<String>>) -> Option<String> {
    let address = check.non_empty(at, raw)?;
    let valid = address
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0));
    if valid {
        return Some(address);
    }
    let span = raw.as_ref().map(Spanned::span);
    check.error(
        span,
        at,
        format!("\"{address}\" is not host:port"),
        Some("for example: address = \"127.0.0.1:5432\"".to_owned()),
    );
    None
}

/// `None` when not set; `Some(None)` when set but invalid.
fn status(check: &mut Checker, at: At<'_>, raw: &Option<Spanned<i64>>) -> Option<Option<u16>> {
    let code = raw.as_ref()?;
    match u16::try_from(*code.get_ref()) {
        Ok(c) if (100..=599).contains(&c) => Some(Some(c)),
        _ => {
            check.error(
                Some(code.span()),
                at,
                format!(
                    "HTTP status {} is out of range: expected 100 to 599",
                    code.get_ref()
                ),
                Some("for example: expect_status = 200".to_owned()),
            );
            Some(None)
        }
    }
}
