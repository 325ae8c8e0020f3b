//! The bounded tail of a child's output: the last N bytes of stdout and stderr, never all of it
//! (and the few bytes before them that the scrubber needs to find a secret the cut splits).

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::unix::pipe;

/// A ring buffer holding the most recent `capacity` bytes written to it, and up to
/// [`crate::redact::reach`] bytes before them: what is shown ([`Tail::text`]) is scrubbed
/// before it is cut to `capacity`, so a secret split by the cut is still found whole.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tail {
    bytes: VecDeque<u8>,
    /// What is shown.
    capacity: usize,
    /// What is kept: `capacity` and the scrubber's reach before it (0 when nothing is shown).
    keep: usize,
    /// How many bytes were dropped from the front, so a reader can say "output truncated".
    dropped: u64,
}

impl Tail {
    /// An empty tail showing at most `capacity` bytes.
    pub(crate) fn new(capacity: usize) -> Tail {
        let reach = if capacity == 0 {
            0
        } else {
            crate::redact::reach()
        };
        Tail {
            // No up-front allocation: the buffer grows only with actual output, so thousands of
            // quiet jobs cost nothing here.
            bytes: VecDeque::new(),
            capacity,
            keep: capacity.saturating_add(reach),
            dropped: 0,
        }
    }

    /// Appends `data`, dropping the oldest bytes beyond what is kept.
    pub(crate) fn push(&mut self, data: &[u8]) {
        let keep = &data[data.len().saturating_sub(self.keep)..];
        self.dropped += (data.len() - keep.len()) as u64;
        let overflow = (self.bytes.len() + keep.len()).saturating_sub(self.keep);
        self.bytes.drain(..overflow);
        self.dropped += overflow as u64;
        self.bytes.extend(keep);
    }

    /// The kept bytes, oldest first (the scrubber's reach included: not for showing).
    pub(crate) fn contents(&self) -> Vec<u8> {
        self.bytes.iter().copied().collect()
    }

    /// The last `capacity` bytes as they may be shown: valid UTF-8, scrubbed of every known
    /// secret, then cut ([`crate::redact::job_output`]).
    pub(crate) fn text(&self) -> String {
        crate::redact::job_output(&self.contents(), self.capacity)
    }

    /// How many bytes were written but are no longer kept (the scrubber's reach counts as
    /// kept).
    #[cfg(test)]
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// A captured child's stdout and stderr: read by [`Capture::pump`] inside the run's own
/// supervision (no reader tasks of their own, so a run costs one task, not three), into the
/// [`Tail`] and the optional [`LineSink`]. When the child writes both into one pipe (the
/// daemon's capture: the order kept), that pipe is read as stdout and its lines are told as
/// [`Stream::Both`].
#[derive(Debug)]
pub(super) struct Capture {
    stdout: Option<pipe::Receiver>,
    stderr: Option<pipe::Receiver>,
    tail: Tail,
    lines: Option<LineSink>,
    /// The unfinished last line of stdout and of stderr (only with a sink; grows only with
    /// output).
    pending: (Vec<u8>, Vec<u8>),
    /// Whether the child writes stdout and stderr into the one pipe read as stdout.
    merged: bool,
}

/// How many bytes one read of a pipe takes. Small, because the buffers live in every run's
/// future; a job that writes a lot costs more reads, not more memory.
const READ_CHUNK: usize = 1024;

impl Capture {
    /// Takes the child's pipes (registered with the runtime's reactor); nothing is read until
    /// [`Capture::pump`] is polled. A pipe that cannot be registered is closed: the child sees
    /// a broken pipe there, the run goes on.
    pub(super) fn start(
        child: &mut super::child::Child,
        capacity: usize,
        lines: Option<LineSink>,
    ) -> Capture {
        let merged = child.stderr.is_none();
        Capture {
            stdout: child.stdout.take().and_then(receiver),
            stderr: child.stderr.take().and_then(receiver),
            tail: Tail::new(capacity),
            lines,
            pending: (Vec::new(), Vec::new()),
            merged,
        }
    }

