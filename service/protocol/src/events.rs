//! Journal events: what is recorded, in order, per thread and owner-wide.
//!
//! Every event has a global sequence (`seq`, owner-wide, strictly increasing,
//! gap-free) and a per-thread sequence (`thread_seq`, gap-free from 1). An
//! event is committed before it is acknowledged or published.
//!
//! Payloads of *content* kinds (agent output, tool calls, permissions,
//! observations) follow the thread's retention; lifecycle kinds carry only
//! metadata (states, codes, ids) and are always stored. Read a payload with
//! [`JournalEvent::body`], which types it ([`Payload`](crate::Payload)).

use serde::{Deserialize, Serialize};

/// The kind of a journal event: the one list of kind names. The stored
/// name is the snake_case form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A thread was created.
    ThreadCreated,
    /// A thread's configuration changed.
    ThreadConfigured,
    /// A turn was accepted (payload: turn id, command id, never the prompt).
    TurnSubmitted,
    /// What the turn asked: its prompt (`{"text": …}`), committed with the
    /// turn. Content: under metadata-only retention the payload is kept in
    /// memory only, like the agent's reply.
    UserMessage,
    /// What a claimed turn runs under (payload: its
    /// [`PreparedConfig`](crate::PreparedConfig)), committed with the claim.
    /// Metadata: kept under every retention; not content, so never part of
    /// the turn's transcript (reply, continuation digest), and never a sign
    /// that the agent started.
    TurnPrepared,
    /// A turn changed state (payload: from, to, outcome).
    TurnState,
    /// A cancel was requested for a turn in flight.
    CancelRequested,
    /// The owner resolved a fenced turn (payload: as, principal).
    TurnResolved,
    /// Agent reply text chunk.
    MessageChunk,
    /// Agent reasoning chunk (kept apart from the reply).
    ThoughtChunk,
    /// Tool call envelope (id, title, kind, status, locations).
    ToolCall,
    /// The agent asked for permission.
    PermissionRequested,
    /// A permission request was answered (by a client, automatically, or by expiry).
    PermissionDecided,
    /// Anything else the agent or runner reported, including late events after
    /// a terminal state, which change nothing.
    Observation,
    /// An application tool call through the MCP bridge, before it runs.
    ToolCallRequested,
    /// Its result.
    ToolCallFinished,
    /// What the thread's context port gave a turn (identities, digests,
    /// sizes, the budget's cut; the text on `full` threads only), before
    /// its dispatch boundary.
    ContextPrepared,
    /// One recall of the thread's memory port (counts, identities, budget
    /// use; never memory text).
    MemoryRecalled,
    /// A git snapshot of the turn's workspace at its dispatch boundary or
    /// its outcome (a tree id, or why none was taken; never content).
    WorkspaceSnapshot,
    /// A thread was deleted (`threads.delete`): its content-free receipt
    /// ([`ThreadDeletion`](crate::ThreadDeletion)), the thread's last event.
    ThreadDeleted,
    /// A retention pass pruned the thread's oldest events (`history`
    /// config): its content-free receipt
    /// ([`HistoryPruned`](crate::HistoryPruned)).
    HistoryPruned,
    /// A thread was imported from a bundle (`threads.import`): its
    /// content-free provenance receipt
    /// ([`ThreadImported`](crate::ThreadImported)), after the events it
    /// journaled again.
    ThreadImported,
    /// A kind this SDK does not know (a newer server). Read only: never
    /// stored, not in [`EventKind::ALL`], and [`EventKind::parse`] refuses
    /// it, so the store fails closed on a row it does not understand.
    #[serde(other)]
    Unknown,
}

impl EventKind {
    /// Every kind the controller writes.
    pub const ALL: [EventKind; 22] = [
        EventKind::ThreadCreated,
        EventKind::ThreadConfigured,
        EventKind::TurnSubmitted,
        EventKind::UserMessage,
        EventKind::TurnPrepared,
        EventKind::TurnState,
        EventKind::CancelRequested,
        EventKind::TurnResolved,
        EventKind::MessageChunk,
        EventKind::ThoughtChunk,
        EventKind::ToolCall,
        EventKind::PermissionRequested,
        EventKind::PermissionDecided,
        EventKind::Observation,
        EventKind::ToolCallRequested,
        EventKind::ToolCallFinished,
        EventKind::ContextPrepared,
        EventKind::MemoryRecalled,
        EventKind::WorkspaceSnapshot,
        EventKind::ThreadDeleted,
        EventKind::HistoryPruned,
        EventKind::ThreadImported,
    ];

