//! What the controller journals from a turn, and the mapping from ACP
//! `session/update` notifications to it.
//!
//! Invariants: the agent's authored reply (`Message`) and its reasoning
//! (`Reasoning`) are never mixed; every `tool_call` and its later
//! `tool_call_update`s are merged into one [`Invocation`] envelope per tool
//! call id, re-emitted whole on each change so a reader needs only the latest;
//! anything not understood is kept verbatim as an `Observation`, never dropped.
//! Serialized (the journal payload) with camelCase fields like the rest of
//! the wire protocol and ACP itself, and a snake_case `type` tag.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One journaled thing that happened during a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum ActivityEvent {
    /// `session/new` succeeded.
    SessionStarted {
        /// The agent's session id.
        session_id: String,
    },
    /// A chunk of the agent's reply (`agent_message_chunk`).
    Message(ContentActivity),
    /// A chunk of the agent's reasoning (`agent_thought_chunk`).
    Reasoning(ContentActivity),
    /// The merged state of one tool call after a `tool_call`/`tool_call_update`.
    Invocation(Invocation),
    /// Anything else the agent reported (`plan`, mode changes, unknown kinds,
    /// refused requests), kept verbatim.
    Observation {
        /// The `sessionUpdate` discriminator or a controller-chosen label.
        kind: String,
        /// The update as received.
        payload: Value,
    },
    /// The agent asked for permission; an answer is pending.
    PermissionRequested {
        /// Stable id of this request within the turn (the JSON-RPC id).
        request_id: String,
        /// The tool call the request is about, merged with what is known.
        invocation: Invocation,
        /// The options offered; an answer must be one of their ids.
        options: Vec<PermissionOption>,
    },
    /// A permission request was answered.
    PermissionResolved {
        /// The request's id.
        request_id: String,
        /// The answer sent to the agent.
        answer: PermissionAnswer,
        /// Who decided.
        decided_by: DecidedBy,
    },
    /// The controller sent `session/cancel`.
    CancelRequested,
    /// The agent answered `session/prompt`: the completion marker.
    Stopped {
        /// `stopReason` as sent by the agent.
        stop_reason: String,
        /// `_meta` of the response, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        meta: Option<Value>,
    },
    /// An update that arrived after the prompt's response; it changes nothing.
    Late {
        /// The `sessionUpdate` discriminator, or the JSON-RPC method.
        kind: String,
        /// The message as received.
        payload: Value,
    },
}

impl ActivityEvent {
    /// Whether the event shows the agent working on the prompt, so a
    /// dispatched turn may be marked `running`. What the controller records
    /// itself — its own `session/cancel`, its answers to permission
    /// requests, the prompt's answer, output after it, the session it
    /// opened — never does: a turn is `running` only once the agent acknowledged the
    /// prompt. (Observations after the dispatch boundary come from the agent:
    /// its updates, notifications and refused requests; the controller's own
    /// observations are recorded before the boundary.)
    pub(crate) fn shows_agent_progress(&self) -> bool {
        match self {
            ActivityEvent::Message(_)
            | ActivityEvent::Reasoning(_)
            | ActivityEvent::Invocation(_)
            | ActivityEvent::Observation { .. }
            | ActivityEvent::PermissionRequested { .. } => true,
            // The prompt's answer ends the turn (straight from `dispatched`
            // when nothing came before it, e.g. a cancel the agent honoured).
            ActivityEvent::Stopped { .. }
            | ActivityEvent::SessionStarted { .. }
            | ActivityEvent::PermissionResolved { .. }
            | ActivityEvent::CancelRequested
            | ActivityEvent::Late { .. } => false,
        }
    }

    /// The event's kind as journaled (`message`, `reasoning`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            ActivityEvent::SessionStarted { .. } => "session_started",
            ActivityEvent::Message(_) => "message",
            ActivityEvent::Reasoning(_) => "reasoning",
            ActivityEvent::Invocation(_) => "invocation",
            ActivityEvent::Observation { .. } => "observation",
            ActivityEvent::PermissionRequested { .. } => "permission_requested",
            ActivityEvent::PermissionResolved { .. } => "permission_resolved",
            ActivityEvent::CancelRequested => "cancel_requested",
            ActivityEvent::Stopped { .. } => "stopped",
            ActivityEvent::Late { .. } => "late",
        }
    }
}

/// A message or reasoning chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentActivity {
    /// The text of a `text` content block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Any other content block, verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) content: Option<Value>,
    /// `messageId`, when the agent sends one: chunks of one message share it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// `_meta` of the update (completion markers live here for some agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) meta: Option<Value>,
}

/// One tool call, merged across its updates.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Invocation {
    /// `toolCallId`.
    pub id: String,
    /// Human-readable title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `read`, `edit`, `execute`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `pending`, `in_progress`, `completed`, `failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Files the call touches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<Location>,
    /// The call's content blocks (diffs, text), latest wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) content: Option<Value>,
    /// `rawInput`, latest wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) raw_input: Option<Value>,
    /// `rawOutput`, latest wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) raw_output: Option<Value>,
}

/// A file location a tool call touches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Location {
    /// Absolute path as reported.
    pub path: String,
    /// 1-based line, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<u64>,
}

