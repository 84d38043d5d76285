//! Reading journal events in tests, typed (through `JournalEvent::body`,
//! never by indexing the raw payload).

use lapis_protocol::{JournalEvent, Note, Observation, Payload, TurnState};

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

/// The label and payload of an agent update kept verbatim (`plan`, …).
pub fn noted(e: &JournalEvent) -> Option<(String, serde_json::Value)> {
    match observation(e)? {
        Observation::Noted { kind, payload } => Some((kind, payload)),
        _ => None,
    }
}
