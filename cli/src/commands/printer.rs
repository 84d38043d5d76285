//! Showing a journal as it happens: the one renderer of every follow mode
//! (`turns submit --wait/--follow`, `ask`, `journal tail`), and how a follow
//! loop stops.
//!
//! What must stay true:
//! - plain output joins a run of reply chunks into running text (no newline
//!   per chunk); thoughts are marked apart and never mixed into the reply;
//! - stdout carries only what a script consumes: for a watched turn
//!   (`--follow`, `ask`) that is the reply, and thoughts, tool calls,
//!   permission notes and the agent's stderr go to *stderr*; for `journal
//!   tail` the events are the output, so they all go to stdout (thoughts
//!   still to stderr), each line led by its event's commit time;
//! - plain output passes every agent-supplied string through
//!   [`crate::terminal::safe`]; the printer's own styles ([`crate::style`])
//!   are written through `anstream`, which drops them where colour is not
//!   wanted (a pipe, `NO_COLOR`, `CLICOLOR=0`, `TERM=dumb`);
//! - `--json` follow output is NDJSON: one compact object per line, each
//!   with exactly one member (`turn`, `event` or `permission`);
//! - a closed stdout ends the loop at once ([`Halt::Closed`]), found either
//!   by a failed write or by polling while idle; callers exit 0 then;
//! - payloads are read typed, through `JournalEvent::body()`.

use std::io::{self, Write};

use lapis_protocol::{JournalEvent, Note, Observation, Payload};
use serde_json::{Value, json};

use crate::exit::CliError;
use crate::style::{self, BOLD, DIM};
use crate::terminal::safe;

/// Why a follow loop stopped early.
pub(super) enum Halt {
    /// Stdout's reader is gone: stop quietly, exit 0.
    Closed,
    /// A real failure.
    Failed(CliError),
}

impl<E: Into<CliError>> From<E> for Halt {
    fn from(e: E) -> Halt {
        Halt::Failed(e.into())
    }
}

/// Maps a follow result to a command result: a closed stdout is success.
pub(super) fn settle(r: Result<(), Halt>) -> Result<(), CliError> {
    match r {
        Ok(()) | Err(Halt::Closed) => Ok(()),
        Err(Halt::Failed(e)) => Err(e),
    }
}

/// Which run of streamed text the output is in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Run {
    None,
    Reply,
    Thought,
}

/// Writes events for a person (plain) or a script (NDJSON).
pub(super) struct Printer {
    /// NDJSON instead of text.
    json: bool,
    /// Show the agent's thoughts.
    thoughts: bool,
    /// Show lifecycle events (`journal tail`); a watched turn shows only
    /// what the agent did.
    lifecycle: bool,
    /// The run of streamed text currently open on the line.
    run: Run,
    /// Whether the last text written to stdout ended a line.
    at_line_start: bool,
    /// Whether the last thought text written to stderr ended a line.
    err_at_line_start: bool,
}

impl Printer {
    /// A printer for stdout.
    pub(super) fn new(json: bool, thoughts: bool, lifecycle: bool) -> Printer {
        Printer {
            json,
            thoughts,
            lifecycle,
            run: Run::None,
            at_line_start: true,
            err_at_line_start: true,
        }
    }

    /// Whether output is NDJSON.
    pub(super) fn is_json(&self) -> bool {
        self.json
    }

    /// Whether the last text written ended its line (a spinner may be
    /// drawn on stderr without breaking into it).
    pub(super) fn at_line_start(&self) -> bool {
        self.at_line_start && self.err_at_line_start
    }

    /// Writes a thought's text to stderr (a failure there is ignored: the
    /// reply on stdout is what matters).
    fn write_err(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let mut err = anstream::stderr().lock();
        if err
            .write_all(text.as_bytes())
            .and_then(|()| err.flush())
            .is_ok()
        {
            self.err_at_line_start = text.ends_with('\n');
        }
    }

    /// Writes raw text to stdout; a closed pipe is [`Halt::Closed`].
    fn write(&mut self, text: &str) -> Result<(), Halt> {
        if text.is_empty() {
            return Ok(());
        }
        let mut out = anstream::stdout().lock();
        match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            Ok(()) => {
                self.at_line_start = text.ends_with('\n');
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(Halt::Closed),
            Err(e) => Err(Halt::Failed(e.into())),
        }
    }

    /// Writes one finished line where notes go: stdout for `journal tail`
    /// (the notes are its output), stderr for a watched turn (stdout is
    /// the reply's).
    fn note_line(&mut self, line: &str) -> Result<(), Halt> {
        if self.lifecycle {
            self.write(&format!("{line}\n"))
        } else {
            self.write_err(&format!("{line}\n"));
            Ok(())
        }
    }

