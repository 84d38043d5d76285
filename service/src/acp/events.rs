//! The mapping from ACP `session/update` notifications to what the
//! controller journals: [`Payload`]s, the one typed journal vocabulary of
//! `lapis-protocol`.
//!
//! Invariants: the agent's authored reply (`message_chunk`) and its
//! reasoning (`thought_chunk`) are never mixed; every `tool_call` and its
//! later `tool_call_update`s are merged into one [`Invocation`] envelope per
//! tool call id (title, kind, status, locations, `command` from `rawInput`,
//! the latest content), journaled as a *durable pair*: the envelope when
//! the call starts and the merged envelope when it settles (`completed` or
//! `failed`). Updates in between only change the envelope in memory, so a
//! call's file, command and patch bodies are never rows of their own
//! however many frames carry them; whatever is still unjournaled when the
//! prompt ends is journaled then ([`UpdateMapper::flush`]), so a reader
//! needs only a call's latest envelope and never misses its last state.
//! A `usage_update` becomes the typed `usage_update` note. Anything not
//! understood is kept verbatim as an observation, never dropped.

use std::collections::HashMap;

use lapis_protocol::{Chunk, Invocation, Location, Observation, Payload};
use serde_json::{Map, Value};

/// Whether a journaled event shows the agent working on the prompt, so a
/// dispatched turn may be marked `running`. What the controller records
/// itself — its own `session/cancel`, its answers to permission requests,
/// the prompt's answer, output after it, the session it opened — never
/// does: a turn is `running` only once the agent acknowledged the prompt.
/// (Noted observations and notes after the dispatch boundary come from the
/// agent: its updates, notifications and refused requests; the
/// controller's session notes are recorded before the boundary.)
pub(crate) fn shows_agent_progress(event: &Payload) -> bool {
    match event {
        Payload::MessageChunk(_)
        | Payload::ThoughtChunk(_)
        | Payload::ToolCall(_)
        | Payload::PermissionRequested(_)
        | Payload::Observation(Observation::Noted { .. } | Observation::Note(_)) => true,
        // The prompt's answer ends the turn (straight from `dispatched`
        // when nothing came before it, e.g. a cancel the agent honoured).
        Payload::Observation(_) | Payload::PermissionDecided(_) => false,
        // Never emitted by a turn.
        Payload::ThreadCreated(_)
        | Payload::ThreadConfigured(_)
        | Payload::TurnSubmitted(_)
        | Payload::UserMessage(_)
        | Payload::TurnPrepared(_)
        | Payload::TurnState(_)
        | Payload::CancelRequested(_)
        | Payload::TurnResolved(_)
        | Payload::ThreadDeleted(_)
        | Payload::HistoryPruned(_)
        | Payload::ThreadImported(_)
        | Payload::Unknown { .. } => false,
        // Journaled by the MCP bridge's calls, never by the runner.
        Payload::ToolCallRequested(_) | Payload::ToolCallFinished(_) => false,
        // Journaled by the claim's preparation, before the boundary.
        Payload::ContextPrepared(_) | Payload::MemoryRecalled(_) => false,
        // Journaled by the engine around the turn, never by the agent.
        Payload::WorkspaceSnapshot(_) => false,
    }
}

/// A message an agent sent after the prompt's answer (or while idle), as
/// the observation that records it: labelled by its `sessionUpdate`, else
/// its method.
pub(crate) fn late_update(msg: Value) -> Payload {
    let kind = msg
        .pointer("/params/update/sessionUpdate")
        .or_else(|| msg.get("method"))
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_string();
    Observation::LateUpdate { kind, payload: msg }.into()
}

/// One tool call's merged envelope and whether the journal has its latest
/// state.
#[derive(Debug, Default)]
struct Tracked {
    /// The merged envelope.
    invocation: Invocation,
    /// Changed since it was last journaled.
    dirty: bool,
    /// When it started, for [`UpdateMapper::flush`]'s order.
    order: u64,
}

/// Turns `session/update` payloads into events, keeping tool call state.
#[derive(Debug, Default)]
pub(crate) struct UpdateMapper {
    /// Merged state per tool call id.
    tools: HashMap<String, Tracked>,
    /// Calls started so far.
    started: u64,
}

