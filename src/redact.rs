//! Keeping secrets out of every output.
//!
//! The API key and ping URLs (whose path carries the check's token) are secrets. A ping URL is
//! shown only as scheme, host and a short fingerprint, so users can still tell targets apart;
//! the key is held in [`Secret`], whose `Debug` and `Display` never show the value.
//!
//! Text the agent does not write itself (a job's output, the body of an API error, a transport
//! error) may still hold a secret. [`scrub`] is the one scrubber for all of it, wherever it goes
//! (the daemon's log, `/status`, error messages): it replaces every secret this process knows
//! with `[redacted]`. The process learns its secrets where they enter it: every [`Secret`] (the
//! API key, the status token) when it is made, every ping URL of the config when it is loaded
//! ([`remember_url`]), every ping URL and token sync learns or reads back. Secrets are only
//! added, never forgotten (a URL dropped by a reload is still a secret). One Aho-Corasick
//! automaton (the `aho-corasick` crate, as regex uses it) finds them all in one pass over the
//! text, so a daemon with hundreds of jobs scrubs each output line in time linear in the line;
//! it is rebuilt only by the first scrub after a new secret was learned.
//!
//! The set of known secrets is a process-wide static, on purpose, not a value handed around: a
//! secret learned on one path (a config load, sync reading a token back) must be scrubbed from
//! text written on any other, from any thread, including code that was never given a context
//! (an error's text, a child's output). A set passed as a value would miss every path it was
//! not passed to; the shared one only grows, so sharing it cannot let a secret out.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, RwLock};

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use sha2::{Digest, Sha256};

/// A secret string (the API key) whose formatting never reveals it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value, which [`scrub`] removes from then on.
    pub fn new(value: impl Into<String>) -> Self {
        let value = value.into();
        remember(&value);
        Secret(value)
    }

    /// The value itself, for the one place that must send it (an HTTP header).
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// The first 8 hex digits of the SHA-256 of `text`: enough to tell secrets apart, nothing to
/// recover them from.
pub(crate) fn fingerprint(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest[..4].iter().map(|b| format!("{b:02x}")).collect()
}

/// Shows a ping URL without its secret parts: `https://ping.example.com/…#1a2b3c4d`.
///
/// The path, query, user info and fragment are dropped; the fingerprint is of the whole URL.
/// Text that does not parse as a URL is shown only as its fingerprint.
pub fn url(raw: &str) -> String {
    match reqwest::Url::parse(raw) {
        Ok(parsed) if parsed.host_str().is_some() => {
            let host = parsed.host_str().unwrap_or_default();
            let port = parsed.port().map(|p| format!(":{p}")).unwrap_or_default();
            format!("{}://{host}{port}/…#{}", parsed.scheme(), fingerprint(raw))
        }
        _ => format!("<url #{}>", fingerprint(raw)),
    }
}

/// Secrets shorter than this are not scrubbed: they would match ordinary words.
const MIN_SECRET: usize = 4;

/// A ping URL's last path segment is taken for its token when it is at least this long (a
/// path such as `/ping` is not a token, and scrubbing the word would garble output).
const MIN_TOKEN: usize = 8;

/// The secrets this process knows, and the automaton that finds them.
struct Known {
    secrets: BTreeSet<String>,
    /// The length in bytes of the longest of them.
    longest: usize,
    /// Built from `secrets` by the first [`scrub`] after a change (`None` until then), so
    /// loading a config with thousands of ping URLs builds it once, not once per URL.
    matcher: Option<Arc<AhoCorasick>>,
}

/// Every secret this process has learned (see the module header).
// One per process: the log and panic paths reach it without a handle.
static KNOWN: RwLock<Known> = RwLock::new(Known {
    secrets: BTreeSet::new(),
    longest: 0,
    matcher: None,
});

/// Adds `secret` to those [`scrub`] removes (one shorter than 4 characters is ignored).
pub(crate) fn remember(secret: &str) {
    let secret = secret.trim();
    let known = |k: &Known| k.secrets.contains(secret);
    if secret.chars().count() < MIN_SECRET
        || known(&KNOWN.read().unwrap_or_else(|e| e.into_inner()))
    {
        return;
    }
    let mut known = KNOWN.write().unwrap_or_else(|e| e.into_inner());
    if known.secrets.insert(secret.to_owned()) {
        known.longest = known.longest.max(secret.len());
        known.matcher = None;
    }
}

/// The least [`reach`] answers: room for a secret learned while an output is being kept (a
/// ping URL sync learns during a run).
const MIN_REACH: usize = 1024;

/// How many bytes before a cut of a job's output must be kept for [`job_output`] to find a
/// secret that the cut splits: the longest secret known, at least 1 KiB.
pub(crate) fn reach() -> usize {
    let known = KNOWN.read().unwrap_or_else(|e| e.into_inner());
    known.longest.max(MIN_REACH)
}

