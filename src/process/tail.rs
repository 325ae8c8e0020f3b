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
            bytes: VecDeque::with_capacity(capacity.min(64 * 1024)),
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
    pub(super) fn start(child: &mut tokio::process::Child, capacity: usize) -> Capture {
        let tail = Arc::new(Mutex::new(Tail::new(capacity)));
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            readers.push(tokio::spawn(pump(out, tail.clone())));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(tokio::spawn(pump(err, tail.clone())));
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

async fn pump(mut pipe: impl AsyncRead + Unpin, tail: Arc<Mutex<Tail>>) {
    let mut buf = [0u8; 8192];
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            break;
        }
        if let Ok(mut t) = tail.lock() {
            t.push(&buf[..n]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
