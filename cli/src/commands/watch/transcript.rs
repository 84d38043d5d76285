//! One turn's transcript as `watch` shows it: the reply, the agent's
//! thoughts, its tool calls and permission requests, in journal order.
//!
//! What must stay true:
//! - every agent-supplied string passes through [`display`] (the one
//!   terminal-safe filter, plus the two characters a cell grid cannot hold:
//!   a CR before a line end is dropped and a tab becomes spaces) before it
//!   is stored, so rendering never sees a control character;
//! - a run of reply (or thought) chunks is one entry, so streamed text reads
//!   as running text; a tool call is one entry updated in place by its id;
//! - an event is taken at most once: events at or before [`Transcript::upto`]
//!   (the thread sequence of the last event taken) are ignored, so a replay
//!   and the live stream overlapping never doubles text;
//! - memory is bounded: at most [`MAX_ENTRIES`] entries, and a run keeps at
//!   most [`MAX_RUN_BYTES`] of its tail.

use lapis_protocol::{JournalEvent, Payload};

/// Entries kept per transcript (the oldest go first).
pub(super) const MAX_ENTRIES: usize = 400;

/// Bytes of one reply or thought run kept (its tail).
pub(super) const MAX_RUN_BYTES: usize = 32 * 1024;

/// Agent text made safe for a cell grid: the terminal-safe filter, then no
/// CR before a line end and tabs as four spaces.
pub(super) fn display(text: &str) -> String {
    crate::terminal::safe(text)
        .replace("\r\n", "\n")
        .replace('\t', "    ")
}

/// One thing a turn did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Entry {
    /// A run of reply text.
    Reply(String),
    /// A run of thoughts.
    Thought(String),
    /// A tool call's latest envelope.
    Tool {
        /// The call id (updates replace the entry with this id).
        id: String,
        /// Its title, kind and status, shown on one line.
        line: String,
    },
    /// A permission request or its answer, a cancel, a note.
    Note(String),
}

/// A turn's transcript.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Transcript {
    /// What the turn did, oldest first.
    pub(super) entries: Vec<Entry>,
    /// The thread sequence of the last event taken.
    pub(super) upto: u64,
    /// Whether it holds the turn from its start (its submission was seen
    /// live, or the journal was replayed for it); an incomplete one is
    /// replayed when the turn is selected.
    pub(super) complete: bool,
}

impl Transcript {
    /// Takes `e` (an event of this transcript's turn) unless it was taken
    /// already. Returns whether anything changed.
    pub(super) fn take(&mut self, e: &JournalEvent) -> bool {
        if e.thread_seq <= self.upto {
            return false;
        }
        self.upto = e.thread_seq;
        match e.body() {
            Some(Payload::MessageChunk(c)) => match c.plain_text() {
                Some(t) => self.stream(false, t),
                None => false,
            },
            Some(Payload::ThoughtChunk(c)) => match c.plain_text() {
                Some(t) => self.stream(true, t),
                None => false,
            },
            Some(Payload::ToolCall(inv)) => {
                let title = inv.title.as_deref().unwrap_or("tool call");
                let kind = inv
                    .kind
                    .as_deref()
                    .map(|k| format!(" [{k}]"))
                    .unwrap_or_default();
                let status = inv.status.as_deref().unwrap_or("pending");
                let line = display(&format!("{title}{kind}: {status}"));
                let id = inv.id.clone();
                match self
                    .entries
                    .iter_mut()
                    .rev()
                    .find(|x| matches!(x, Entry::Tool { id: i, .. } if *i == id))
                {
                    Some(Entry::Tool { line: l, .. }) => *l = line,
                    _ => self.push(Entry::Tool { id, line }),
                }
                true
            }
            Some(Payload::PermissionRequested(r)) => {
                let title = r.invocation.title.as_deref().unwrap_or("a tool call");
                self.push(Entry::Note(display(&format!(
                    "permission {} requested: {title}",
                    r.request_id
                ))));
                true
            }
            Some(Payload::PermissionDecided(d)) => {
                let by = lapis_protocol::DecidedBy::describe(d.decided_by);
                self.push(Entry::Note(display(&format!(
                    "permission {}: {} ({by})",
                    d.request_id,
                    d.answer.label()
                ))));
                true
            }
            Some(Payload::CancelRequested(c)) => {
                self.push(Entry::Note(display(&format!(
                    "cancel requested by {}",
                    c.application
                ))));
                true
            }
            Some(Payload::TurnState(s)) if s.to.is_terminal() || s.to.is_fenced() => {
                let outcome = s
                    .outcome
                    .as_deref()
                    .map(|o| format!(" ({o})"))
                    .unwrap_or_default();
                self.push(Entry::Note(display(&format!(
                    "turn {}{outcome}",
                    s.to.as_str()
                ))));
                true
            }
            Some(Payload::TurnResolved(r)) => {
                self.push(Entry::Note(format!("resolved as {}", r.as_state.as_str())));
                true
            }
            _ => false,
        }
    }

    /// Appends streamed text to the open run of its kind, or opens one.
    fn stream(&mut self, thought: bool, text: &str) -> bool {
        let text = display(text);
        if text.is_empty() {
            return false;
        }
        match self.entries.last_mut() {
            Some(Entry::Thought(run)) if thought => append(run, &text),
            Some(Entry::Reply(run)) if !thought => append(run, &text),
            _ if thought => self.push(Entry::Thought(text)),
            _ => self.push(Entry::Reply(text)),
        }
        true
    }

    fn push(&mut self, entry: Entry) {
        self.entries.push(entry);
        if self.entries.len() > MAX_ENTRIES {
            let over = self.entries.len() - MAX_ENTRIES;
            self.entries.drain(..over);
        }
    }
}

/// Appends `text` to `run`, keeping at most [`MAX_RUN_BYTES`] of its tail
/// (cut at a character boundary).
fn append(run: &mut String, text: &str) {
    run.push_str(text);
    if run.len() > MAX_RUN_BYTES {
        let mut cut = run.len() - MAX_RUN_BYTES;
        while !run.is_char_boundary(cut) {
            cut += 1;
        }
        run.drain(..cut);
    }
}
