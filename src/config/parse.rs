//! Stage one: TOML text to the `Raw*` structs, collecting every problem.
//!
//! The text is parsed once into a span-keeping `toml_edit` document. Each section (`[agent]`,
//! `[api]`, `[defaults]`, each `[[jobs]]` table and its `[jobs.watch]`) is then deserialized on
//! its own, so one bad section does not hide the others: unknown keys are found first (with the
//! closest known key as a suggestion), then a key whose value has the wrong type is reported
//! and dropped, and the section is deserialized again without it.

use std::collections::BTreeSet;
use std::fmt;
use std::ops::Range;

use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use toml_edit::{ImDocument, Item, Value};

use super::cluster::RawCluster;
use super::problem::{closest, Problem};
use super::raw::{self, keys_of, RawAgent, RawApi, RawCheck, RawJob, RawSettings, RawWatch};
use super::status::RawStatus;

/// The file after stage one: every section that could be read, with what was dropped.
#[derive(Debug, Default)]
pub(crate) struct RawFile {
    /// `[agent]`.
    pub agent: Section<RawAgent>,
    /// `[api]`.
    pub api: Section<RawApi>,
    /// `[defaults]`.
    pub defaults: Section<RawSettings>,
    /// `[[jobs]]`, in file order.
    pub jobs: Vec<RawJobEntry>,
    /// `[status]`.
    pub status: Section<RawStatus>,
    /// `[cluster]`, when the file has one.
    pub cluster: Option<Section<RawCluster>>,
}

/// One section, deserialized.
#[derive(Debug, Default)]
pub(crate) struct Section<T> {
    /// The values that could be read.
    pub raw: T,
    /// Where the section starts (its header or inline table).
    pub span: Option<Range<usize>>,
    /// Keys already reported as broken: stage two must not call them missing.
    pub broken: BTreeSet<String>,
    /// Every key present (known ones), with where it is written.
    pub keys: Vec<(String, Option<Range<usize>>)>,
}

/// One `[[jobs]]` table, split into the job's own keys, its settings and its watch.
#[derive(Debug, Default)]
pub(crate) struct RawJobEntry {
    /// `job "name"` (or `job #N` when the name is missing), for messages.
    pub context: String,
    /// The job's own keys (name, schedule, what it does, where it pings).
    pub job: Section<RawJob>,
    /// The keys that override `[defaults]`.
    pub settings: Section<RawSettings>,
    /// `[jobs.watch]`, when present.
    pub watch: Option<Section<RawWatch>>,
    /// `[jobs.check]`, when present.
    pub check: Option<Section<RawCheck>>,
}

/// One key of a table as written.
#[derive(Clone)]
struct Entry<'a> {
    name: String,
    key_span: Option<Range<usize>>,
    item: &'a Item,
}

/// Parses `text`; syntax errors stop here (the TOML parser cannot go on), anything else is
/// collected and the rest of the file is still read.
pub(crate) fn parse(text: &str) -> (Option<RawFile>, Vec<Problem>) {
    let doc = match ImDocument::parse(text) {
        Ok(doc) => doc,
        Err(err) => {
            let lines: Vec<&str> = err
                .message()
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            let message = if lines.is_empty() {
                "a value is missing here".to_owned()
            } else {
                lines.join(", ")
            };
            let problem = Problem::new(err.span(), "", format!("invalid TOML: {message}"))
                .hint("fix the TOML syntax at this place (strings need quotes, tables [brackets])");
            return (None, vec![problem]);
        }
    };
    let mut problems = Vec::new();
    let mut file = RawFile::default();
    const SECTIONS: [&str; 6] = ["agent", "api", "cluster", "defaults", "jobs", "status"];
    for entry in table_entries(doc.as_item()).unwrap_or_default() {
        match entry.name.as_str() {
            "agent" => file.agent = top_section(&entry, &mut problems),
            "api" => file.api = top_section(&entry, &mut problems),
            "defaults" => file.defaults = top_section(&entry, &mut problems),
            "jobs" => file.jobs = jobs(&entry, &mut problems),
            "status" => file.status = top_section(&entry, &mut problems),
            "cluster" => file.cluster = Some(top_section(&entry, &mut problems)),
            other => problems.push(unknown_key(entry.key_span.clone(), "", other, &SECTIONS)),
        }
    }
    (Some(file), problems)
}

