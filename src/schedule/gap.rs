//! Gaps between consecutive fire times, measured in real (UTC) time: the primitives from which
//! the sync derives a check's heartbeat period. A daily job's gap is 23 h or 25 h across a DST
//! change, so "regular" here means regular in real time.

use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::Schedule;

/// At most this many gaps are examined by [`Schedule::gap_stats`], so a per-second schedule
/// over a long window stays cheap (such a schedule is far below any period limit anyway).
const MAX_GAPS: usize = 100_000;

/// The smallest and largest gap between consecutive fires over a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GapStats {
    /// The shortest gap seen.
    pub min: Duration,
    /// The longest gap seen: what a heartbeat period must cover to never alarm early.
    pub max: Duration,
    /// How many gaps were measured.
    pub count: usize,
    /// False when the measurement stopped after `MAX_GAPS` gaps before the window's end.
    pub complete: bool,
}

impl GapStats {
    /// Every gap was the same length in real time.
    pub fn is_regular(&self) -> bool {
        self.min == self.max
    }
}

impl Schedule {
    /// The time from the fire at `fire` to the next one; None when there is no next fire.
    pub fn gap_after(&self, fire: DateTime<Utc>, tz: Tz) -> Option<Duration> {
        let next = self.next_after(fire, tz)?;
        (next - fire).to_std().ok()
    }

    /// Gaps after every fire in `(from, from + window]`, each to the fire that follows it
    /// (which may lie beyond the window). None when no fire in the window has a successor.
    pub fn gap_stats(&self, from: DateTime<Utc>, tz: Tz, window: Duration) -> Option<GapStats> {
        let end = from.checked_add_signed(chrono::TimeDelta::from_std(window).ok()?)?;
        let mut fires = self.fire_times(from, tz);
        let mut previous = fires.next().filter(|first| *first <= end)?;
        let mut stats: Option<GapStats> = None;
        for fire in fires {
            let gap = (fire - previous).to_std().ok()?;
            let s = stats.get_or_insert(GapStats {
                min: gap,
                max: gap,
                count: 0,
                complete: true,
            });
            s.min = s.min.min(gap);
            s.max = s.max.max(gap);
            s.count += 1;
            if fire > end {
                break;
            }
            if s.count >= MAX_GAPS {
                s.complete = false;
                break;
            }
            previous = fire;
        }
        stats
    }

    /// All gaps over `(from, from + window]` are equal in real time (see [`GapStats`]).
    pub fn is_regular(&self, from: DateTime<Utc>, tz: Tz, window: Duration) -> bool {
        self.gap_stats(from, tz, window)
            .is_some_and(|stats| stats.is_regular())
    }
}
