//! A run's pings recorded after the run: the second line of a run in the history.
//!
//! A run is appended when it ends ([`super::Run`], `ping_pending` when pings are still on their
//! way), so a daemon killed while its ping host hangs keeps the run; the final ping's and the
//! start ping's outcome follow, when they are known, as a short line of their own
//! ([`PingUpdate`]: `{"update": SEQ, "ping": ..., "start_ping": ...}`) in the same file
//! (after a new generation began, in the next one). A reader reads a job's lines newest first
//! and so meets a run's update before the run: [`Join`] keeps it until the run comes and
//! puts it into the run.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{Run, RunPing};

/// The pings of run `update` (its `seq`), known after the run was recorded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PingUpdate {
    /// The number of the run it completes.
    pub update: u64,
    /// Its final ping; `null` when none was sent after all (the daemon was stopping).
    pub ping: Option<RunPing>,
    /// Its start ping, when the answer came.
    pub start_ping: Option<RunPing>,
}

impl PingUpdate {
    /// The pings of `report`'s run, recorded as number `seq`.
    pub(crate) fn of(seq: u64, report: &crate::run::Report) -> PingUpdate {
        PingUpdate {
            update: seq,
            ping: report.ping.as_ref().map(RunPing::of),
            start_ping: report.start_ping.as_ref().map(RunPing::of),
        }
    }
}

impl PingUpdate {
    /// Puts these pings into `run` (the run it completes).
    pub(crate) fn apply(self, run: &mut Run) {
        run.ping = self.ping;
        run.start_ping = self.start_ping.or(run.start_ping.take());
        run.ping_pending = false;
    }
}

/// One line of a history file.
#[derive(Debug)]
pub(super) enum Line {
    /// A run's pings.
    Update(PingUpdate),
    /// A run.
    Run(Box<Run>),
}

impl Line {
    /// The line in `bytes`, if it reads as one. An update is told by its first field (as
    /// written), so a run's line, which may be megabytes of output, is parsed once.
    pub(super) fn parse(bytes: &[u8]) -> Option<Line> {
        if bytes.starts_with(b"{\"update\":") {
            serde_json::from_slice(bytes).ok().map(Line::Update)
        } else {
            serde_json::from_slice(bytes)
                .ok()
                .map(|run| Line::Run(Box::new(run)))
        }
    }

    /// The number of the run it is or completes.
    pub(super) fn seq(&self) -> u64 {
        match self {
            Line::Update(update) => update.update,
            Line::Run(run) => run.seq,
        }
    }
}

/// What the first bytes of a line, as written, tell: a run's line begins with its number
/// (`{"seq":N,`), an update's with `{"update":`.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Head {
    /// The run numbered so.
    Run(u64),
    /// A run's pings.
    Update,
    /// Neither (a damaged line).
    Unknown,
}

impl Head {
    /// How many bytes of a line [`Head::of`] needs.
    pub(super) const BYTES: usize = 32;

    /// What `head`, the first [`Head::BYTES`] bytes of a line (or all of a shorter one), is.
    pub(super) fn of(head: &[u8]) -> Head {
        if head.starts_with(b"{\"update\":") {
            return Head::Update;
        }
        let Some(rest) = head.strip_prefix(b"{\"seq\":") else {
            return Head::Unknown;
        };
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        match rest.get(digits) {
            Some(b',' | b'}') => std::str::from_utf8(&rest[..digits])
                .ok()
                .and_then(|d| d.parse().ok())
                .map_or(Head::Unknown, Head::Run),
            _ => Head::Unknown,
        }
    }
}

/// Joins runs and their updates read newest first (see the module header).
#[derive(Debug, Default)]
pub(super) struct Join {
    updates: HashMap<u64, PingUpdate>,
}

impl Join {
    /// Takes the next line (newer lines first): a run is given back with its update; an
    /// update is kept for its run; `None` for an update or a line that does not read (`Err`).
    pub(super) fn line(&mut self, bytes: &[u8]) -> Result<Option<Run>, ()> {
        match Line::parse(bytes).ok_or(())? {
            Line::Update(update) => {
                // The newest update of a run wins (there is one per run).
                self.updates.entry(update.update).or_insert(update);
                Ok(None)
            }
            Line::Run(run) => {
                let mut run = *run;
                if let Some(update) = self.updates.remove(&run.seq) {
                    update.apply(&mut run);
                }
                Ok(Some(run))
            }
        }
    }
}
