//! The dashboard's charts, inline SVG drawn with presentation attributes and the classes of
//! the page's style sheet: a job's last 24 hours ([`timeline`]: a mark per run at its start,
//! coloured by its outcome, or per quarter of an hour that holds several runs, in its worst
//! run's colour, so a day is at most 96 marks; every hour ticked and every sixth labelled, UTC
//! as every time on the page), its runs' durations ([`durations`]: a bar per run on one labelled axis in one unit for
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

/// The timeline's slots: a quarter of an hour each, two pixels wide, so a day is at most
/// [`SLOTS`] marks whatever the number of runs (a job every minute would draw 1,440 marks of
/// two pixels on 192, each 0.13 px apart).
const SLOTS: i64 = 96;

/// How bad an outcome is, for the mark of a slot that holds several runs: any end but a
/// success or a shutdown's stop first (in [`RunOutcome::ALL`]'s order), then `stopped`, then
/// `success`. A slot is drawn in its worst run's colour: a failure is never hidden by the
/// successes beside it.
fn badness(outcome: &str) -> usize {
    match outcome {
        "success" => 0,
        "stopped" => 1,
        _ => {
            let rank = RunOutcome::ALL
                .iter()
                .position(|o| o.as_str() == outcome)
                .unwrap_or(0);
            2 + RunOutcome::ALL.len() - rank
        }
    }
}

/// Job `name`'s runs `marks` (oldest first) in the 24 hours up to `now` (others are left out).
/// A run alone in its quarter of an hour is a mark of its own, at its start, titled with its
/// number, outcome, time and duration; quarters in a row that hold runs and whose worst
/// outcome is the same are one mark, titled with their runs' numbers, times and outcomes
/// (the bad ones by number). The page is then bounded by the jobs, not by their runs. `read`
/// is how many runs at most were read: when `marks` holds that many and the oldest is within
/// the day, earlier runs of the day may not have been read, and the part of the day before it
/// is drawn as not read (`class="unread"`), not as a time without runs.
pub(super) fn timeline(name: &str, marks: &[Mark], read: usize, now: DateTime<Utc>) -> String {
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
    if let Some(oldest) = marks
        .first()
        .filter(|m| marks.len() >= read && m.at > start)
    {
        let _ = write!(
            out,
            "<rect class=\"unread\" x=\"0\" y=\"{top}\" width=\"{:.1}\" height=\"{}\">\
             <title>before {} UTC: runs not read, if any (a job's last {read} runs are read)</title></rect>",
            x_of(oldest.at).max(0.0),
            bottom - top,
            oldest.at.format("%H:%M")
        );
    }
    let slot_of =
        |m: &Mark| ((m.at - start).num_milliseconds() * SLOTS / 86_400_000).min(SLOTS - 1);
    let worst = |runs: &[&Mark]| {
        runs.iter()
            .map(|m| m.outcome)
            .max_by_key(|o| badness(o))
            .unwrap_or("success")
    };
    // Runs in one slot, then slots in a row with the same worst outcome, become one mark.
    let mut i = 0;
    while i < shown.len() {
        let slot = slot_of(shown[i]);
        let mut end = i;
        while end < shown.len() && slot_of(shown[end]) == slot {
            end += 1;
        }
        let outcome = worst(&shown[i..end]);
        let mut last_slot = slot;
        while end < shown.len() {
            let next = slot_of(shown[end]);
            let mut after = end;
            while after < shown.len() && slot_of(shown[after]) == next {
                after += 1;
            }
            if next != last_slot + 1 || worst(&shown[end..after]) != outcome {
                break;
            }
            last_slot = next;
            end = after;
        }
        let group = &shown[i..end];
        let (x, width) = if group.len() == 1 {
            (x_of(group[0].at).clamp(0.0, w - 2.0), 2.0)
        } else {
            let slot_w = w / SLOTS as f64;
            (slot as f64 * slot_w, (last_slot - slot + 1) as f64 * slot_w)
        };
        let title = if group.len() == 1 {
            group[0].title()
        } else {
            group_title(group)
        };
        let _ = write!(
            out,
            "<rect class=\"mark {outcome}\" x=\"{x:.1}\" y=\"{top}\" width=\"{width:.1}\" height=\"{}\">\
             <title>{}</title></rect>",
            bottom - top,
            esc(&title)
        );
        i = end;
    }
    out.push_str("</svg>");
    out
}

