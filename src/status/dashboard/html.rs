//! The frame of every dashboard page: its one style sheet ([`CSS`]), the Content-Security-Policy
//! that allows only it ([`csp`]), the page's head and foot, the outcome and tone classes the
//! style sheet colours, and [`esc`], the one way a text enters a page (element content and
//! quoted attribute values, inside SVG as well as HTML).
//!
//! The page has no `style` attribute, no script and no external asset, so `default-src 'none'`
//! holds: charts are inline SVG drawn with presentation attributes and classes of [`CSS`]
//! (an SVG mark takes its colour from its outcome's class through `currentColor`).

use std::fmt::Write;
use std::sync::OnceLock;

use base64::Engine;
use sha2::{Digest, Sha256};

use crate::run_end::RunOutcome;
use crate::status::state::Tone;

/// The page's only style sheet (dark and light by `prefers-color-scheme`; rows turn into
/// blocks on a narrow screen).
const CSS: &str = "\
:root{color-scheme:light dark;--bg:#fff;--fg:#1b1f24;--mute:#5b6570;--line:#d6dbe0;--card:#f5f7f9;\
--ok:#1a7f37;--bad:#cf222e;--warn:#9a6700;--idle:#6e7781}\
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--mute:#8d96a0;--line:#30363d;\
--card:#161b22;--ok:#3fb950;--bad:#f85149;--warn:#d29922;--idle:#8b949e}}\
*{box-sizing:border-box}\
body{margin:0;padding:1rem;background:var(--bg);color:var(--fg);\
font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif}\
h1{font-size:1.3rem;margin:0 0 .3rem}h2{font-size:1.1rem;margin:1.2rem 0 .5rem}\
a{color:inherit}header p,.mute{color:var(--mute)}header p{margin:.2rem 0}\
p.summary{font-size:1.1rem;margin:.6rem 0;color:var(--fg)}\
table{border-collapse:collapse;width:100%}\
th,td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}\
th{font-weight:600;color:var(--mute);white-space:nowrap}\
td.num{text-align:right;font-variant-numeric:tabular-nums}td.nowrap,.nowrap{white-space:nowrap}\
.outcome{font-weight:600}.success{color:var(--ok)}\
.failed,.timed_out,.signaled,.unhealthy{color:var(--bad)}\
.not_started,.stopped,.paused{color:var(--warn)}\
.none{color:var(--idle)}\
.strip{font-family:ui-monospace,monospace;letter-spacing:1px;overflow-wrap:anywhere}\
svg .mark{fill:currentColor}svg text{fill:var(--mute);font-size:10px}\
svg .tick{stroke:var(--line)}svg .tick.major,svg .axis{stroke:var(--mute)}\
svg .grid{stroke:var(--line);stroke-dasharray:2 3}svg .frame{fill:var(--card)}\
svg .unread{fill:var(--line)}\
ul.legend{list-style:none;display:flex;flex-wrap:wrap;gap:.2rem 1rem;padding:0;margin:.4rem 0;\
color:var(--mute)}ul.legend li{white-space:nowrap}ul.legend svg{vertical-align:-1px}\
pre{margin:.3rem 0 0;padding:.5rem;background:var(--card);border-radius:4px;overflow-x:auto;\
white-space:pre-wrap;word-break:break-all;max-height:16rem}\
form.login{max-width:22rem;padding:1rem;background:var(--card);border-radius:6px}\
form input{width:100%;padding:.4rem;margin:.3rem 0 .6rem;font:inherit}\
form button{padding:.4rem 1rem;font:inherit}.error{color:var(--bad)}\
@media (max-width:760px){table.jobs thead,table.runs thead{display:none}\
table.jobs tr,table.runs tr{display:block;padding:.5rem 0;border-bottom:1px solid var(--line)}\
table.jobs td,table.runs td{display:block;border:0;padding:.1rem 0}\
table.jobs td[data-label]::before,table.runs td[data-label]::before{content:attr(data-label) ': ';\
color:var(--mute)}td.num{text-align:left}}";

/// The Content-Security-Policy of every page: nothing loads, only [`CSS`] applies, forms post
/// to this endpoint only, and no other site may frame the page.
pub(super) fn csp() -> &'static str {
    // Made once: the hash of a constant, the same for the process's life (not state).
    static CSP: OnceLock<String> = OnceLock::new();
    CSP.get_or_init(|| {
        let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(CSS));
        format!(
            "default-src 'none'; style-src 'sha256-{hash}'; img-src 'none'; form-action 'self'; \
             frame-ancestors 'none'; base-uri 'none'"
        )
    })
}

/// `text` with `&`, `<`, `>`, `"` and `'` escaped: safe in element content and in quoted
/// attribute values, of HTML and of inline SVG. The one way a text enters the page.
pub(super) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `name` as a URL path segment (percent-encoded but for unreserved characters).
pub(super) fn segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The page's head, its body opened (`refresh`: reload every 30 s).
pub(super) fn head(title: &str, refresh: bool) -> String {
    let refresh = if refresh {
        "<meta http-equiv=\"refresh\" content=\"30\">"
    } else {
        ""
    };
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">{refresh}\
         <title>{}</title><style>{CSS}</style></head><body>",
        esc(title)
    )
}

/// The end of every page.
pub(super) const FOOT: &str = "</body></html>";

/// An outcome's word as its CSS class (only the words of [`RunOutcome`]; anything else is
/// `none`).
pub(super) fn class(outcome: &str) -> &'static str {
    RunOutcome::named(outcome).map_or("none", RunOutcome::as_str)
}

/// The CSS class of a state's tone: the colours of the outcomes.
pub(super) fn tone_class(tone: Tone) -> &'static str {
    match tone {
        Tone::Good => "success",
        Tone::Bad => "failed",
        Tone::Warn => "paused",
        Tone::Plain => "none",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_special_character_is_escaped() {
        assert_eq!(
            esc("<script>alert(\"x\" & 'y')</script>"),
            "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;"
        );
        assert_eq!(segment("a b/c"), "a%20b%2Fc");
    }

    #[test]
    fn the_policy_allows_the_style_sheet_by_its_hash() {
        let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(CSS));
        assert!(csp().contains(&format!("style-src 'sha256-{hash}'")));
        assert!(csp().starts_with("default-src 'none'"));
        assert!(
            !CSS.contains("</"),
            "the style sheet cannot close its element"
        );
    }

    #[test]
    fn only_the_outcomes_words_are_classes() {
        for outcome in RunOutcome::ALL {
            assert_eq!(class(outcome.as_str()), outcome.as_str());
        }
        assert_eq!(class("\" onload=\"x"), "none");
    }
}