    /// Reads both pipes until both are closed (or fail). Cancel-safe: what was read is kept
    /// (partial lines included), and polling it again goes on where it stopped.
    pub(super) async fn pump(&mut self) {
        let mut out_buf = [0u8; READ_CHUNK];
        let mut err_buf = [0u8; READ_CHUNK];
        while self.stdout.is_some() || self.stderr.is_some() {
            let (stream, n) = tokio::select! {
                n = read_some(self.stdout.as_mut(), &mut out_buf) => (Stream::Stdout, n),
                n = read_some(self.stderr.as_mut(), &mut err_buf) => (Stream::Stderr, n),
            };
            let data = match stream {
                Stream::Stdout | Stream::Both => &out_buf[..n],
                Stream::Stderr => &err_buf[..n],
            };
            self.take(stream, data);
        }
    }

    /// Keeps `data` read from `stream`, and hands its complete lines to the sink; empty `data`
    /// means the pipe closed (a last line without a newline is handed on then).
    fn take(&mut self, stream: Stream, data: &[u8]) {
        let label = match stream {
            Stream::Stdout if self.merged => Stream::Both,
            other => other,
        };
        let pending = match stream {
            Stream::Stdout | Stream::Both => &mut self.pending.0,
            Stream::Stderr => &mut self.pending.1,
        };
        if data.is_empty() {
            match stream {
                Stream::Stdout | Stream::Both => self.stdout = None,
                Stream::Stderr => self.stderr = None,
            }
            if let Some(sink) = &self.lines {
                split_lines(pending, true, |line| (sink.0)(label, line));
            }
            *pending = Vec::new();
            return;
        }
        self.tail.push(data);
        if let Some(sink) = &self.lines {
            pending.extend_from_slice(data);
            split_lines(pending, false, |line| (sink.0)(label, line));
        }
    }

    /// What was kept.
    pub(super) fn into_tail(self) -> Tail {
        self.tail
    }
}

/// The read end `fd` of a pipe, made non-blocking and registered with the runtime's reactor.
fn receiver(fd: OwnedFd) -> Option<pipe::Receiver> {
    super::child::set_nonblocking(&fd).ok()?;
    pipe::Receiver::from_owned_fd_unchecked(fd).ok()
}

/// One read of `pipe` into `buf` (0 at its end or on an error); never ready without a pipe.
async fn read_some(pipe: Option<&mut (impl AsyncRead + Unpin)>, buf: &mut [u8]) -> usize {
    match pipe {
        Some(pipe) => pipe.read(buf).await.unwrap_or(0),
        None => std::future::pending().await,
    }
}

/// Which standard stream a line of output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    /// The child's stdout.
    Stdout,
    /// The child's stderr.
    Stderr,
    /// Either: the child writes both into one pipe (which keeps their order).
    Both,
}

impl Stream {
    /// `"stdout"`, `"stderr"` or `"stdout+stderr"`, for log fields.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
            Stream::Both => "stdout+stderr",
        }
    }
}

/// Receives each line of captured output as it arrives (without the line end), so the daemon
/// can log output line by line with the job's name. A line longer than [`MAX_LINE`] is passed
/// on in pieces; a last line without a newline is passed on when the pipe closes.
#[derive(Clone)]
pub(crate) struct LineSink(Arc<LineFn>);

/// The callback behind a [`LineSink`].
type LineFn = dyn Fn(Stream, &[u8]) + Send + Sync;

impl LineSink {
    /// A sink calling `f` for every line.
    pub(crate) fn new(f: impl Fn(Stream, &[u8]) + Send + Sync + 'static) -> LineSink {
        LineSink(Arc::new(f))
    }
}

impl std::fmt::Debug for LineSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LineSink")
    }
}

/// About the longest line handed to a [`LineSink`] in one piece: a child that writes megabytes
/// without a newline must not make the reader buffer all of it.
pub(crate) const MAX_LINE: usize = 4096;

