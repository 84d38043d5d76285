//! Journal payloads, typed: one [`Payload`] enum for every kind of event the
//! controller journals, shared by the server (which writes through it), the
//! client SDK, the CLI and the tests (which read through
//! [`JournalEvent::body`]).
//!
//! What must stay true:
//! - a payload's stored form is [`Payload::to_value`]; it is exactly what
//!   the store wrote before these types existed, because the hash chain
//!   covers the stored bytes (`tests/fixtures/journal-v1` in `lapis-e2e`
//!   holds a journal of that time, read and verified by the tests);
//! - the event kind's name exists once, in [`EventKind`]; a payload knows
//!   its kind ([`Payload::kind`]);
//! - reading never fails: a kind this SDK does not know, or a payload that
//!   does not parse as its kind, is [`Payload::Unknown`] with the raw JSON,
//!   so an older SDK reads a newer server's journal.
//!
//! A legacy field: the activity payloads (`message_chunk`, `thought_chunk`,
//! `tool_call`, `permission_requested`, `permission_decided`) carry a
//! `type` member naming the runner's old in-memory event (`message`,
//! `reasoning`, `invocation`, `permission_requested`,
//! `permission_resolved`), so a `message_chunk` holds `"type":"message"`.
//! It says nothing the kind does not, but the chain covers it, so
//! [`Payload::to_value`] adds it and [`Payload::from_value`] strips it, here
//! and nowhere else (`legacy_tag`). The `type` of `observation` payloads
//! is a real discriminator and belongs to [`Observation`].

mod activity;
mod lifecycle;
mod note;
mod observation;
mod tool_calls;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::events::{EventKind, JournalEvent};
use crate::invocation::Invocation;
use crate::prepared::PreparedConfig;

pub use activity::{Chunk, PermissionDecided, PermissionRequested};
pub use lifecycle::{
    CancelRequest, Prompt, Resolution, ResolvedVia, StateChange, ThreadConfigured, ThreadCreated,
    TurnSubmitted,
};
pub use note::{
    AgentNotification, AgentStderr, AskMode, ContextReset, McpRefused, ModeResult, Note,
    ReplaceReason, ResetReason, RestrictedMode, SessionLoaded, SessionReplaced, SessionResumed,
    UnsupportedRequest,
};
pub use observation::{Ignored, LateAppend, Observation};
pub use tool_calls::{
    ToolCallFinished, ToolCallOutcome, ToolCallRequested, UnknownToolEffect, unknown_effects,
};

/// The payload of one journal event, by kind.
///
/// Reading a thread's events (the example of `service/PROTOCOL.md`):
///
/// ```no_run
/// # fn main() -> Result<(), lapis_protocol::client::ClientError> {
/// # let (socket, token, thread_id) = (std::path::PathBuf::new(), String::new(), String::new());
/// use lapis_protocol::client::{Client, Credential};
/// use lapis_protocol::{Note, Observation, Payload};
///
/// let credential = Credential::Token { token, application: "my-app".into() };
/// let mut client = Client::open(&socket, credential)?;
/// let page = client.journal_replay(Some(&thread_id), 0, None)?;
/// for event in &page.events {
///     match event.body() {
///         Some(Payload::MessageChunk(chunk)) => print!("{}", chunk.plain_text().unwrap_or("")),
///         Some(Payload::ToolCall(call)) => println!("tool {}: {:?}", call.id, call.status),
///         Some(Payload::PermissionRequested(r)) => println!("asks {}: {:?}", r.request_id, r.options),
///         Some(Payload::TurnState(change)) => println!("turn is {}", change.to.as_str()),
///         Some(Payload::Observation(Observation::Stopped { stop_reason, .. })) => {
///             println!("stopped: {stop_reason}")
///         }
///         Some(Payload::Observation(Observation::Note(Note::AgentStderr(tail)))) => {
///             println!("agent stderr: {}", tail.lines.join(" | "))
///         }
///         Some(Payload::Unknown { kind, raw }) => println!("newer server: {} {raw}", kind.as_str()),
///         Some(_) => {}
///         None if event.payload_unavailable => println!("(not retained)"),
///         None => {}
///     }
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// `thread_created`.
    ThreadCreated(ThreadCreated),
    /// `thread_configured`.
    ThreadConfigured(ThreadConfigured),
    /// `turn_submitted`.
    TurnSubmitted(TurnSubmitted),
    /// `user_message`: the prompt.
    UserMessage(Prompt),
    /// `turn_prepared`: what the claimed turn runs under.
    TurnPrepared(PreparedConfig),
    /// `turn_state`.
    TurnState(StateChange),
    /// `cancel_requested`: a client asked to cancel.
    CancelRequested(CancelRequest),
    /// `turn_resolved`.
    TurnResolved(Resolution),
    /// `message_chunk`: reply text.
    MessageChunk(Chunk),
    /// `thought_chunk`: reasoning, never mixed into the reply.
    ThoughtChunk(Chunk),
    /// `tool_call`: the latest envelope of one tool call.
    ToolCall(Invocation),
    /// `permission_requested`.
    PermissionRequested(PermissionRequested),
    /// `permission_decided`.
    PermissionDecided(PermissionDecided),
    /// `observation`.
    Observation(Observation),
    /// `tool_call_requested`: an application tool call, before it runs.
    ToolCallRequested(ToolCallRequested),
    /// `context_prepared`: what the thread's context port gave the turn,
    /// before its dispatch boundary.
    ContextPrepared(crate::context::PreparedContext),
    /// `memory_recalled`: one recall of the thread's memory port.
    MemoryRecalled(crate::memory::PreparedMemory),
    /// `workspace_snapshot`: the workspace's git tree at the boundary or
    /// the outcome, or why none was taken.
    WorkspaceSnapshot(crate::snapshot::WorkspaceSnapshot),
    /// `tool_call_finished`: its result.
    ToolCallFinished(ToolCallFinished),
    /// `thread_deleted`: the deleted thread's receipt.
    ThreadDeleted(crate::ThreadDeletion),
    /// `history_pruned`: a retention pass's receipt for the thread.
    HistoryPruned(crate::HistoryPruned),
    /// `thread_imported`: the imported thread's provenance receipt.
    ThreadImported(crate::ThreadImported),
    /// A kind this SDK does not know, or a payload that does not parse as
    /// its kind (a newer server): the raw JSON, as stored.
    Unknown {
        /// The event's kind ([`EventKind::Unknown`] for a new kind).
        kind: EventKind,
        /// The payload as received.
        raw: Value,
    },
}