impl UpdateMapper {
    /// Maps the `update` object of one `session/update` notification;
    /// `None` when it only changed a tool call's envelope in memory (see
    /// the module docs).
    pub(crate) fn map(&mut self, update: Value) -> Option<Payload> {
        let kind = update
            .get("sessionUpdate")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match kind.as_str() {
            "agent_message_chunk" => Some(Payload::MessageChunk(chunk(update))),
            "agent_thought_chunk" => Some(Payload::ThoughtChunk(chunk(update))),
            "tool_call" | "tool_call_update" => {
                match update.get("toolCallId").and_then(Value::as_str) {
                    Some(id) => self.tool(id, kind == "tool_call", &update),
                    None => Some(observation(kind, update)),
                }
            }
            "usage_update" => Some(usage_update(update)),
            _ => Some(observation(kind, update)),
        }
    }

    /// A `tool_call` (`fresh`) or `tool_call_update` frame: journaled when
    /// it starts a call (an update for an unknown id starts one too) or
    /// settles it; otherwise kept for the settling or the flush.
    fn tool(&mut self, id: &str, fresh: bool, update: &Value) -> Option<Payload> {
        let known = self.tools.contains_key(id);
        let entry = self.tools.entry(id.to_owned()).or_default();
        let was_settled = entry.invocation.is_settled();
        if fresh || !known {
            self.started += 1;
            *entry = Tracked {
                order: self.started,
                ..Tracked::default()
            };
        }
        entry.invocation.id = id.to_owned();
        merge_invocation(&mut entry.invocation, update);
        let starts = fresh || !known;
        let settles = entry.invocation.is_settled() && !was_settled;
        if starts || settles {
            entry.dirty = false;
            Some(Payload::ToolCall(entry.invocation.clone()))
        } else {
            entry.dirty = true;
            None
        }
    }

    /// The envelopes changed since they were last journaled, in the order
    /// their calls started (the prompt ended: they are journaled now).
    pub(crate) fn flush(&mut self) -> Vec<Payload> {
        let mut out: Vec<&mut Tracked> = self.tools.values_mut().filter(|t| t.dirty).collect();
        out.sort_by_key(|t| t.order);
        out.into_iter()
            .map(|t| {
                t.dirty = false;
                Payload::ToolCall(t.invocation.clone())
            })
            .collect()
    }

    /// The invocation a permission request's `toolCall` describes: the
    /// known state merged with the request's fields (state is not changed).
    pub(crate) fn preview(&self, tool_call: &Value) -> Invocation {
        let id = tool_call
            .get("toolCallId")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut inv = self
            .tools
            .get(&id)
            .map(|t| t.invocation.clone())
            .unwrap_or_default();
        inv.id = id;
        merge_invocation(&mut inv, tool_call);
        inv
    }
}

/// A `usage_update` as the typed `usage_update` note when it has ACP's
/// shape (`used`, `size`, optional `cost`), else verbatim like any update
/// the controller does not understand.
fn usage_update(update: Value) -> Payload {
    let mut members = update.clone();
    if let Some(map) = members.as_object_mut() {
        map.remove("sessionUpdate");
        // `_meta` is the agent's own; the note keeps the figures.
        map.remove("_meta");
    }
    match serde_json::from_value::<lapis_protocol::usage::ContextUsage>(members) {
        Ok(usage) => lapis_protocol::Note::UsageUpdate(usage).into(),
        Err(_) => observation("usage_update".into(), update),
    }
}

fn observation(kind: String, payload: Value) -> Payload {
    let kind = if kind.is_empty() {
        "unknown".into()
    } else {
        kind
    };
    Observation::Noted { kind, payload }.into()
}

fn chunk(update: Value) -> Chunk {
    let Value::Object(mut map) = update else {
        return Chunk {
            content: Some(update),
            ..Chunk::default()
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
            Chunk {
                text: take_string(&mut block, "text"),
                content: None,
                message_id,
                meta,
            }
        }
        other => Chunk {
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
        if let Some(command) = command_of(v) {
            inv.command = Some(command);
        }
        inv.raw_input = Some(v.clone());
    }
    if let Some(v) = update.get("rawOutput").filter(|v| !v.is_null()) {
        inv.raw_output = Some(v.clone());
    }
}

/// The command line a tool call runs, as agents put it in `rawInput`:
/// `command` as a string, or as an argv array (joined with spaces).
fn command_of(raw_input: &Value) -> Option<String> {
    match raw_input.get("command")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(argv) => {
            let parts: Option<Vec<&str>> = argv.iter().map(Value::as_str).collect();
            parts.map(|p| p.join(" "))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