/// The `[[jobs]]` array.
fn jobs(entry: &Entry<'_>, problems: &mut Vec<Problem>) -> Vec<RawJobEntry> {
    let tables: Vec<Option<TableRef<'_>>> = match entry.item {
        Item::ArrayOfTables(array) => array.iter().map(|t| Some(TableRef::Table(t))).collect(),
        Item::Value(Value::Array(array)) => array.iter().map(TableRef::from_value).collect(),
        other => {
            problems.push(
                Problem::new(
                    other.span().or(entry.key_span.clone()),
                    "",
                    "expected an array of job tables",
                )
                .key("jobs")
                .hint("start each job with [[jobs]] (two brackets)"),
            );
            return Vec::new();
        }
    };
    tables
        .into_iter()
        .enumerate()
        .filter_map(|(index, table)| match table {
            Some(table) => Some(job(index + 1, table, problems)),
            None => {
                let context = format!("job #{}", index + 1);
                problems.push(
                    Problem::new(entry.item.span(), context, "expected a table")
                        .key("jobs")
                        .hint("start each job with [[jobs]] followed by its keys"),
                );
                None
            }
        })
        .collect()
}

/// One `[[jobs]]` table.
fn job(number: usize, table: TableRef<'_>, problems: &mut Vec<Problem>) -> RawJobEntry {
    let context = match table.get_str("name") {
        Some(name) => format!("job {name:?}"),
        None => format!("job #{number}"),
    };
    let entries = table.entries();
    let job_keys = keys_of::<RawJob>();
    let setting_keys = keys_of::<RawSettings>();
    let (mut own, mut settings, mut watch, mut check) = (Vec::new(), Vec::new(), None, None);
    // Keys an unknown key was probably meant to be: not also reported as missing.
    let mut suggested = BTreeSet::new();
    for entry in entries {
        let name = entry.name.as_str();
        if job_keys.contains(&name) {
            own.push(entry);
        } else if setting_keys.contains(&name) {
            settings.push(entry);
        } else if name == "watch" {
            watch = Some(entry);
        } else if name == "check" {
            check = Some(entry);
        } else {
            let known = job_keys
                .iter()
                .chain(setting_keys)
                .copied()
                .chain(["watch", "check"]);
            let known: Vec<&str> = known.collect();
            suggested.extend(closest(name, known.iter().copied()).map(str::to_owned));
            let mut problem = unknown_key(entry.key_span.clone(), &context, name, &known);
            if keys_of::<RawWatch>().contains(&name) {
                problem = problem.hint(format!(
                    "`{name}` belongs in the job's [jobs.watch] table, next to `kind`"
                ));
            }
            problems.push(problem);
        }
    }
    let span = table.span();
    let mut job: Section<RawJob> = deserialize_entries(own, span.clone(), &context, "", problems);
    job.broken.extend(suggested);
    let settings = deserialize_entries(settings, span, &context, "", problems);
    let watch = watch.and_then(|entry| section(&entry, &context, "watch.", problems));
    let check = check.and_then(|entry| section(&entry, &context, "check.", problems));
    RawJobEntry {
        context,
        job,
        settings,
        watch,
        check,
    }
}

/// A top-level section (`[agent]`, `[api]`, `[defaults]`); empty when it is not a table.
fn top_section<T: DeserializeOwned + Default>(
    entry: &Entry<'_>,
    problems: &mut Vec<Problem>,
) -> Section<T> {
    let context = format!("[{}]", entry.name);
    section(entry, &context, "", problems).unwrap_or_default()
}

