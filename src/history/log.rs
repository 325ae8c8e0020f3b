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
/// `limit`.
pub(super) fn append(dir: &Path, job: &str, limit: usize, mut run: Run) -> io::Result<()> {
    crate::persist::file::private_dir(dir)?;
    let _lock = FileLock::acquire(&dir.join("lock"))?;
    let path = dir.join(CURRENT);
    let mut file = crate::persist::file::open_state_append(&path)?;
    let last = match last_seq(&file, &path, job)? {
        Some(seq) => seq,
        None => last_in(&dir.join(OLD), job).unwrap_or(0),
    };
    run.seq = last + 1;
    let mut line = serde_json::to_vec(&run).map_err(io::Error::other)?;
    line.push(b'\n');
    // One write of the whole line: a death before it leaves nothing, a death inside it (a
    // short write is the only way) leaves a torn line the next append cuts off.
    file.write_all(&line)?;
    crate::persist::crash_point("history-appended");
    let limit = u64::try_from(limit).unwrap_or(u64::MAX).max(1);
    if run.seq % limit == 0 {
        std::fs::rename(&path, dir.join(OLD))?;
    }
    Ok(())
}

/// The last `n` runs of `job` in `dir`, oldest first, read from the ends of the files
/// backwards (the current generation, then the old one when it holds fewer than `n`): the
/// cost is that of the `n` lines, not of the whole history. A torn last line (a kill -9 during
/// an append) and lines that do not read as a run are skipped, with one warning per read.
pub(super) fn read_last(dir: &Path, job: &str, n: usize) -> io::Result<Vec<Run>> {
    let mut runs = Vec::new();
    let mut skipped = 0usize;
    for name in [CURRENT, OLD] {
        if runs.len() >= n {
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
        while end > 0 && runs.len() < n {
            let start = line_start(&file, end - 1)?;
            let mut line = vec![0u8; usize::try_from(end - 1 - start).unwrap_or(0)];
            file.read_exact_at(&mut line, start)?;
            match serde_json::from_slice::<Run>(&line) {
                Ok(run) => runs.push(run),
                Err(_) => skipped += 1,
            }
            end = start;
        }
    }
    if skipped > 0 {
        warn!(job = %job, dir = %dir.display(), skipped, "skipped unreadable records of the job's history (a record torn by a crash, or a damaged file)");
    }
    runs.reverse();
    Ok(runs)
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
/// cutting off a torn last line.
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
    let start = line_start(file, size - 1)?;
    let mut line = vec![0u8; usize::try_from(size - 1 - start).unwrap_or(0)];
    file.read_exact_at(&mut line, start)?;
    match serde_json::from_slice::<Run>(&line) {
        Ok(run) => Ok(Some(run.seq)),
        // A damaged last line: number after the best run read in the file.
        Err(_) => Ok(read_file(path).iter().map(|r| r.seq).max().or(Some(0))),
    }
}

/// The number of the last run in the file at `path`, if it has one.
fn last_in(path: &Path, job: &str) -> Option<u64> {
    let file = crate::persist::file::open_state(path).ok()??;
    last_seq(&file, path, job).ok().flatten()
}

/// The runs readable in one file.
fn read_file(path: &Path) -> Vec<Run> {
    crate::persist::file::read_regular(path, READ_LIMIT)
        .map(|bytes| {
            bytes
                .split(|&b| b == b'\n')
                .filter_map(|l| serde_json::from_slice(l).ok())
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
