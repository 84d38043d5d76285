//! Making text that an agent or a model wrote safe to show on a terminal.
//!
//! Reply text, thoughts, tool titles, permission option names, agent error
//! messages and stderr lines come from the model, and a terminal obeys the
//! control characters inside them: `ESC [ 2 K ESC [ 1 G` erases and
//! rewrites the very line a person approves from, OSC sequences set the
//! window title or the clipboard, a bare CR or a backspace overwrites what
//! was already shown. [`safe`] is the one function every plain-output
//! printer passes such text through, and so does the controller's notifier
//! (a notification lands on a terminal or a desktop), which is why it lives
//! here, in the crate both use.
//!
//! The rule, and what must stay true:
//! - `\n` and `\t` pass, and so does a CR directly before a `\n` (CRLF line
//!   ends are harmless);
//! - every other C0 control (U+0000-U+001F) becomes its Unicode *control
//!   picture* (U+2400 + code: ESC is `␛`, a bare CR `␍`, backspace `␈`,
//!   NUL `␀`), DEL (U+007F) becomes `␡`;
//! - a C1 control (U+0080-U+009F, e.g. the one-byte CSI U+009B) is the
//!   7-bit sequence ESC + (code − 0x40), so it becomes `␛` followed by that
//!   character: CSI U+009B shows as `␛[`, OSC U+009D as `␛]`;
//! - nothing else changes, so ordinary text (any language, emoji) is
//!   byte-for-byte what the agent sent;
//! - `--json` and NDJSON output never go through here: JSON escapes control
//!   characters itself, and scripts get the bytes verbatim.

use std::borrow::Cow;

/// `text` with every control character other than `\n`, `\t` and a CR
/// ending a line replaced by a visible stand-in (see the module docs).
/// Borrows when nothing needed replacing.
pub fn safe(text: &str) -> Cow<'_, str> {
    let mut scan = text.chars().peekable();
    let clean = loop {
        match scan.next() {
            None => break true,
            Some('\r') if scan.peek() == Some(&'\n') => {}
            Some(c) if is_unsafe_char(c) => break false,
            Some(_) => {}
        }
    };
    if clean {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\t' => out.push(c),
            '\r' if chars.peek() == Some(&'\n') => out.push(c),
            c if (c as u32) < 0x20 => out.push(picture(c as u32)),
            '\u{7f}' => out.push('\u{2421}'),
            c if (0x80..=0x9f).contains(&(c as u32)) => {
                out.push('\u{241b}');
                out.push(char::from((c as u32 - 0x40) as u8));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Whether `c` needs replacing (a CR before a `\n` is let through by the
/// caller).
fn is_unsafe_char(c: char) -> bool {
    let code = c as u32;
    (code < 0x20 && c != '\n' && c != '\t') || (0x7f..=0x9f).contains(&code)
}

/// The control picture of C0 code `code` (U+2400 block).
fn picture(code: u32) -> char {
    char::from_u32(0x2400 + code).unwrap_or('\u{fffd}')
}

#[cfg(test)]
mod tests {
    use super::safe;

    #[test]
    fn plain_text_is_untouched_and_borrowed() {
        for text in [
            "hello",
            "two\nlines\tand a tab",
            "crlf\r\nend",
            "日本語 ✓ 🎉",
            "",
        ] {
            assert!(
                matches!(safe(text), std::borrow::Cow::Borrowed(_)),
                "{text:?}"
            );
            assert_eq!(safe(text), text);
        }
    }

    #[test]
    fn every_control_becomes_visible() {
        assert_eq!(safe("\x1b[2K\x1b[1Gok"), "␛[2K␛[1Gok");
        assert_eq!(safe("\x1b]0;title\x07"), "␛]0;title␇");
        assert_eq!(safe("\u{9b}31m"), "␛[31m");
        assert_eq!(safe("\u{9d}52;c;x\u{9c}"), "␛]52;c;x␛\\");
        assert_eq!(safe("yes\rno"), "yes␍no");
        assert_eq!(safe("end\r"), "end␍");
        assert_eq!(safe("ab\x08\x08xy"), "ab␈␈xy");
        assert_eq!(safe("del\x7f nul\0"), "del␡ nul␀");
    }

    #[test]
    fn no_output_byte_is_a_control_other_than_newline_tab_and_crlf() {
        // Every code point below U+00A0, in every position.
        let all: String = (0u32..0xa0).filter_map(char::from_u32).collect();
        let shown = safe(&all);
        let mut prev = None;
        for (i, c) in shown.char_indices() {
            let code = c as u32;
            let control = code < 0x20 || (0x7f..=0x9f).contains(&code);
            let allowed = c == '\n' || c == '\t' || (c == '\r' && shown[i + 1..].starts_with('\n'));
            assert!(!control || allowed, "{c:?} after {prev:?} in {shown:?}");
            prev = Some(c);
        }
    }
}