/// A table-valued key (`[agent]`, `watch`), deserialized as `T` after its unknown keys are
/// reported and removed; `None` (reported) when it is not a table.
fn section<T: DeserializeOwned + Default>(
    entry: &Entry<'_>,
    context: &str,
    prefix: &str,
    problems: &mut Vec<Problem>,
) -> Option<Section<T>> {
    let span = entry.item.span().or(entry.key_span.clone());
    let Some(entries) = table_entries(entry.item) else {
        let header = if prefix.is_empty() {
            entry.name.clone()
        } else {
            format!("jobs.{}", entry.name)
        };
        problems.push(
            Problem::new(span, context, "expected a table")
                .key(&entry.name)
                .hint(format!(
                    "write it as a [{header}] table with its keys under it"
                )),
        );
        return None;
    };
    let known = keys_of::<T>();
    let (known_entries, unknown): (Vec<_>, Vec<_>) = entries
        .into_iter()
        .partition(|e| known.contains(&e.name.as_str()));
    let mut suggested = BTreeSet::new();
    for entry in unknown {
        let key = format!("{prefix}{}", entry.name);
        suggested.extend(closest(&entry.name, known.iter().copied()).map(str::to_owned));
        problems.push(unknown_key(entry.key_span, context, &key, known));
    }
    let mut section = deserialize_entries(known_entries, span, context, prefix, problems);
    // A key an unknown key was probably meant to be is not also reported as missing.
    section.broken.extend(suggested);
    Some(section)
}

/// Deserializes known `entries` as `T`; a key whose value does not fit is reported, dropped,
/// and the rest deserialized again, so every such key is reported.
fn deserialize_entries<T: DeserializeOwned + Default>(
    mut entries: Vec<Entry<'_>>,
    span: Option<Range<usize>>,
    context: &str,
    prefix: &str,
    problems: &mut Vec<Problem>,
) -> Section<T> {
    let keys = entries
        .iter()
        .map(|e| (e.name.clone(), e.key_span.clone()))
        .collect();
    let mut broken = BTreeSet::new();
    // Each failed round drops one key, so this ends.
    loop {
        let section = TableDeserializer {
            entries: entries.clone(),
            span: span.clone(),
        };
        match T::deserialize(section) {
            Ok(raw) => {
                return Section {
                    raw,
                    span,
                    broken,
                    keys,
                }
            }
            Err(err) => {
                let top = err.path.first().cloned().unwrap_or_default();
                let key = format!("{prefix}{}", err.path.join("."));
                let message = plain_types(&err.message);
                let mut problem =
                    Problem::new(err.span.or(span.clone()), context, message).key(key);
                if let Some(example) = raw::example(&top) {
                    problem = problem.hint(format!("for example: {example}"));
                }
                problems.push(problem);
                let before = entries.len();
                entries.retain(|e| e.name != top);
                if entries.len() == before {
                    return Section {
                        raw: T::default(),
                        span,
                        broken,
                        keys,
                    };
                }
                broken.insert(top);
            }
        }
    }
}

/// serde's names for expected types, in TOML's words.
fn plain_types(message: &str) -> String {
    [
        ("expected f64", "expected a number"),
        ("expected i64", "expected an integer"),
        ("expected a sequence", "expected an array"),
        ("expected a map", "expected a table"),
        ("invalid type: map", "invalid type: table"),
        ("invalid type: sequence", "invalid type: array"),
    ]
    .iter()
    .fold(message.to_owned(), |text, (serde, toml)| {
        text.replace(serde, toml)
    })
}

/// An unknown key, with the closest known one as a suggestion.
fn unknown_key(span: Option<Range<usize>>, context: &str, key: &str, known: &[&str]) -> Problem {
    let leaf = key.rsplit('.').next().unwrap_or(key);
    let problem = Problem::new(span, context, "unknown key").key(key);
    match closest(leaf, known.iter().copied()) {
        Some(suggestion) => problem.hint(format!("did you mean `{suggestion}`?")),
        None => problem.hint(format!("known keys here: {}", known.join(", "))),
    }
}

/// The keys of a table item (a `[table]`, a dotted-key table, or an inline table).
fn table_entries(item: &Item) -> Option<Vec<Entry<'_>>> {
    TableRef::from_item(item).map(|t| t.entries())
}

