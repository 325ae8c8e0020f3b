//! Checking single values of stage one (durations, zones, URLs, paths, sizes) and recording
//! what is wrong with them. Used by `validate` for every section.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use crate::schedule::Zone;
use toml::Spanned;

use crate::duration;

use super::problem::{closest, Problem};
use super::raw::{example, RawDuration, RawSize};
use super::{size, Amount, FailUrl, PingUrl, UrlProblem};

/// Collects errors and warnings while values are checked.
pub(crate) struct Checker {
    /// The config file's directory: relative paths in the file are relative to it.
    pub base_dir: PathBuf,
    /// Whether the agent runs as root (`user`/`group` apply only then).
    pub is_root: bool,
    /// Problems that make the file invalid.
    pub errors: Vec<Problem>,
    /// Problems worth telling but not fatal.
    pub warnings: Vec<Problem>,
    /// Whether the `fail_headers` values from a file or a variable are read (false for a
    /// command that sends no fail ping: see [`super::Config::load_for_reading`]).
    pub read_header_secrets: bool,
}

/// Where a value is: the section's name for messages and the key as written.
#[derive(Clone, Copy)]
pub(crate) struct At<'a> {
    /// `[agent]`, `job "backup"`, ...
    pub context: &'a str,
    /// `timeout`, `watch.timeout`, ...
    pub key: &'a str,
}

impl Checker {
    /// Records an error about `at`, with `example(key)` as the hint when none is given.
    pub(crate) fn error(
        &mut self,
        span: Option<Range<usize>>,
        at: At<'_>,
        message: impl Into<String>,
        hint: Option<String>,
    ) {
        self.errors.push(problem(span, at, message, hint));
    }

    /// Records a warning about `at`.
    pub(crate) fn warn(
        &mut self,
        span: Option<Range<usize>>,
        at: At<'_>,
        message: impl Into<String>,
        hint: Option<String>,
    ) {
        self.warnings.push(problem(span, at, message, hint));
    }

    /// A duration with a unit; a bare number is an error suggesting the unit.
    pub(crate) fn duration(
        &mut self,
        at: At<'_>,
        value: &Option<Spanned<RawDuration>>,
    ) -> Option<Duration> {
        let value = value.as_ref()?;
        let (text, hint) = match value.get_ref() {
            RawDuration::Text(text) => {
                (text.as_str(), "use a number with a unit (ms, s, m, h or d)")
            }
            RawDuration::Number(number) => {
                (number.as_str(), "durations are quoted strings with a unit")
            }
        };
        match duration::parse(text) {
            Ok(parsed) => Some(parsed),
            Err(message) => {
                let hint = format!(
                    "{hint}, for example: {}",
                    example(leaf(at.key)).unwrap_or("timeout = \"30s\"")
                );
                self.error(Some(value.span()), at, message, Some(hint));
                None
            }
        }
    }

    /// A number of bytes: `"10KiB"` or a bare integer.
    pub(crate) fn bytes(&mut self, at: At<'_>, value: &Option<Spanned<RawSize>>) -> Option<u64> {
        let value = value.as_ref()?;
        let parsed = match value.get_ref() {
            RawSize::Text(text) => size::parse_bytes(text),
            RawSize::Bytes(n) => u64::try_from(*n).map_err(|_| format!("size {n} is negative")),
        };
        self.size_result(at, value.span(), parsed)
    }

    /// Bytes or a percentage: `"10GiB"`, `"15%"` or a bare integer.
    pub(crate) fn amount(
        &mut self,
        at: At<'_>,
        value: &Option<Spanned<RawSize>>,
    ) -> Option<Amount> {
        let value = value.as_ref()?;
        let parsed = match value.get_ref() {
            RawSize::Text(text) => size::parse_amount(text),
            RawSize::Bytes(n) => u64::try_from(*n)
                .map(Amount::Bytes)
                .map_err(|_| format!("size {n} is negative")),
        };
        self.size_result(at, value.span(), parsed)
    }

    fn size_result<T>(
        &mut self,
        at: At<'_>,
        span: Range<usize>,
        parsed: Result<T, String>,
    ) -> Option<T> {
        parsed
            .map_err(|message| {
                let hint = example(leaf(at.key)).map(|e| format!("for example: {e}"));
                self.error(Some(span), at, message, hint);
            })
            .ok()
    }

    /// An IANA time zone name; an unknown one gets the closest known name as a suggestion.
    pub(crate) fn timezone(&mut self, at: At<'_>, value: &Option<Spanned<String>>) -> Option<Zone> {
        let value = value.as_ref()?;
        let name = value.get_ref().trim();
        if let Ok(tz) = Zone::from_str(name) {
            return Some(tz);
        }
        let names = Zone::names();
        let hint = match closest(name, names.iter().map(String::as_str)) {
            Some(suggestion) => format!("did you mean \"{suggestion}\"?"),
            None => "use an IANA name such as \"Europe/Berlin\", \"America/New_York\" or \"UTC\""
                .to_owned(),
        };
        self.error(
            Some(value.span()),
            at,
            format!("unknown time zone \"{name}\""),
            Some(hint),
        );
        None
    }

    /// An http or https URL with a host. When `secret`, the URL is never part of a message.
    pub(crate) fn http_url(
        &mut self,
        at: At<'_>,
        value: &Option<Spanned<String>>,
        secret: bool,
    ) -> Option<String> {
        let text = value.as_ref()?.get_ref().trim().to_owned();
        self.url(at, value, secret).map(|_| text)
    }

