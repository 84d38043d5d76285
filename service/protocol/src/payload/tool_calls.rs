//! Payloads of application tool calls through the MCP bridge: one
//! `tool_call_requested` journaled (durably) before anything runs, one
//! `tool_call_finished` after the result.
//!
//! What must stay true: a mutating call's `tool_call_requested` without a
//! `tool_call_finished`, or finished `effect_unknown`, is an *unknown tool
//! effect* on its turn ([`UnknownToolEffect`]): never re-invoked, and the
//! turn's continuation is refused. These kinds are always kept (their
//! identities decide that); a metadata-only thread's events carry no
//! arguments and no output.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ErrorCode;
use crate::tools::ToolOutput;

/// `tool_call_requested`: the agent asked for one call; nothing ran yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRequested {
    /// The controller's id of the call (`tcall_…`), unique.
    pub call_id: String,
    /// The endpoint.
    pub endpoint: String,
    /// Its identity when called (`tools_…`).
    pub endpoint_identity: String,
    /// The tool.
    pub tool: String,
    /// Whether it is mutating.
    pub mutating: bool,
    /// Turn id + call id, as the application receives it.
    pub idempotency_key: String,
    /// The arguments, redacted (absent on metadata-only threads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
}

/// How one call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallOutcome {
    /// The tool ran and returned a result.
    Ok,
    /// The tool ran and reported an error (told to the agent).
    Error,
    /// Refused or failed before the tool could run (never invoked).
    Failed,
    /// A mutating call that may have run without its result reaching the
    /// controller (the application went away between capture begin and
    /// finish): an unknown tool effect.
    EffectUnknown,
}

/// `tool_call_finished`: the call's result, journaled before the agent
/// gets it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallFinished {
    /// The call.
    pub call_id: String,
    /// How it ended.
    pub outcome: ToolCallOutcome,
    /// The failure's code (`failed`, `effect_unknown`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<ErrorCode>,
    /// The result, redacted (absent on metadata-only threads and when the
    /// tool never answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<ToolOutput>,
}

/// A mutating call whose effect is unknown, as `turns.get` and `status`
/// name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnknownToolEffect {
    /// The turn.
    pub turn_id: String,
    /// The call.
    pub call_id: String,
    /// The endpoint.
    pub endpoint: String,
    /// The tool.
    pub tool: String,
    /// Its idempotency key (what the application saw, if it saw anything).
    pub idempotency_key: String,
}

/// The unknown effects among one turn's tool-call payloads, in order:
/// each mutating request whose call has no finish, or finished
/// `effect_unknown`.
pub fn unknown_effects<'a>(
    turn_id: &str,
    payloads: impl IntoIterator<Item = &'a crate::Payload>,
) -> Vec<UnknownToolEffect> {
    let mut open: Vec<(ToolCallRequested, bool)> = Vec::new();
    for p in payloads {
        match p {
            crate::Payload::ToolCallRequested(r) if r.mutating => open.push((r.clone(), true)),
            crate::Payload::ToolCallFinished(f) => {
                if let Some(entry) = open.iter_mut().find(|(r, _)| r.call_id == f.call_id) {
                    entry.1 = f.outcome == ToolCallOutcome::EffectUnknown;
                }
            }
            _ => {}
        }
    }
    open.into_iter()
        .filter(|(_, unknown)| *unknown)
        .map(|(r, _)| UnknownToolEffect {
            turn_id: turn_id.to_owned(),
            call_id: r.call_id,
            endpoint: r.endpoint,
            tool: r.tool,
            idempotency_key: r.idempotency_key,
        })
        .collect()
}
