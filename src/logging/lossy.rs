//! Log lines written so that a closed or broken output never stops the agent: a line that
//! cannot be written (the reader of a pipe went away: a `| head`, a `tee` stopped with Ctrl-C, a
//! restarted collector) is dropped and counted, and the agent goes on. The count is
//! [`dropped`], served as `heartbeat_agent_log_lines_dropped_total` by `/metrics`.
//!
//! Output meant for the person at the terminal (`status`, `history`, the one-line messages of
//! the commands) goes through [`out`] and [`err`], which drop what cannot be written the same
//! way instead of panicking as `println!` does.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};

/// Log lines dropped because the log's output could not take them.
// One per process: the logger (and the output it writes to) is the process's.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// How many log lines were dropped since the process started.
pub(crate) fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// A writer that never fails: what `inner` refuses is dropped and counted in [`dropped`].
#[derive(Debug)]
pub(crate) struct Lossy<W>(pub(crate) W);

impl<W: Write> Write for Lossy<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        // tracing writes a line with one `write_all`: the first failure drops the rest of it.
        match self.0.write_all(data) {
            Ok(()) => {}
            Err(_) => {
                DROPPED.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _ = self.0.flush();
        Ok(())
    }
}

/// Stderr for one log line, dropping what cannot be written.
pub(crate) fn stderr() -> Lossy<io::Stderr> {
    Lossy(io::stderr())
}

/// Writes `text` to stdout; a closed stdout drops it (the command's exit code says how it went,
/// not whether someone still reads).
pub(crate) fn out(text: &str) {
    let _ = io::stdout().lock().write_all(text.as_bytes());
}

/// Writes `text` and a newline to stderr; a closed stderr drops it.
pub(crate) fn err(text: &str) {
    let mut line = String::with_capacity(text.len() + 1);
    line.push_str(text);
    line.push('\n');
    let _ = io::stderr().lock().write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Closed;

    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
    }

    #[test]
    fn a_refused_line_is_dropped_and_counted() {
        let before = dropped();
        let mut writer = Lossy(Closed);
        assert_eq!(writer.write(b"one line\n").expect("never fails"), 9);
        writer.flush().expect("never fails");
        assert!(dropped() > before);
    }
}
