//! The handoff projection: what a consumer needs to continue a thread
//! elsewhere (another agent, another controller, a person), read from the
//! thread's journal events. The controller's own continuation digest (a
//! prior turn summarised for an agent that lost its session) is built from
//! it, so both read a transcript the same way.
//!
//! What must stay true: only what the journal says is projected (the
//! prompt, the reply text, each tool call's latest title and status, the
//! last state and outcome), never reasoning chunks; a turn whose content
//! is unavailable (metadata-only retention after a restart) says so with
//! the sequences it lacks, so nobody continues from a silently partial
//! record.

use serde::{Deserialize, Serialize};

use crate::{JournalEvent, Payload, TurnState};

/// A thread as a consumer continues it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Handoff {
    /// The thread (empty when no event was given).
    pub thread_id: String,
    /// The last `thread_seq` projected (0 when none): continue reading the
    /// journal after it.
    pub last_thread_seq: u64,
    /// Its turns, in the order they were submitted.
    pub turns: Vec<HandoffTurn>,
}

/// One turn of a [`Handoff`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoffTurn {
    /// The turn.
    pub turn_id: String,
    /// What was asked (`user_message` text; `None` when not in the events).
    pub prompt: Option<String>,
    /// The reply: every `message_chunk`'s text, in order.
    pub reply: String,
    /// Each tool call, in first-seen order, with its latest title and status.
    pub tool_calls: Vec<HandoffToolCall>,
    /// The turn's last recorded state.
    pub state: Option<TurnState>,
    /// The outcome code recorded with it.
    pub outcome: Option<String>,
    /// `thread_seq`s of this turn's events whose payload is unavailable:
    /// when not empty, the prompt, reply or tool calls are incomplete.
    pub unavailable: Vec<u64>,
}

/// One tool call of a [`HandoffTurn`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoffToolCall {
    /// The agent's tool call id.
    pub id: String,
    /// Its latest title.
    pub title: Option<String>,
    /// Its latest status (`pending`, `in_progress`, `completed`, `failed`).
    pub status: Option<String>,
}

impl HandoffTurn {
    fn new(turn_id: &str) -> HandoffTurn {
        HandoffTurn {
            turn_id: turn_id.to_owned(),
            prompt: None,
            reply: String::new(),
            tool_calls: Vec::new(),
            state: None,
            outcome: None,
            unavailable: Vec::new(),
        }
    }

    fn note(&mut self, event: &JournalEvent) {
        if event.payload_unavailable {
            self.unavailable.push(event.thread_seq);
            return;
        }
        match event.body() {
            Some(Payload::UserMessage(p)) => self
                .prompt
                .get_or_insert_with(String::new)
                .push_str(&p.text),
            Some(Payload::MessageChunk(c)) => self.reply.push_str(c.plain_text().unwrap_or("")),
            Some(Payload::ToolCall(inv)) => {
                match self.tool_calls.iter_mut().find(|t| t.id == inv.id) {
                    Some(t) => {
                        if inv.title.is_some() {
                            t.title = inv.title.clone();
                        }
                        if inv.status.is_some() {
                            t.status = inv.status.clone();
                        }
                    }
                    None => self.tool_calls.push(HandoffToolCall {
                        id: inv.id.clone(),
                        title: inv.title.clone(),
                        status: inv.status.clone(),
                    }),
                }
            }
            Some(Payload::TurnState(change)) => {
                self.state = Some(change.to);
                if change.outcome.is_some() {
                    self.outcome = change.outcome;
                }
            }
            _ => {}
        }
    }
}

/// Projects one thread's events (in `thread_seq` order; a page or the
/// whole thread). Events without a turn (thread creation, configuration)
/// only advance [`Handoff::last_thread_seq`].
pub fn handoff(events: &[JournalEvent]) -> Handoff {
    let mut out = Handoff::default();
    for event in events {
        if out.thread_id.is_empty() {
            out.thread_id = event.thread_id.clone();
        }
        out.last_thread_seq = out.last_thread_seq.max(event.thread_seq);
        let Some(turn) = event.turn_id.as_deref() else {
            continue;
        };
        let at = match out.turns.iter().position(|t| t.turn_id == turn) {
            Some(i) => i,
            None => {
                out.turns.push(HandoffTurn::new(turn));
                out.turns.len() - 1
            }
        };
        out.turns[at].note(event);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EventKind;
    use serde_json::json;

    fn ev(
        seq: u64,
        turn: Option<&str>,
        kind: EventKind,
        payload: serde_json::Value,
    ) -> JournalEvent {
        JournalEvent {
            seq,
            thread_id: "thr".into(),
            thread_seq: seq,
            turn_id: turn.map(str::to_owned),
            kind,
            at: 0,
            payload: Some(payload),
            payload_unavailable: false,
        }
    }

    #[test]
    fn turns_carry_prompt_reply_tools_and_outcome_but_no_thoughts() {
        let mut lost = ev(8, Some("t2"), EventKind::MessageChunk, json!({}));
        lost.payload = None;
        lost.payload_unavailable = true;
        let events = [
            ev(
                1,
                None,
                EventKind::ThreadCreated,
                json!({"workspaceId": "w"}),
            ),
            ev(
                2,
                Some("t1"),
                EventKind::UserMessage,
                json!({"text": "do it"}),
            ),
            ev(
                3,
                Some("t1"),
                EventKind::ThoughtChunk,
                json!({"text": "secret plan"}),
            ),
            ev(
                4,
                Some("t1"),
                EventKind::MessageChunk,
                json!({"text": "do"}),
            ),
            ev(
                5,
                Some("t1"),
                EventKind::ToolCall,
                json!({"id": "c1", "title": "Read", "status": "pending"}),
            ),
            ev(
                6,
                Some("t1"),
                EventKind::ToolCall,
                json!({"id": "c1", "status": "completed"}),
            ),
            ev(
                7,
                Some("t1"),
                EventKind::MessageChunk,
                json!({"text": "ne"}),
            ),
            lost,
        ];
        let h = handoff(&events);
        assert_eq!(h.thread_id, "thr");
        assert_eq!(h.last_thread_seq, 8);
        assert_eq!(h.turns.len(), 2);
        let t1 = &h.turns[0];
        assert_eq!(t1.prompt.as_deref(), Some("do it"));
        assert_eq!(t1.reply, "done");
        assert_eq!(
            t1.tool_calls,
            [HandoffToolCall {
                id: "c1".into(),
                title: Some("Read".into()),
                status: Some("completed".into())
            }]
        );
        assert!(t1.unavailable.is_empty());
        assert_eq!(h.turns[1].unavailable, [8]);
        let text = serde_json::to_string(&h).unwrap();
        assert!(!text.contains("secret plan"), "{text}");
        assert_eq!(serde_json::from_str::<Handoff>(&text).unwrap(), h);
    }
}
