//! A tracing layer that writes each event to the journal's native socket as one datagram of
//! fields (the native journal protocol), so `journalctl JOB=backup` or `-o verbose` work.
//!
//! Each entry has `MESSAGE` (the message followed by the event's fields as `key=value`, so the
//! default `journalctl` view still shows them), `PRIORITY` (syslog level), `SYSLOG_IDENTIFIER`,
//! `TARGET`, `CODE_FILE`/`CODE_LINE`, and every field of the event and of the spans it happened
//! in, uppercased (`check_id` -> `CHECK_ID`). A field whose name clashes with one of those
//! gets a `FIELD_` prefix. An entry the socket refuses (too large, journald gone) is written to
//! stderr as plain text instead, which the journal also reads.
//!
//! Written here rather than with the `tracing-journald` crate (0.3), whose layer can be set to
//! this priority mapping and `SYSLOG_IDENTIFIER` but not to the rest of what docs/logging.md
//! documents:
//! - its `MESSAGE` is the message alone, so plain `journalctl` would no longer show the fields;
//! - its field names get an `F_` prefix (`journalctl JOB=backup` would find nothing), or with
//!   the prefix off, a field named like a fixed one is sent as a second `PRIORITY` (say) instead
//!   of `FIELD_PRIORITY`; they keep leading digits (journald drops such a field), drop other
//!   characters instead of making them `_`, and have no 64-byte limit;
//! - an entry it cannot send is dropped without a trace, not written to stderr;
//! - its socket path is fixed, so the tests below could not receive its datagrams.
//!
//! Its layer is one unit (the naming and encoding are private), so none of it is used.

use std::fmt::{self, Write as _};
use std::io::Write as _;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// Where journald listens for native-protocol datagrams.
pub(crate) const JOURNAL_SOCKET: &str = "/run/systemd/journal/socket";

/// `SYSLOG_IDENTIFIER` of every entry: what `journalctl -t` selects.
pub(crate) const SYSLOG_IDENTIFIER: &str = "heartbeat-agent";

/// Field names the layer sets itself; event fields with these names get a `FIELD_` prefix.
const RESERVED: [&str; 6] = [
    "MESSAGE",
    "PRIORITY",
    "SYSLOG_IDENTIFIER",
    "TARGET",
    "CODE_FILE",
    "CODE_LINE",
];

/// The journald layer: an unbound datagram socket, the journal socket's path, and where an
/// entry goes when the journal refuses it.
#[derive(Debug)]
pub(crate) struct JournaldLayer<W = fn() -> std::io::Stderr> {
    /// Unbound: journald identifies the sender by its credentials.
    socket: UnixDatagram,
    /// The journal socket (injectable so tests can receive the datagrams).
    path: PathBuf,
    /// Stderr, which the journal also reads (injectable so tests can see the fallback).
    fallback: W,
}

impl JournaldLayer {
    /// A layer writing to the socket at `path`, falling back to stderr; fails if nothing
    /// listens there.
    pub(crate) fn connect(path: &Path) -> std::io::Result<Self> {
        Self::with_fallback(path, std::io::stderr)
    }
}

impl<W> JournaldLayer<W> {
    /// A layer writing to the socket at `path`, and to `fallback` what the socket refuses.
    pub(crate) fn with_fallback(path: &Path, fallback: W) -> std::io::Result<Self> {
        // Connecting once proves a listener exists; entries are sent with `send_to`, so a
        // journald restart (a new socket at the same path) is followed.
        UnixDatagram::unbound()?.connect(path)?;
        Ok(JournaldLayer {
            socket: UnixDatagram::unbound()?,
            path: path.to_path_buf(),
            fallback,
        })
    }
}

/// The fields of a span, kept in its extensions until an event inside it is written.
struct SpanFields(Vec<(String, String)>);

/// Collects fields as `(name, text)`; the message separately.
#[derive(Default)]
struct Fields {
    /// The event's `message`, if any.
    message: Option<String>,
    /// Every other field, in order.
    pairs: Vec<(String, String)>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, value.to_owned());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.push(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.push(field, format!("{value:?}"));
    }
}

impl Fields {
    fn push(&mut self, field: &Field, value: String) {
        if field.name() == "message" {
            self.message = Some(value);
        } else {
            self.pairs.push((field.name().to_owned(), value));
        }
    }
}

