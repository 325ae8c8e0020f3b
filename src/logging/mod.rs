//! Logging set-up: human text on a terminal, JSON on request, structured journald entries when
//! stderr is the journal. Logs always go to stderr (or the journal); stdout belongs to the
//! command's output.
//!
//! The format is chosen once at start ([`init`]):
//! - `--log-format json`: one JSON object per line (`timestamp`, `level`, `message`, the
//!   event's fields, `target`).
//! - `--log-format text`: human text; colour only when stderr is a terminal and `NO_COLOR` is
//!   unset. Whether stderr is a terminal is asked again at each line (`anstream` strips the
//!   colour codes when it is not): `demo` points stderr at its `daemon.log` after logging was
//!   set up on the terminal, and that file must hold plain text.
//! - `auto` (the default): journald entries when `JOURNAL_STREAM` names stderr (systemd
//!   connected it to the journal), written to the journal's native socket with each event
//!   field as its own journal field (see [`journald`]); if that socket cannot be used, plain
//!   text without time stamps (the journal adds its own). Otherwise human text as above.
//!
//! A line that cannot be written (the log's pipe closed) is dropped and counted, never a
//! reason to stop: see [`lossy`].
//!
//! In text, every field's value and the message go through [`printable`]: text someone else
//! wrote (a claim value, a pause reason, a server's error) cannot forge a line or drive the
//! terminal. JSON escapes control characters itself.

use std::io::IsTerminal;

use tracing::Subscriber;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

use lossy::Lossy;

mod journald;
mod lossy;
mod printable;

pub(crate) use journald::JOURNAL_SOCKET;
pub(crate) use lossy::{dropped as dropped_lines, err as write_err, out as write_out};
pub(crate) use printable::printable;

/// The environment variable holding a log filter when `--log-level` is not given.
pub(crate) const LOG_ENV: &str = "HEARTBEAT_AGENT_LOG";

/// The target of `run`'s line saying what it pinged (`pinged backup (HTTP 200, 3 ms)`). It is
/// an info event, but the default filter holds it back: a good run wrapped in crontab must
/// print nothing (cron mails whatever a job prints). Asking for a level (`--log-level info`,
/// `-v`, `$HEARTBEAT_AGENT_LOG`) shows it.
pub(crate) const PINGED_TARGET: &str = "heartbeat_agent::pinged";

/// The filter when neither `--log-level` nor [`LOG_ENV`] gives one: `info`, without
/// [`PINGED_TARGET`].
const DEFAULT_FILTER: &str = "info,heartbeat_agent::pinged=warn";

/// How log lines are written to stderr (the values of `--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Journald fields when stderr is the journal (`JOURNAL_STREAM`), else text.
    Auto,
    /// Human-readable text.
    Text,
    /// One JSON object per line.
    Json,
}

/// What to log and how, as the command line asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// A level or tracing filter (`--log-level`); `None` falls back to [`LOG_ENV`], then `info`.
    pub level: Option<String>,
    /// The format (`--log-format`).
    pub format: LogFormat,
}

/// Installs the global tracing subscriber. Safe to call once per process; a later call (tests)
/// changes nothing.
pub fn init(options: &Options) {
    let filter = filter(
        options.level.as_deref(),
        std::env::var(LOG_ENV).ok().as_deref(),
    );
    let format = options.format;
    let journal = format == LogFormat::Auto && stderr_is_journal();
    // An already installed subscriber (tests) is fine: the results are ignored on purpose.
    match format {
        LogFormat::Json => {
            let _ = json_subscriber(filter, lossy::stderr).try_init();
        }
        LogFormat::Auto if journal => {
            match journald::JournaldLayer::connect(std::path::Path::new(JOURNAL_SOCKET)) {
                Ok(layer) => {
                    let _ = tracing_subscriber::registry()
                        .with(filter)
                        .with(layer)
                        .try_init();
                }
                // The journal still reads stderr: text without time stamps or colour.
                Err(_) => {
                    let _ = text_builder(filter)
                        .without_time()
                        .with_ansi(false)
                        .try_init();
                }
            }
        }
        LogFormat::Auto | LogFormat::Text => {
            let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            let _ = text_builder(filter)
                .with_writer(
                    coloured_stderr as fn() -> Lossy<anstream::AutoStream<std::io::Stderr>>,
                )
                .with_ansi(colour)
                .try_init();
        }
    }
}