/// The automaton finding every known secret, built when the secrets changed since the last
/// call; `None` while there is no secret.
fn matcher() -> Option<Arc<AhoCorasick>> {
    {
        let known = KNOWN.read().unwrap_or_else(|e| e.into_inner());
        if known.matcher.is_some() || known.secrets.is_empty() {
            return known.matcher.clone();
        }
    }
    let mut known = KNOWN.write().unwrap_or_else(|e| e.into_inner());
    if known.matcher.is_none() {
        // Leftmost-longest: a URL is replaced whole, not only the token inside it. A
        // contiguous NFA builds in time linear in the secrets' length (a DFA's build grows far
        // faster, too slow for a long API key) and still finds them all in one pass.
        known.matcher = AhoCorasick::builder()
            .kind(Some(AhoCorasickKind::ContiguousNFA))
            .match_kind(MatchKind::LeftmostLongest)
            .build(&known.secrets)
            .ok()
            .map(Arc::new);
    }
    known.matcher.clone()
}

/// Adds a ping URL to the secrets [`scrub`] removes: the whole URL and its token (the last
/// path segment, when it is 8 characters or more).
pub(crate) fn remember_url(url: &str) {
    remember(url);
    if let Ok(parsed) = reqwest::Url::parse(url.trim()) {
        let token = parsed
            .path_segments()
            .and_then(|mut segments| segments.rfind(|s| !s.is_empty()));
        if let Some(token) = token.filter(|t| t.chars().count() >= MIN_TOKEN) {
            remember(token);
        }
    }
}

/// `text` with every secret this process knows replaced by `[redacted]`: the last line of
/// defence for text the agent does not write itself (job output, API error bodies, reqwest's
/// `Display`, which includes the URL).
pub(crate) fn scrub(text: &str) -> String {
    match matcher() {
        Some(matcher) if matcher.is_match(text) => {
            let replacements = vec![REDACTED; matcher.patterns_len()];
            matcher.replace_all(text, &replacements)
        }
        _ => text.to_owned(),
    }
}

/// [`scrub`] of `text` in place: no copy when it holds no secret (a run's output of megabytes
/// read back from the history).
pub(crate) fn scrub_in_place(text: &mut String) {
    if matcher().is_some_and(|matcher| matcher.is_match(text.as_str())) {
        *text = scrub(text);
    }
}

/// What [`scrub`] puts in place of a secret.
const REDACTED: &str = "[redacted]";

/// A job's output as it may leave the process: valid UTF-8, cut to its last `max` bytes (at a
/// character boundary) with every known secret scrubbed first: a secret that the cut splits is
/// found in the bytes before the cut and replaced whole, so no part of it is kept. The caller
/// keeps [`reach`] bytes more than it shows for that. The one function for every path that
/// sends or shows what a job printed: a fail ping's body (`run`, `run --job` and the daemon
/// alike), the daemon's log of each output line, and a run's recorded output. A replacement
/// longer than the secret may make the answer a few bytes longer than `max`.
pub(crate) fn job_output(output: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(output);
    let mut cut = text.len().saturating_sub(max);
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    let Some(matcher) = matcher() else {
        return text[cut..].to_owned();
    };
    let mut shown = String::with_capacity(text.len() - cut);
    let mut at = cut;
    for found in matcher.find_iter(text.as_ref()) {
        if found.end() <= cut {
            continue;
        }
        shown.push_str(&text[at..found.start().max(at)]);
        shown.push_str(REDACTED);
        at = found.end();
    }
    shown.push_str(&text[at..]);
    shown
}

/// Where to cut `text` into a first piece of about `at` bytes so that no known secret is split:
/// `at` itself when no secret found in `text` spans it, else the start of the one that does (or
/// its end, when it starts the text). The caller hands in [`reach`] bytes past `at`, so a secret
/// that spans `at` is found whole. For a long line handed on in pieces (the daemon's log of a
/// job's output): each piece is scrubbed on its own, and none then holds a part of a secret.
pub(crate) fn cut_between_secrets(text: &[u8], at: usize) -> usize {
    let Some(matcher) = matcher() else {
        return at;
    };
    for found in matcher.find_iter(text) {
        if found.start() >= at {
            break;
        }
        if found.end() > at {
            return if found.start() > 0 {
                found.start()
            } else {
                found.end()
            };
        }
    }
    at
}

