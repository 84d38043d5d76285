//! Pending permission requests as clients see them (`permissions.list`).
//!
//! A request is pending exactly while the engine waits for an answer to it:
//! it disappears when answered, when its deadline passes (the engine then
//! picks a reject option or cancels) or when its turn ends. What must stay
//! true: `options[].id` are the only values `permissions.respond` accepts.

use serde::{Deserialize, Serialize};

/// One option an agent offered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionChoice {
    /// The option id to answer with.
    pub id: String,
    /// Label shown to the user.
    pub name: String,
    /// `allow_once`, `allow_always`, `reject_once`, `reject_always` (or what
    /// the agent sent).
    pub kind: String,
}

impl PermissionChoice {
    /// An allow option (`allow_once` / `allow_always`).
    pub fn is_allow(&self) -> bool {
        self.kind.starts_with("allow")
    }

    /// A reject option (`reject_once` / `reject_always`).
    pub fn is_reject(&self) -> bool {
        self.kind.starts_with("reject")
    }
}

/// One request waiting for an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingRequest {
    /// The request id within its turn.
    pub id: String,
    /// The turn that asked.
    pub turn_id: String,
    /// The turn's thread.
    pub thread_id: String,
    /// The tool call the request is about (the journal's tool-call envelope:
    /// id, title, kind, status, locations, …).
    pub tool_call: serde_json::Value,
    /// The options offered; an answer must name one of their ids.
    pub options: Vec<PermissionChoice>,
    /// When the engine stops waiting and answers by itself (RFC 3339 UTC).
    pub deadline: String,
}