/// A table however it was written: `[header]`/dotted keys, or `{ inline }`.
#[derive(Clone, Copy)]
enum TableRef<'a> {
    Table(&'a toml_edit::Table),
    Inline(&'a toml_edit::InlineTable),
}

impl<'a> TableRef<'a> {
    fn from_item(item: &'a Item) -> Option<Self> {
        match item {
            Item::Table(table) => Some(TableRef::Table(table)),
            Item::Value(value) => Self::from_value(value),
            _ => None,
        }
    }

    fn from_value(value: &'a Value) -> Option<Self> {
        match value {
            Value::InlineTable(table) => Some(TableRef::Inline(table)),
            _ => None,
        }
    }

    fn span(self) -> Option<Range<usize>> {
        match self {
            TableRef::Table(t) => t.span(),
            TableRef::Inline(t) => t.span(),
        }
    }

    fn get_str(self, key: &str) -> Option<&'a str> {
        match self {
            TableRef::Table(t) => t.get(key).and_then(Item::as_str),
            TableRef::Inline(t) => t.get(key).and_then(Value::as_str),
        }
    }

    fn entries(self) -> Vec<Entry<'a>> {
        let pairs: Vec<(&toml_edit::Key, &Item)> = match self {
            TableRef::Table(t) => t.iter().filter_map(|(k, _)| t.get_key_value(k)).collect(),
            TableRef::Inline(t) => t.iter().filter_map(|(k, _)| t.get_key_value(k)).collect(),
        };
        pairs
            .into_iter()
            .map(|(key, item)| Entry {
                name: key.get().to_owned(),
                key_span: key.span(),
                item,
            })
            .collect()
    }
}

/// A deserialization problem, with the key path it is under and where it is.
#[derive(Debug)]
struct SectionError {
    message: String,
    span: Option<Range<usize>>,
    path: Vec<String>,
}

impl SectionError {
    /// The error as seen from the table holding `key`.
    fn within(mut self, key: &str, span: Option<Range<usize>>) -> Self {
        self.path.insert(0, key.to_owned());
        if self.span.is_none() {
            self.span = span;
        }
        self
    }
}

impl fmt::Display for SectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SectionError {}

impl de::Error for SectionError {
    fn custom<M: fmt::Display>(msg: M) -> Self {
        SectionError {
            message: msg.to_string(),
            span: None,
            path: Vec::new(),
        }
    }
}

impl From<toml_edit::de::Error> for SectionError {
    fn from(err: toml_edit::de::Error) -> Self {
        SectionError {
            message: err.message().to_owned(),
            span: err.span(),
            path: Vec::new(),
        }
    }
}

/// Presents a list of entries (a section, or a sub-table such as `[jobs.env]`) to serde as a
/// map, deserializing each value with `toml_edit`, which keeps the spans of the original file.
struct TableDeserializer<'a> {
    entries: Vec<Entry<'a>>,
    span: Option<Range<usize>>,
}

impl<'de> de::Deserializer<'de> for TableDeserializer<'_> {
    type Error = SectionError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, SectionError> {
        let span = self.span.clone();
        let map = TableMap {
            entries: self.entries.into_iter(),
            pending: None,
        };
        visitor.visit_map(map).map_err(|mut err| {
            if err.span.is_none() {
                err.span = span;
            }
            err
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, SectionError> {
        // `toml::Spanned<T>` asks for this struct name; a sub-table has no single span to give.
        if name == "$__serde_spanned_private_Spanned" {
            return Err(SectionError {
                message: "invalid type: table, expected a value".to_owned(),
                span: self.span,
                path: Vec::new(),
            });
        }
        self.deserialize_any(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, SectionError> {
        visitor.visit_some(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// The map access behind [`TableDeserializer`].
struct TableMap<'a> {
    entries: std::vec::IntoIter<Entry<'a>>,
    pending: Option<Entry<'a>>,
}

impl<'de> MapAccess<'de> for TableMap<'_> {
    type Error = SectionError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, SectionError> {
        let Some(entry) = self.entries.next() else {
            return Ok(None);
        };
        let key = seed.deserialize(entry.name.clone().into_deserializer());
        self.pending = Some(entry);
        key.map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, SectionError> {
        let entry = self.pending.take().ok_or_else(|| {
            <SectionError as de::Error>::custom("a value was asked for before its key")
        })?;
        let result = match entry.item {
            Item::Value(value) => seed
                .deserialize(value.clone().into_deserializer())
                .map_err(SectionError::from),
            Item::Table(_) => match table_entries(entry.item) {
                Some(entries) => seed.deserialize(TableDeserializer {
                    entries,
                    span: entry.item.span(),
                }),
                None => Err(de::Error::custom("invalid type: table, expected a value")),
            },
            _ => Err(de::Error::custom(
                "invalid type: array of tables, expected a value",
            )),
        };
        result.map_err(|err| err.within(&entry.name, entry.item.span().or(entry.key_span.clone())))
    }
}