/// Formats a reqwest error without the URL it carries (which may hold a ping token).
pub(crate) fn reqwest_error(err: &reqwest::Error) -> String {
    let kind = if err.is_timeout() {
        "timed out"
    } else if err.is_connect() {
        "connection failed"
    } else if err.is_body() || err.is_decode() {
        "could not read the response"
    } else if err.is_request() {
        "request failed"
    } else {
        "HTTP error"
    };
    let mut detail = String::new();
    let mut source = std::error::Error::source(err);
    // The innermost cause is the most specific ("connection refused"); none of the sources
    // below reqwest's own error carry the URL.
    while let Some(inner) = source {
        detail = inner.to_string();
        source = inner.source();
    }
    if detail.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}: {detail}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_hides_path_and_query() {
        let shown = url("https://user:pw@ping.example.com:8443/abc-token-123?x=secret");
        assert!(
            shown.starts_with("https://ping.example.com:8443/…#"),
            "{shown}"
        );
        assert!(!shown.contains("abc-token-123"));
        assert!(!shown.contains("secret"));
        assert!(!shown.contains("pw"));
    }

    #[test]
    fn fingerprints_tell_targets_apart() {
        assert_ne!(url("http://h/a"), url("http://h/b"));
        assert_eq!(url("http://h/a"), url("http://h/a"));
        assert_eq!(fingerprint("x").len(), 8);
    }

    #[test]
    fn unparsable_url_shows_only_fingerprint() {
        let shown = url("not a url with token-xyz");
        assert!(!shown.contains("token-xyz"));
    }

    #[test]
    fn secret_formatting_hides_value() {
        let s = Secret::new("sk_live_1234");
        assert!(!format!("{s:?} {s}").contains("1234"));
        assert_eq!(s.expose(), "sk_live_1234");
    }

    #[test]
    fn scrub_replaces_every_occurrence_of_every_known_secret() {
        remember("tok1-scrub-test");
        let _key = Secret::new("sk_scrub_test_key");
        assert_eq!(
            scrub("a tok1-scrub-test b tok1-scrub-test sk_scrub_test_key"),
            "a [redacted] b [redacted] [redacted]"
        );
        // Too short to be told from a word: left alone.
        remember("ab");
        assert_eq!(scrub("ab cd"), "ab cd");
    }

    #[test]
    fn job_output_is_text_scrubbed_and_bounded() {
        remember("fail-body-secret-token");
        let out = b"line 1\ntoken fail-body-secret-token\n\xffend\n";
        let text = job_output(out, 1000);
        assert_eq!(text, "line 1\ntoken [redacted]\n\u{fffd}end\n");
        assert_eq!(job_output(out, 5), "end\n");
        assert_eq!(job_output("ééé".as_bytes(), 3), "é");
    }

    #[test]
    fn a_secret_split_by_the_cut_is_scrubbed_whole() {
        let secret = "cut-secret-0123456789abcdefghij";
        remember(secret);
        let out = format!("key={secret}\nnext line\n");
        for max in 0..out.len() + 3 {
            let shown = job_output(out.as_bytes(), max);
            for piece in secret.as_bytes().windows(12) {
                let piece = std::str::from_utf8(piece).expect("ascii");
                assert!(!shown.contains(piece), "max {max}: {shown:?}");
            }
            let last = "next line\n";
            if max <= last.len() + 1 {
                assert_eq!(shown, &out[out.len() - max..]);
            } else if max >= out.len() {
                assert_eq!(shown, "key=[redacted]\nnext line\n");
            } else {
                assert!(
                    shown.ends_with("[redacted]\nnext line\n"),
                    "max {max}: {shown:?}"
                );
            }
        }
    }

    #[test]
    fn a_cut_between_secrets_never_splits_one() {
        let secret = "piece-secret-0123456789abcdefghij";
        remember(secret);
        let text = format!("{}{secret}{}", "x".repeat(50), "y".repeat(50));
        let (start, end) = (50, 50 + secret.len());
        for at in 1..text.len() {
            let cut = cut_between_secrets(text.as_bytes(), at);
            if at > start && at < end {
                assert_eq!(cut, start, "at {at}");
            } else {
                assert_eq!(cut, at, "at {at}");
            }
        }
        // A secret at the very start is kept whole in the first piece.
        let first = format!("{secret}tail");
        assert_eq!(cut_between_secrets(first.as_bytes(), 5), secret.len());
    }

    #[test]
    fn a_ping_url_is_scrubbed_whole_and_its_token_alone() {
        remember_url("https://ping.example.com/scrub-test-token-42");
        assert_eq!(
            scrub("GET https://ping.example.com/scrub-test-token-42 then scrub-test-token-42"),
            "GET [redacted] then [redacted]"
        );
        // A short last segment is not a token; the host is never a secret.
        remember_url("http://127.0.0.1:9/ping");
        assert_eq!(
            scrub("ping http://127.0.0.1:9/ping 127.0.0.1:9"),
            "ping [redacted] 127.0.0.1:9"
        );
    }
}
