//! The CLI's own styling, named once. Styles are `anstyle` values written
//! through `anstream` streams, which decide per stream whether colour is
//! wanted, by the rules clap's help follows: not on a pipe, not with
//! `NO_COLOR` set (non-empty) or `TERM=dumb` or `CLICOLOR=0`, always with
//! `CLICOLOR_FORCE` set. Nothing else writes an ANSI style by hand.
//!
//! What must stay true: agent text is made terminal-safe *before* it is
//! styled, so the only escapes that reach a terminal are these.

use anstyle::{Effects, Style};

/// Secondary text: status lines and thoughts.
pub(crate) const DIM: Style = Style::new().effects(Effects::DIMMED);
/// A marker a person's eye should catch (`tool`).
pub(crate) const BOLD: Style = Style::new().effects(Effects::BOLD);
/// A table's header row.
pub(crate) const HEADER: Style = Style::new().effects(Effects::BOLD.insert(Effects::UNDERLINE));

/// `text` in `style` (the stream it is written to may strip it).
pub(crate) fn paint(style: Style, text: &str) -> String {
    format!("{style}{text}{style:#}")
}
