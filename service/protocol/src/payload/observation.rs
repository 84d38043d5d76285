//! The payload of `observation` events: everything a turn recorded that
//! is neither output, a tool call nor a permission: the session it opened,
//! the controller's own cancel, the prompt's answer, the controller's
//! typed notes ([`Note`]), agent updates the controller does not interpret
//! (`plan`, mode changes, unknown kinds, kept verbatim), output that came
//! after the answer, and what the store refused to apply to a finished
//! turn.
//!
//! What must stay true: every variant serializes to the object stored
//! before these types existed. Five carry a `type` member (the runner's
//! old event names; a [`Note`] and a `Noted` share the `observation` one
//! and are told apart by [`Note::from_parts`]); the store's own two are
//! told apart by their members (`late` + `data`, `ignored`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::activity::keep_null;
use super::note::Note;
use crate::events::EventKind;
use crate::state::{TurnEvent, TurnState};

/// One `observation` payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "ObservationWire", into = "ObservationWire")]
pub enum Observation {
    /// `session/new` (or `session/load`) succeeded: the agent's session id.
    SessionStarted {
        /// The agent's session id.
        session_id: String,
    },
    /// A note the controller wrote (its stderr tail, refused MCP servers,
    /// how the session was opened, …), typed.
    Note(Note),
    /// Something the agent reported that the controller does not
    /// interpret (`plan`, mode changes, unknown kinds), verbatim; also a
    /// note of a newer server that this SDK does not know in full.
    Noted {
        /// The `sessionUpdate` discriminator (or the note's kind).
        kind: String,
        /// The update as received (the agent's own JSON).
        payload: Value,
    },
    /// The controller sent `session/cancel`.
    CancelSent,
    /// The agent answered `session/prompt`: the completion marker.
    Stopped {
        /// `stopReason` as sent by the agent.
        stop_reason: String,
        /// `_meta` of the response, if any.
        meta: Option<Value>,
    },
    /// A message that arrived after the prompt's answer; changes nothing.
    LateUpdate {
        /// The `sessionUpdate` discriminator, or the JSON-RPC method.
        kind: String,
        /// The message as received.
        payload: Value,
    },
    /// An activity appended after its turn ended, filed here by the store.
    LateAppend(LateAppend),
    /// A state change the transition table refused (the turn had moved on).
    Ignored(Ignored),
}

/// An activity appended after its turn ended: `{"late": kind, "data": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LateAppend {
    /// The kind the activity was appended as.
    pub late: EventKind,
    /// Its payload as it would have been stored (`null` if none); read it
    /// with [`Payload::from_value`](crate::Payload::from_value)`(late, data)`.
    pub data: Value,
}

/// A refused transition: `{"ignored": event, "state": …, "outcome": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ignored {
    /// The event the table refused.
    pub ignored: TurnEvent,
    /// The turn's state then.
    pub state: TurnState,
    /// The outcome that came with it, else `null`.
    pub outcome: Option<String>,
}

/// The stored shapes: the runner's tagged five, then the store's two.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum ObservationWire {
    Tagged(Tagged),
    LateAppend(LateAppend),
    Ignored(Ignored),
}

/// The five `type`-tagged shapes (names of the runner's old event enum).
#[derive(Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
enum Tagged {
    SessionStarted {
        session_id: String,
    },
    Observation {
        kind: String,
        payload: Value,
    },
    CancelRequested,
    Stopped {
        stop_reason: String,
        #[serde(
            default,
            deserialize_with = "keep_null",
            skip_serializing_if = "Option::is_none"
        )]
        meta: Option<Value>,
    },
    Late {
        kind: String,
        payload: Value,
    },
}

impl From<ObservationWire> for Observation {
    fn from(w: ObservationWire) -> Self {
        match w {
            ObservationWire::Tagged(t) => match t {
                Tagged::SessionStarted { session_id } => Observation::SessionStarted { session_id },
                Tagged::Observation { kind, payload } => match Note::from_parts(&kind, &payload) {
                    Some(note) => Observation::Note(note),
                    None => Observation::Noted { kind, payload },
                },
                Tagged::CancelRequested => Observation::CancelSent,
                Tagged::Stopped { stop_reason, meta } => Observation::Stopped { stop_reason, meta },
                Tagged::Late { kind, payload } => Observation::LateUpdate { kind, payload },
            },
            ObservationWire::LateAppend(l) => Observation::LateAppend(l),
            ObservationWire::Ignored(i) => Observation::Ignored(i),
        }
    }
}

impl From<Observation> for ObservationWire {
    fn from(o: Observation) -> Self {
        let tagged = match o {
            Observation::SessionStarted { session_id } => Tagged::SessionStarted { session_id },
            Observation::Note(note) => Tagged::Observation {
                kind: note.kind().to_owned(),
                payload: note.to_value(),
            },
            Observation::Noted { kind, payload } => Tagged::Observation { kind, payload },
            Observation::CancelSent => Tagged::CancelRequested,
            Observation::Stopped { stop_reason, meta } => Tagged::Stopped { stop_reason, meta },
            Observation::LateUpdate { kind, payload } => Tagged::Late { kind, payload },
            Observation::LateAppend(l) => return ObservationWire::LateAppend(l),
            Observation::Ignored(i) => return ObservationWire::Ignored(i),
        };
        ObservationWire::Tagged(tagged)
    }
}

impl Observation {
    /// An agent update the controller keeps verbatim, labelled `kind`.
    pub fn noted(kind: impl Into<String>, payload: Value) -> Observation {
        Observation::Noted {
            kind: kind.into(),
            payload,
        }
    }

    /// The label of a [`Note`](Observation::Note),
    /// [`Noted`](Observation::Noted) or
    /// [`LateUpdate`](Observation::LateUpdate) observation.
    pub fn label(&self) -> Option<&str> {
        match self {
            Observation::Note(note) => Some(note.kind()),
            Observation::Noted { kind, .. } | Observation::LateUpdate { kind, .. } => Some(kind),
            _ => None,
        }
    }
}

impl From<Note> for Observation {
    fn from(note: Note) -> Observation {
        Observation::Note(note)
    }
}
