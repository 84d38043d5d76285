//! Continuations (`turns.continue`): a linked attempt after a settled turn.
//!
//! What must stay true: a continuation never cancels anything, never
//! releases a fence, never sends the prior prompt again and never reruns a
//! tool. It is accepted only after a prior whose outcome is known
//! (`completed`, `failed`, `cancelled`, resolved ones included) and whose
//! record is whole: no permission request left unanswered, no tool call
//! without a terminal status, no application tool call with an unknown
//! effect (`tool_effect_unknown`, checked in the writer's step that queues
//! the continuation and again at its claim), no payload lost to metadata-only retention
//! (`transcript_unavailable`). The claim checks the prior again. When the
//! agent session cannot be resumed, the attempt carries a bounded
//! [`digest`] of the prior turn as a separate content block.

use std::collections::{BTreeMap, HashSet};

use lapis_protocol::{Invocation, Payload};
use rusqlite::Connection;

use crate::domain::{JournalEvent, StoreError, StoreResult, Turn, TurnState};

use super::journal::MemoryPayloads;
use super::read;

/// Longest digest of a prior turn sent to a new session, in bytes.
pub(super) const MAX_DIGEST_BYTES: usize = 4096;
/// Longest part (prompt, reply) of a digest, in bytes.
const MAX_PART_BYTES: usize = 1536;

/// Tool-call statuses after which a call will not run again.
fn terminal_tool_status(status: &str) -> bool {
    matches!(status, "completed" | "failed")
}

/// Refuses a prior turn that may not be continued (see the module docs).
/// `thread` is the thread the continuation is submitted to.
pub(super) fn check_prior(
    conn: &Connection,
    memory: &MemoryPayloads,
    prior: &Turn,
    thread: &str,
) -> StoreResult<Vec<JournalEvent>> {
    if prior.thread_id != thread {
        return Err(StoreError::invalid(
            "continued turn belongs to another thread",
        ));
    }
    match prior.state {
        TurnState::Completed | TurnState::Failed | TurnState::Cancelled => {}
        TurnState::SubmissionUnknown | TurnState::Interrupted => {
            return Err(StoreError::conflict(format!(
                "turn `{}` is {}: its outcome is unknown; resolve it first (`turns resolve`); \
                 a continuation never releases a fence",
                prior.id,
                prior.state.as_str()
            )));
        }
        s => {
            return Err(StoreError::conflict(format!(
                "turn `{}` is {}: only a settled turn (completed, failed, cancelled) can be continued",
                prior.id,
                s.as_str()
            )));
        }
    }
    let events = read::turn_events(conn, memory, &prior.thread_id, &prior.id)?;
    // In the writer, like the insert that follows: no call of the prior can
    // be journaled between this check and the continuation's queueing.
    let bodies: Vec<Payload> = events.iter().filter_map(JournalEvent::body).collect();
    if let Some(u) = lapis_protocol::unknown_effects(&prior.id, &bodies)
        .into_iter()
        .next()
    {
        return Err(StoreError::ToolEffectUnknown {
            turn: u.turn_id,
            call: u.call_id,
            endpoint: u.endpoint,
            tool: u.tool,
        });
    }
    if let Some(e) = events.iter().find(|e| e.payload_unavailable) {
        return Err(StoreError::TranscriptUnavailable {
            thread: prior.thread_id.clone(),
            seq: e.thread_seq,
        });
    }
    let mut asked = HashSet::new();
    let mut answered = HashSet::new();
    let mut tools: BTreeMap<String, String> = BTreeMap::new();
    for e in &events {
        match e.body() {
            Some(Payload::PermissionRequested(r)) => {
                note_tool(&mut tools, &r.invocation);
                asked.insert(r.request_id);
            }
            Some(Payload::PermissionDecided(d)) => {
                answered.insert(d.request_id);
            }
            Some(Payload::ToolCall(inv)) => note_tool(&mut tools, &inv),
            _ => {}
        }
    }
    if asked.iter().any(|id| !answered.contains(id)) {
        return Err(StoreError::conflict(format!(
            "turn `{}` has a permission request that was never answered",
            prior.id
        )));
    }
    if let Some((id, status)) = tools.iter().find(|(_, s)| !terminal_tool_status(s)) {
        return Err(StoreError::conflict(format!(
            "turn `{}` has tool call `{id}` without a terminal status ({status})",
            prior.id
        )));
    }
    Ok(events)
}

/// Records the latest status of a tool call envelope (`pending` when the
/// agent never gave one).
fn note_tool(tools: &mut BTreeMap<String, String>, invocation: &Invocation) {
    let status = invocation.status.as_deref();
    match (tools.get_mut(&invocation.id), status) {
        (Some(old), Some(s)) => *old = s.to_owned(),
        (Some(_), None) => {}
        (None, s) => {
            tools.insert(invocation.id.clone(), s.unwrap_or("pending").to_owned());
        }
    }
}

/// A bounded, plain-text digest of the prior turn for an agent that lost
/// its session: what was asked, what was replied, and each tool call's title
/// and final status. At most [`MAX_DIGEST_BYTES`].
pub(super) fn digest(prior: &Turn, events: &[JournalEvent]) -> String {
    // The shared handoff projection reads the transcript, so the digest
    // and what consumers continue a thread from agree.
    let projected = lapis_protocol::transcript::handoff(events);
    let turn = projected.turns.iter().find(|t| t.turn_id == prior.id);
    let asked = turn.and_then(|t| t.prompt.as_deref()).unwrap_or("");
    let reply = turn.map_or("", |t| t.reply.as_str());
    let tools: Vec<(&str, &str)> = turn
        .map(|t| {
            t.tool_calls
                .iter()
                .map(|c| {
                    (
                        c.title.as_deref().unwrap_or(&c.id),
                        c.status.as_deref().unwrap_or("pending"),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let mut out = format!(
        "[Context: this turn continues turn {} ({}{}); the agent session it ran in could not be resumed, so this is what it recorded.]\n",
        prior.id,
        prior.state.as_str(),
        prior
            .outcome
            .as_deref()
            .map(|o| format!(", {o}"))
            .unwrap_or_default()
    );
    out.push_str("Asked: ");
    out.push_str(bounded(asked, MAX_PART_BYTES));
    out.push_str("\nReplied: ");
    out.push_str(bounded(reply, MAX_PART_BYTES));
    if !tools.is_empty() {
        out.push_str("\nTool calls:");
        for (title, status) in &tools {
            out.push_str(&format!("\n- {} ({status})", bounded(title, 200)));
        }
    }
    bounded(&out, MAX_DIGEST_BYTES).to_owned()
}

/// `s` cut to at most `max` bytes on a character boundary.
fn bounded(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_cuts_on_a_char_boundary() {
        assert_eq!(bounded("héllo", 2), "h");
        assert_eq!(bounded("héllo", 3), "hé");
        assert_eq!(bounded("abc", 10), "abc");
    }
}
