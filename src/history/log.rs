//! One job's history on disk: `runs.jsonl` and `runs.old.jsonl` in the job's directory, and
//! the `lock` file whose `flock(2)` orders writers (the daemon and any `run --job` of the same
//! job). See the parent module for the layout and its bounds. Every file is opened as the
//! agent's state files are ([`crate::persist::file::open_state`]): never waiting on a FIFO, a
//! file that is not a regular one set aside.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::SystemTime;

use tracing::warn;

use super::update::{Head, Join, Line, PingUpdate};
use super::Run;
use crate::persist::lock::FileLock;

/// The current generation.
pub(super) const CURRENT: &str = "runs.jsonl";
/// The generation before it.
const OLD: &str = "runs.old.jsonl";
/// The most a history file is read into memory: far above what `2 x history x output_tail`
/// reaches with the documented maxima, and a refusal instead of an unbounded read when a file
/// was replaced by something else.
const READ_LIMIT: u64 = 256 * 1024 * 1024;
/// How much is read at a time when looking for the last line from the end.
const CHUNK: usize = 8 * 1024;

/// Appends `run` to the history in `dir` (created 0700 when missing) of `job`, numbering it
/// after the last run recorded, and starts a new generation when its number is a multiple of
/// `limit`. Returns the number given.
pub(super) fn append(dir: &Path, job: &str, limit: usize, mut run: Run) -> io::Result<u64> {
    append_line(dir, job, |last| {
        run.seq = last + 1;
        let limit = u64::try_from(limit).unwrap_or(u64::MAX).max(1);
        let line = serde_json::to_vec(&run).map_err(io::Error::other)?;
        Ok((line, (run.seq % limit == 0).then_some(run.seq)))
    })?;
    Ok(run.seq)
}

/// Appends `update` (a recorded run's pings) to the history in `dir` of `job`.
pub(super) fn append_update(dir: &Path, job: &str, update: &PingUpdate) -> io::Result<()> {
    append_line(dir, job, |_| {
        Ok((serde_json::to_vec(update).map_err(io::Error::other)?, None))
    })
}

/// Appends the line that `line` makes from the number of the last run recorded, under the
/// job's lock; when it also answers a number, a new generation starts after the line.
fn append_line(
    dir: &Path,
    job: &str,
    line: impl FnOnce(u64) -> io::Result<(Vec<u8>, Option<u64>)>,
) -> io::Result<()> {
    crate::persist::file::private_dir(dir)?;
    let _lock = FileLock::acquire(&dir.join("lock"))?;
    let path = dir.join(CURRENT);
    let mut file = crate::persist::file::open_state_append(&path)?;
    let last = match last_seq(&file, &path, job)? {
        Some(seq) => seq,
        None => last_in(&dir.join(OLD), job).unwrap_or(0),
    };
    let (mut line, rotate) = line(last)?;
    line.push(b'\n');
    // One write of the whole line: a death before it leaves nothing, a death inside it (a
    // short write is the only way) leaves a torn line the next append cuts off.
    file.write_all(&line)?;
    crate::persist::crash_point("history-appended");
    if rotate.is_some() {
        std::fs::rename(&path, dir.join(OLD))?;
    }
    Ok(())
}

