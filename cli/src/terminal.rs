//! Terminal-safe text: the one definition is `lapis_protocol::terminal`
//! (the controller's notifier uses it too).

pub(crate) use lapis_protocol::terminal::safe;

use std::ffi::OsStr;
use std::io::IsTerminal;

/// Whether `stream`'s current line can be redrawn in place (a carriage
/// return, then erase to the end of the line): it is a terminal and `TERM`
/// is not `dumb`, the rule cargo follows for its progress bar. Colour is a
/// separate question, answered by `anstream` (`NO_COLOR` turns colour off,
/// not redrawing).
pub(crate) fn redraws_lines(stream: &impl IsTerminal) -> bool {
    redraws(stream.is_terminal(), std::env::var_os("TERM").as_deref())
}

/// [`redraws_lines`] on its inputs.
fn redraws(is_terminal: bool, term: Option<&OsStr>) -> bool {
    is_terminal && term != Some(OsStr::new("dumb"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_terminal_that_is_not_dumb_redraws_lines() {
        assert!(redraws(true, Some(OsStr::new("xterm-256color"))));
        assert!(redraws(true, None));
        assert!(!redraws(true, Some(OsStr::new("dumb"))));
        assert!(!redraws(false, Some(OsStr::new("xterm"))));
    }
}
