//! Payloads of the lifecycle kinds: metadata only (names, states, codes,
//! ids), kept under every retention.
//!
//! What must stay true: each serializes to exactly the object the store
//! wrote before these types existed (the hash chain covers those bytes):
//! `Option` fields that were written as `null` stay `null`, fields that
//! were added only when set stay omitted otherwise.

use serde::{Deserialize, Serialize};

use crate::policy::{ApprovalPolicy, Retention};
use crate::state::{TurnEvent, TurnState};

/// `thread_created`: the thread's first configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadCreated {
    /// Its workspace.
    pub workspace_id: String,
    /// Its provider.
    pub provider: String,
    /// Its approval policy.
    pub approval: ApprovalPolicy,
    /// Whether it is restricted.
    pub restricted: bool,
    /// Its retention.
    pub retention: Retention,
    /// Application MCP servers it binds by name (omitted when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<String>,
    /// The application ports it binds by name (each omitted when none, so
    /// the stored bytes of threads without them are unchanged).
    #[serde(flatten)]
    pub ports: crate::ThreadPorts,
    /// Its own permission timeout in seconds (omitted when it uses the
    /// provider's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_timeout_seconds: Option<u64>,
    /// Its own budget (omitted when it has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::config::ThreadBudget>,
}

/// `thread_configured`: the configuration after a `threads.configure`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadConfigured {
    /// The new configuration version.
    pub version: u64,
    /// Provider.
    pub provider: String,
    /// Approval policy.
    pub approval: ApprovalPolicy,
    /// Restricted flag.
    pub restricted: bool,
    /// Retention (applies to events written from now on).
    pub retention: Retention,
    /// Who reconfigured it.
    pub principal: String,
    /// Its own permission timeout in seconds after the change (omitted
    /// when it uses the provider's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_timeout_seconds: Option<u64>,
    /// Its own budget after the change (omitted when it has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::config::ThreadBudget>,
    /// The transcript store it binds after the change (omitted when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript_store: Option<String>,
}

/// `turn_submitted`: a turn was accepted (never its prompt).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnSubmitted {
    /// The turn.
    pub turn_id: String,
    /// The submitter's command id.
    pub command_id: String,
    /// The settled turn this one continues (`turns.continue`), else `null`.
    pub continues: Option<String>,
    /// The submission's input digest, as its receipt records it (SHA-256
    /// over the thread, the raw prompt, the continued turn and the
    /// deadline; lowercase hex). Chained with the event, so the queued
    /// input is checked against it before dispatch (`prompt_mismatch`).
    /// Absent for turns submitted before schema version 8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_digest: Option<String>,
}

/// `user_message`: what the turn asked. Content: follows the thread's
/// retention.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Prompt {
    /// The prompt text.
    pub text: String,
}

/// `turn_state`: one transition of the turn's state table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateChange {
    /// State before.
    pub from: TurnState,
    /// State after.
    pub to: TurnState,
    /// What happened (the table's input).
    pub event: TurnEvent,
    /// The outcome code recorded with it (omitted when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// `true` when startup recovery made the change (omitted otherwise).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recovered: bool,
    /// `true` when the turn reached a terminal state and its workspace has
    /// no other turn queued, in flight or fenced: the workspace went idle
    /// with this event (omitted otherwise).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub workspace_idle: bool,
}

/// `cancel_requested`: a cancel was requested for a turn in flight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelRequest {
    /// Who asked.
    pub principal: String,
    /// Through which application.
    pub application: String,
}

/// `turn_resolved`: the owner settled a fenced turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resolution {
    /// The state it was settled as (`failed` or `cancelled`).
    #[serde(rename = "as")]
    pub as_state: TurnState,
    /// The fenced state it left.
    pub from: TurnState,
    /// Which request settled it.
    pub via: ResolvedVia,
    /// Who settled it.
    pub principal: String,
    /// Through which application.
    pub application: String,
}

/// The request that settled a fenced turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolvedVia {
    /// `turns.resolve` with `confirmStopped`.
    Resolve,
    /// The owner's `turns.cancel` of the fenced turn.
    Cancel,
}

impl ResolvedVia {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ResolvedVia::Resolve => "resolve",
            ResolvedVia::Cancel => "cancel",
        }
    }
}
