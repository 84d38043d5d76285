//! Reading journal events in tests, typed (through `JournalEvent::body`,
//! never by indexing the raw payload).

use lapis_protocol::client::Client;
use lapis_protocol::{Invocation, JournalEvent, Note, Observation, Payload, TurnState};

/// The state a `turn_state` event moved to.
pub fn moved_to(e: &JournalEvent) -> Option<TurnState> {
    match e.body()? {
        Payload::TurnState(change) => Some(change.to),
        _ => None,
    }
}

/// The text of a reply chunk.
pub fn reply_text(e: &JournalEvent) -> Option<String> {
    match e.body()? {
        Payload::MessageChunk(c) => c.plain_text().map(str::to_owned),
        _ => None,
    }
}

/// The reply text of one turn of `thread` (its message chunks, in order).
pub fn turn_reply(client: &mut Client, thread: &str, turn: &str) -> String {
    let page = client.journal_replay(Some(thread), 0, None).unwrap();
    page.events
        .iter()
        .filter(|e| e.turn_id.as_deref() == Some(turn))
        .filter_map(reply_text)
        .collect()
}

/// The latest envelope of the last tool call among `events`.
pub fn last_tool_call(events: &[JournalEvent]) -> Option<Invocation> {
    events.iter().rev().find_map(|e| match e.body()? {
        Payload::ToolCall(inv) => Some(inv),
        _ => None,
    })
}

/// The observation an `observation` event holds.
pub fn observation(e: &JournalEvent) -> Option<Observation> {
    match e.body()? {
        Payload::Observation(o) => Some(o),
        _ => None,
    }
}

/// A note the controller wrote (`agent_stderr`, `mcp_servers`,
/// `restricted_mode`, …), typed.
pub fn note(e: &JournalEvent) -> Option<Note> {
    match observation(e)? {
        Observation::Note(note) => Some(note),
        _ => None,
    }
}