/// Hands the last `n` runs of `job` in `dir` to `each`, newest first, one at a time (until it
/// answers false), read from the ends of the files backwards (the current generation, then the
/// old one when it holds fewer than `n`): the cost is that of the `n` lines, not of the whole
/// history, and only one run is held at a time. Each run's pings recorded after it are joined
/// to it ([`Join`]). A torn last line (a kill -9 during an append) and lines that do not read
/// are skipped, with one warning per read.
pub(super) fn visit_last(
    dir: &Path,
    job: &str,
    n: usize,
    mut each: impl FnMut(Run) -> bool,
) -> io::Result<()> {
    let mut taken = 0usize;
    let mut join = Join::default();
    let mut skipped = 0usize;
    for name in [CURRENT, OLD] {
        if taken >= n {
            break;
        }
        let Some(file) = crate::persist::file::open_state(&dir.join(name))? else {
            continue;
        };
        let size = file.metadata()?.len();
        // Past a torn last line (no newline at the end of the file).
        let mut end = match size {
            0 => continue,
            _ => line_start(&file, size)?,
        };
        skipped += usize::from(end < size);
        while end > 0 && taken < n {
            let start = line_start(&file, end - 1)?;
            let mut line = vec![0u8; usize::try_from(end - 1 - start).unwrap_or(0)];
            file.read_exact_at(&mut line, start)?;
            match join.line(&line) {
                Ok(Some(run)) => {
                    taken += 1;
                    if !each(run) {
                        taken = n;
                    }
                }
                Ok(None) => {}
                Err(()) => skipped += 1,
            }
            end = start;
        }
    }
    if skipped > 0 {
        warn!(job = %job, dir = %dir.display(), skipped, "skipped unreadable records of the job's history (a record torn by a crash, or a damaged file)");
    }
    Ok(())
}

/// When `dir`'s history was last written (its current file, else the old one, else the
/// directory itself).
pub(super) fn last_written(dir: &Path) -> Option<SystemTime> {
    [CURRENT, OLD]
        .iter()
        .find_map(|name| std::fs::metadata(dir.join(name)).ok())
        .or_else(|| std::fs::metadata(dir).ok())
        .and_then(|m| m.modified().ok())
}

/// The number of the last run in the open current file (`None` when it holds none), after
/// cutting off a torn last line. The lines of pings after it do not count: they name earlier
/// runs.
fn last_seq(file: &File, path: &Path, job: &str) -> io::Result<Option<u64>> {
    let mut size = file.metadata()?.len();
    if size == 0 {
        return Ok(None);
    }
    let mut last = [0u8; 1];
    file.read_exact_at(&mut last, size - 1)?;
    if last[0] != b'\n' {
        let keep = line_start(file, size)?;
        file.set_len(keep)?;
        warn!(job = %job, file = %path.display(), bytes = size - keep, "cut off a torn last record of the job's history (the agent was killed while writing it)");
        size = keep;
        if size == 0 {
            return Ok(None);
        }
    }
    // The last run's line, past the lines of pings that follow it (which name earlier runs),
    // told by its first bytes: a run's line may be megabytes of output.
    let mut end = size;
    while end > 0 {
        let start = line_start(file, end - 1)?;
        let length = usize::try_from(end - 1 - start).unwrap_or(0);
        let mut head = vec![0u8; length.min(Head::BYTES)];
        file.read_exact_at(&mut head, start)?;
        match Head::of(&head) {
            Head::Run(seq) => return Ok(Some(seq)),
            Head::Update => end = start,
            // A damaged line: number after the best run read in the file.
            Head::Unknown => return Ok(read_file(path).into_iter().max().or(Some(0))),
        }
    }
    Ok(None)
}

/// The number of the last run in the file at `path`, if it has one.
fn last_in(path: &Path, job: &str) -> Option<u64> {
    let file = crate::persist::file::open_state(path).ok()??;
    last_seq(&file, path, job).ok().flatten()
}

/// The numbers of the runs readable in one file.
fn read_file(path: &Path) -> Vec<u64> {
    crate::persist::file::read_regular(path, READ_LIMIT)
        .map(|bytes| {
            bytes
                .split(|&b| b == b'\n')
                .filter_map(|l| Line::parse(l).map(|line| line.seq()))
                .collect()
        })
        .unwrap_or_default()
}

/// Where the line that holds the byte before `end` starts: just after the last `\n` before
/// `end`, or 0. Reads backwards a chunk at a time.
fn line_start(file: &File, end: u64) -> io::Result<u64> {
    let mut buf = vec![0u8; CHUNK];
    let mut to = end;
    while to > 0 {
        let from = to.saturating_sub(CHUNK as u64);
        let chunk = &mut buf[..usize::try_from(to - from).unwrap_or(CHUNK)];
        file.read_exact_at(chunk, from)?;
        if let Some(at) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(from + at as u64 + 1);
        }
        to = from;
    }
    Ok(0)
}
