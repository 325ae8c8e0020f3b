//! Passing a child's stdout and stderr through to the agent's own, byte for byte, while keeping
//! the last N bytes of both ([`Tail`]): what `run` does for a job whose fail ping carries the
//! output (`fail_body = "output_tail"`).
//!
//! One plain thread per pipe (one for both streams when the agent's stdout and stderr are the
//! same file, see `spawn`) copies with blocking `read` and `write` of up to 64 KiB, so the
//! copy costs two system calls per chunk and no hop through the async runtime: the command's
//! output reaches the terminal or pipe as soon as it is written, and a slow reader of the
//! agent's output slows the command exactly as it would without the copy (the pipe fills). A
//! write that fails (the reader went away) closes that pipe, so the command sees the same
//! broken pipe it would have seen writing there itself.
//!
//! After the command ended, [`Tee::finish`] waits for both copies to reach the end of their
//! pipe, but not for a background process that holds a pipe open and writes nothing: once no
//! byte moved for [`PIPE_GRACE`], the copies are left behind (they end with the agent).

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::{Tail, PIPE_GRACE};

/// How much one read and one write move at most.
const CHUNK: usize = 64 * 1024;

/// The copies of a running child's stdout and stderr.
#[derive(Debug)]
pub(super) struct Tee {
    shared: Arc<Shared>,
    /// How many copies were started.
    copies: usize,
}

/// What the copying threads and the supervisor share.
#[derive(Debug)]
struct Shared {
    tail: Mutex<Tail>,
    /// Bytes moved so far, or a write in progress: whether the copies are still busy.
    progress: AtomicU64,
    writing: AtomicUsize,
    /// Copies that reached the end of their pipe.
    done: AtomicUsize,
    /// Woken when a copy ends.
    ended: Notify,
}

impl Tee {
    /// Takes the child's stdout and stderr pipes and starts copying them to this process's
    /// own, keeping the last `capacity` bytes.
    pub(super) fn start(child: &mut super::child::Child, capacity: usize) -> Tee {
        let shared = Arc::new(Shared {
            tail: Mutex::new(Tail::new(capacity)),
            progress: AtomicU64::new(0),
            writing: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            ended: Notify::new(),
        });
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let targets = [
            std::io::stdout().as_fd().try_clone_to_owned(),
            std::io::stderr().as_fd().try_clone_to_owned(),
        ];
        let mut copies = 0;
        for (pipe, target) in [stdout, stderr].into_iter().zip(targets) {
            let Some(pipe) = pipe else { continue };
            let shared = Arc::clone(&shared);
            let target = target.ok().map(File::from);
            let started = std::thread::Builder::new()
                .name("output-copy".to_owned())
                .spawn(move || copy(File::from(pipe), target, &shared));
            if started.is_ok() {
                copies += 1;
            }
        }
        Tee { shared, copies }
    }

    /// Waits until both copies reached the end of their pipes, or nothing moved for
    /// [`PIPE_GRACE`]; returns what was kept.
    pub(super) async fn finish(self) -> Tail {
        let shared = &self.shared;
        loop {
            if shared.done.load(Ordering::Acquire) >= self.copies {
                break;
            }
            let before = shared.progress.load(Ordering::Acquire);
            let woken = tokio::time::timeout(PIPE_GRACE, shared.ended.notified()).await;
            let idle = shared.progress.load(Ordering::Acquire) == before
                && shared.writing.load(Ordering::Acquire) == 0;
            if woken.is_err() && idle {
                break;
            }
        }
        shared.tail.lock().map(|t| t.clone()).unwrap_or_default()
    }
}

/// Copies `pipe` to `target` until the pipe ends or `target` fails, keeping the tail.
fn copy(mut pipe: File, mut target: Option<File>, shared: &Shared) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if let Ok(mut tail) = shared.tail.lock() {
            tail.push(&buf[..n]);
        }
        shared.progress.fetch_add(n as u64, Ordering::AcqRel);
        if let Some(out) = target.as_mut() {
            shared.writing.fetch_add(1, Ordering::AcqRel);
            let written = write_all(out, &buf[..n]);
            shared.writing.fetch_sub(1, Ordering::AcqRel);
            if written.is_err() {
                // The reader went away: closing the pipe gives the command the broken pipe it
                // would have had writing there itself.
                break;
            }
        }
    }
    drop(pipe);
    shared.done.fetch_add(1, Ordering::AcqRel);
    shared.ended.notify_one();
}

/// `write_all`, waiting out a non-blocking target that is full rather than failing.
fn write_all(out: &mut File, mut data: &[u8]) -> std::io::Result<()> {
    while !data.is_empty() {
        match out.write(data) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(err) if err.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Err(err) => return Err(err),
        }
    }
    Ok(())
}