    /// [`Checker::http_url`], parsed: a ping URL, which is a secret.
    pub(crate) fn url(
        &mut self,
        at: At<'_>,
        value: &Option<Spanned<String>>,
        secret: bool,
    ) -> Option<PingUrl> {
        let value = value.as_ref()?;
        let text = value.get_ref().trim();
        let shown = if secret {
            String::new()
        } else {
            format!(" \"{text}\"")
        };
        PingUrl::parse(text)
            .map_err(|problem| self.url_problem(at, value.span(), &shown, problem))
            .ok()
    }

    /// A `ping_url` or `start_url`: a secret ping URL that may hold the `{run_id}`
    /// placeholder.
    pub(crate) fn url_template(
        &mut self,
        at: At<'_>,
        value: &Option<Spanned<String>>,
    ) -> Option<PingUrl> {
        self.secret_url(at, value, PingUrl::template)
    }

    /// A `fail_url`: a secret ping URL that may hold the `{exit_code}` and `{run_id}`
    /// placeholders.
    pub(crate) fn fail_url(
        &mut self,
        at: At<'_>,
        value: &Option<Spanned<String>>,
    ) -> Option<FailUrl> {
        self.secret_url(at, value, FailUrl::parse)
    }

    /// A secret URL that may hold placeholders, checked by `parse`.
    fn secret_url<T>(
        &mut self,
        at: At<'_>,
        value: &Option<Spanned<String>>,
        parse: fn(&str) -> Result<T, UrlProblem>,
    ) -> Option<T> {
        let value = value.as_ref()?;
        parse(value.get_ref().trim())
            .map_err(|problem| self.url_problem(at, value.span(), "", problem))
            .ok()
    }

    fn url_problem(&mut self, at: At<'_>, span: Range<usize>, shown: &str, problem: UrlProblem) {
        let message = match problem {
            UrlProblem::Scheme(scheme) => {
                format!("URL{shown} has scheme \"{scheme}\"; expected http or https")
            }
            UrlProblem::NoHost => format!("URL{shown} has no host"),
            UrlProblem::Malformed(reason) => format!("not a valid URL{shown}: {reason}"),
            UrlProblem::Placeholder(found) => {
                let hint = if leaf(at.key) == "fail_url" {
                    format!(
                        "the placeholders are {}, filled in with the run's exit status, and {}, \
                         the run's id",
                        FailUrl::PLACEHOLDER,
                        PingUrl::RUN_ID
                    )
                } else {
                    format!(
                        "the only placeholder here is {}, filled in with the run's id \
                         ({} is only for fail_url)",
                        PingUrl::RUN_ID,
                        FailUrl::PLACEHOLDER
                    )
                };
                let message = format!("unknown placeholder \"{found}\" in the URL");
                self.error(Some(span), at, message, Some(hint));
                return;
            }
            UrlProblem::PlaceholderPart(placeholder, part) => {
                let value = if placeholder == FailUrl::PLACEHOLDER {
                    "the exit status"
                } else {
                    "the run's id"
                };
                let message = format!(
                    "{placeholder} is in the URL's {part}: filled in, {value} would send the ping \
                     elsewhere"
                );
                let example = if placeholder == FailUrl::PLACEHOLDER {
                    format!("https://hc-ping.com/UUID/{placeholder}")
                } else {
                    format!("https://hc-ping.com/UUID?rid={placeholder}")
                };
                let hint = format!(
                    "put {placeholder} in the URL's path or query only, for example: {example}"
                );
                self.error(Some(span), at, message, Some(hint));
                return;
            }
        };
        let hint = example(leaf(at.key)).map(|e| format!("write a full URL, for example: {e}"));
        self.error(Some(span), at, message, hint);
    }

    /// A string that must not be empty (after trimming).
    pub(crate) fn non_empty(
        &mut self,
        at: At<'_>,
        value: &Option<Spanned<String>>,
    ) -> Option<String> {
        let value = value.as_ref()?;
        let text = value.get_ref().trim();
        if text.is_empty() {
            let hint = example(leaf(at.key)).map(|e| format!("for example: {e}"));
            self.error(Some(value.span()), at, "must not be empty", hint);
            return None;
        }
        Some(text.to_owned())
    }

    /// A path; relative ones are taken relative to the config file's directory.
    pub(crate) fn path(&mut self, at: At<'_>, value: &Option<Spanned<String>>) -> Option<PathBuf> {
        self.non_empty(at, value)
            .map(|p| self.resolve(Path::new(&p)))
    }

    /// `path` made absolute against the config file's directory.
    pub(crate) fn resolve(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_owned()
        } else {
            self.base_dir.join(path)
        }
    }

    /// A percentage from 0 to 100.
    pub(crate) fn percent(&mut self, at: At<'_>, value: &Option<Spanned<f64>>) -> Option<f64> {
        let value = value.as_ref()?;
        let percent = *value.get_ref();
        if (0.0..=100.0).contains(&percent) {
            return Some(percent);
        }
        self.error(
            Some(value.span()),
            at,
            format!("{percent} is out of range: expected 0 to 100"),
            example(leaf(at.key)).map(|e| format!("for example: {e}")),
        );
        None
    }
}

fn problem(
    span: Option<Range<usize>>,
    at: At<'_>,
    message: impl Into<String>,
    hint: Option<String>,
) -> Problem {
    let mut problem = Problem::new(span, at.context, message);
    if !at.key.is_empty() {
        problem = problem.key(at.key);
    }
    match hint {
        Some(hint) => problem.hint(hint),
        None => problem,
    }
}

/// The last part of a dotted key (`watch.timeout` -> `timeout`).
pub(crate) fn leaf(key: &str) -> &str {
    key.rsplit('.').next().unwrap_or(key)
}
