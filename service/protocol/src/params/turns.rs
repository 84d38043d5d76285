//! Turns and their permission requests: `turns.*` and `permissions.*`,
//! params and results (see the module docs of `params`). What must stay
//! true here too: a prompt is never in a `Debug` form.

use serde::{Deserialize, Serialize};

/// `turns.submit`. The prompt is a payload: never logged.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnsSubmit {
    /// Thread id.
    pub thread_id: String,
    /// Idempotency key: same id + same input = same turn.
    pub command_id: String,
    /// Prompt text.
    pub prompt: String,
    /// A turn of the same thread this one continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continues: Option<String>,
    /// Deadline for this turn in seconds (1-604800), overriding the
    /// provider's `maxTurnSeconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turn_seconds: Option<u64>,
    /// The binding the caller relies on: checked in the same step that
    /// queues the turn; a difference is `binding_mismatch` and nothing is
    /// queued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<crate::ThreadExpect>,
}

impl std::fmt::Debug for TurnsSubmit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnsSubmit")
            .field("thread_id", &self.thread_id)
            .field("command_id", &self.command_id)
            .field("prompt", &format_args!("<{} bytes>", self.prompt.len()))
            .finish_non_exhaustive()
    }
}

/// `turns.continue`: a linked attempt after a settled turn, in its thread,
/// with new instructions. The prompt is a payload: never logged.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnsContinue {
    /// The prior turn (completed, failed or cancelled).
    pub turn_id: String,
    /// Idempotency key: same id + same input = same turn.
    pub command_id: String,
    /// The new instructions (the prior prompt is never sent again).
    pub prompt: String,
    /// Deadline for this turn in seconds (1-604800), overriding the
    /// provider's `maxTurnSeconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turn_seconds: Option<u64>,
    /// The binding the caller relies on, as for `turns.submit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<crate::ThreadExpect>,
}

impl std::fmt::Debug for TurnsContinue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnsContinue")
            .field("turn_id", &self.turn_id)
            .field("command_id", &self.command_id)
            .field("prompt", &format_args!("<{} bytes>", self.prompt.len()))
            .finish_non_exhaustive()
    }
}

/// `turns.get`: by turn id, or by the command id of the `turns.submit` that
/// created it (exactly one): finds the turn of a lost answer without
/// resending the prompt.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnsGet {
    /// Turn id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// The submit's command id (the caller's own principal and application).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_id: Option<String>,
}

/// `turns.cancel`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnsCancel {
    /// Turn id.
    pub turn_id: String,
    /// Makes the call idempotent (replays the first answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_id: Option<String>,
}

/// `turns.list`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnsList {
    /// Only turns of this thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// Only turns in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<crate::TurnState>,
    /// At most this many (the server bounds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `turns.resolve`: the owner's confirmation, recorded with an audit event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnsResolve {
    /// Turn id.
    pub turn_id: String,
    /// `failed` or `cancelled`.
    #[serde(rename = "as")]
    pub resolve_as: crate::ResolveAs,
    /// Must be `true`: the owner confirms the agent is no longer running it.
    #[serde(default)]
    pub confirm_stopped: bool,
    /// Makes the call idempotent (replays the first answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_id: Option<String>,
}

/// `permissions.list`: pending requests of the session's threads, optionally
/// of one thread or one turn.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PermissionsList {
    /// Only requests of this thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// Only requests of this turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
}

/// `permissions.respond`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PermissionsRespond {
    /// The turn that asked.
    pub turn_id: String,
    /// The pending request's id.
    pub request_id: String,
    /// One of the exact option ids the agent offered.
    pub option_id: String,
    /// Makes the call idempotent: a lost answer is asked for again with the
    /// same id and replays `accepted` instead of `not_found`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_id: Option<String>,
}

/// `turns.submit` / `turns.continue` / `turns.get` / `turns.cancel` /
/// `turns.resolve` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnResult {
    /// The turn.
    pub turn: crate::Turn,
    /// Whether the command id was seen before: present (true or false) in
    /// the results of `turns.submit`, `turns.continue`, `turns.cancel` and
    /// `turns.resolve`; absent from `turns.get`'s, which carries no receipt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replayed: Option<bool>,
    /// `turns.get` only: the turn's mutating tool calls whose effect is
    /// unknown (never re-invoked; its continuation is refused).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown_tool_effects: Vec<crate::UnknownToolEffect>,
    /// `turns.get` only: the turn's workspace snapshots (git tree ids at
    /// its boundary and outcome, or why none was taken), what changed
    /// between them and, for a fenced turn, what changed since its
    /// boundary. Absent when no snapshot was journaled for the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<crate::snapshot::TurnEvidence>,
}

/// `permissions.list` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionsResult {
    /// The pending requests, soonest deadline first.
    pub requests: Vec<crate::PendingRequest>,
}

/// `status.permissions`: the pending permission requests.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxSummary {
    /// Requests waiting for an answer, across every workspace.
    pub pending: u64,
    /// The one waiting longest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest: Option<OldestRequest>,
}

/// The pending permission request that has waited longest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OldestRequest {
    /// Its turn.
    pub turn_id: String,
    /// Its id within the turn.
    pub request_id: String,
    /// When it was journaled (RFC 3339 UTC with milliseconds).
    #[serde(with = "crate::time::rfc3339")]
    pub requested_at: i64,
}

/// `turns.list` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnsResult {
    /// The turns.
    pub turns: Vec<crate::Turn>,
}

/// `permissions.respond` result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RespondResult {
    /// Always true: the answer reached the waiting turn.
    pub accepted: bool,
    /// True when the command id was seen before.
    #[serde(default)]
    pub replayed: bool,
}
