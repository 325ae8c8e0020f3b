//! The bounded tail of a child's output: the last N bytes of stdout and stderr, never all of it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;

/// A ring buffer holding the most recent `capacity` bytes written to it.
#[derive(Debug, Clone, Default)]
pub struct Tail {
    bytes: VecDeque<u8>,
    capacity: usize,
    /// How many bytes were dropped from the front, so a reader can say "output truncated".
    dropped: u64,
}

impl Tail {
    /// An empty tail keeping at most `capacity` bytes.
    pub fn new(capacity: usize) -> Tail {
        Tail {
            // No up-front allocation: the buffer grows only with actual output, so thousands of
            // quiet jobs cost nothing here.
            bytes: VecDeque::new(),
            capacity,
            dropped: 0,
        }
    }

    /// Appends `data`, dropping the oldest bytes beyond the capacity.
    pub fn push(&mut self, data: &[u8]) {
        let keep = &data[data.len().saturating_sub(self.capacity)..];
        self.dropped += (data.len() - keep.len()) as u64;
        let overflow = (self.bytes.len() + keep.len()).saturating_sub(self.capacity);
        self.bytes.drain(..overflow);
        self.dropped += overflow as u64;
        self.bytes.extend(keep);
    }

    /// The kept bytes, oldest first.
    pub fn contents(&self) -> Vec<u8> {
        self.bytes.iter().copied().collect()
    }

    /// How many bytes were written but are no longer kept.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// The reader tasks of a captured child's stdout and stderr.
#[derive(Debug)]
pub(super) struct Capture {
    tail: Arc<Mutex<Tail>>,
    readers: Vec<JoinHandle<()>>,
}

impl Capture {
    pub(super) fn start(
        child: &mut tokio::process::Child,
        capacity: usize,
        lines: Option<LineSink>,
    ) -> Capture {
        let tail = Arc::new(Mutex::new(Tail::new(capacity)));
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            let lines = lines.clone().map(|sink| (Stream::Stdout, sink));
            readers.push(tokio::spawn(pump(out, tail.clone(), lines)));
        }
        if let Some(err) = child.stderr.take() {
            let lines = lines.map(|sink| (Stream::Stderr, sink));
            readers.push(tokio::spawn(pump(err, tail.clone(), lines)));
        }
        Capture { tail, readers }
    }

    /// Waits up to `grace` for both pipes to close, then returns what was kept.
    pub(super) async fn finish(self, grace: Duration) -> Tail {
        let deadline = tokio::time::Instant::now() + grace;
        for reader in self.readers {
            let abort = reader.abort_handle();
            if tokio::time::timeout_at(deadline, reader).await.is_err() {
                abort.abort();
            }
        }
        let tail = self.tail.lock().map(|t| t.clone());
        tail.unwrap_or_else(|poisoned| poisoned.into_inner().clone())
    }
}

/// Which standard stream a line of output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// The child's stdout.
    Stdout,
    /// The child's stderr.
    Stderr,
}

impl Stream {
    /// `"stdout"` or `"stderr"`, for log fields.
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// Receives each line of captured output as it arrives (without the line end), so the daemon
/// can log output line by line with the job's name. A line longer than [`MAX_LINE`] is passed
/// on in pieces; a last line without a newline is passed on when the pipe closes.
#[derive(Clone)]
pub struct LineSink(Arc<LineFn>);

/// The callback behind a [`LineSink`].
type LineFn = dyn Fn(Stream, &[u8]) + Send + Sync;

impl LineSink {
    /// A sink calling `f` for every line.
    pub fn new(f: impl Fn(Stream, &[u8]) + Send + Sync + 'static) -> LineSink {
        LineSink(Arc::new(f))
    }
}

impl std::fmt::Debug for LineSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LineSink")
    }
}

/// The longest line handed to a [`LineSink`] in one piece: a child that writes megabytes
/// without a newline must not make the reader buffer all of it.
pub const MAX_LINE: usize = 4096;

async fn pump(
    mut pipe: impl AsyncRead + Unpin,
    tail: Arc<Mutex<Tail>>,
    mut lines: Option<(Stream, LineSink)>,
) {
    let mut buf = [0u8; 8192];
    let mut pending = Vec::new();
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            break;
        }
        if let Ok(mut t) = tail.lock() {
            t.push(&buf[..n]);
        }
        if let Some((stream, sink)) = &mut lines {
            pending.extend_from_slice(&buf[..n]);
            split_lines(&mut pending, |line| (sink.0)(*stream, line));
        }
    }
    if let Some((stream, sink)) = &lines {
        if !pending.is_empty() {
            (sink.0)(*stream, &pending);
        }
    }
}

/// Hands every complete line of `pending` (and pieces of [`MAX_LINE`] bytes of an overlong
/// one) to `emit`, without the `\n` or `\r\n`, and keeps the rest.
fn split_lines(pending: &mut Vec<u8>, mut emit: impl FnMut(&[u8])) {
    let mut start = 0;
    while let Some(end) = pending[start..].iter().position(|&b| b == b'\n') {
        let line = &pending[start..start + end];
        emit(line.strip_suffix(b"\r").unwrap_or(line));
        start += end + 1;
    }
    while pending.len() - start >= MAX_LINE {
        emit(&pending[start..start + MAX_LINE]);
        start += MAX_LINE;
    }
    pending.drain(..start);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_and_overlong_ones_cut() {
        let mut got = Vec::new();
        let mut pending = b"one\r\ntwo\nthr".to_vec();
        split_lines(&mut pending, |l| got.push(l.to_vec()));
        assert_eq!(got, vec![b"one".to_vec(), b"two".to_vec()]);
        assert_eq!(pending, b"thr");
        pending.extend(std::iter::repeat(b'x').take(MAX_LINE + 3));
        got.clear();
        split_lines(&mut pending, |l| got.push(l.to_vec()));
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].len(), MAX_LINE);
        assert_eq!(pending.len(), 6);
    }

    #[test]
    fn keeps_only_the_last_bytes() {
        let mut t = Tail::new(5);
        t.push(b"abc");
        t.push(b"defg");
        assert_eq!(t.contents(), b"cdefg");
        assert_eq!(t.dropped(), 2);
        t.push(b"0123456789");
        assert_eq!(t.contents(), b"56789");
        assert_eq!(t.dropped(), 12);
    }
}