impl Payload {
    /// The kind of event this payload is journaled as.
    pub fn kind(&self) -> EventKind {
        match self {
            Payload::ThreadCreated(_) => EventKind::ThreadCreated,
            Payload::ThreadConfigured(_) => EventKind::ThreadConfigured,
            Payload::TurnSubmitted(_) => EventKind::TurnSubmitted,
            Payload::UserMessage(_) => EventKind::UserMessage,
            Payload::TurnPrepared(_) => EventKind::TurnPrepared,
            Payload::TurnState(_) => EventKind::TurnState,
            Payload::CancelRequested(_) => EventKind::CancelRequested,
            Payload::TurnResolved(_) => EventKind::TurnResolved,
            Payload::MessageChunk(_) => EventKind::MessageChunk,
            Payload::ThoughtChunk(_) => EventKind::ThoughtChunk,
            Payload::ToolCall(_) => EventKind::ToolCall,
            Payload::PermissionRequested(_) => EventKind::PermissionRequested,
            Payload::PermissionDecided(_) => EventKind::PermissionDecided,
            Payload::Observation(_) => EventKind::Observation,
            Payload::ToolCallRequested(_) => EventKind::ToolCallRequested,
            Payload::ToolCallFinished(_) => EventKind::ToolCallFinished,
            Payload::ContextPrepared(_) => EventKind::ContextPrepared,
            Payload::MemoryRecalled(_) => EventKind::MemoryRecalled,
            Payload::WorkspaceSnapshot(_) => EventKind::WorkspaceSnapshot,
            Payload::ThreadDeleted(_) => EventKind::ThreadDeleted,
            Payload::HistoryPruned(_) => EventKind::HistoryPruned,
            Payload::ThreadImported(_) => EventKind::ThreadImported,
            Payload::Unknown { kind, .. } => *kind,
        }
    }

    /// The stored (and wire) form: the JSON object the journal keeps.
    pub fn to_value(&self) -> Value {
        let tag = legacy_tag(self);
        let value = match self {
            Payload::ThreadCreated(p) => value(p),
            Payload::ThreadConfigured(p) => value(p),
            Payload::TurnSubmitted(p) => value(p),
            Payload::UserMessage(p) => value(p),
            Payload::TurnPrepared(p) => value(p),
            Payload::TurnState(p) => value(p),
            Payload::CancelRequested(p) => value(p),
            Payload::TurnResolved(p) => value(p),
            Payload::MessageChunk(p) | Payload::ThoughtChunk(p) => value(p),
            Payload::ToolCall(p) => value(p),
            Payload::PermissionRequested(p) => value(p),
            Payload::PermissionDecided(p) => value(p),
            Payload::Observation(p) => value(p),
            Payload::ToolCallRequested(p) => value(p),
            Payload::ToolCallFinished(p) => value(p),
            Payload::ContextPrepared(p) => value(p),
            Payload::MemoryRecalled(p) => value(p),
            Payload::WorkspaceSnapshot(p) => value(p),
            Payload::ThreadDeleted(p) => value(p),
            Payload::HistoryPruned(p) => value(p),
            Payload::ThreadImported(p) => value(p),
            Payload::Unknown { raw, .. } => return raw.clone(),
        };
        match (tag, value) {
            (Some(tag), Value::Object(mut map)) => {
                map.insert("type".into(), Value::String(tag.into()));
                Value::Object(map)
            }
            (_, v) => v,
        }
    }