/// One option of a permission request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionOption {
    /// `optionId`: the only values an answer may carry.
    pub(crate) option_id: String,
    /// Label shown to the user.
    pub(crate) name: String,
    /// `allow_once`, `allow_always`, `reject_once`, `reject_always`.
    pub(crate) kind: String,
}

impl PermissionOption {
    /// An allow option (`allow_once` / `allow_always`).
    pub(crate) fn is_allow(&self) -> bool {
        self.kind.starts_with("allow")
    }

    /// A reject option (`reject_once` / `reject_always`).
    pub(crate) fn is_reject(&self) -> bool {
        self.kind.starts_with("reject")
    }
}

/// The answer to a permission request, as sent to the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "outcome",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum PermissionAnswer {
    /// One of the offered option ids.
    Selected {
        /// Must be one of the offered ids.
        option_id: String,
    },
    /// No option chosen; the agent must not proceed.
    Cancelled,
}

/// Who produced a permission answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    /// An authorized client answered.
    User,
    /// `allow-all` approved automatically.
    Automatic,
    /// The deadline passed.
    Expired,
    /// The turn was cancelled while the request was pending.
    Cancel,
    /// The turn ended (or failed) while the request was pending.
    TurnEnded,
}

/// Turns `session/update` payloads into events, keeping tool call state.
#[derive(Debug, Default)]
pub(crate) struct UpdateMapper {
    /// Merged state per tool call id.
    tools: HashMap<String, Invocation>,
}

impl UpdateMapper {
    /// Maps the `update` object of one `session/update` notification.
    pub(crate) fn map(&mut self, update: Value) -> ActivityEvent {
        let kind = update
            .get("sessionUpdate")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match kind.as_str() {
            "agent_message_chunk" => ActivityEvent::Message(content_activity(update)),
            "agent_thought_chunk" => ActivityEvent::Reasoning(content_activity(update)),
            "tool_call" | "tool_call_update" => {
                match update.get("toolCallId").and_then(Value::as_str) {
                    Some(id) => {
                        let id = id.to_string();
                        let fresh = kind == "tool_call";
                        let entry = self.tools.entry(id.clone()).or_default();
                        if fresh {
                            *entry = Invocation::default();
                        }
                        entry.id = id;
                        merge_invocation(entry, &update);
                        ActivityEvent::Invocation(entry.clone())
                    }
                    None => observation(kind, update),
                }
            }
            _ => observation(kind, update),
        }
    }

    /// The invocation a permission request's `toolCall` describes: the
    /// known state merged with the request's fields (state is not changed).
    pub(crate) fn preview(&self, tool_call: &Value) -> Invocation {
        let id = tool_call
            .get("toolCallId")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut inv = self.tools.get(&id).cloned().unwrap_or_default();
        inv.id = id;
        merge_invocation(&mut inv, tool_call);
        inv
    }
}

fn observation(kind: String, payload: Value) -> ActivityEvent {
    let kind = if kind.is_empty() {
        "unknown".into()
    } else {
        kind
    };
    ActivityEvent::Observation { kind, payload }
}

fn content_activity(update: Value) -> ContentActivity {
    let Value::Object(mut map) = update else {
        return ContentActivity {
            text: None,
            content: Some(update),
            message_id: None,
            meta: None,
        };
    };
    let message_id = take_string(&mut map, "messageId");
    let meta = map.remove("_meta");
    let content = map.remove("content");
    match content {
        Some(Value::Object(block))
            if block.get("type").and_then(Value::as_str) == Some("text")
                && block.len() == 2
                && block.get("text").is_some_and(Value::is_string) =>
        {
            let mut block = block;
            ContentActivity {
                text: take_string(&mut block, "text"),
                content: None,
                message_id,
                meta,
            }
        }
        other => ContentActivity {
            text: None,
            content: other,
            message_id,
            meta,
        },
    }
}

fn take_string(map: &mut Map<String, Value>, key: &str) -> Option<String> {
    match map.remove(key) {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

/// Fields present in `update` replace the envelope's (ACP update semantics).
fn merge_invocation(inv: &mut Invocation, update: &Value) {
    let s = |k: &str| update.get(k).and_then(Value::as_str).map(str::to_string);
    if let Some(v) = s("title") {
        inv.title = Some(v);
    }
    if let Some(v) = s("kind") {
        inv.kind = Some(v);
    }
    if let Some(v) = s("status") {
        inv.status = Some(v);
    }
    if let Some(Value::Array(locs)) = update.get("locations") {
        inv.locations = locs
            .iter()
            .filter_map(|l| {
                Some(Location {
                    path: l.get("path")?.as_str()?.to_string(),
                    line: l.get("line").and_then(Value::as_u64),
                })
            })
            .collect();
    }
    if let Some(v) = update.get("content").filter(|v| !v.is_null()) {
        inv.content = Some(v.clone());
    }
    if let Some(v) = update.get("rawInput").filter(|v| !v.is_null()) {
        inv.raw_input = Some(v.clone());
    }
    if let Some(v) = update.get("rawOutput").filter(|v| !v.is_null()) {
        inv.raw_output = Some(v.clone());
    }
}

#[cfg(test)]
mod tests;
