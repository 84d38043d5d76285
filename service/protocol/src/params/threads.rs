//! Threads: `threads.create|attach|list|get|configure` and `mcp.register`,
//! params and results (see the module docs of `params`).

use serde::{Deserialize, Serialize};

/// `threads.create`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadsCreate {
    /// Workspace id.
    pub workspace_id: String,
    /// Provider name (`echo` or one from the config).
    pub provider: String,
    /// `ask` (default) or `allow-all`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<crate::ApprovalPolicy>,
    /// Restricted threads never auto-approve.
    #[serde(default)]
    pub restricted: bool,
    /// `full` (default) or `metadata-only`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<crate::Retention>,
    /// Names of MCP servers this application registered (`mcp.register`)
    /// that every turn of the thread gives the agent, besides the
    /// provider's own. A turn whose server is no longer registered fails
    /// `mcp_server_unavailable` before dispatch. Refused on restricted threads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<String>,
    /// Names of tool endpoints this application registered
    /// (`tools.register`) whose tools every turn's agent session reaches
    /// through the controller's MCP bridge. Only the names persist; a turn
    /// whose endpoint is gone fails `tool_endpoint_unavailable` at claim.
    /// Refused on restricted threads (`tools_restricted`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// The name of a context port this application registered
    /// (`context.register`): every turn's claim asks it for context blocks
    /// (`context.prepare`) before the dispatch boundary. Only the name
    /// persists; a turn whose port is gone, late or refusing fails
    /// `context_unavailable` before its agent sees the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The name of a memory port this application registered
    /// (`memory.register`): every turn's preparation recalls from it (a
    /// labelled block before the prompt), and the agent gets the read tools
    /// `memory_search` and `memory_read` on the controller's MCP bridge. A
    /// turn whose port is gone or late fails `context_unavailable` before
    /// dispatch. Refused on restricted threads (`tools_restricted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// The name of a transcript store this application registered
    /// (`transcript.register`), on a `metadata-only` thread only (on a
    /// `full` one it is `invalid_request`): each turn's prompt is appended
    /// to it before the dispatch boundary (a failed or late append fails
    /// the turn `transcript_store_failed` before its agent sees the
    /// prompt), the agent's output as it is journaled, and a replay after
    /// a restart fetches content back from it, checked against the
    /// recorded hashes. Not registered now: `transcript_store_failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript_store: Option<String>,
    /// How long each permission request of the thread's turns waits for
    /// an answer, in seconds (1-604800; absent: the provider's
    /// `permissionTimeoutSeconds`); a turn's deadline caps it. Out of
    /// range is `invalid_request`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_timeout_seconds: Option<u64>,
    /// The thread's own budget (tokens or cost over its whole life),
    /// checked at each claim with the configured budgets (its key is
    /// `thread:ID:total`): a spent one fails the turn `budget_exhausted`.
    /// Without `tokens` or `cost`, or with a negative cost or a currency
    /// that is not an ISO 4217 code, it is `invalid_request`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::config::ThreadBudget>,
    /// A thread id this application reserved (`threads.reserve`): the
    /// thread gets that id. Another application's, or one never reserved,
    /// is `not_found`; one already taken by a thread is `conflict`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// Makes the creation idempotent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_id: Option<String>,
}

/// `mcp.register`: the MCP servers this connection offers its
/// application's threads (replacing what it registered before; an empty
/// list withdraws them). Volatile: they are gone when the connection closes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpRegister {
    /// Launch descriptions (environment *names* only).
    pub servers: Vec<crate::mcp::McpServer>,
}

/// `mcp.register` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpRegisterResult {
    /// What is registered now: names, transports and identities.
    pub servers: Vec<crate::mcp::McpEndpoint>,
}

/// Methods that name one thread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadRef {
    /// Thread id.
    pub thread_id: String,
}

/// `threads.attach`: (re)attach to a thread stating the binding relied on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadsAttach {
    /// Thread id.
    pub thread_id: String,
    /// The expected binding; a difference is `binding_mismatch`.
    #[serde(default)]
    pub expect: crate::ThreadExpect,
}

/// `threads.list`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadsList {
    /// Only threads of this workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<String>,
    /// At most this many (the server bounds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `threads.configure`: optimistic on `expectedVersion`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadsConfigure {
    /// Thread id.
    pub thread_id: String,
    /// The version the caller last saw.
    pub expected_version: u64,
    /// New provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// New approval policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<crate::ApprovalPolicy>,
    /// New restricted flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restricted: Option<bool>,
    /// New retention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<crate::Retention>,
    /// New permission timeout in seconds (1-604800): `Some(Some(n))`;
    /// `Some(None)` (JSON `null`) goes back to the provider's
    /// `permissionTimeoutSeconds`; `None` (absent) leaves it unchanged.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub permission_timeout_seconds: Option<Option<u64>>,
    /// New budget: `Some(Some(b))`; `Some(None)` (JSON `null`) clears it;
    /// `None` (absent) leaves it unchanged.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub budget: Option<Option<crate::config::ThreadBudget>>,
    /// New transcript store (`transcript.register`): `Some(Some(name))`
    /// binds one (the thread's retention, after this call, must be
    /// `metadata-only`); `Some(None)` (JSON `null`) unbinds it; `None`
    /// (absent) leaves it unchanged. A thread that binds one cannot be
    /// made `full` without unbinding it in the same call.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub transcript_store: Option<Option<String>>,
    /// Makes the call idempotent (replays the first answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_id: Option<String>,
}

/// `threads.create` / `threads.configure` result (`replayed` also for
/// `threads.configure` with a command id seen before).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadResult {
    /// The thread.
    pub thread: crate::Thread,
    /// True when the command id was seen before.
    #[serde(default)]
    pub replayed: bool,
}

/// `threads.reserve`: a thread id for this application, before its thread
/// exists, so its ports can be set up for that id first (and set up again
/// for the same id after a reconnect). Idempotent by command id: the same
/// command id always answers the same id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadsReserve {
    /// Makes the reservation idempotent (required).
    pub command_id: String,
}

/// `threads.reserve` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadReserved {
    /// The reserved id (`thr_…`), for `threads.create`'s `threadId`.
    pub thread_id: String,
    /// True when the command id was seen before.
    #[serde(default)]
    pub replayed: bool,
}

/// `threads.list` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadsResult {
    /// The caller's threads.
    pub threads: Vec<crate::Thread>,
}

/// A member that is present deserializes to `Some`, even when it is
/// `null` (`Some(None)`); an absent one stays `None` (`#[serde(default)]`).
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}
