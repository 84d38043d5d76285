//! The notes the controller itself writes into a turn's journal, typed:
//! the agent's stderr tail, refused MCP servers, how the agent session was
//! opened (resumed, loaded, reset, replaced), the restricted and asking modes' results, and the
//! agent messages the controller refused or does not interpret.
//!
//! On disk a note is an `observation` payload
//! `{"type":"observation","kind":K,"payload":P}`, the shape agent updates
//! take too ([`Observation::Noted`](super::Observation::Noted)).
//!
//! What must stay true:
//! - a note's stored form ([`Note::kind`] + [`Note::to_value`]) is the
//!   object the controller wrote before these types existed (the hash chain
//!   covers it; `journal_compat` in `lapis-e2e` re-serializes a journal of
//!   that time byte for byte);
//! - [`Note::from_parts`] gives a note only when its type holds all of `P`
//!   (what it reads re-serializes to exactly `P`). Anything else stays
//!   `Noted`, verbatim: a note from a newer server with members this SDK
//!   does not know, and every agent update, whose payload always carries
//!   its `sessionUpdate` member and so can never pass for a note.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::outcome::OutcomeCode;
use crate::usage::{ContextUsage, TokenUsage};

/// A note the controller writes, by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// `agent_stderr`: the last stderr lines of an agent whose turn failed
    /// setting up or with `agent_error` (redacted, bounded; never on a
    /// metadata-only thread).
    AgentStderr(AgentStderr),
    /// `mcp_servers`: the thread's MCP servers were refused before anything
    /// was launched (the turn fails with the refusal's code).
    McpRefused(McpRefused),
    /// `session_resumed`: the thread's agent session was reconnected with
    /// `session/resume` (no history replayed).
    SessionResumed(SessionResumed),
    /// `session_loaded`: the thread's agent session was restored with
    /// `session/load`.
    SessionLoaded(SessionLoaded),
    /// `context_reset`: the bound session could not be loaded, so a new one
    /// (without the earlier context) was started.
    ContextReset(ContextReset),
    /// `session_replaced`: the bound session was not reused because the
    /// provider or the thread's configuration changed.
    SessionReplaced(SessionReplaced),
    /// `restricted_mode`: what the agent did with a restricted thread's mode.
    RestrictedMode(RestrictedMode),
    /// `ask_mode`: what became of an `ask` turn's asking mode (the agent's
    /// answer to it, or the provider's recorded probe verdict `ignored`).
    AskMode(AskMode),
    /// `unsupported_request`: the agent sent a request the controller does
    /// not serve; it was answered "method not found" (or "invalid params"
    /// for an elicitation with fields or in URL mode).
    UnsupportedRequest(UnsupportedRequest),
    /// `notification`: the agent sent a notification other than
    /// `session/update`; it changes nothing.
    Notification(AgentNotification),
    /// `usage_update`: the agent's context and cumulative cost report (a
    /// `session/update`), typed (see [`crate::usage`]).
    UsageUpdate(ContextUsage),
    /// `prompt_usage`: the prompt response's token usage for the turn.
    PromptUsage(TokenUsage),
}

/// `agent_stderr`: `{"lines": [...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentStderr {
    /// The last lines, oldest first.
    pub lines: Vec<String>,
}

/// `mcp_servers`: `{"refused": code, "message": text}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpRefused {
    /// The turn's outcome (the refusal's code).
    pub refused: OutcomeCode,
    /// Why, naming servers and positions, never a value.
    pub message: String,
}

/// `session_resumed`: `{"sessionId": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionResumed {
    /// The agent's session id, resumed.
    pub session_id: String,
}

/// `session_loaded`: `{"sessionId": …, "replayedUpdates": n}`, plus
/// `"resumeFailed": true` when the agent advertised `session/resume` and
/// refused it, so `session/load` was the fallback.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionLoaded {
    /// The agent's session id, loaded.
    pub session_id: String,
    /// How many history updates the agent replayed while loading (not
    /// journaled: they are the earlier turns' output).
    pub replayed_updates: u64,
    /// `session/resume` was tried first and refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resume_failed: bool,
}

/// `context_reset`: `{"reason": …, "previousSessionId": …, "sessionId": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextReset {
    /// Why the bound session was not loaded.
    pub reason: ResetReason,
    /// The session that could not be loaded.
    pub previous_session_id: String,
    /// The new session.
    pub session_id: String,
}

/// Why a bound session was neither resumed nor loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetReason {
    /// The agent refused `session/load` (after `session/resume`, when it
    /// offers that too).
    LoadFailed,
    /// The agent offers neither `session/resume` nor `session/load`.
    LoadUnsupported,
    /// The agent refused `session/resume` and does not offer `session/load`.
    ResumeFailed,
}

/// `session_replaced`: `{"reason": …, "previousSessionId": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionReplaced {
    /// What changed since the session was bound.
    pub reason: ReplaceReason,
    /// The session not reused.
    pub previous_session_id: String,
}

/// Why a bound session was not reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplaceReason {
    /// The provider's launch definition changed (its fingerprint).
    ProviderChanged,
    /// The thread was configured since (`threads.configure`).
    ThreadReconfigured,
}

