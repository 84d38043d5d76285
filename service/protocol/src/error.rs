//! Stable error codes and the JSON-RPC error object that carries them.
//!
//! Clients branch on `error.data.code`, a string from [`ErrorCode`]; the
//! numeric JSON-RPC code is a coarse class kept for generic JSON-RPC tooling.
//! A code, once published, never changes meaning. Messages are for humans and
//! must never contain a token, a bearer or a prompt payload.

use serde::{Deserialize, Serialize};
use serde_json::json;

/// Every error code a client may see in `error.data.code`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// `hello` named a protocol this server does not speak. Checked before any
    /// credential is looked at.
    ProtocolUnsupported,
    /// No valid credential: unknown token, unknown/revoked/expired bearer, or
    /// a request before `hello`.
    Unauthenticated,
    /// The session lacks the method's scope (or a token may not speak for
    /// the application). Never about a resource: another principal's or
    /// application's thread or turn is [`ErrorCode::NotFound`].
    Forbidden,
    /// No such workspace, thread, turn or session as far as the caller may
    /// see: another principal's or application's answers exactly the same.
    NotFound,
    /// The same command id with different input, or a stale config version.
    Conflict,
    /// A request names resources that do not belong together.
    BindingMismatch,
    /// A second workspace id for a canonical path that already has one.
    WorkspaceAlias,
    /// A workspace whose canonical directory is inside, contains, or is
    /// the same directory (inode: a bind mount) as another registered
    /// workspace: two turns at once would run in one tree. `data.existing`
    /// names the other workspace.
    WorkspaceOverlaps,
    /// The workspace is fenced by a turn whose outcome is unknown.
    WorkspaceFenced,
    /// The workspace has a queued or claimed turn (`workspaces.remove`);
    /// `data` names the turn and its state.
    WorkspaceBusy,
    /// The scheduler's bounded queue is full.
    QueueFull,
    /// Malformed frame, unknown method or field, wrong parameter types, or a
    /// request the target's state does not allow.
    InvalidRequest,
    /// The journal payload was not retained (metadata-only thread after restart).
    TranscriptUnavailable,
    /// A failure inside the controller; details are in the server log.
    Internal,
    /// Another process holds the controller home's instance lock.
    InstanceLocked,
    /// A server limit refused the request or the connection (connection
    /// cap, subscriptions per connection); the message names the limit.
    LimitReached,
    /// The controller cannot write its store (disk full, read-only file
    /// system, I/O error); reads still work and writes resume by themselves
    /// when the condition clears.
    StorageUnavailable,
    /// An MCP server description breaks a shape rule (name, absolute
    /// command, url, environment name syntax) or two servers share a name.
    McpServerInvalid,
    /// Too many MCP servers, arguments or environment names, or a
    /// description too long.
    McpLimitExceeded,
    /// An MCP server names a reserved environment variable (the controller's
    /// identity, `LAPIS_AI_CONTROLLER_HOME` or its old name, or
    /// one the controller runs on).
    McpEnvReserved,
    /// An application's MCP server names a variable outside the provider's
    /// `mcpEnvAllowlist`.
    McpEnvNotAllowed,
    /// A variable an MCP server needs has no value in the controller's env
    /// file or environment.
    McpEnvUnset,
    /// One environment name would get two different values (an MCP
    /// server's and the agent's own).
    McpEnvConflict,
    /// The agent does not advertise the MCP server's transport (`http`,
    /// `sse`).
    McpTransportUnsupported,
    /// A restricted thread was given MCP servers.
    McpRestricted,
    /// An application MCP server the thread selected is not registered:
    /// its connection closed (registrations are volatile) or it never was.
    McpServerUnavailable,
    /// A tool endpoint description breaks a shape rule (names, schema
    /// shape, a name used twice).
    ToolInvalid,
    /// Too many endpoints or tools, or a description, schema or result
    /// too large.
    ToolLimitExceeded,
    /// Application tools on a restricted thread (at `threads.create`,
    /// `threads.attach` and as a turn outcome at claim).
    ToolsRestricted,
    /// A tool endpoint the thread binds is not registered now: unregistered,
    /// its connection closed, or it never was.
    ToolEndpointUnavailable,
    /// No such tool on the thread's endpoints.
    ToolUnknown,
    /// A tool call failed closed: the endpoint went away, did not answer in
    /// time, or answered with an error.
    ToolCallFailed,
    /// A mutating tool call's effect is unknown (the controller stopped
    /// between capture begin and finish): never re-invoked, and the turn's
    /// continuation is refused.
    ToolEffectUnknown,
    /// A context or memory port registration breaks a shape rule (name,
    /// deadline) or exceeds the per-application limit.
    PortInvalid,
    /// The context port a thread binds is not registered now (revoked,
    /// its connection closed, never registered), or its `context.prepare`
    /// was late, refused or malformed: the turn fails before the dispatch
    /// boundary, so the agent never sees the prompt without its context.
    ContextUnavailable,
    /// `workspaces.add` named a directory outside the workspace roots the
    /// configuration grants (`workspaceRoots`, default the home directory);
    /// only the configuration file adds a root.
    WorkspaceOutsideRoots,
    /// The transcript store a metadata-only thread binds
    /// (`transcriptStore`) is not registered by its application now, or a
    /// turn's prompt could not be appended to it (refused, late — 120 s by
    /// default — or its connection gone): the turn fails before the
    /// dispatch boundary, so nothing runs without its transcript kept.
    TranscriptStoreFailed,
    /// `workspaces.remove` with `deleteWorktree` of a worktree with
    /// uncommitted changes or untracked files, without `force`: nothing
    /// was removed.
    WorkspaceDirty,
    /// `threads.delete` of a thread with a queued or claimed turn; `data`
    /// names the turn and its state. Nothing was deleted.
    ThreadBusy,
    /// `threads.delete` of a thread with a turn whose outcome is unknown
    /// (`turns resolve` it first); `data.turn` names it.
    ThreadFenced,
    /// The thread was deleted (`threads.delete`): only its content-free
    /// receipt remains in the journal.
    ThreadDeleted,
    /// `turns.continue` of a store-bound prior whose content the journal no
    /// longer holds: what its transcript store gave back for event
    /// `data.seq` (a `thread_seq`) is missing, does not hash to the
    /// `event_hash` its chained row records, or the row was linked before
    /// the chain covered `event_hash` (chain version 1). Nothing was
    /// written.
    TranscriptUnverified,
    /// `threads.import` of a bundle edited in some byte (what
    /// `threads export --verify` refuses): `data` names the byte range
    /// (`start`, `end`) and `reason`. Nothing was written.
    BundleTampered,
    /// `threads.import` of a bundle this controller cannot import: another
    /// format version, an event kind it does not know, or an event whose
    /// shape it would not store. Nothing was written.
    BundleUnsupported,
    /// `threads.import` of a bundle over `MAX_IMPORT_BUNDLE_BYTES`
    /// (512 KiB). Nothing was written.
    BundleTooLarge,
    /// `threads.import` of a bundle with a turn that had not settled when
    /// it was exported (`data.turn` names it; export again once it has).
    /// Nothing was written.
    BundleUnsettled,
    /// `threads.import` without `workspaceId` of a bundle whose workspace
    /// path is not registered here: pass `--workspace ID`. Nothing was
    /// written.
    WorkspaceRequired,
}

