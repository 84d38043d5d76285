//! The records the controller keeps, as plain data.
//!
//! Ids are strings with a kind prefix (`thr_`, `turn_`, `ses_`) and 32 random
//! hex digits; workspace ids are chosen by the owner. Times are milliseconds
//! since the Unix epoch, from the store's injected clock; on the wire they are
//! RFC 3339 UTC (`crate::time`).

use serde::{Deserialize, Serialize};

use super::policy::{ApprovalPolicy, Retention};
use super::state::TurnState;

/// A registered agent workspace: one id per canonical path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workspace {
    /// The owner-chosen id.
    pub id: String,
    /// The canonical absolute path (symlinks resolved).
    pub path: String,
    /// When it was registered.
    #[serde(with = "crate::time::rfc3339")]
    pub created_at: i64,
}

/// What an owner's resolution (`turns.resolve`) records a fenced turn as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolveAs {
    /// Record as failed.
    Failed,
    /// Record as cancelled.
    Cancelled,
}

impl ResolveAs {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ResolveAs::Failed => "failed",
            ResolveAs::Cancelled => "cancelled",
        }
    }
}

/// A conversation bound to one workspace and one provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Thread {
    /// `thr_…`.
    pub id: String,
    /// Owning principal.
    pub principal: String,
    /// Owning application (stamped from the creating session).
    pub application: String,
    /// The workspace every turn of the thread runs in.
    pub workspace_id: String,
    /// Provider name (from config).
    pub provider: String,
    /// Permission policy.
    pub approval: ApprovalPolicy,
    /// Restricted threads never get automatic approval.
    pub restricted: bool,
    /// Journal retention.
    pub retention: Retention,
    /// Optimistic version, bumped by every configure.
    pub version: u64,
    /// Creation time.
    #[serde(with = "crate::time::rfc3339")]
    pub created_at: i64,
    /// Last configuration time.
    #[serde(with = "crate::time::rfc3339")]
    pub updated_at: i64,
    /// The native agent session the thread is bound to, once a turn was
    /// dispatched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_session: Option<SessionBinding>,
    /// Application MCP servers (names) every turn gives the agent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<String>,
    /// The application ports (names) it binds: tool endpoints, context
    /// and memory ports, transcript store (see [`crate::ThreadPorts`]).
    #[serde(flatten)]
    pub ports: crate::ThreadPorts,
    /// How long a permission request of this thread's turns waits for an
    /// answer before it is answered by policy (`expired`), in seconds;
    /// absent: the provider's `permissionTimeoutSeconds`. A turn's own
    /// deadline caps either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_timeout_seconds: Option<u64>,
    /// The thread's own budget (absent when it has none), checked at the
    /// claim as the budget `thread:ID:total`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::config::ThreadBudget>,
}

/// A thread's native agent session and what it was made under: a turn whose
/// provider definition (fingerprint) or thread version differs replaces it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionBinding {
    /// The agent's own session id (from `session/new`), 1-512 bytes.
    pub session_id: String,
    /// Lowercase hex SHA-256 of the provider definition's identity
    /// (command, args, environment names, `vcsIdentity`).
    pub fingerprint: String,
    /// The thread's configuration version when the session was bound.
    pub thread_version: u64,
}

/// One turn: a prompt run once by the thread's provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    /// `turn_…`.
    pub id: String,
    /// The thread.
    pub thread_id: String,
    /// The thread's workspace at submission.
    pub workspace_id: String,
    /// The submitting principal.
    pub principal: String,
    /// The caller's command id (idempotency key with the principal).
    pub command_id: String,
    /// Current state.
    pub state: TurnState,
    /// Short outcome code once finished or fenced (`end_turn`, `setup_interrupted`, …).
    pub outcome: Option<String>,
    /// A cancel was requested and the runner should stop the agent.
    pub cancel_requested: bool,
    /// The turn this one continues, if any.
    pub continues: Option<String>,
    /// Global FIFO position (submission order).
    pub queue_seq: u64,
    /// Submission time.
    #[serde(with = "crate::time::rfc3339")]
    pub created_at: i64,
    /// Last state change.
    #[serde(with = "crate::time::rfc3339")]
    pub updated_at: i64,
    /// Claimed by the runner.
    #[serde(with = "crate::time::rfc3339_opt", default)]
    pub prepared_at: Option<i64>,
    /// The dispatch boundary.
    #[serde(with = "crate::time::rfc3339_opt", default)]
    pub dispatched_at: Option<i64>,
    /// Agent acknowledged.
    #[serde(with = "crate::time::rfc3339_opt", default)]
    pub started_at: Option<i64>,
    /// Reached a terminal or fenced state.
    #[serde(with = "crate::time::rfc3339_opt", default)]
    pub finished_at: Option<i64>,
    /// Resolved by the owner.
    #[serde(with = "crate::time::rfc3339_opt", default)]
    pub resolved_at: Option<i64>,
    /// The native agent session the prompt was sent to (set at dispatch).
    #[serde(default)]
    pub agent_session_id: Option<String>,
    /// Per-turn deadline override (seconds), if the submitter set one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turn_seconds: Option<u64>,
    /// `true` while a permission request of this turn waits for an answer
    /// (`permissions.list`). Live state, not stored: the server fills it in.
    #[serde(default)]
    pub awaiting_input: bool,
    /// Credentials replaced by `[REDACTED:…]` markers in this turn's journal.
    #[serde(default)]
    pub redactions: u64,
    /// What the turn runs under, recorded when it was claimed (absent while
    /// queued, and for turns claimed before schema version 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepared: Option<crate::PreparedConfig>,
    /// What the turn asked: its `user_message` journal event. Filled in by
    /// `turns.get` only (absent from lists and receipts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_message: Option<UserMessage>,
    /// What the turn used (tokens, context, cost), recorded when it ended
    /// with any usage report from its agent (see [`crate::usage`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::usage::TurnUsage>,
}

impl Turn {
    /// The controller's outcome code, when the turn ended for a reason the
    /// controller names (`None` while in flight, and for a completion,
    /// whose `outcome` is the agent's own stop reason).
    pub fn outcome_code(&self) -> Option<crate::OutcomeCode> {
        match self.state {
            TurnState::Completed => None,
            _ => self.outcome.as_deref().and_then(crate::OutcomeCode::parse),
        }
    }
}

/// A turn's prompt as its thread's journal keeps it (`user_message`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserMessage {
    /// The event's thread sequence.
    pub thread_seq: u64,
    /// The prompt text; absent when the payload is unavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// `true` when the thread is metadata-only and the payload is gone
    /// (after a restart or eviction), as for any content event.
    pub payload_unavailable: bool,
}