impl ReplaceReason {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplaceReason::ProviderChanged => "provider_changed",
            ReplaceReason::ThreadReconfigured => "thread_reconfigured",
        }
    }
}

/// `restricted_mode`: `{"mode": …, "result": …, "runsUnrestricted": bool}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestrictedMode {
    /// The provider's restricted mode id (`null` when it names none).
    pub mode: Option<String>,
    /// What the agent did.
    pub result: ModeResult,
    /// Whether the turn runs without the mode (the provider allows it).
    pub runs_unrestricted: bool,
}

/// `ask_mode`: `{"mode", "result"?, "probeIgnored"?, "runsUnasked"}`, on
/// every new or reopened session of an unrestricted `ask` thread whose
/// provider has an asking mode, and on an `ask` turn refused because the
/// provider definition's recorded policy probe found it `ignored`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AskMode {
    /// The provider's asking mode id (`null` when it names none).
    pub mode: Option<String>,
    /// What the agent did with the request (absent when nothing was
    /// asked of it: the turn was refused on the probe's verdict).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ModeResult>,
    /// The provider definition's recorded policy probe (`providers check
    /// --policy`) found that it does not ask.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub probe_ignored: bool,
    /// The turn runs though the agent may not ask (the owner accepted the
    /// provider with `allowUnasked`).
    pub runs_unasked: bool,
}

/// What became of a restricted thread's mode request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModeResult {
    /// The agent accepted `session/set_mode` (or already was in the mode).
    Applied,
    /// The provider names no restricted mode, the agent does not offer it,
    /// or it does not implement `session/set_mode`.
    Unsupported,
    /// The agent refused the request.
    Rejected,
    /// The agent reported no session modes, so whether it could honour one
    /// is unknown; the mode is not requested.
    Unreported,
}

/// `unsupported_request`: `{"method": …}`, plus `"idle": true` when the
/// agent sent it between turns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnsupportedRequest {
    /// The request's JSON-RPC method.
    pub method: String,
    /// Sent while the agent was idle (journaled on the turn it last ran).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idle: bool,
}

/// `notification`: `{"method": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentNotification {
    /// The notification's JSON-RPC method.
    pub method: String,
}

impl Note {
    /// The stored `kind` of the observation.
    pub fn kind(&self) -> &'static str {
        match self {
            Note::AgentStderr(_) => "agent_stderr",
            Note::McpRefused(_) => "mcp_servers",
            Note::SessionResumed(_) => "session_resumed",
            Note::SessionLoaded(_) => "session_loaded",
            Note::ContextReset(_) => "context_reset",
            Note::SessionReplaced(_) => "session_replaced",
            Note::RestrictedMode(_) => "restricted_mode",
            Note::AskMode(_) => "ask_mode",
            Note::UnsupportedRequest(_) => "unsupported_request",
            Note::Notification(_) => "notification",
            Note::UsageUpdate(_) => "usage_update",
            Note::PromptUsage(_) => "prompt_usage",
        }
    }

    /// The stored `payload` of the observation.
    pub fn to_value(&self) -> Value {
        match self {
            Note::AgentStderr(n) => value(n),
            Note::McpRefused(n) => value(n),
            Note::SessionResumed(n) => value(n),
            Note::SessionLoaded(n) => value(n),
            Note::ContextReset(n) => value(n),
            Note::SessionReplaced(n) => value(n),
            Note::RestrictedMode(n) => value(n),
            Note::AskMode(n) => value(n),
            Note::UnsupportedRequest(n) => value(n),
            Note::Notification(n) => value(n),
            Note::UsageUpdate(n) => value(n),
            Note::PromptUsage(n) => value(n),
        }
    }

    /// The note an observation's `kind` and `payload` are, when they are one
    /// this SDK knows in full (see the module docs); `None` otherwise.
    pub fn from_parts(kind: &str, payload: &Value) -> Option<Note> {
        Some(match kind {
            "agent_stderr" => Note::AgentStderr(exact(payload)?),
            "mcp_servers" => Note::McpRefused(exact(payload)?),
            "session_resumed" => Note::SessionResumed(exact(payload)?),
            "session_loaded" => Note::SessionLoaded(exact(payload)?),
            "context_reset" => Note::ContextReset(exact(payload)?),
            "session_replaced" => Note::SessionReplaced(exact(payload)?),
            "restricted_mode" => Note::RestrictedMode(exact(payload)?),
            "ask_mode" => Note::AskMode(exact(payload)?),
            "unsupported_request" => Note::UnsupportedRequest(exact(payload)?),
            "notification" => Note::Notification(exact(payload)?),
            "usage_update" => Note::UsageUpdate(exact(payload)?),
            "prompt_usage" => Note::PromptUsage(exact(payload)?),
            _ => return None,
        })
    }
}

/// Serializes a note struct: infallible for these types (string keys; the
/// one float, a cost amount, came from JSON and so is finite).
fn value(n: &impl Serialize) -> Value {
    serde_json::to_value(n).unwrap_or(Value::Null)
}

/// `payload` as `T` when `T` holds all of it.
fn exact<T: DeserializeOwned + Serialize>(payload: &Value) -> Option<T> {
    let typed = T::deserialize(payload).ok()?;
    (serde_json::to_value(&typed).ok()? == *payload).then_some(typed)
}

#[cfg(test)]
mod tests;