/// Hands every complete line of `pending` to `emit`, without the `\n` or `\r\n`, and keeps the
/// rest; when the pipe `closed`, the rest too.
///
/// An overlong line goes on in pieces of [`MAX_LINE`] bytes, each scrubbed on its own by the
/// sink, so no piece may hold part of a secret: a piece is cut only once the scrubber's reach
/// ([`crate::redact::reach`]) past it has arrived, and where no known secret spans the cut
/// ([`crate::redact::cut_between_secrets`]: a piece then ends before the secret, or, for one
/// that starts it, after). What waits is so at most `MAX_LINE` and the reach.
fn split_lines(pending: &mut Vec<u8>, closed: bool, mut emit: impl FnMut(&[u8])) {
    let mut start = 0;
    while let Some(end) = pending[start..].iter().position(|&b| b == b'\n') {
        let line = &pending[start..start + end];
        emit(line.strip_suffix(b"\r").unwrap_or(line));
        start += end + 1;
    }
    let reach = crate::redact::reach();
    loop {
        let left = pending.len() - start;
        if left < MAX_LINE.saturating_add(reach) && !(closed && left > MAX_LINE) {
            break;
        }
        let window = &pending[start..pending.len().min(start + MAX_LINE + reach)];
        let cut = crate::redact::cut_between_secrets(window, MAX_LINE);
        emit(&pending[start..start + cut]);
        start += cut;
    }
    if closed && start < pending.len() {
        emit(&pending[start..]);
        start = pending.len();
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
        split_lines(&mut pending, false, |l| got.push(l.to_vec()));
        assert_eq!(got, vec![b"one".to_vec(), b"two".to_vec()]);
        assert_eq!(pending, b"thr");
        let reach = crate::redact::reach();
        // A piece waits for the scrubber's reach past it.
        pending.extend(std::iter::repeat(b'x').take(MAX_LINE + reach - 4));
        got.clear();
        split_lines(&mut pending, false, |l| got.push(l.to_vec()));
        assert!(got.is_empty());
        pending.extend(b"x");
        split_lines(&mut pending, false, |l| got.push(l.to_vec()));
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].len(), MAX_LINE);
        assert_eq!(pending.len(), reach);
        // At the pipe's end, the rest goes on too.
        got.clear();
        split_lines(&mut pending, true, |l| got.push(l.to_vec()));
        assert_eq!(got, vec![vec![b'x'; reach]]);
        assert!(pending.is_empty());
    }

    #[test]
    fn no_piece_of_an_overlong_line_holds_part_of_a_secret() {
        let secret = "line-piece-secret-0123456789abcdef";
        crate::redact::remember(secret);
        // The secret across every boundary of MAX_LINE, from 1 byte to all but 1 before it.
        for before in 1..secret.len() {
            let mut line = Vec::new();
            for k in 1..=3 {
                line.resize(k * MAX_LINE - before, b'x');
                line.extend_from_slice(secret.as_bytes());
            }
            line.extend_from_slice(b"\n");
            let mut pieces = Vec::new();
            let mut pending = Vec::new();
            // Read in small chunks, as from a pipe.
            for chunk in line.chunks(1000) {
                pending.extend_from_slice(chunk);
                split_lines(&mut pending, false, |l| pieces.push(l.to_vec()));
            }
            split_lines(&mut pending, true, |l| pieces.push(l.to_vec()));
            assert_eq!(pieces.concat(), line[..line.len() - 1].to_vec());
            let whole = pieces
                .iter()
                .map(|p| {
                    crate::redact::job_output(p, usize::MAX)
                        .matches("[redacted]")
                        .count()
                })
                .sum::<usize>();
            assert_eq!(whole, 3, "before {before}: every secret scrubbed whole");
            for piece in &pieces {
                let shown = crate::redact::job_output(piece, usize::MAX);
                assert!(!shown.contains("0123456789"), "before {before}");
                assert!(piece.len() <= MAX_LINE + secret.len(), "{}", piece.len());
            }
        }
    }

    #[test]
    fn keeps_only_the_last_bytes_and_the_scrubbers_reach() {
        let mut t = Tail::new(5);
        let reach = t.keep - 5;
        t.push(&vec![b'.'; reach]);
        t.push(b"abc");
        t.push(b"defg");
        assert_eq!(t.text(), "cdefg");
        assert_eq!(t.contents().len(), reach + 5);
        assert_eq!(t.dropped(), 2);
        t.push(b"0123456789");
        assert_eq!(t.text(), "56789");
        assert_eq!(t.dropped(), 12);
        assert!(Tail::new(0).text().is_empty());
    }
}
