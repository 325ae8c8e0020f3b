//! The dashboard's charts, inline SVG drawn with presentation attributes and the classes of
//! the page's style sheet: a job's last 24 hours ([`timeline`]: one mark per run at its start,
//! coloured by its outcome, every hour ticked and every sixth labelled, UTC as every time on the
//! page), its runs' durations ([`durations`]: a bar per run on one labelled axis in one unit for
//! the whole chart, at least [`FLOOR_MS`] high so a millisecond of jitter stays flat) and the
//! [`legend`] of their colours. Every text drawn (titles, labels, a job's name) goes through
//! [`esc`].

use std::fmt::Write;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Timelike, Utc};

use super::html::{class, esc};
use crate::duration::{human_duration, unit_of};
use crate::history::Run;
use crate::run_end::RunOutcome;

/// What the charts keep of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Mark {
    /// Its number in the job's history.
    pub seq: u64,
    /// When it started.
    pub at: DateTime<Utc>,
    /// How long it ran.
    pub duration_ms: u64,
    /// Its outcome's word, as a CSS class ([`class`]).
    pub outcome: &'static str,
}

impl Mark {
    /// The mark of `run`.
    pub(super) fn of(run: &Run) -> Mark {
        Mark {
            seq: run.seq,
            at: run.run.started,
            duration_ms: run.run.duration_ms,
            outcome: class(&run.run.outcome),
        }
    }

    /// What a mark's tooltip says: `#12 failed at 2026-11-26 05:49:50Z, 3s`.
    fn title(&self) -> String {
        format!(
            "#{} {} at {}, {}",
            self.seq,
            self.outcome,
            self.at.format("%Y-%m-%d %H:%M:%SZ"),
            human_duration(Duration::from_millis(self.duration_ms))
        )
    }
}

/// The span of a timeline.
pub(super) const DAY: TimeDelta = TimeDelta::hours(24);

/// The lowest top of the durations' axis: runs of a few milliseconds draw as the short bars
/// they are, not as spikes of a scale of their own.
pub(super) const FLOOR_MS: u64 = 100;

/// Job `name`'s runs `marks` in the 24 hours up to `now` (others are left out), one mark per
/// run at its start.
pub(super) fn timeline(name: &str, marks: &[Mark], now: DateTime<Utc>) -> String {
    let (w, h, top, bottom) = (192.0_f64, 36.0_f64, 2.0_f64, 20.0_f64);
    let start = now - DAY;
    let x_of = |at: DateTime<Utc>| (at - start).num_milliseconds() as f64 / 86_400_000.0 * w;
    let shown: Vec<&Mark> = marks
        .iter()
        .filter(|m| m.at > start && m.at <= now)
        .collect();
    let mut out = format!(
        "<svg class=\"timeline\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\">\
         <title>{} in the last 24 hours (to {} UTC): {} runs</title>\
         <rect class=\"frame\" x=\"0\" y=\"{top}\" width=\"{w}\" height=\"{}\"/>",
        esc(name),
        now.format("%H:%M"),
        shown.len(),
        bottom - top
    );
    // Every whole hour: a tick; every sixth, a longer one and its label.
    let first = start
        .with_minute(0)
        .and_then(|t| t.with_second(0))
        .and_then(|t| t.with_nanosecond(0))
        .unwrap_or(start)
        + TimeDelta::hours(1);
    let mut hour = first;
    while hour <= now {
        let x = x_of(hour);
        let major = hour.hour() % 6 == 0;
        let (cls, y2) = if major {
            ("tick major", bottom + 6.0)
        } else {
            ("tick", bottom + 3.0)
        };
        let _ = write!(
            out,
            "<line class=\"{cls}\" x1=\"{x:.1}\" y1=\"{bottom}\" x2=\"{x:.1}\" y2=\"{y2}\"/>"
        );
        if major && x > 14.0 && x < w - 14.0 {
            let _ = write!(
                out,
                "<text class=\"hour\" x=\"{x:.1}\" y=\"{h}\" text-anchor=\"middle\">{:02}:00</text>",
                hour.hour()
            );
        }
        hour += TimeDelta::hours(1);
    }
    for mark in shown {
        let x = x_of(mark.at).clamp(0.0, w - 2.0);
        let _ = write!(
            out,
            "<rect class=\"mark {}\" x=\"{x:.1}\" y=\"{top}\" width=\"2\" height=\"{}\">\
             <title>{}</title></rect>",
            mark.outcome,
            bottom - top,
            esc(&mark.title())
        );
    }
    out.push_str("</svg>");
    out
}

