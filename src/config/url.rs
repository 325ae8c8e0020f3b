//! The URLs a job pings, checked once when the configuration is read: [`PingUrl`] (`ping_url`,
//! `start_url`, `run --ping-url`) and [`FailUrl`] (`fail_url`, with its `{exit_code}`), their
//! placeholders, and why a text is refused ([`UrlProblem`]).
//!
//! Its own file because it is one rule shared by the config, `run`'s flags and the ping: an
//! http(s) URL with a host, placeholders only in the path or query, and every URL and token
//! remembered as a secret the moment it is parsed.

/// A ping URL checked when the config was loaded: absolute, `http` or `https`, with a host.
/// A secret (its path carries the token): `Debug` shows it redacted, and only
/// [`PingUrl::as_str`] gives the URL itself, for sending and for keying state.
#[derive(Clone, PartialEq, Eq)]
pub struct PingUrl(reqwest::Url);

impl PingUrl {
    /// The placeholder of the run's id (a UUID), in `ping_url`, `start_url` and `fail_url`:
    /// the ping of each run fills it in (`Ping::for_run`).
    pub const RUN_ID: &'static str = "{run_id}";

    /// Parses `text` as a ping URL; the error never repeats the text. A ping URL is a secret
    /// from then on: [`crate::redact::scrub`] removes it (and its token) from any text.
    pub(crate) fn parse(text: &str) -> Result<PingUrl, UrlProblem> {
        let url = parse_url(text)?;
        crate::redact::remember_url(text);
        crate::redact::remember_url(url.as_str());
        Ok(PingUrl(url))
    }

    /// [`PingUrl::parse`] for a URL of the config (`ping_url`, `start_url`) or of `run`'s
    /// flags, which may hold [`PingUrl::RUN_ID`] in its path or query (any other `{...}` is
    /// refused). The token learned as a secret is the last path segment without it.
    pub(crate) fn template(text: &str) -> Result<PingUrl, UrlProblem> {
        let rest = placeholders(text, &[Self::RUN_ID])?;
        let url = parse_url(text)?;
        crate::redact::remember(text);
        crate::redact::remember_url(&rest);
        crate::redact::remember(url.as_str());
        Ok(PingUrl(url))
    }

    /// The URL itself: a secret, only for sending and for keying state (outbox, locks).
    pub(crate) fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The parsed URL.
    pub(crate) fn url(&self) -> &reqwest::Url {
        &self.0
    }
}

/// `text` parsed as an http(s) URL with a host (the error never repeats the text).
fn parse_url(text: &str) -> Result<reqwest::Url, UrlProblem> {
    match reqwest::Url::parse(text) {
        Ok(url) if !matches!(url.scheme(), "http" | "https") => {
            Err(UrlProblem::Scheme(url.scheme().to_owned()))
        }
        Ok(url) if url.host_str().map_or(true, str::is_empty) => Err(UrlProblem::NoHost),
        Ok(url) => Ok(url),
        Err(err) => Err(UrlProblem::Malformed(err.to_string())),
    }
}

/// Why a text is not a usable http(s) URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UrlProblem {
    /// It parses, with a scheme other than http or https.
    Scheme(String),
    /// It parses, without a host.
    NoHost,
    /// It does not parse: what the parser said (never the text).
    Malformed(String),
    /// A URL holds a `{...}` other than the placeholders it may have (shown short).
    Placeholder(String),
    /// A URL holds this placeholder outside its path and query: in this part.
    PlaceholderPart(&'static str, &'static str),
}

impl std::fmt::Debug for PingUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::redact::url(self.as_str()))
    }
}

/// A `fail_url` (or `run --fail-url`): a ping URL that may carry the run's exit status in the
/// placeholder [`FailUrl::PLACEHOLDER`] and its id in [`PingUrl::RUN_ID`], which are filled in
/// when the run has ended. A secret like [`PingUrl`]: `Debug` shows it redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct FailUrl(String);

