//! Memory ports: what an application registers on its connection
//! (`memory.register`) so the agents of the threads that bind it can
//! recall what the application remembers, and the two callbacks the
//! controller makes (`memory.search`, `memory.evidence`).
//!
//! What must stay true:
//! - the controller decides recall: it searches once at each turn's
//!   preparation (with the prompt), renders the top candidates within
//!   [`MEMORY_BUDGET_BYTES`] into one labelled block before the prompt, and
//!   offers the agent `memory_search` and `memory_read` as read tools on
//!   the thread's MCP bridge;
//! - every callback carries an [`AccessEnvelope`] the controller fills from
//!   the thread (principal, application, thread, workspace); nothing the
//!   agent or the application sends can set or change it, and a port is
//!   only ever reached for threads of its own application;
//! - a candidate or item whose text carries a redaction or omission marker
//!   (`[REDACTED:`, `[OMITTED:`) is rejected and counted, never shown;
//! - what the journal keeps of a recall ([`PreparedMemory`]) is counts,
//!   identities and budget use, never memory text.

use serde::{Deserialize, Serialize};

/// The server → client request a memory port answers with candidates.
pub const MEMORY_SEARCH: &str = "memory.search";
/// The server → client request a memory port answers with one item.
pub const MEMORY_EVIDENCE: &str = "memory.evidence";
/// Bytes of candidate text the recall block of one turn may hold.
pub const MEMORY_BUDGET_BYTES: usize = 8 * 1024;
/// Most candidates one search asks for (and reads).
pub const MAX_CANDIDATES: usize = 16;
/// The bridge tool that searches the thread's memory port.
pub const MEMORY_SEARCH_TOOL: &str = "memory_search";
/// The bridge tool that reads one item of it.
pub const MEMORY_READ_TOOL: &str = "memory_read";
/// What marks text the redactor changed (`[REDACTED:<detector>]`,
/// `[OMITTED:id]`): a candidate carrying one is derived from redacted
/// content and is rejected.
pub const MARKERS: [&str; 2] = ["[REDACTED:", "[OMITTED:"];

/// `memory.register`: one memory port of this connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryRegister {
    /// The port's name (the tools' name rule).
    pub port: String,
    /// How long one callback may take, in milliseconds (1-60000, default
    /// 5000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
}

impl MemoryRegister {
    /// The deadline in effect.
    pub fn deadline(&self) -> std::time::Duration {
        std::time::Duration::from_millis(
            self.deadline_ms
                .unwrap_or(crate::context::DEFAULT_PREPARE_DEADLINE_MS),
        )
    }
}

/// Who is asking, as the controller knows it: filled from the thread,
/// never from the agent's or the application's input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccessEnvelope {
    /// The thread's principal.
    pub principal: String,
    /// The thread's application.
    pub application: String,
    /// The thread.
    pub thread_id: String,
    /// The thread's workspace.
    pub workspace_id: String,
}

/// `memory.search` (controller → application).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemorySearch {
    /// The port.
    pub port: String,
    /// The access envelope.
    pub envelope: AccessEnvelope,
    /// What to look for (the prompt at preparation, the agent's query in
    /// `memory_search`).
    pub query: String,
    /// Most candidates wanted.
    pub limit: usize,
}

/// One candidate (or item) a memory port answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
// An answer: unknown members are ignored, as for every callback answer.
#[serde(rename_all = "camelCase")]
pub struct MemoryCandidate {
    /// Its identity in the application's memory (the tools' name rule).
    pub id: String,
    /// Its text.
    pub text: String,
}

/// The result of `memory.search`: best first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
// An answer: unknown members are ignored, as for every callback answer.
#[serde(rename_all = "camelCase")]
pub struct MemoryCandidates {
    /// The candidates, best first.
    #[serde(default)]
    pub candidates: Vec<MemoryCandidate>,
}

/// `memory.evidence` (controller → application): authorize and return one
/// item for the envelope.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryEvidence {
    /// The port.
    pub port: String,
    /// The access envelope.
    pub envelope: AccessEnvelope,
    /// The item's id.
    pub id: String,
}

/// What asked for a recall.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecallVia {
    /// The turn's preparation (searched with the prompt).
    Preparation,
    /// The agent's `memory_search`.
    Search,
    /// The agent's `memory_read`.
    Read,
}

/// `memory_recalled`: one recall, as journaled (metadata only, on every
/// thread: counts, identities and budget use, never memory text).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreparedMemory {
    /// What asked.
    pub via: RecallVia,
    /// The port's name.
    pub port: String,
    /// Its identity at the call.
    pub port_identity: String,
    /// Candidates the port answered.
    pub candidates: usize,
    /// Candidates rejected for a redaction or omission marker (or a bad id).
    pub rejected: usize,
    /// The ids rendered into the recall block, best first.
    pub rendered: Vec<String>,
    /// The block's budget.
    pub budget_bytes: usize,
    /// Bytes of candidate text rendered.
    pub used_bytes: usize,
}

/// Checks one `memory.register` (the context port's rules).
pub fn validate_memory(r: &MemoryRegister) -> Result<(), crate::context::PortRefusal> {
    crate::context::validate_context(&crate::context::ContextRegister {
        port: r.port.clone(),
        deadline_ms: r.deadline_ms,
    })
}

/// Whether `text` carries a marker of the redactor.
pub fn carries_marker(text: &str) -> bool {
    MARKERS.iter().any(|m| text.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_the_redactors() {
        assert!(carries_marker("token [REDACTED:github-token] here"));
        assert!(carries_marker("[OMITTED:id]"));
        assert!(!carries_marker("Ada prefers tea"));
    }

    #[test]
    fn an_envelope_refuses_extra_members() {
        let forged = serde_json::json!({"principal": "p", "application": "a",
            "threadId": "t", "workspaceId": "w", "admin": true});
        assert!(serde_json::from_value::<AccessEnvelope>(forged).is_err());
    }

    #[test]
    fn answers_with_unknown_members_are_accepted() {
        // What memory services commonly add: a score, a cursor, metadata.
        let answer = serde_json::json!({"candidates": [
            {"id": "m1", "text": "Ada prefers tea", "score": 0.92, "meta": {"src": "crm"}}],
            "next": "cursor-2"});
        let found: MemoryCandidates = serde_json::from_value(answer).unwrap();
        assert_eq!(found.candidates[0].id, "m1");
        assert_eq!(found.candidates[0].text, "Ada prefers tea");
        let item = serde_json::json!({"id": "m1", "text": "t", "score": 1});
        assert!(serde_json::from_value::<MemoryCandidate>(item).is_ok());
        let blocks = serde_json::json!({"blocks": [{"id": "b", "text": "t", "mime": "text/plain"}],
            "tokens": 3});
        let prepared: crate::context::ContextPrepared = serde_json::from_value(blocks).unwrap();
        assert_eq!(prepared.blocks.len(), 1);
    }

    #[test]
    fn a_memory_ports_refusal_names_a_memory_port() {
        let r = crate::context::PortRefusal::MemoryUnavailable {
            port: "mem".into(),
            why: "its answer is malformed",
        };
        assert_eq!(r.code(), crate::ErrorCode::ContextUnavailable);
        assert_eq!(
            r.to_string(),
            "memory port `mem` is unavailable: its answer is malformed"
        );
    }
}
