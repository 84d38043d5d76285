//! The last lines an agent wrote on stderr, kept so that a failed start or
//! check can say why in the agent's own words ("node: not found", "401
//! invalid x-api-key") instead of only `initialize failed (broken_pipe)`.
//!
//! What must stay true: only lines that passed the stderr redactor (the
//! very lines the service log gets) are kept; at most [`TAIL_LINES`] lines
//! of at most the log's line bound each, so the tail is bounded whatever
//! the agent writes; a metadata-only thread's agent keeps nothing (its
//! stderr is drained unread). Terminal safety is the printer's job.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// How many of the last stderr lines are kept.
pub const TAIL_LINES: usize = 8;

/// Most bytes of stderr lines journaled with one turn
/// ([`StderrTail::within`]): its owner reads why it failed, not a log.
pub(crate) const TAIL_BYTES: usize = 4096;

/// A shared, bounded ring of redacted stderr lines.
#[derive(Debug, Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    /// Records one redacted (and already cut) line, forgetting the oldest
    /// beyond [`TAIL_LINES`].
    pub(super) fn push(&self, line: &str) {
        let mut lines = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if lines.len() == TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line.to_owned());
    }

    /// The lines kept, oldest first.
    pub fn lines(&self) -> Vec<String> {
        let lines = self.0.lock().unwrap_or_else(|p| p.into_inner());
        lines.iter().cloned().collect()
    }

    /// The newest lines kept whose bytes together are at most `max`,
    /// oldest first; when even the newest line alone is longer, its start,
    /// cut at a character boundary.
    pub fn within(&self, max: usize) -> Vec<String> {
        let lines = self.lines();
        let mut used = 0;
        let mut out = Vec::new();
        for line in lines.iter().rev() {
            if used + line.len() > max {
                if out.is_empty() {
                    let mut end = max;
                    while !line.is_char_boundary(end) {
                        end -= 1;
                    }
                    out.push(line[..end].to_owned());
                }
                break;
            }
            used += line.len();
            out.push(line.clone());
        }
        out.reverse();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::{StderrTail, TAIL_LINES};

    #[test]
    fn within_keeps_the_newest_lines_that_fit() {
        let tail = StderrTail::default();
        for i in 0..3 {
            tail.push(&format!("{i}{}", "x".repeat(2999)));
        }
        let kept = tail.within(super::TAIL_BYTES);
        assert_eq!(kept.len(), 1);
        assert!(kept[0].starts_with('2'));
        let small = StderrTail::default();
        small.push("a");
        small.push("b");
        assert_eq!(small.within(super::TAIL_BYTES), ["a", "b"]);
        // A line longer than the bound alone: its start, on a char boundary.
        let wide = StderrTail::default();
        wide.push(&"é".repeat(3000));
        let kept = wide.within(super::TAIL_BYTES);
        assert_eq!(kept.len(), 1);
        assert!(kept[0].len() <= super::TAIL_BYTES && kept[0].len() >= super::TAIL_BYTES - 1);
    }

    #[test]
    fn keeps_only_the_last_lines() {
        let tail = StderrTail::default();
        for i in 0..TAIL_LINES + 3 {
            tail.push(&format!("line {i}"));
        }
        let kept = tail.lines();
        assert_eq!(kept.len(), TAIL_LINES);
        assert_eq!(kept[0], "line 3");
        assert_eq!(kept.last().unwrap(), &format!("line {}", TAIL_LINES + 2));
    }
}
