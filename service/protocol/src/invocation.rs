//! A tool call as the journal keeps it: one envelope per tool call id,
//! merged across the agent's `tool_call` and `tool_call_update`s and
//! re-journaled whole on each change, so a reader needs only the latest
//! (`tool_call` events, the `invocation` of a permission request, the
//! `toolCall` of `permissions.list`).
//!
//! What must stay true: the serialized form is the stored journal payload
//! (camelCase, absent fields omitted); renaming a field changes the bytes
//! the hash chain covers.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One tool call, merged across its updates.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    /// The command line it runs, when the agent gave one in `rawInput`
    /// (`command`, a string or an argv array joined with spaces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The call's content blocks (diffs, text), latest wins; the agent's
    /// own JSON, kept verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
    /// `rawInput`, latest wins (the agent's own JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_input: Option<Value>,
    /// `rawOutput`, latest wins (the agent's own JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_output: Option<Value>,
}

impl Invocation {
    /// Whether the status is final (`completed` or `failed`).
    pub fn is_settled(&self) -> bool {
        matches!(self.status.as_deref(), Some("completed" | "failed"))
    }
}

/// A file location a tool call touches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Location {
    /// Absolute path as reported.
    pub path: String,
    /// 1-based line, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}

/// ACP v1's `ToolKind`: the closed vocabulary a tool call's `kind` is meant
/// to come from. [`Invocation::kind`] keeps what the agent sent (the
/// journal records the agent's words); anything the controller says in its
/// own words (a notification's title) uses only a kind that parses here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    /// `read`.
    Read,
    /// `edit`.
    Edit,
    /// `delete`.
    Delete,
    /// `move`.
    Move,
    /// `search`.
    Search,
    /// `execute`.
    Execute,
    /// `think`.
    Think,
    /// `fetch`.
    Fetch,
    /// `switch_mode`.
    SwitchMode,
    /// `other`.
    Other,
}

impl ToolKind {
    /// Every kind, in ACP's order.
    pub const ALL: [ToolKind; 10] = [
        ToolKind::Read,
        ToolKind::Edit,
        ToolKind::Delete,
        ToolKind::Move,
        ToolKind::Search,
        ToolKind::Execute,
        ToolKind::Think,
        ToolKind::Fetch,
        ToolKind::SwitchMode,
        ToolKind::Other,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Read => "read",
            ToolKind::Edit => "edit",
            ToolKind::Delete => "delete",
            ToolKind::Move => "move",
            ToolKind::Search => "search",
            ToolKind::Execute => "execute",
            ToolKind::Think => "think",
            ToolKind::Fetch => "fetch",
            ToolKind::SwitchMode => "switch_mode",
            ToolKind::Other => "other",
        }
    }

    /// The kind named exactly `s`, if ACP has one.
    pub fn parse(s: &str) -> Option<ToolKind> {
        ToolKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::ToolKind;

    #[test]
    fn only_acps_tool_kinds_parse() {
        for k in ToolKind::ALL {
            assert_eq!(ToolKind::parse(k.as_str()), Some(k));
        }
        for s in ["", "Edit", "edit\n", "edit <b>", "rm -rf /", "switch-mode"] {
            assert_eq!(ToolKind::parse(s), None, "{s:?}");
        }
    }
}
