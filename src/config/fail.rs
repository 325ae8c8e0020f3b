//! Stage two for how a job's fail ping is sent, besides its URL and body: `fail_method` and
//! `fail_headers`. A header's value is a string, `{ file = "PATH" }` (one line, read like a key
//! file) or `{ env = "VAR" }`, read when the config is loaded and held as a [`Secret`] from
//! then on (never in a message); the variables named are taken out of the jobs' environment
//! ([`super::Config::secret_env_vars`]). A command that sends no fail ping loads the config
//! without reading them ([`super::Config::load_for_reading`]).

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;

use super::values::{At, Checker};
use super::{FailHeader, FailMethod};
use crate::redact::Secret;

/// Headers the agent writes itself: set by a user they would break the request or lie about
/// its body.
const OWN_HEADERS: [&str; 6] = [
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "origin",
];

/// `fail_method`: `GET`, `POST` or `PUT` (any case); `Err(())` when it is invalid (reported).
/// A `GET` cannot carry the body `fail_body` asks for.
pub(super) fn method(
    check: &mut Checker,
    at: At<'_>,
    raw: &Option<Spanned<String>>,
    with_body: bool,
) -> Result<Option<FailMethod>, ()> {
    let Some(value) = raw else {
        return Ok(None);
    };
    let method = match value.get_ref().trim().to_ascii_uppercase().as_str() {
        "GET" => FailMethod::Get,
        "POST" => FailMethod::Post,
        "PUT" => FailMethod::Put,
        _ => {
            let message = format!(
                "unknown fail_method \"{}\": expected \"GET\", \"POST\" or \"PUT\"",
                value.get_ref().escape_debug()
            );
            let hint = "a webhook usually takes \"POST\"".to_owned();
            check.error(Some(value.span()), at, message, Some(hint));
            return Err(());
        }
    };
    if method == FailMethod::Get && with_body {
        let hint = "use \"POST\" or \"PUT\", or remove fail_body".to_owned();
        check.error(
            Some(value.span()),
            at,
            "fail_method \"GET\" cannot carry the body fail_body asks for",
            Some(hint),
        );
        return Err(());
    }
    Ok(Some(method))
}

/// `fail_headers`; `Err(())` when one is invalid (each problem reported).
pub(super) fn headers(
    check: &mut Checker,
    context: &str,
    raw: &Option<BTreeMap<String, Spanned<toml::Value>>>,
) -> Result<Vec<FailHeader>, ()> {
    let mut headers = Vec::new();
    let mut valid = true;
    for (name, value) in raw.iter().flatten() {
        let key = format!("fail_headers.{name}");
        let at = At { context, key: &key };
        match header(check, at, name, value) {
            Some(header) => headers.push(header),
            None => valid = false,
        }
    }
    if valid {
        Ok(headers)
    } else {
        Err(())
    }
}

/// One header, its value read; `None` when it is invalid (reported).
fn header(
    check: &mut Checker,
    at: At<'_>,
    name: &str,
    value: &Spanned<toml::Value>,
) -> Option<FailHeader> {
    let span = Some(value.span());
    if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
        let message = format!(
            "\"{}\" is not a valid HTTP header name",
            name.escape_debug()
        );
        let hint = "a header name is letters, digits and !#$%&'*+-.^_`|~, such as \
                    \"Authorization\" or \"X-Hook-Token\""
            .to_owned();
        check.error(span, at, message, Some(hint));
        return None;
    }
    if OWN_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
        let message = format!("the agent sets the {name} header of a ping itself");
        let hint = "remove it; fail_body decides Content-Type".to_owned();
        check.error(span, at, message, Some(hint));
        return None;
    }
    let (text, env) = source(check, at, value)?;
    if reqwest::header::HeaderValue::from_str(&text).is_err() {
        // Never the value: it is a secret.
        check.error(
            span,
            at,
            "the header's value holds a character a header cannot carry (a control character \
             or a line break)",
            Some("write the value on one line of printable characters".to_owned()),
        );
        return None;
    }
    Some(FailHeader {
        name: name.to_owned(),
        value: Secret::new(text),
        env,
    })
}

/// The value of a header and the variable it came from: a string, `{ file = "PATH" }` or
/// `{ env = "VAR" }`.
fn source(
    check: &mut Checker,
    at: At<'_>,
    value: &Spanned<toml::Value>,
) -> Option<(String, Option<String>)> {
    let span = value.span();
    let table = match value.get_ref() {
        toml::Value::String(text) => return Some((text.trim().to_owned(), None)),
        toml::Value::Table(table) => table,
        _ => return refused(check, at, span),
    };
    let one = |key: &str| table.get(key).and_then(toml::Value::as_str);
    match (one("file"), one("env"), table.len()) {
        // Not read for a command that sends no fail ping; the variable is still named, so
        // the jobs' environment leaves it out.
        (Some(_), None, 1) if !check.read_header_secrets => Some((String::new(), None)),
        (None, Some(var), 1) if !check.read_header_secrets => {
            Some((String::new(), Some(var.trim().to_owned())))
        }
        (Some(path), None, 1) => {
            let path = check.resolve(std::path::Path::new(path.trim()));
            match super::secrets::read_secret_line(&path) {
                Ok(text) => {
                    let fix = "chmod 600 it: it holds a header's secret";
                    if let Some(warning) =
                        super::secrets::exposed_warning("fail header file", &path, fix)
                    {
                        check.warn(Some(span), at, warning, None);
                    }
                    Some((text, None))
                }
                Err(reason) => {
                    let message = format!("cannot use {}: {reason}", path.display());
                    let hint = "write the header's value into that file, one line".to_owned();
                    check.error(Some(span), at, message, Some(hint));
                    None
                }
            }
        }
        (None, Some(var), 1) => {
            let var = var.trim();
            match std::env::var(var).ok().filter(|v| !v.trim().is_empty()) {
                Some(text) => Some((text.trim().to_owned(), Some(var.to_owned()))),
                None => {
                    let message = format!("names ${var}, which is not set (or empty)");
                    let hint =
                        format!("export {var} where the agent runs, or use {{ file = \"PATH\" }}");
                    check.error(Some(span), at, message, Some(hint));
                    None
                }
            }
        }
        _ => refused(check, at, span),
    }
}

/// Reports a value that is neither a string, a file nor an environment reference.
fn refused<T>(check: &mut Checker, at: At<'_>, span: Range<usize>) -> Option<T> {
    check.error(
        Some(span),
        at,
        "a fail_headers value is a string, { file = \"PATH\" } or { env = \"VAR\" }",
        Some("for example: fail_headers = { Authorization = { env = \"HOOK_TOKEN\" } }".to_owned()),
    );
    None
}