/// The scale of a durations axis: its unit, the unit's size in milliseconds, the step between
/// two labels and the top, both in that unit.
#[derive(Debug, PartialEq)]
struct Scale {
    unit: &'static str,
    size: u64,
    step: f64,
    top: f64,
}

/// The scale for durations up to `longest_ms`: the unit [`unit_of`] picks for the longest (at
/// least [`FLOOR_MS`]), labels 1, 2 or 5 times a power of ten apart, about four of them.
fn scale(longest_ms: u64) -> Scale {
    let longest = longest_ms.max(FLOOR_MS);
    let (unit, size) = unit_of(Duration::from_millis(longest));
    let max = longest as f64 / size as f64;
    let raw = max / 4.0;
    let magnitude = libm::pow(10.0, libm::floor(libm::log10(raw)));
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude);
    let top = (max / step).ceil() * step;
    Scale {
        unit,
        size,
        step,
        top,
    }
}

/// A label's number: `0`, `0.5`, `250` (no float noise).
fn number(value: f64) -> String {
    format!("{}", (value * 1e6).round() / 1e6)
}

/// Job `name`'s runs `marks` (oldest first) as bars on one axis of durations, labelled in one
/// unit, the runs' numbers below.
pub(super) fn durations(name: &str, marks: &[Mark]) -> String {
    let (w, h) = (640.0_f64, 190.0_f64);
    let (left, right, top, bottom) = (56.0_f64, 8.0_f64, 10.0_f64, 150.0_f64);
    let longest = marks.iter().map(|m| m.duration_ms).max().unwrap_or(0);
    let scale = scale(longest);
    let y_of = |ms: u64| {
        let value = ms as f64 / scale.size as f64;
        bottom - (value / scale.top).min(1.0) * (bottom - top)
    };
    let mut out = format!(
        "<svg class=\"durations\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" \
         role=\"img\"><title>durations of {}'s last {} runs, in {}, longest {}</title>",
        esc(name),
        marks.len(),
        scale.unit,
        human_duration(Duration::from_millis(longest))
    );
    let mut value = 0.0;
    while value <= scale.top + scale.step / 1e6 {
        let y = bottom - value / scale.top * (bottom - top);
        let _ = write!(
            out,
            "<line class=\"grid\" x1=\"{left}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\"/>\
             <text class=\"tick-label\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            w - right,
            left - 6.0,
            y + 3.5,
            number(value)
        );
        value += scale.step;
    }
    let _ = write!(
        out,
        "<line class=\"axis\" x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{bottom}\"/>\
         <line class=\"axis\" x1=\"{left}\" y1=\"{bottom}\" x2=\"{}\" y2=\"{bottom}\"/>\
         <text class=\"axis-title\" x=\"14\" y=\"{:.1}\" text-anchor=\"middle\" \
         transform=\"rotate(-90 14 {:.1})\">duration ({})</text>\
         <text class=\"axis-title\" x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">runs, oldest to \
         newest</text>",
        w - right,
        (top + bottom) / 2.0,
        (top + bottom) / 2.0,
        scale.unit,
        (left + w - right) / 2.0,
        h - 4.0
    );
    let slot = (w - right - left) / marks.len().max(1) as f64;
    let bar = (slot * 0.7).clamp(1.0, 16.0);
    for (i, mark) in marks.iter().enumerate() {
        let x = left + slot * i as f64 + (slot - bar) / 2.0;
        let y = y_of(mark.duration_ms);
        let _ = write!(
            out,
            "<rect class=\"mark {}\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{bar:.1}\" \
             height=\"{:.1}\"><title>{}</title></rect>",
            mark.outcome,
            (bottom - y).max(0.5),
            esc(&mark.title())
        );
    }
    if let (Some(first), Some(last)) = (marks.first(), marks.last()) {
        let _ = write!(
            out,
            "<text class=\"run-label\" x=\"{left}\" y=\"{}\">#{}</text>\
             <text class=\"run-label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">#{}</text>",
            bottom + 14.0,
            first.seq,
            w - right,
            bottom + 14.0,
            last.seq
        );
    }
    out.push_str("</svg>");
    out
}