impl<S, W> Layer<S> for JournaldLayer<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'a> MakeWriter<'a> + 'static,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanFields(fields.pairs));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        values.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            let mut extensions = span.extensions_mut();
            if let Some(SpanFields(pairs)) = extensions.get_mut::<SpanFields>() {
                pairs.extend(fields.pairs);
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                if let Some(SpanFields(pairs)) = span.extensions().get::<SpanFields>() {
                    fields.pairs.extend(pairs.iter().cloned());
                }
            }
        }
        event.record(&mut fields);
        let entry = Entry::new(event.metadata(), fields);
        if self.socket.send_to(&entry.encode(), &self.path).is_err() {
            let _ = writeln!(self.fallback.make_writer(), "{}", entry.text());
        }
    }
}

/// One journal entry before encoding.
struct Entry {
    /// The event's level.
    level: Level,
    /// The message with the fields appended as `key=value`.
    text: String,
    /// `(JOURNAL_NAME, value)` pairs, the fixed ones first.
    fields: Vec<(String, String)>,
}

impl Entry {
    fn new(meta: &tracing::Metadata<'_>, collected: Fields) -> Self {
        let mut text = collected.message.unwrap_or_default();
        for (name, value) in &collected.pairs {
            let _ = write!(text, " {name}={value}");
        }
        let mut fields = vec![
            ("PRIORITY".to_owned(), priority(meta.level()).to_string()),
            ("SYSLOG_IDENTIFIER".to_owned(), SYSLOG_IDENTIFIER.to_owned()),
            ("TARGET".to_owned(), meta.target().to_owned()),
        ];
        if let Some(file) = meta.file() {
            fields.push(("CODE_FILE".to_owned(), file.to_owned()));
        }
        if let Some(line) = meta.line() {
            fields.push(("CODE_LINE".to_owned(), line.to_string()));
        }
        for (name, value) in collected.pairs {
            if let Some(name) = journal_name(&name) {
                fields.push((name, value));
            }
        }
        Entry {
            level: *meta.level(),
            text,
            fields,
        }
    }

    /// The datagram: `NAME=value\n` per field, or for a value with a newline
    /// `NAME\n<little-endian u64 length><value>\n`.
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256 + self.text.len());
        encode_field(&mut out, "MESSAGE", &self.text);
        for (name, value) in &self.fields {
            encode_field(&mut out, name, value);
        }
        out
    }

    /// The plain-text fallback line.
    fn text(&self) -> String {
        format!("{} {}", self.level, self.text)
    }
}

/// Appends one field in the native protocol's encoding.
fn encode_field(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(name.as_bytes());
    if value.contains('\n') {
        out.push(b'\n');
        out.extend_from_slice(&(value.len() as u64).to_le_bytes());
    } else {
        out.push(b'=');
    }
    out.extend_from_slice(value.as_bytes());
    out.push(b'\n');
}

/// A tracing field name as a journal field name: uppercase letters, digits and `_`, not
/// starting with `_` (reserved for trusted fields) or a digit, at most 64 bytes; clashes with
/// the layer's own fields get a `FIELD_` prefix. `None` if nothing usable remains.
fn journal_name(name: &str) -> Option<String> {
    let upper: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    let trimmed = upper.trim_start_matches(|c: char| c == '_' || c.is_ascii_digit());
    if trimmed.is_empty() {
        return None;
    }
    let mut name = if RESERVED.contains(&trimmed) {
        format!("FIELD_{trimmed}")
    } else {
        trimmed.to_owned()
    };
    name.truncate(64);
    Some(name)
}