/// The filter: `--log-level`, else `$HEARTBEAT_AGENT_LOG`, else [`DEFAULT_FILTER`] (`info`); an
/// invalid filter falls back to that default (logging cannot report its own set-up problem any
/// other way).
fn filter(flag: Option<&str>, env: Option<&str>) -> EnvFilter {
    let wanted = flag.or(env).unwrap_or(DEFAULT_FILTER);
    EnvFilter::try_new(wanted).unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER))
}

/// How the text format writes one field: `name=value` (the message without its name), the
/// value through [`printable`].
type TextFields = tracing_subscriber::field::delimited::Delimited<
    &'static str,
    tracing_subscriber::fmt::format::FieldFn<
        fn(
            &mut tracing_subscriber::fmt::format::Writer<'_>,
            &tracing::field::Field,
            &dyn std::fmt::Debug,
        ) -> std::fmt::Result,
    >,
>;

fn text_field(
    writer: &mut tracing_subscriber::fmt::format::Writer<'_>,
    field: &tracing::field::Field,
    value: &dyn std::fmt::Debug,
) -> std::fmt::Result {
    let value = format!("{value:?}");
    match field.name() {
        "message" => write!(writer, "{}", printable(&value)),
        name => write!(writer, "{name}={}", printable(&value)),
    }
}

/// The human text format on stderr, without the target (module path) noise.
fn text_builder(
    filter: EnvFilter,
) -> tracing_subscriber::fmt::SubscriberBuilder<
    TextFields,
    tracing_subscriber::fmt::format::Format,
    EnvFilter,
    fn() -> Lossy<std::io::Stderr>,
> {
    use tracing_subscriber::field::MakeExt;
    let fields: TextFields = tracing_subscriber::fmt::format::debug_fn(
        text_field
            as fn(
                &mut tracing_subscriber::fmt::format::Writer<'_>,
                &tracing::field::Field,
                &dyn std::fmt::Debug,
            ) -> std::fmt::Result,
    )
    .delimited(" ");
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(lossy::stderr as fn() -> Lossy<std::io::Stderr>)
        .with_target(false)
        .log_internal_errors(false)
        .fmt_fields(fields)
}

/// Stderr for one log line, with its colour codes stripped unless stderr is a terminal now
/// (and `NO_COLOR` unset): the text format's colour follows where stderr points, not where it
/// pointed at start.
fn coloured_stderr() -> Lossy<anstream::AutoStream<std::io::Stderr>> {
    Lossy(anstream::AutoStream::auto(std::io::stderr()))
}

/// One JSON object per line on `writer`, the event's fields at the top level next to
/// `timestamp`, `level` and `message`, plus the fields of the spans it happened in.
fn json_subscriber<W>(filter: EnvFilter, writer: W) -> impl Subscriber + Send + Sync
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .log_internal_errors(false)
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(true)
        .finish()
}

/// Whether stderr is connected to the journal: `JOURNAL_STREAM` (`DEVICE:INODE`, set by
/// systemd) names the very file stderr is. A child that inherited the variable but had its
/// stderr redirected elsewhere does not match.
fn stderr_is_journal() -> bool {
    let Some(value) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Ok(stat) = nix::sys::stat::fstat(libc::STDERR_FILENO) else {
        return false;
    };
    journal_stream_matches(&value.to_string_lossy(), stat.st_dev, stat.st_ino)
}

