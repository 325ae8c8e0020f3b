//! Text someone else wrote, made safe to print on a terminal: a claim value or a leader name
//! read from etcd, a pause's `--reason`, an error a server sent. Every control character (C0,
//! DEL, C1) and every Unicode bidirectional control is written as its Rust escape (`\u{1b}`,
//! `\r`, `\n`), so such text can neither move the cursor, retitle the window, clear the screen
//! nor start a line that looks like another table row or log line. The status table and the text
//! log run every piece of text through [`printable`]; JSON output needs nothing (JSON escapes
//! control characters itself).

use std::borrow::Cow;

/// `text` with each character that could act on a terminal escaped; borrowed when there is
/// none (the usual case).
pub(crate) fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(acts_on_terminal) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if acts_on_terminal(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Control characters (C0 with tab, CR and LF, DEL, C1) and the bidirectional controls that
/// reorder what is shown (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069).
fn acts_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn escapes_what_acts_on_a_terminal_and_keeps_the_rest() {
        assert_eq!(printable("deploy (ok) é ✓"), "deploy (ok) é ✓");
        assert_eq!(
            printable("\x1b]0;owned\x07\x1b[2J\r\nfake\t\u{9b}\u{202e}"),
            "\\u{1b}]0;owned\\u{7}\\u{1b}[2J\\r\\nfake\\t\\u{9b}\\u{202e}"
        );
    }
}