    /// Reads the stored form of a `kind` payload; never fails (see
    /// [`Payload::Unknown`]).
    pub fn from_value(kind: EventKind, raw: Value) -> Payload {
        match typed(kind, &raw) {
            Some(p) => p,
            None => Payload::Unknown { kind, raw },
        }
    }
}

impl From<Observation> for Payload {
    fn from(o: Observation) -> Payload {
        Payload::Observation(o)
    }
}

impl From<Note> for Payload {
    fn from(n: Note) -> Payload {
        Payload::Observation(Observation::Note(n))
    }
}

impl JournalEvent {
    /// The typed payload; `None` when the event has none here (see
    /// `payload_unavailable`).
    pub fn body(&self) -> Option<Payload> {
        self.payload
            .as_ref()
            .map(|raw| Payload::from_value(self.kind, raw.clone()))
    }
}

/// The legacy `type` member of a payload's stored form (see the module
/// docs), or `None` for kinds without one.
fn legacy_tag(p: &Payload) -> Option<&'static str> {
    match p {
        Payload::MessageChunk(_) => Some("message"),
        Payload::ThoughtChunk(_) => Some("reasoning"),
        Payload::ToolCall(_) => Some("invocation"),
        Payload::PermissionRequested(_) => Some("permission_requested"),
        // An answer recorded too late was never the runner's event.
        Payload::PermissionDecided(d) if d.decided_by.is_some() => Some("permission_resolved"),
        _ => None,
    }
}

/// Serializes a payload struct. Infallible for these types: their maps have
/// string keys and they hold no non-finite floats of their own.
fn value(p: &impl Serialize) -> Value {
    serde_json::to_value(p).unwrap_or(Value::Null)
}

fn parse<T: DeserializeOwned>(raw: &Value) -> Option<T> {
    T::deserialize(raw).ok()
}

/// `raw` with its legacy `type` removed when it names `tag`; `None` when it
/// names anything else.
fn untagged(raw: &Value, tags: &[&str]) -> Option<Value> {
    let mut map = raw.as_object()?.clone();
    match map.remove("type") {
        None => {}
        Some(Value::String(t)) if tags.contains(&t.as_str()) => {}
        Some(_) => return None,
    }
    Some(Value::Object(map))
}

fn typed(kind: EventKind, raw: &Value) -> Option<Payload> {
    Some(match kind {
        EventKind::ThreadCreated => Payload::ThreadCreated(parse(raw)?),
        EventKind::ThreadConfigured => Payload::ThreadConfigured(parse(raw)?),
        EventKind::TurnSubmitted => Payload::TurnSubmitted(parse(raw)?),
        EventKind::UserMessage => Payload::UserMessage(parse(raw)?),
        EventKind::TurnPrepared => Payload::TurnPrepared(parse(raw)?),
        EventKind::TurnState => Payload::TurnState(parse(raw)?),
        EventKind::CancelRequested => Payload::CancelRequested(parse(raw)?),
        EventKind::TurnResolved => Payload::TurnResolved(parse(raw)?),
        EventKind::MessageChunk => Payload::MessageChunk(parse(&untagged(raw, &["message"])?)?),
        EventKind::ThoughtChunk => Payload::ThoughtChunk(parse(&untagged(raw, &["reasoning"])?)?),
        EventKind::ToolCall => Payload::ToolCall(parse(&untagged(raw, &["invocation"])?)?),
        EventKind::PermissionRequested => {
            Payload::PermissionRequested(parse(&untagged(raw, &["permission_requested"])?)?)
        }
        EventKind::PermissionDecided => {
            Payload::PermissionDecided(parse(&untagged(raw, &["permission_resolved"])?)?)
        }
        EventKind::Observation => Payload::Observation(parse(raw)?),
        EventKind::ToolCallRequested => Payload::ToolCallRequested(parse(raw)?),
        EventKind::ToolCallFinished => Payload::ToolCallFinished(parse(raw)?),
        EventKind::ContextPrepared => Payload::ContextPrepared(parse(raw)?),
        EventKind::MemoryRecalled => Payload::MemoryRecalled(parse(raw)?),
        EventKind::WorkspaceSnapshot => Payload::WorkspaceSnapshot(parse(raw)?),
        EventKind::ThreadDeleted => Payload::ThreadDeleted(parse(raw)?),
        EventKind::HistoryPruned => Payload::HistoryPruned(parse(raw)?),
        EventKind::ThreadImported => Payload::ThreadImported(parse(raw)?),
        EventKind::Unknown => return None,
    })
}

#[cfg(test)]
mod tests;
