//! The runs the pages read from the history files ([`crate::history::History::each_run`]),
//! off the runtime's threads and one run at a time: a job's page keeps the last
//! [`PAGE_TAIL`] of each run's output ([`shown`]); the overview keeps each job's marks of the
//! last 24 hours ([`Marks`]) between requests, until that job's history changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use chrono::{DateTime, Utc};

use super::charts::{Mark, DAY};
use super::render::Shown;
use crate::history::History;

/// The most of a run's output a job's page shows: its last 4 KiB (the whole recorded tail is
/// at `/jobs/{name}/runs/{seq}`). A page of 100 runs so stays under a few MiB whatever
/// `output_tail` is.
pub(super) const PAGE_TAIL: usize = 4 * 1024;

/// The most runs of a job the overview's timeline reads: one every 5 minutes for a day. A job
/// that runs more often shows its last 288 runs.
pub(super) const TIMELINE_RUNS: usize = 288;

/// `job`'s last `limit` runs as its page shows them (newest first, none when its history
/// cannot be read), each output cut to [`PAGE_TAIL`] as it is read.
pub(super) async fn shown(history: History, job: String, limit: usize) -> Vec<Shown> {
    tokio::task::spawn_blocking(move || {
        let mut shown = Vec::new();
        let _ = history.each_run(&job, limit, |mut run| {
            let cut = keep_last(&mut run.run.output_tail, PAGE_TAIL);
            shown.push(Shown { run, cut });
            true
        });
        shown
    })
    .await
    .unwrap_or_default()
}

/// Cuts `text` to its last `max` bytes (at a character boundary) in a buffer of that size (the
/// run's whole output is freed); returns how many bytes went.
fn keep_last(text: &mut String, max: usize) -> usize {
    let mut cut = text.len().saturating_sub(max);
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    if cut > 0 {
        *text = text[cut..].to_owned();
    }
    cut
}

/// A job's marks as last read: the version of its history they were read at, how many runs
/// were asked, and the marks (oldest first).
type Kept = (Option<(u64, SystemTime)>, usize, Arc<[Mark]>);

/// The overview's marks of every job, kept between requests by history directory and job, and
/// read again only for a job whose history changed since ([`History::version`]): an overview
/// of 1,000 mostly idle jobs reads next to nothing. Owned by the dashboard's router, made when
/// the endpoint is assembled.
#[derive(Debug, Default)]
pub(super) struct Marks {
    kept: Mutex<HashMap<std::path::PathBuf, Kept>>,
}

impl Marks {
    /// Each job's marks (oldest first) of its runs that started in the day before `now` (and
    /// of those older runs read before that a later request found kept: [`super::charts::timeline`]
    /// leaves them out), at most its `limit` last runs. Shared with the cache, not copied: an
    /// overview of 1,000 jobs of 288 runs each holds one set of marks, not one per reader.
    pub(super) fn of(
        &self,
        history: &History,
        jobs: &[(String, usize)],
        now: DateTime<Utc>,
    ) -> Vec<Arc<[Mark]>> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let since = now - DAY;
        // Jobs no longer in the config are forgotten.
        kept.retain(|key, _| jobs.iter().any(|(job, _)| history.dir().join(job) == *key));
        jobs.iter()
            .map(|(job, limit)| {
                let key = history.dir().join(job);
                let version = history.version(job);
                match kept.get(&key) {
                    Some((v, n, marks)) if *v == version && n == limit => Arc::clone(marks),
                    _ => {
                        // One run at a time: only its mark is kept.
                        let mut marks = Vec::new();
                        let _ = history.each_run(job, *limit, |run| {
                            let mark = Mark::of(&run);
                            let in_day = mark.at > since;
                            if in_day {
                                marks.push(mark);
                            }
                            in_day
                        });
                        marks.reverse();
                        let marks: Arc<[Mark]> = marks.into();
                        kept.insert(key, (version, *limit, Arc::clone(&marks)));
                        marks
                    }
                }
            })
            .collect()
    }
}