impl ErrorCode {
    /// Every code, for tests and documentation.
    pub const ALL: [ErrorCode; 47] = [
        ErrorCode::ProtocolUnsupported,
        ErrorCode::Unauthenticated,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::Conflict,
        ErrorCode::BindingMismatch,
        ErrorCode::WorkspaceAlias,
        ErrorCode::WorkspaceOverlaps,
        ErrorCode::WorkspaceFenced,
        ErrorCode::QueueFull,
        ErrorCode::InvalidRequest,
        ErrorCode::TranscriptUnavailable,
        ErrorCode::Internal,
        ErrorCode::InstanceLocked,
        ErrorCode::LimitReached,
        ErrorCode::StorageUnavailable,
        ErrorCode::McpServerInvalid,
        ErrorCode::McpLimitExceeded,
        ErrorCode::McpEnvReserved,
        ErrorCode::McpEnvNotAllowed,
        ErrorCode::McpEnvUnset,
        ErrorCode::McpEnvConflict,
        ErrorCode::McpTransportUnsupported,
        ErrorCode::McpRestricted,
        ErrorCode::McpServerUnavailable,
        ErrorCode::WorkspaceBusy,
        ErrorCode::ToolInvalid,
        ErrorCode::ToolLimitExceeded,
        ErrorCode::ToolsRestricted,
        ErrorCode::ToolEndpointUnavailable,
        ErrorCode::ToolUnknown,
        ErrorCode::ToolCallFailed,
        ErrorCode::ToolEffectUnknown,
        ErrorCode::PortInvalid,
        ErrorCode::ContextUnavailable,
        ErrorCode::WorkspaceOutsideRoots,
        ErrorCode::WorkspaceDirty,
        ErrorCode::TranscriptStoreFailed,
        ErrorCode::ThreadBusy,
        ErrorCode::ThreadFenced,
        ErrorCode::ThreadDeleted,
        ErrorCode::TranscriptUnverified,
        ErrorCode::BundleTampered,
        ErrorCode::BundleUnsupported,
        ErrorCode::BundleTooLarge,
        ErrorCode::BundleUnsettled,
        ErrorCode::WorkspaceRequired,
    ];

