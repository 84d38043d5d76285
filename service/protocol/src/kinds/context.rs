//! Context ports: what an application registers on its connection
//! (`context.register`) so that it shapes each turn of the threads that
//! bind the port, and what the controller asks it (`context.prepare`) when
//! such a turn becomes eligible (at the claim, before the dispatch
//! boundary).
//!
//! What must stay true:
//! - a port is volatile like a tool endpoint: it lives exactly as long as
//!   the registering connection (or until `context.unregister`, or until a
//!   newer connection of the same application registers the same name); a
//!   thread binds it by *name* and only the name persists;
//! - the controller owns when and how much: it calls `context.prepare` once
//!   per turn, with a byte budget, within the port's deadline; blocks over
//!   the budget are cut by the controller (the cut is recorded), never
//!   trusted to the application;
//! - a turn never reaches its agent without the context it was promised: a
//!   missing, revoked, late or refusing port fails the turn
//!   `context_unavailable` before the dispatch boundary;
//! - what the journal keeps of the answer ([`PreparedContext`]) is block
//!   identities, SHA-256 digests and sizes on every thread; the text only
//!   on a `full` thread.

use serde::{Deserialize, Serialize};

use crate::ErrorCode;

/// The server → client request a context port answers.
pub const CONTEXT_PREPARE: &str = "context.prepare";

/// Most blocks one `context.prepare` answer may carry (more fail the turn).
pub const MAX_CONTEXT_BLOCKS: usize = 32;
/// The budget (bytes of block text) a turn's context gets from a port.
pub const CONTEXT_BUDGET_BYTES: usize = 64 * 1024;
/// How long `context.prepare` may take unless the port asks otherwise.
pub const DEFAULT_PREPARE_DEADLINE_MS: u64 = 5_000;
/// The longest deadline a port may ask for.
pub const MAX_PREPARE_DEADLINE_MS: u64 = 60_000;

/// `context.register`: one context port of this connection (registering a
/// name again on the same connection replaces it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextRegister {
    /// The port's name (the tools' name rule: 1-64 of `[A-Za-z0-9_-]`).
    pub port: String,
    /// How long one `context.prepare` may take, in milliseconds (1 to
    /// [`MAX_PREPARE_DEADLINE_MS`]; default [`DEFAULT_PREPARE_DEADLINE_MS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
}

impl ContextRegister {
    /// The deadline in effect.
    pub fn deadline(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.deadline_ms.unwrap_or(DEFAULT_PREPARE_DEADLINE_MS))
    }
}

/// What is shown (and journaled) of a context or memory port: never a
/// callback.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortView {
    /// Its name.
    pub name: String,
    /// `context_…` / `memory_…` + lowercase hex SHA-256 of its description.
    pub identity: String,
}

/// `context.register` / `memory.register` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortRegisterResult {
    /// The port as registered.
    pub port: PortView,
}

/// `context.unregister` / `memory.unregister`: revokes one port of this
/// connection at once; a preparation waiting on it fails closed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PortUnregister {
    /// The port's name.
    pub port: String,
}

/// `context.prepare` (controller → application): the blocks one turn's
/// agent reads before the prompt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextPrepare {
    /// The port.
    pub port: String,
    /// The thread.
    pub thread_id: String,
    /// The turn.
    pub turn_id: String,
    /// The thread's workspace.
    pub workspace_id: String,
    /// The turn's prompt text.
    pub prompt: String,
    /// Bytes of block text the controller will pass on; more is cut.
    pub budget_bytes: usize,
}

/// One block of context, as the application answers it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
// An answer: unknown members are ignored, as for every callback answer.
#[serde(rename_all = "camelCase")]
pub struct ContextBlock {
    /// The block's identity (the tools' name rule), unique in the answer;
    /// the agent sees it in the block's URI
    /// (`lapis://context/<port>/<id>`).
    pub id: String,
    /// What the agent reads.
    pub text: String,
}

/// The result of `context.prepare`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
// An answer: unknown members are ignored, as for every callback answer.
#[serde(rename_all = "camelCase")]
pub struct ContextPrepared {
    /// The blocks, in the order the agent reads them.
    #[serde(default)]
    pub blocks: Vec<ContextBlock>,
}