/// The syslog priority of a tracing level (3 error, 4 warning, 6 info, 7 debug).
fn priority(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        _ => 7,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logging::tests::Buffer;
    use std::collections::HashMap;
    use std::time::Duration;
    use tracing_subscriber::layer::SubscriberExt;

    /// Decodes one native-protocol datagram into its fields (a name may repeat).
    fn decode(mut data: &[u8]) -> Vec<(String, String)> {
        let mut fields = Vec::new();
        while !data.is_empty() {
            let end = data.iter().position(|&b| b == b'\n').expect("a line end");
            let line = &data[..end];
            if let Some(eq) = line.iter().position(|&b| b == b'=') {
                let name = String::from_utf8(line[..eq].to_vec()).expect("utf-8 name");
                let value = String::from_utf8(line[eq + 1..].to_vec()).expect("utf-8 value");
                fields.push((name, value));
                data = &data[end + 1..];
            } else {
                let name = String::from_utf8(line.to_vec()).expect("utf-8 name");
                let rest = &data[end + 1..];
                let len_bytes: [u8; 8] = rest[..8].try_into().expect("8 length bytes");
                let len = u64::from_le_bytes(len_bytes) as usize;
                let value = String::from_utf8(rest[8..8 + len].to_vec()).expect("utf-8 value");
                assert_eq!(rest[8 + len], b'\n', "binary value ends with a newline");
                fields.push((name, value));
                data = &rest[8 + len + 1..];
            }
        }
        fields
    }

    fn receive(socket: &UnixDatagram) -> HashMap<String, String> {
        let mut buffer = vec![0u8; 65536];
        let n = socket.recv(&mut buffer).expect("a datagram");
        decode(&buffer[..n]).into_iter().collect()
    }

    #[test]
    fn events_become_native_protocol_datagrams() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("journal.sock");
        let socket = UnixDatagram::bind(&path).expect("bind journal socket");
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("read timeout");
        let layer = JournaldLayer::connect(&path).expect("socket listens");
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("run", job = "backup");
            let _entered = span.enter();
            tracing::warn!(check_id = "c-1", exit_code = 3, "job failed");
            tracing::error!(output = "line one\nline two", "job output");
            tracing::info!(priority = "high", "8bad" = 1, "clash");
        });

        let first = receive(&socket);
        assert_eq!(
            first["MESSAGE"],
            "job failed job=backup check_id=c-1 exit_code=3"
        );
        assert_eq!(first["PRIORITY"], "4");
        assert_eq!(first["SYSLOG_IDENTIFIER"], "heartbeat-agent");
        assert_eq!(first["JOB"], "backup");
        assert_eq!(first["CHECK_ID"], "c-1");
        assert_eq!(first["EXIT_CODE"], "3");
        assert_eq!(first["CODE_FILE"], file!());
        assert!(first["TARGET"].ends_with("journald::tests"));

        let second = receive(&socket);
        assert_eq!(second["PRIORITY"], "3");
        assert_eq!(second["OUTPUT"], "line one\nline two");
        assert_eq!(
            second["MESSAGE"],
            "job output job=backup output=line one\nline two"
        );

        let third = receive(&socket);
        assert_eq!(third["PRIORITY"], "6");
        assert_eq!(third["FIELD_PRIORITY"], "high");
        assert_eq!(third["BAD"], "1");
    }

    #[test]
    fn refused_entries_fall_back_to_text() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("journal.sock");
        let socket = UnixDatagram::bind(&path).expect("bind journal socket");
        let fallback = Buffer::default();
        let layer = JournaldLayer::with_fallback(&path, fallback.clone()).expect("listens");
        // journald goes away after start-up.
        drop(socket);
        std::fs::remove_file(&path).expect("remove socket");
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(job = "backup", "job failed");
        });
        let text = String::from_utf8(fallback.0.lock().expect("lock").clone()).expect("utf-8");
        assert_eq!(text, "WARN job failed job=backup\n");
    }

    #[test]
    fn connect_fails_without_a_listener() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(JournaldLayer::connect(&dir.path().join("none.sock")).is_err());
    }

    #[test]
    fn field_names_follow_journal_rules() {
        assert_eq!(journal_name("check_id").as_deref(), Some("CHECK_ID"));
        assert_eq!(journal_name("log.target").as_deref(), Some("LOG_TARGET"));
        assert_eq!(journal_name("_pid").as_deref(), Some("PID"));
        assert_eq!(journal_name("message").as_deref(), Some("FIELD_MESSAGE"));
        assert_eq!(journal_name("__"), None);
        assert_eq!(journal_name(&"x".repeat(100)).map(|n| n.len()), Some(64));
    }

    #[test]
    fn newline_values_use_the_length_prefixed_form() {
        let mut out = Vec::new();
        encode_field(&mut out, "A", "one");
        encode_field(&mut out, "B", "x\ny");
        let mut expected = b"A=one\nB\n".to_vec();
        expected.extend_from_slice(&3u64.to_le_bytes());
        expected.extend_from_slice(b"x\ny\n");
        assert_eq!(out, expected);
    }
}