    /// The stable string form.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::ProtocolUnsupported => "protocol_unsupported",
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::BindingMismatch => "binding_mismatch",
            ErrorCode::WorkspaceAlias => "workspace_alias",
            ErrorCode::WorkspaceOverlaps => "workspace_overlaps",
            ErrorCode::WorkspaceFenced => "workspace_fenced",
            ErrorCode::QueueFull => "queue_full",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::TranscriptUnavailable => "transcript_unavailable",
            ErrorCode::Internal => "internal",
            ErrorCode::InstanceLocked => "instance_locked",
            ErrorCode::LimitReached => "limit_reached",
            ErrorCode::StorageUnavailable => "storage_unavailable",
            ErrorCode::McpServerInvalid => "mcp_server_invalid",
            ErrorCode::McpLimitExceeded => "mcp_limit_exceeded",
            ErrorCode::McpEnvReserved => "mcp_env_reserved",
            ErrorCode::McpEnvNotAllowed => "mcp_env_not_allowed",
            ErrorCode::McpEnvUnset => "mcp_env_unset",
            ErrorCode::McpEnvConflict => "mcp_env_conflict",
            ErrorCode::McpTransportUnsupported => "mcp_transport_unsupported",
            ErrorCode::McpRestricted => "mcp_restricted",
            ErrorCode::McpServerUnavailable => "mcp_server_unavailable",
            ErrorCode::WorkspaceBusy => "workspace_busy",
            ErrorCode::ToolInvalid => "tool_invalid",
            ErrorCode::ToolLimitExceeded => "tool_limit_exceeded",
            ErrorCode::ToolsRestricted => "tools_restricted",
            ErrorCode::ToolEndpointUnavailable => "tool_endpoint_unavailable",
            ErrorCode::ToolUnknown => "tool_unknown",
            ErrorCode::ToolCallFailed => "tool_call_failed",
            ErrorCode::ToolEffectUnknown => "tool_effect_unknown",
            ErrorCode::PortInvalid => "port_invalid",
            ErrorCode::ContextUnavailable => "context_unavailable",
            ErrorCode::WorkspaceOutsideRoots => "workspace_outside_roots",
            ErrorCode::WorkspaceDirty => "workspace_dirty",
            ErrorCode::TranscriptStoreFailed => "transcript_store_failed",
            ErrorCode::ThreadBusy => "thread_busy",
            ErrorCode::ThreadFenced => "thread_fenced",
            ErrorCode::ThreadDeleted => "thread_deleted",
            ErrorCode::TranscriptUnverified => "transcript_unverified",
            ErrorCode::BundleTampered => "bundle_tampered",
            ErrorCode::BundleUnsupported => "bundle_unsupported",
            ErrorCode::BundleTooLarge => "bundle_too_large",
            ErrorCode::BundleUnsettled => "bundle_unsettled",
            ErrorCode::WorkspaceRequired => "workspace_required",
        }
    }

    /// Parses the stable string form.
    pub fn parse(s: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The JSON-RPC numeric class for this code when no more specific one
    /// (parse error, method not found, invalid params) applies.
    pub fn rpc_code(self) -> i64 {
        match self {
            ErrorCode::ProtocolUnsupported => -32001,
            ErrorCode::Unauthenticated => -32002,
            ErrorCode::Forbidden => -32003,
            ErrorCode::NotFound => -32004,
            ErrorCode::Conflict => -32005,
            ErrorCode::BindingMismatch => -32006,
            ErrorCode::WorkspaceAlias => -32007,
            ErrorCode::WorkspaceFenced => -32008,
            ErrorCode::QueueFull => -32009,
            ErrorCode::TranscriptUnavailable => -32010,
            ErrorCode::InstanceLocked => -32011,
            ErrorCode::LimitReached => -32012,
            ErrorCode::StorageUnavailable => -32013,
            ErrorCode::McpServerInvalid => -32014,
            ErrorCode::McpLimitExceeded => -32015,
            ErrorCode::McpEnvReserved => -32016,
            ErrorCode::McpEnvNotAllowed => -32017,
            ErrorCode::McpEnvUnset => -32018,
            ErrorCode::McpEnvConflict => -32019,
            ErrorCode::McpTransportUnsupported => -32020,
            ErrorCode::McpRestricted => -32021,
            ErrorCode::McpServerUnavailable => -32022,
            ErrorCode::WorkspaceBusy => -32023,
            ErrorCode::WorkspaceOverlaps => -32024,
            ErrorCode::ToolInvalid => -32040,
            ErrorCode::ToolLimitExceeded => -32041,
            ErrorCode::ToolsRestricted => -32042,
            ErrorCode::ToolEndpointUnavailable => -32043,
            ErrorCode::ToolUnknown => -32044,
            ErrorCode::ToolCallFailed => -32045,
            ErrorCode::ToolEffectUnknown => -32046,
            ErrorCode::WorkspaceOutsideRoots => -32047,
            ErrorCode::WorkspaceDirty => -32050,
            ErrorCode::TranscriptStoreFailed => -32051,
            ErrorCode::ThreadBusy => -32052,
            ErrorCode::ThreadFenced => -32053,
            ErrorCode::ThreadDeleted => -32054,
            ErrorCode::TranscriptUnverified => -32055,
            ErrorCode::BundleTampered => -32056,
            ErrorCode::BundleUnsupported => -32057,
            ErrorCode::BundleTooLarge => -32058,
            ErrorCode::BundleUnsettled => -32059,
            ErrorCode::WorkspaceRequired => -32060,
            ErrorCode::PortInvalid => -32048,
            ErrorCode::ContextUnavailable => -32049,
            ErrorCode::InvalidRequest => rpc::INVALID_REQUEST,
            ErrorCode::Internal => rpc::INTERNAL_ERROR,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The standard JSON-RPC 2.0 numeric codes.
pub mod rpc {
    /// The frame is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON is not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Parameters of the wrong shape or type.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Server-side failure.
    pub const INTERNAL_ERROR: i64 = -32603;
}

/// A JSON-RPC error object: numeric class, human message, stable code.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} ({})", self.code_str())]
pub struct RpcError {
    /// JSON-RPC numeric code.
    pub code: i64,
    /// Human-readable message; never holds a secret or a payload.
    pub message: String,
    /// `{"code": "<stable code>", ...}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

impl RpcError {
    /// An error with the code's default numeric class.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> RpcError {
        RpcError::with_rpc(code.rpc_code(), code, message)
    }

    /// An error with an explicit numeric class.
    pub fn with_rpc(rpc_code: i64, code: ErrorCode, message: impl Into<String>) -> RpcError {
        RpcError {
            code: rpc_code,
            message: message.into(),
            data: Some(json!({ "code": code.as_str() })),
        }
    }

    /// Malformed JSON.
    pub fn parse_error() -> RpcError {
        RpcError::with_rpc(
            rpc::PARSE_ERROR,
            ErrorCode::InvalidRequest,
            "frame is not valid JSON",
        )
    }

    /// Unknown method.
    pub fn method_not_found(method: &str) -> RpcError {
        // The method name is caller-chosen; bound it so a huge name is not echoed.
        let shown: String = method.chars().take(64).collect();
        RpcError::with_rpc(
            rpc::METHOD_NOT_FOUND,
            ErrorCode::InvalidRequest,
            format!("unknown method `{shown}`"),
        )
    }

    /// Parameters that do not match the method's schema.
    pub fn invalid_params(detail: impl std::fmt::Display) -> RpcError {
        RpcError::with_rpc(
            rpc::INVALID_PARAMS,
            ErrorCode::InvalidRequest,
            format!("invalid params: {detail}"),
        )
    }

    /// Adds a field to `data` (for example the offending table or the
    /// holder's pid). Never pass secrets.
    pub fn with_data(mut self, key: &str, value: serde_json::Value) -> RpcError {
        if let Some(serde_json::Value::Object(map)) = self.data.as_mut() {
            map.insert(key.to_owned(), value);
        }
        self
    }

    /// The stable code from `data.code`, if present and known.
    pub fn error_code(&self) -> Option<ErrorCode> {
        self.data
            .as_ref()
            .and_then(|d| d.get("code"))
            .and_then(|c| c.as_str())
            .and_then(ErrorCode::parse)
    }

    fn code_str(&self) -> &str {
        self.data
            .as_ref()
            .and_then(|d| d.get("code"))
            .and_then(|c| c.as_str())
            .unwrap_or("unknown")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_are_distinct() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
            let wire = serde_json::to_value(code).unwrap();
            assert_eq!(wire, code.as_str());
            assert!(seen.insert(code.as_str()));
        }
    }

    #[test]
    fn protocol_unsupported_matches_the_architecture_example() {
        let err = RpcError::new(ErrorCode::ProtocolUnsupported, "x");
        assert_eq!(err.code, -32001);
        assert_eq!(err.error_code(), Some(ErrorCode::ProtocolUnsupported));
    }
}