/// `context_prepared`: what a turn's context port gave it, as journaled
/// before the dispatch boundary (metadata on every thread; the text only
/// when the thread keeps content).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreparedContext {
    /// The port's name.
    pub port: String,
    /// Its identity at the call.
    pub port_identity: String,
    /// The budget the call was given.
    pub budget_bytes: usize,
    /// Bytes of block text passed on (at most the budget).
    pub used_bytes: usize,
    /// The blocks, as passed on.
    pub blocks: Vec<PreparedBlock>,
    /// Blocks the budget cut (shortened or dropped).
    pub cut_blocks: usize,
    /// Bytes the budget cut.
    pub cut_bytes: usize,
}

/// One block as passed on to the agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreparedBlock {
    /// The application's identity of the block.
    pub id: String,
    /// Lowercase hex SHA-256 of the text passed on.
    pub sha256: String,
    /// Its size passed on, in bytes.
    pub bytes: usize,
    /// Whether the budget shortened it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
    /// The text, on a `full` thread only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// Why a port (context or memory) was refused. Messages name ports and
/// positions only, never a block or a prompt.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PortRefusal {
    /// A registration or an answer breaks a shape rule.
    #[error("port `{port}`: {reason}")]
    Invalid {
        /// The port's name (`?` when the name itself is invalid).
        port: String,
        /// What is wrong (no values).
        reason: &'static str,
    },
    /// Too many ports of one kind for one application.
    #[error("ports: {what} exceeds the limit of {limit}")]
    Limit {
        /// What was counted.
        what: &'static str,
        /// The bound.
        limit: usize,
    },
    /// The context port a thread binds is not registered now, did not
    /// answer in time, answered with an error, or answered malformed.
    #[error("context port `{port}` is unavailable: {why}")]
    ContextUnavailable {
        /// The port's name.
        port: String,
        /// What happened (no values).
        why: &'static str,
    },
    /// The memory port a thread binds is unavailable, as for a context
    /// port (same code: the turn's preparation could not have what it was
    /// promised), named as what it is.
    #[error("memory port `{port}` is unavailable: {why}")]
    MemoryUnavailable {
        /// The port's name.
        port: String,
        /// What happened (no values).
        why: &'static str,
    },
    /// The transcript store a thread binds is not registered now, or an
    /// append to it failed, expired or lost its connection: the turn fails
    /// before the dispatch boundary.
    #[error("transcript store `{port}` failed: {why}")]
    TranscriptStoreFailed {
        /// The store's name.
        port: String,
        /// What happened (no values).
        why: &'static str,
    },
}

impl PortRefusal {
    /// The stable wire code (also a turn's failure code).
    pub fn code(&self) -> ErrorCode {
        match self {
            PortRefusal::Invalid { .. } | PortRefusal::Limit { .. } => ErrorCode::PortInvalid,
            PortRefusal::ContextUnavailable { .. } | PortRefusal::MemoryUnavailable { .. } => {
                ErrorCode::ContextUnavailable
            }
            PortRefusal::TranscriptStoreFailed { .. } => ErrorCode::TranscriptStoreFailed,
        }
    }
}

/// Most context ports (and, apart, memory ports) one application may hold.
pub const MAX_PORTS: usize = 8;

/// Checks one `context.register`.
pub fn validate_context(r: &ContextRegister) -> Result<(), PortRefusal> {
    if !crate::tools::valid_tool_name(&r.port) {
        return Err(PortRefusal::Invalid {
            port: "?".into(),
            reason: "the port name must be 1-64 of [A-Za-z0-9_-], starting alphanumeric",
        });
    }
    if r.deadline_ms
        .is_some_and(|d| d == 0 || d > MAX_PREPARE_DEADLINE_MS)
    {
        return Err(PortRefusal::Invalid {
            port: r.port.clone(),
            reason: "deadlineMs must be 1-60000",
        });
    }
    Ok(())
}

/// A bound port name: valid when present.
pub fn validate_port_binding(name: Option<&str>) -> Result<(), PortRefusal> {
    match name {
        Some(n) if !crate::tools::valid_tool_name(n) => Err(PortRefusal::Invalid {
            port: "?".into(),
            reason: "a bound port name is invalid",
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_registrations_are_refused() {
        let bad = ContextRegister {
            port: "a.b".into(),
            deadline_ms: None,
        };
        assert_eq!(
            validate_context(&bad).unwrap_err().code(),
            ErrorCode::PortInvalid
        );
        let slow = ContextRegister {
            port: "ctx".into(),
            deadline_ms: Some(MAX_PREPARE_DEADLINE_MS + 1),
        };
        assert!(validate_context(&slow).is_err());
        let ok = ContextRegister {
            port: "ctx".into(),
            deadline_ms: None,
        };
        assert!(validate_context(&ok).is_ok());
    }
}