    /// Stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::ThreadCreated => "thread_created",
            EventKind::ThreadConfigured => "thread_configured",
            EventKind::TurnSubmitted => "turn_submitted",
            EventKind::UserMessage => "user_message",
            EventKind::TurnPrepared => "turn_prepared",
            EventKind::TurnState => "turn_state",
            EventKind::CancelRequested => "cancel_requested",
            EventKind::TurnResolved => "turn_resolved",
            EventKind::MessageChunk => "message_chunk",
            EventKind::ThoughtChunk => "thought_chunk",
            EventKind::ToolCall => "tool_call",
            EventKind::PermissionRequested => "permission_requested",
            EventKind::PermissionDecided => "permission_decided",
            EventKind::Observation => "observation",
            EventKind::ToolCallRequested => "tool_call_requested",
            EventKind::ToolCallFinished => "tool_call_finished",
            EventKind::ContextPrepared => "context_prepared",
            EventKind::MemoryRecalled => "memory_recalled",
            EventKind::WorkspaceSnapshot => "workspace_snapshot",
            EventKind::ThreadDeleted => "thread_deleted",
            EventKind::HistoryPruned => "history_pruned",
            EventKind::ThreadImported => "thread_imported",
            EventKind::Unknown => "unknown",
        }
    }

    /// Parse a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Content kinds follow the thread's retention; lifecycle kinds are always kept.
    pub fn is_content(self) -> bool {
        matches!(
            self,
            EventKind::UserMessage
                | EventKind::MessageChunk
                | EventKind::ThoughtChunk
                | EventKind::ToolCall
                | EventKind::PermissionRequested
                | EventKind::PermissionDecided
                | EventKind::Observation
        )
    }

    /// Kinds the runner may append through `append_activity` (the agent's
    /// side: never the user's message, which only the submit writes).
    /// The tool-call kinds, `context_prepared` and `workspace_snapshot` are activity but not
    /// content: always kept, so an unknown tool effect (and what context a
    /// turn got) is known on every thread (a metadata-only thread's carry
    /// identities only).
    pub fn is_activity(self) -> bool {
        (self.is_content() && self != EventKind::UserMessage)
            || matches!(
                self,
                EventKind::ToolCallRequested
                    | EventKind::ToolCallFinished
                    | EventKind::ContextPrepared
                    | EventKind::MemoryRecalled
                    | EventKind::WorkspaceSnapshot
            )
    }
}

/// One committed journal event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JournalEvent {
    /// Owner-wide sequence (1, 2, 3, …).
    pub seq: u64,
    /// The thread.
    pub thread_id: String,
    /// Per-thread sequence (1, 2, 3, …).
    pub thread_seq: u64,
    /// The turn, for turn-scoped events.
    pub turn_id: Option<String>,
    /// Kind.
    pub kind: EventKind,
    /// Commit time (ms since epoch; RFC 3339 UTC on the wire).
    #[serde(with = "crate::time::rfc3339")]
    pub at: i64,
    /// The payload as stored, when available; read it typed with
    /// [`JournalEvent::body`].
    pub payload: Option<serde_json::Value>,
    /// `true` when the event had a payload that is no longer available
    /// (metadata-only thread after a restart).
    pub payload_unavailable: bool,
}

/// Which events a replay walks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayScope {
    /// One thread, by `thread_seq`.
    Thread(String),
    /// Every thread of one principal (and optionally one application), by `seq`.
    Owner {
        /// Only threads of this principal.
        principal: String,
        /// Only threads of this application, if set.
        application: Option<String>,
    },
}

/// One bounded page of a replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayPage {
    /// Events with sequence > `after`, in order, at most `limit`.
    pub events: Vec<JournalEvent>,
    /// The cursor to pass as `after` for the next page (thread_seq for thread
    /// scope, seq for owner scope).
    pub next_after: u64,
    /// `true` when more events follow this page.
    pub more: bool,
}

/// A thread with its active turn and a bounded tail of recent events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadSnapshot {
    /// The thread.
    pub thread: super::records::Thread,
    /// Its most recent turns, newest first (bounded).
    pub recent_turns: Vec<super::records::Turn>,
    /// The last events of the thread, oldest first.
    pub tail: Vec<JournalEvent>,
    /// `true` when older events exist that are not in `tail`.
    pub truncated: bool,
    /// The thread's last `thread_seq` (0 when empty).
    pub last_thread_seq: u64,
    /// `true` while a permission request of one of the thread's turns waits
    /// for an answer. Live state, not stored: the server fills it in.
    #[serde(default)]
    pub awaiting_input: bool,
    /// The thread's usage over all its turns.
    #[serde(default)]
    pub usage: crate::usage::UsageTotals,
}