impl FailUrl {
    /// The placeholder of the exit status as `run` reports it (only a fail URL has it).
    pub const PLACEHOLDER: &'static str = "{exit_code}";

    /// Checks `text`: an http(s) URL with a host once the placeholders are filled in, and no
    /// `{...}` but [`FailUrl::PLACEHOLDER`] and [`PingUrl::RUN_ID`], each only in the path or
    /// the query. The error never repeats the URL. The URL and its token (the last path
    /// segment without the placeholders) become secrets ([`crate::redact::scrub`]).
    pub(crate) fn parse(text: &str) -> Result<FailUrl, UrlProblem> {
        let rest = placeholders(text, &[Self::PLACEHOLDER, PingUrl::RUN_ID])?;
        parse_url(&Self::filled(text, "0", "run-id"))?;
        crate::redact::remember(text);
        crate::redact::remember_url(&rest);
        Ok(FailUrl(text.to_owned()))
    }

    /// `text` with its placeholders replaced by `status` and `run_id`.
    fn filled(text: &str, status: &str, run_id: &str) -> String {
        text.replace(Self::PLACEHOLDER, status)
            .replace(PingUrl::RUN_ID, run_id)
    }

    /// The URL to ping for run `run_id` that ended with `status` (as `run` exits: the code,
    /// 128+N for signal N, 124 or 137 after a timeout). The URL made is not learned as a
    /// secret of its own (one per run would grow the scrubber without end): its token and
    /// the text around the placeholders were learned with the fail URL.
    pub(crate) fn with_exit_code(&self, status: u8, run_id: &str) -> Result<PingUrl, UrlProblem> {
        parse_url(&Self::filled(&self.0, &status.to_string(), run_id)).map(PingUrl)
    }

    /// The URL as given, placeholder included: a secret, only for fingerprints.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// Checks the placeholders of the URL `text`: none but `allowed`, each only in the path or the
/// query. Returns the text without them (its secret parts, to remember).
fn placeholders(text: &str, allowed: &[&'static str]) -> Result<String, UrlProblem> {
    let rest = allowed
        .iter()
        .fold(text.to_owned(), |rest, p| rest.replace(p, ""));
    if let Some(at) = rest.find(['{', '}']) {
        let found: String = rest[at..]
            .chars()
            .take_while(|c| *c != '/')
            .take(20)
            .collect();
        let plain = found
            .trim_matches(['{', '}'])
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
        let shown = if plain {
            found
        } else {
            rest[at..at + 1].to_owned()
        };
        return Err(UrlProblem::Placeholder(shown));
    }
    for placeholder in allowed {
        if let Some(part) = placeholder_outside_path(text, placeholder) {
            return Err(UrlProblem::PlaceholderPart(placeholder, part));
        }
    }
    Ok(rest)
}

/// The part of the URL `text` outside its path and query that holds `placeholder`
/// (`"scheme"`, `"host or port"`, `"fragment"`), if any. Filled in there, the value would
/// send the ping to another host or port (or nowhere): only the path and the query may carry
/// it. A placeholder holds none of `/?#`, so the parts are found in the text as written.
fn placeholder_outside_path(text: &str, placeholder: &str) -> Option<&'static str> {
    let first = text.find(placeholder)?;
    let (scheme_end, authority_start) = match text.find("://") {
        Some(at) => (at, at + 3),
        None => (0, 0),
    };
    if first < scheme_end {
        return Some("scheme");
    }
    let authority_end = text[authority_start..]
        .find(['/', '?', '#'])
        .map_or(text.len(), |at| authority_start + at);
    if first < authority_end {
        return Some("host or port");
    }
    let fragment = text.find('#')?;
    text[fragment..].contains(placeholder).then_some("fragment")
}

impl std::fmt::Debug for FailUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::redact::url(&self.0))
    }
}
