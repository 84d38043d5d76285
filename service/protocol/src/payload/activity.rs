//! Payloads of what a turn's agent did: reply and reasoning chunks and the
//! permission requests with their answers (tool calls are
//! [`Invocation`](crate::Invocation)s). Content kinds: they follow the
//! thread's retention.
//!
//! What must stay true: each serializes to the object the store wrote
//! before these types existed, less the legacy `type` member that
//! [`Payload`](crate::Payload) adds and strips in one place.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::invocation::Invocation;
use crate::permissions::{Answerer, DecidedBy, PermissionAnswer, PermissionOption};

/// `message_chunk` / `thought_chunk`: a piece of the agent's reply or of
/// its reasoning (never mixed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Chunk {
    /// The text of a `text` content block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Any other content block, verbatim (the agent's own JSON).
    #[serde(
        default,
        deserialize_with = "keep_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub content: Option<Value>,
    /// `messageId`, when the agent sends one: chunks of one message share it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// `_meta` of the update (completion markers live here for some agents).
    #[serde(
        default,
        deserialize_with = "keep_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub meta: Option<Value>,
}

/// Reads a present member as `Some`, `null` included, so a payload that
/// stored `"meta": null` reads back to the same object.
pub(super) fn keep_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl Chunk {
    /// A plain text chunk.
    pub fn text(text: impl Into<String>) -> Chunk {
        Chunk {
            text: Some(text.into()),
            ..Chunk::default()
        }
    }

    /// The text to show: the text block's, or the `text` of another
    /// content block that has one.
    pub fn plain_text(&self) -> Option<&str> {
        self.text.as_deref().or_else(|| {
            self.content
                .as_ref()
                .and_then(|c| c.get("text"))
                .and_then(Value::as_str)
        })
    }
}

/// `permission_requested`: the agent asked; an answer is pending.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionRequested {
    /// Stable id of this request within the turn (the JSON-RPC id).
    pub request_id: String,
    /// The tool call the request is about, merged with what is known.
    pub invocation: Invocation,
    /// The options offered; an answer must be one of their ids.
    pub options: Vec<PermissionOption>,
    /// When the controller stops waiting and answers by policy (absent in
    /// events journaled before the durable inbox).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::time::rfc3339_opt"
    )]
    pub expires_at: Option<i64>,
}

/// `permission_decided`: a permission request was answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "DecidedWire", into = "DecidedWire")]
pub struct PermissionDecided {
    /// The request's id.
    pub request_id: String,
    /// The answer.
    pub answer: PermissionAnswer,
    /// Who decided; `None` for an answer that came after its turn ended
    /// (recorded, never delivered; the store files it as a late
    /// observation).
    pub decided_by: Option<DecidedBy>,
    /// Which application answered, when a user did ([`DecidedBy::User`]).
    pub answered_by: Option<Answerer>,
}

/// The two stored shapes of [`PermissionDecided`].
#[derive(Serialize, Deserialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
enum DecidedWire {
    /// Delivered to the agent.
    Answered {
        request_id: String,
        answer: PermissionAnswer,
        decided_by: DecidedBy,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answered_by: Option<Answerer>,
    },
    /// Too late: `{"late": true, …}`.
    Late {
        late: bool,
        request_id: String,
        answer: PermissionAnswer,
    },
}

impl From<DecidedWire> for PermissionDecided {
    fn from(w: DecidedWire) -> Self {
        match w {
            DecidedWire::Answered {
                request_id,
                answer,
                decided_by,
                answered_by,
            } => PermissionDecided {
                request_id,
                answer,
                decided_by: Some(decided_by),
                answered_by,
            },
            DecidedWire::Late {
                request_id, answer, ..
            } => PermissionDecided {
                request_id,
                answer,
                decided_by: None,
                answered_by: None,
            },
        }
    }
}

impl From<PermissionDecided> for DecidedWire {
    fn from(d: PermissionDecided) -> Self {
        match d.decided_by {
            Some(decided_by) => DecidedWire::Answered {
                request_id: d.request_id,
                answer: d.answer,
                decided_by,
                answered_by: d.answered_by,
            },
            None => DecidedWire::Late {
                late: true,
                request_id: d.request_id,
                answer: d.answer,
            },
        }
    }
}