/// The tooltip of a mark of several runs: `#12 to #20, 9 runs 05:47Z to 07:58Z: 8 success,
/// 1 failed (#15)`, the outcomes worst first, at most [`NAMED`] bad runs named by number.
fn group_title(group: &[&Mark]) -> String {
    /// The most bad runs a tooltip names.
    const NAMED: usize = 5;
    let (first, last) = (group[0], group[group.len() - 1]);
    let mut title = format!(
        "#{} to #{}, {} runs {} to {}:",
        first.seq,
        last.seq,
        group.len(),
        first.at.format("%H:%MZ"),
        last.at.format("%H:%MZ")
    );
    let mut outcomes: Vec<&str> = group.iter().map(|m| m.outcome).collect();
    outcomes.sort_by_key(|o| std::cmp::Reverse(badness(o)));
    outcomes.dedup();
    for (n, outcome) in outcomes.iter().enumerate() {
        let runs: Vec<u64> = group
            .iter()
            .filter(|m| m.outcome == *outcome)
            .map(|m| m.seq)
            .collect();
        let _ = write!(
            title,
            "{} {} {outcome}",
            if n == 0 { "" } else { "," },
            runs.len()
        );
        if badness(outcome) > 0 {
            let named: Vec<String> = runs.iter().take(NAMED).map(|s| format!("#{s}")).collect();
            let more = if runs.len() > NAMED { ", ..." } else { "" };
            let _ = write!(title, " ({}{more})", named.join(", "));
        }
    }
    title
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
         <li>runs in a quarter hour: one mark, the worst's colour</li>\
         <li><svg width=\"10\" height=\"10\" aria-hidden=\"true\"><rect class=\"unread\" \
         width=\"10\" height=\"10\"/></svg> runs not read</li>\
         <li>last runs: ✓ success, ✗ any other end, · stopped</li></ul>",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The time `text` (RFC 3339) names.
    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("a time")
            .with_timezone(&Utc)
    }

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
        let now = at("2026-11-26T09:30:00Z");
        let marks = [
            mark(1, now - TimeDelta::hours(30), 5, "success"),
            mark(2, now - TimeDelta::hours(8), 5, "failed"),
            mark(3, now - TimeDelta::minutes(1), 5, "success"),
        ];
        let svg = timeline("<b>", &marks, 100, now);
        assert_eq!(svg.matches("class=\"mark ").count(), 2, "{svg}");
        assert_eq!(svg.matches("class=\"mark failed\"").count(), 1);
        assert_eq!(svg.matches("<line class=\"tick").count(), 24, "{svg}");
        assert!(svg.contains(">12:00</text>") && svg.contains(">06:00</text>"));
        assert!(svg.contains("&lt;b&gt; in the last 24 hours") && !svg.contains("<b>"));
    }

    #[test]
    fn a_day_of_runs_every_minute_is_at_most_a_mark_per_quarter_and_a_failure_stays_seen() {
        let now = at("2026-11-26T09:30:30Z");
        // 1,440 runs, one a minute; #700 failed, #900 and #901 timed out.
        let marks: Vec<Mark> = (1..=1440)
            .map(|seq| {
                let outcome = match seq {
                    700 => "failed",
                    900 | 901 => "timed_out",
                    _ => "success",
                };
                mark(seq, now - TimeDelta::minutes(1440 - seq as i64), 5, outcome)
            })
            .collect();
        let svg = timeline("j", &marks, 2000, now);
        let drawn = svg.matches("class=\"mark ").count();
        assert_eq!(
            drawn, 5,
            "success, failed, success, timed_out, success: {svg}"
        );
        assert_eq!(svg.matches("class=\"mark failed\"").count(), 1, "{svg}");
        assert_eq!(svg.matches("class=\"mark timed_out\"").count(), 1, "{svg}");
        assert!(svg.contains("1 failed (#700)"), "{svg}");
        assert!(svg.contains("2 timed_out (#900, #901)"), "{svg}");
        assert!(svg.contains("): 1440 runs</title>"), "{svg}");
        // The marks cover the day without overlapping: each starts where the last ended.
        let attr = |tag: &str, name: &str| -> f64 {
            let at = tag.find(&format!(" {name}=\"")).expect(name) + name.len() + 3;
            tag[at..at + tag[at..].find('"').expect("end")]
                .parse()
                .expect("a number")
        };
        let xs: Vec<(f64, f64)> = svg
            .match_indices("<rect class=\"mark ")
            .map(|(at, _)| (attr(&svg[at..], "x"), attr(&svg[at..], "width")))
            .collect();
        for pair in xs.windows(2) {
            assert!((pair[0].0 + pair[0].1 - pair[1].0).abs() < 0.05, "{xs:?}");
        }
        // Alternating outcomes still draw at most one mark per quarter of an hour, all failed.
        let mixed: Vec<Mark> = marks
            .iter()
            .map(|m| Mark {
                outcome: if m.seq % 2 == 0 { "failed" } else { "success" },
                ..m.clone()
            })
            .collect();
        let svg = timeline("j", &mixed, 2000, now);
        assert!(svg.matches("class=\"mark ").count() <= 97, "{svg}");
        assert_eq!(svg.matches("class=\"mark success\"").count(), 0, "{svg}");
        assert!(svg.len() < 20_000, "{} bytes", svg.len());
    }

    #[test]
    fn a_day_cut_by_the_runs_read_is_drawn_as_not_read_before_the_oldest() {
        let now = at("2026-11-26T09:30:00Z");
        // A job every minute, its last 288 runs read: the day before 04:43 was not read.
        let marks: Vec<Mark> = (1..=288)
            .map(|seq| {
                mark(
                    seq,
                    now - TimeDelta::minutes(288 - seq as i64),
                    5,
                    "success",
                )
            })
            .collect();
        let svg = timeline("j", &marks, 288, now);
        assert_eq!(svg.matches("class=\"unread\"").count(), 1, "{svg}");
        assert!(
            svg.contains(
                "before 04:43 UTC: runs not read, if any (a job's last 288 runs are read)"
            ),
            "{svg}"
        );
        // Fewer runs than were asked for: the day was read whole, nothing is drawn as unread.
        assert!(!timeline("j", &marks, 289, now).contains("unread"));
        // As many runs as asked for, the oldest before the day: the day was read whole.
        let older: Vec<Mark> = (1..=288)
            .map(|seq| {
                mark(
                    seq,
                    now - TimeDelta::minutes(10 * (288 - seq as i64)),
                    5,
                    "success",
                )
            })
            .collect();
        assert!(!timeline("j", &older, 288, now).contains("unread"));
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
