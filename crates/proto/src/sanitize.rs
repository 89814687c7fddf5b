//! Making peer-supplied text safe to print.
//!
//! Refusal messages, abort reasons, notes and software strings come from
//! the other end of a connection and end up on terminals and in log files.
//! Raw, an escape sequence in them can clear or rewrite a terminal and an
//! embedded newline can forge a log line. [`sanitize`] is applied where
//! such strings are decoded ([`crate::wire::decode`]), so nothing past the
//! codec ever holds an unescaped control character from a peer.

/// Longest peer string kept (in chars); the rest is cut with a marker. A
/// refusal or abort reason is one line of text, not a payload.
pub const MAX_PEER_TEXT: usize = 1024;

/// Marks text cut at [`MAX_PEER_TEXT`].
const CUT: &str = "…[cut]";

/// Returns `s` with every control character (C0, DEL, C1 and the Unicode
/// line/paragraph separators and bidi overrides) written as a visible
/// `\u{..}` escape, cut after [`MAX_PEER_TEXT`] characters of output.
/// Sanitising twice changes nothing more.
pub fn sanitize(s: &str) -> String {
    if is_clean(s) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len().min(MAX_PEER_TEXT * 2));
    let mut kept = 0;
    for c in s.chars() {
        let piece = if unsafe_char(c) {
            escape(c)
        } else {
            c.to_string()
        };
        kept += piece.chars().count();
        if kept > MAX_PEER_TEXT {
            out.push_str(CUT);
            break;
        }
        out.push_str(&piece);
    }
    out
}

/// Multi-line text from a peer or from the system (an iperf3 server's
/// `--get-server-output` text, interface names and driver strings on a
/// host command's lines): every character [`sanitize`] escapes is escaped
/// the same way except the newline, which separates the lines; nothing is
/// cut (the caller bounds the text).
pub fn sanitize_lines(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c != '\n' && unsafe_char(c)) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if c != '\n' && unsafe_char(c) {
            out.push_str(&escape(c));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Sanitises a string in place (see [`sanitize`]).
pub fn sanitize_in_place(s: &mut String) {
    if !is_clean(s) {
        *s = sanitize(s);
    }
}

fn is_clean(s: &str) -> bool {
    let short =
        s.len() <= MAX_PEER_TEXT || s.chars().count() <= MAX_PEER_TEXT + CUT.chars().count();
    short && !s.chars().any(unsafe_char)
}

/// Sanitises every string value in a JSON document (see [`sanitize`]).
pub fn sanitize_json(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::String(s) => sanitize_in_place(s),
        Value::Array(a) => a.iter_mut().for_each(sanitize_json),
        Value::Object(o) => o.values_mut().for_each(sanitize_json),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Whether a JSON text may hold a string [`sanitize`] would change: JSON
/// cannot carry a raw C0 control character, so only escapes (`\`), DEL,
/// the lead bytes of U+0080..U+009F (0xC2) and of U+2028..U+2069 (0xE2)
/// can, and a text without any of them skips the slower checked path.
/// Strings longer than [`MAX_PEER_TEXT`] are not cut on this fast path:
/// the frame length already bounds them.
pub fn json_may_need(raw: &[u8]) -> bool {
    raw.iter().any(|&b| matches!(b, b'\\' | 0x7f | 0xc2 | 0xe2))
}

/// A character as the visible escape every sanitiser writes: `\u{1b}`.
fn escape(c: char) -> String {
    format!("\\u{{{:x}}}", u32::from(c))
}

/// Characters a terminal or a line-oriented log may act on.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            // Line and paragraph separators, bidi embeddings/overrides and
            // isolates (they reorder what a reader sees: "Trojan Source").
            '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_28_multi_line_text_keeps_its_lines_and_loses_its_escapes() {
        let raw = "line one\x1b[2J\nline two\r\u{7}\u{202e}";
        assert_eq!(
            sanitize_lines(raw),
            "line one\\u{1b}[2J\nline two\\u{d}\\u{7}\\u{202e}"
        );
        assert!(matches!(
            sanitize_lines("clean\ntext"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
    use proptest::prelude::*;

    #[test]
    fn issue_10_escape_sequences_and_newlines_are_made_visible() {
        assert_eq!(sanitize("plain text, ünïcode"), "plain text, ünïcode");
        assert_eq!(sanitize("\x1b[2Jcleared"), "\\u{1b}[2Jcleared");
        assert_eq!(
            sanitize("busy\nlinerate server: forged line"),
            "busy\\u{a}linerate server: forged line"
        );
        assert_eq!(
            sanitize("a\rb\u{9b}c\u{202e}d"),
            "a\\u{d}b\\u{9b}c\\u{202e}d"
        );
    }

    #[test]
    fn issue_10_long_peer_text_is_cut() {
        let s = "x".repeat(10 * MAX_PEER_TEXT);
        let out = sanitize(&s);
        assert!(out.chars().count() <= MAX_PEER_TEXT + CUT.len());
        assert!(out.ends_with("[cut]"));
    }

    proptest! {
        #[test]
        fn sanitized_text_has_no_control_characters(s in "(?s).{0,1500}") {
            let out = sanitize(&s);
            prop_assert!(!out.chars().any(unsafe_char));
            prop_assert_eq!(sanitize(&out), out.clone());
        }
    }
}