/// The legend of the charts' and the strip's colours: each outcome's word in its colour, and
/// how to read the timeline and the strip.
pub(super) fn legend() -> String {
    let mut out = String::from("<ul class=\"legend\" id=\"legend\">");
    for outcome in RunOutcome::ALL.map(RunOutcome::as_str) {
        let _ = write!(
            out,
            "<li data-legend=\"{outcome}\"><svg width=\"10\" height=\"10\" aria-hidden=\"true\">\
             <rect class=\"mark {outcome}\" width=\"10\" height=\"10\"/></svg> {outcome}</li>"
        );
    }
    out.push_str(
        "<li>last 24 h: a mark per run at its start, hours in UTC</li>\
         <li>last runs: ✓ success, ✗ any other end, · stopped</li></ul>",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(seq: u64, at: DateTime<Utc>, duration_ms: u64, outcome: &'static str) -> Mark {
        Mark {
            seq,
            at,
            duration_ms,
            outcome,
        }
    }

    #[test]
    fn the_timeline_has_a_mark_per_run_of_the_day_and_every_hour_ticked() {
        let now = DateTime::parse_from_rfc3339("2026-11-26T09:30:00Z")
            .expect("a time")
            .with_timezone(&Utc);
        let marks = [
            mark(1, now - TimeDelta::hours(30), 5, "success"),
            mark(2, now - TimeDelta::hours(8), 5, "failed"),
            mark(3, now - TimeDelta::minutes(1), 5, "success"),
        ];
        let svg = timeline("<b>", &marks, now);
        assert_eq!(svg.matches("class=\"mark ").count(), 2, "{svg}");
        assert_eq!(svg.matches("class=\"mark failed\"").count(), 1);
        assert_eq!(svg.matches("<line class=\"tick").count(), 24, "{svg}");
        assert!(svg.contains(">12:00</text>") && svg.contains(">06:00</text>"));
        assert!(svg.contains("&lt;b&gt; in the last 24 hours") && !svg.contains("<b>"));
    }

    #[test]
    fn the_durations_axis_has_one_unit_and_a_floor() {
        assert_eq!(
            scale(1),
            Scale {
                unit: "ms",
                size: 1,
                step: 50.0,
                top: 100.0
            }
        );
        let seconds = scale(7_300);
        assert_eq!((seconds.unit, seconds.step, seconds.top), ("s", 2.0, 8.0));
        let minutes = scale(600_000);
        assert_eq!((minutes.unit, minutes.top), ("m", 10.0));
        assert_eq!(number(0.1 + 0.2), "0.3");
        let svg = durations(
            "j",
            &[
                mark(1, Utc::now(), 0, "success"),
                mark(2, Utc::now(), 1, "failed"),
            ],
        );
        assert!(svg.contains(">duration (ms)</text>"), "{svg}");
        for label in [">0<", ">50<", ">100<"] {
            assert!(svg.contains(label), "{label}: {svg}");
        }
        assert_eq!(svg.matches("class=\"mark ").count(), 2);
        // A 1 ms run is a sliver of the 100 ms axis, not a full bar.
        assert!(svg.contains("height=\"1.4\""), "{svg}");
    }
}