/// Whether a `JOURNAL_STREAM` value `DEVICE:INODE` names the file with `dev` and `ino`.
fn journal_stream_matches(value: &str, dev: u64, ino: u64) -> bool {
    let Some((device, inode)) = value.trim().split_once(':') else {
        return false;
    };
    device.parse() == Ok(dev) && inode.parse() == Ok(ino)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn journal_stream_must_name_our_stderr() {
        assert!(journal_stream_matches("8:1234", 8, 1234));
        assert!(journal_stream_matches("8:1234\n", 8, 1234));
        assert!(!journal_stream_matches("8:1235", 8, 1234));
        assert!(!journal_stream_matches("9:1234", 8, 1234));
        assert!(!journal_stream_matches("garbage", 8, 1234));
        assert!(!journal_stream_matches("", 8, 1234));
    }

    #[test]
    fn stderr_is_journal_compares_with_fstat() {
        // Whatever stderr is during tests, JOURNAL_STREAM built from its own fstat matches and
        // one with another inode does not.
        let stat = nix::sys::stat::fstat(libc::STDERR_FILENO).expect("fstat stderr");
        let value = format!("{}:{}", stat.st_dev, stat.st_ino);
        assert!(journal_stream_matches(&value, stat.st_dev, stat.st_ino));
        let other = format!("{}:{}", stat.st_dev, stat.st_ino.wrapping_add(1));
        assert!(!journal_stream_matches(&other, stat.st_dev, stat.st_ino));
    }

    #[test]
    fn flag_beats_environment_beats_default() {
        assert_eq!(filter(Some("debug"), Some("error")).to_string(), "debug");
        assert_eq!(filter(None, Some("error")).to_string(), "error");
        let default = EnvFilter::new(DEFAULT_FILTER).to_string();
        assert!(
            default.contains("heartbeat_agent::pinged=warn"),
            "{default}"
        );
        assert_eq!(filter(None, None).to_string(), default);
        assert_eq!(filter(Some("=nonsense=="), None).to_string(), default);
    }

    /// A writer that appends to a shared buffer (also used by the journald tests).
    #[derive(Clone, Default)]
    pub(super) struct Buffer(pub(super) Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("buffer lock").extend_from_slice(data);
            Ok(data.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    #[test]
    fn text_escapes_control_characters_in_every_field_and_the_message() {
        let buffer = Buffer::default();
        let subscriber = text_builder(EnvFilter::new("info"))
            .with_ansi(false)
            .with_writer(buffer.clone())
            .finish();
        let remote = "x\x1b]0;owned\x07\x1b[2J\r\n2026-01-01T00:00:00Z  INFO fake line";
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("run", job = %remote);
            let _entered = span.enter();
            tracing::warn!(node = %remote, reason = remote, "claim of {remote}");
        });
        let text = String::from_utf8(buffer.0.lock().expect("lock").clone()).expect("utf-8");
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(!text.contains(['\x1b', '\x07', '\r']), "{text:?}");
        assert!(text.contains("node=x\\u{1b}]0;owned\\u{7}"), "{text}");
        assert!(text.contains("claim of x\\u{1b}"), "{text}");
        assert!(text.contains("job=x\\u{1b}"), "{text}");
    }

    #[test]
    fn json_is_one_object_per_line_with_fields() {
        let buffer = Buffer::default();
        let subscriber = json_subscriber(EnvFilter::new("debug"), buffer.clone());
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("job", job = "backup");
            let _entered = span.enter();
            tracing::warn!(check_id = "abc", exit_code = 3, "job failed\nbadly");
            tracing::debug!("second");
            tracing::trace!("filtered out");
        });
        let text = String::from_utf8(buffer.0.lock().expect("lock").clone()).expect("utf-8");
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).expect("each line is a JSON object"))
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0]["level"], "WARN");
        assert_eq!(lines[0]["message"], "job failed\nbadly");
        assert_eq!(lines[0]["check_id"], "abc");
        assert_eq!(lines[0]["exit_code"], 3);
        assert_eq!(lines[0]["spans"][0]["job"], "backup");
        assert!(lines[0]["timestamp"].is_string());
        assert_eq!(lines[1]["message"], "second");
    }
}