    /// `journal tail` leads each line with its event's commit time.
    fn stamp(&self, e: &JournalEvent) -> String {
        if self.lifecycle {
            format!(
                "{} ",
                style::paint(DIM, &lapis_protocol::time::format_ms(e.at))
            )
        } else {
            String::new()
        }
    }

    /// Ends an open run of streamed text with a newline (unless the text
    /// ended its line itself).
    pub(super) fn end_run(&mut self) -> Result<(), Halt> {
        match std::mem::replace(&mut self.run, Run::None) {
            Run::None => {}
            Run::Reply if !self.at_line_start => self.write("\n")?,
            Run::Thought if !self.err_at_line_start => self.write_err("\n"),
            Run::Reply | Run::Thought => {}
        }
        Ok(())
    }

    /// Writes agent text made terminal-safe (the reply of `--wait`).
    pub(super) fn write_text(&mut self, text: &str) -> Result<(), Halt> {
        self.write(&safe(text))
    }

    /// One NDJSON line holding `value`.
    pub(super) fn record_value(&mut self, value: &Value) -> Result<(), Halt> {
        let line = serde_json::to_string(value).map_err(CliError::from)?;
        self.write(&format!("{line}\n"))
    }

    /// One NDJSON line `{key: value}`.
    pub(super) fn record(&mut self, key: &str, value: &impl serde::Serialize) -> Result<(), Halt> {
        let line = serde_json::to_string(&json!({ key: value })).map_err(CliError::from)?;
        self.write(&format!("{line}\n"))
    }

    /// A status line (plain mode) about event `e`, dimmed on a terminal;
    /// made terminal-safe, since it quotes what the agent sent.
    fn status(&mut self, e: &JournalEvent, text: &str) -> Result<(), Halt> {
        self.end_run()?;
        let line = format!("{}{}", self.stamp(e), style::paint(DIM, &safe(text)));
        self.note_line(&line)
    }

    /// Shows one event.
    pub(super) fn event(&mut self, e: &JournalEvent) -> Result<(), Halt> {
        if self.json {
            return self.record("event", e);
        }
        match e.body() {
            Some(Payload::MessageChunk(c)) => {
                let Some(text) = c.plain_text() else {
                    return Ok(());
                };
                if self.run != Run::Reply {
                    self.end_run()?;
                    self.run = Run::Reply;
                    let stamp = self.stamp(e);
                    self.write(&stamp)?;
                }
                self.write(&safe(text))
            }
            Some(Payload::ThoughtChunk(c)) => {
                if !self.thoughts {
                    return Ok(());
                }
                let Some(text) = c.plain_text() else {
                    return Ok(());
                };
                if self.run != Run::Thought {
                    self.end_run()?;
                    self.run = Run::Thought;
                    let mark = format!("{}{}", self.stamp(e), style::paint(DIM, "thinking: "));
                    self.write_err(&mark);
                }
                let text = style::paint(DIM, &safe(text));
                self.write_err(&text);
                Ok(())
            }
            Some(Payload::ToolCall(inv)) => {
                let title = inv.title.as_deref().unwrap_or("tool call");
                let kind = inv
                    .kind
                    .as_deref()
                    .map(|k| format!(" [{k}]"))
                    .unwrap_or_default();
                let status = inv.status.as_deref().unwrap_or("pending");
                self.end_run()?;
                let what = safe(&format!("{title}{kind}: {status}")).into_owned();
                let line = format!("{}{} {what}", self.stamp(e), style::paint(BOLD, "tool"));
                self.note_line(&line)
            }
            Some(Payload::PermissionRequested(r)) => {
                let title = r.invocation.title.as_deref().unwrap_or("a tool call");
                self.status(
                    e,
                    &format!("permission {} requested: {title}", r.request_id),
                )
            }
            Some(Payload::PermissionDecided(d)) => {
                let by = lapis_protocol::DecidedBy::describe(d.decided_by);
                self.status(
                    e,
                    &format!("permission {}: {} ({by})", d.request_id, d.answer.label()),
                )
            }
            Some(Payload::Observation(Observation::Note(Note::AgentStderr(tail)))) => {
                for line in &tail.lines {
                    self.status(e, &format!("agent stderr: {line}"))?;
                }
                Ok(())
            }
            _ if !self.lifecycle => Ok(()),
            _ => {
                let detail = match &e.payload {
                    Some(p) => p.to_string(),
                    None if e.payload_unavailable => "(payload unavailable)".into(),
                    None => String::new(),
                };
                self.status(
                    e,
                    &format!("[{} #{}] {detail}", e.kind.as_str(), e.thread_seq),
                )
            }
        }
    }
}
