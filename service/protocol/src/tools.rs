//! Application tools: what an application registers on its connection
//! (`tools.register`), what the controller calls back on that connection
//! (`tools.invoke`, `capture.begin`, `capture.finish`), and what the MCP
//! bridge of an agent session asks (`tools.list`, `tools.call`).
//!
//! What must stay true:
//! - an endpoint is volatile: it lives exactly as long as the registering
//!   connection (or until `tools.unregister`, or until a newer connection of
//!   the same application registers the same name); a thread binds it by
//!   *name* and only the name persists;
//! - every refusal is one [`ToolRefusal`] with one stable [`ErrorCode`] and
//!   a message naming endpoints, tools and positions only, never an
//!   argument or a result;
//! - the bridge's name of a tool is `<endpoint>__<tool>` ([`qualified`]),
//!   which matches `^[a-zA-Z0-9_-]{1,64}$`, the function-name rule of the
//!   OpenAI and Anthropic APIs (a name a model API refuses makes the tool
//!   unusable behind a real model): an endpoint name has no `__` and does
//!   not end in `_`, and a tool name starts alphanumeric, so the first `__`
//!   of a qualified name is the join and the split is unambiguous; an
//!   endpoint whose joined names would exceed 64 bytes is refused at
//!   `tools.register`;
//! - a mutating tool's call carries an idempotency key (turn id + tool call
//!   id, [`idempotency_key`]): the controller never invokes it twice for one
//!   key, across restarts, and an application that sees a key again may
//!   answer from what it recorded.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ErrorCode;

/// Most endpoints one application may hold at once, and most endpoints one
/// thread may bind.
pub const MAX_TOOL_ENDPOINTS: usize = 8;
/// Most tools of one endpoint.
pub const MAX_TOOLS: usize = 64;
/// Largest `inputSchema` of one tool (its JSON), in bytes.
pub const MAX_TOOL_SCHEMA_BYTES: usize = 16 * 1024;
/// Longest name offered to an agent ([`qualified`], and the memory read
/// tools): the model APIs' function-name bound.
pub const MAX_OFFERED_NAME: usize = 64;
/// What joins an endpoint and a tool in the name offered to agents.
pub const QUALIFIED_SEPARATOR: &str = "__";
/// Longest tool description, in bytes.
pub const MAX_TOOL_DESCRIPTION_BYTES: usize = 2048;
/// Largest result an application may return to one `tools.invoke` (its
/// JSON), in bytes; a larger one fails the call (`tool_call_failed`).
pub const MAX_TOOL_RESULT_BYTES: usize = 256 * 1024;

/// One tool an endpoint offers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolSpec {
    /// 1-64 of `[A-Za-z0-9_-]`, starting alphanumeric; unique in its endpoint.
    pub name: String,
    /// What the agent reads about the tool.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// A JSON Schema object for the arguments (at most
    /// [`MAX_TOOL_SCHEMA_BYTES`]).
    pub input_schema: Value,
    /// A mutating tool has effects: its call goes through the capture port
    /// (when registered) and is never invoked twice. A read tool skips
    /// capture; its result is advisory.
    #[serde(default)]
    pub mutating: bool,
}

/// `tools.register`: one endpoint of this connection (registering a name
/// again on the same connection replaces it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolsRegister {
    /// The endpoint's name (the tools' rule).
    pub endpoint: String,
    /// Its tools.
    pub tools: Vec<ToolSpec>,
    /// Whether this connection also serves the capture port
    /// (`capture.begin` / `capture.finish`) for the endpoint's mutating tools.
    #[serde(default)]
    pub capture: bool,
}

/// `tools.register` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsRegisterResult {
    /// The endpoint as registered.
    pub endpoint: ToolEndpointView,
}

/// What is shown (and journaled) of an endpoint: never a callback.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolEndpointView {
    /// Its name.
    pub name: String,
    /// `tools_` + lowercase hex SHA-256 of the endpoint's description
    /// (tool names, descriptions, schemas, mutating flags, capture).
    pub identity: String,
    /// Its tools' names, in registration order.
    pub tools: Vec<String>,
    /// Whether it has a capture port.
    pub capture: bool,
}

/// `tools.unregister`: revokes one endpoint of this connection at once;
/// calls in flight fail closed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolsUnregister {
    /// The endpoint's name.
    pub endpoint: String,
}

/// `tools.unregister` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsUnregisterResult {
    /// Whether this connection held the endpoint (false: nothing changed).
    pub revoked: bool,
}

/// One tool as the bridge lists it to the agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BridgeTool {
    /// `<endpoint>__<tool>` ([`qualified`]), or a provided tool's name.
    pub name: String,
    /// The tool's description.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Its JSON Schema.
    pub input_schema: Value,
    /// Whether it is mutating.
    pub mutating: bool,
}

/// `tools.list` (bridge only) result: the tools of the ticket's thread
/// whose endpoints are registered now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsListResult {
    /// The tools.
    pub tools: Vec<BridgeTool>,
}

/// `tools.call` (bridge only): one call of a tool of the ticket's thread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolsCall {
    /// `<endpoint>__<tool>` ([`qualified`]), or a provided tool's name.
    pub name: String,
    /// The arguments (an object).
    #[serde(default)]
    pub arguments: Value,
    /// The MCP request's own id as the bridge saw it, when it has one:
    /// recorded, never trusted for identity (the controller numbers calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_request_id: Option<String>,
}

/// What a tool returned: the result of `tools.invoke` and of `tools.call`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolOutput {
    /// Text the agent reads.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// Structured content (JSON), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
    /// The tool ran and failed (the agent is told; not a protocol error).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

/// `tools.invoke` (controller → application): run one tool once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolInvoke {
    /// The endpoint.
    pub endpoint: String,
    /// The tool.
    pub tool: String,
    /// The agent's arguments.
    pub arguments: Value,
    /// Turn id + tool call id ([`idempotency_key`]).
    pub idempotency_key: String,
    /// The thread.
    pub thread_id: String,
    /// The turn.
    pub turn_id: String,
    /// The controller's id of this call within the turn.
    pub call_id: String,
    /// Whether the tool is mutating.
    pub mutating: bool,
}

/// `capture.begin` / `capture.finish` (controller → application): the
/// capture port around one mutating call. `begin` must be acknowledged
/// before the tool is invoked; `finish` follows every invoke that was
/// begun, whatever its answer or failure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CaptureNotice {
    /// The endpoint.
    pub endpoint: String,
    /// The tool.
    pub tool: String,
    /// The call's idempotency key.
    pub idempotency_key: String,
    /// The thread.
    pub thread_id: String,
    /// The turn.
    pub turn_id: String,
    /// The call.
    pub call_id: String,
    /// `finish` only: whether the tool reported an error (`true` also when
    /// the application answered the invoke with an error); absent from a
    /// `finish` when the invoke's transport failed (deadline, connection
    /// gone, an unreadable answer): the tool may have run, the controller
    /// does not know its result. Absent from every `begin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
}

/// The result of `capture.begin` / `capture.finish`: an acknowledgement.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaptureAck {}

/// Server → client request names, each answered by the application (the
/// names of their bindings in [`crate::callback`]).
pub mod callbacks {
    use crate::callback::{Callback, CaptureBegin, CaptureFinish, ToolsInvoke};

    /// Run a tool.
    pub const TOOLS_INVOKE: &str = <ToolsInvoke as Callback>::METHOD;
    /// A mutating call is about to run.
    pub const CAPTURE_BEGIN: &str = <CaptureBegin as Callback>::METHOD;
    /// A mutating call has its result.
    pub const CAPTURE_FINISH: &str = <CaptureFinish as Callback>::METHOD;
}

/// The environment variable the MCP bridge reads its ticket from (set by
/// the controller in the bridge's launch description toward the agent).
pub const BRIDGE_TICKET_ENV: &str = "LAPIS_TOOLS_TICKET";

/// The MCP server name the bridge is given in an agent session's
/// `mcpServers`.
pub const BRIDGE_SERVER_NAME: &str = "lapis-tools";

/// `<endpoint>__<tool>`: the name the agent is offered.
pub fn qualified(endpoint: &str, tool: &str) -> String {
    format!("{endpoint}{QUALIFIED_SEPARATOR}{tool}")
}

/// Splits `<endpoint>__<tool>` at its first `__`; `None` when it is not of
/// that form (see the module docs for why the first `__` is the join).
pub fn split_qualified(name: &str) -> Option<(&str, &str)> {
    let (e, t) = name.split_once(QUALIFIED_SEPARATOR)?;
    (valid_endpoint_name(e) && valid_tool_name(t) && name.len() <= MAX_OFFERED_NAME)
        .then_some((e, t))
}

/// Whether `name` is one every model API accepts as a function name:
/// `^[a-zA-Z0-9_-]{1,64}$`.
pub fn offerable_name(name: &str) -> bool {
    (1..=MAX_OFFERED_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

/// The idempotency key of a call: `<turn id>:<call id>`.
pub fn idempotency_key(turn_id: &str, call_id: &str) -> String {
    format!("{turn_id}:{call_id}")
}

/// Why tools were refused. Messages name endpoints, tools and positions only.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ToolRefusal {
    /// A description breaks a shape rule.
    #[error("tool endpoint `{endpoint}`: {reason}")]
    Invalid {
        /// The endpoint's name (or `?` when the name itself is invalid).
        endpoint: String,
        /// What is wrong (no values).
        reason: &'static str,
    },
    /// Too many endpoints or tools, or something too large.
    #[error("tools: {what} exceeds the limit of {limit}")]
    Limit {
        /// What was counted.
        what: &'static str,
        /// The bound.
        limit: usize,
    },
    /// Restricted threads get no application tools and no memory port.
    #[error("restricted threads get no application tools or memory port")]
    Restricted,
    /// An endpoint the thread binds is not registered now (its connection
    /// closed, it was unregistered, or it never was).
    #[error(
        "tool endpoint `{endpoint}` is not registered by the thread's application (revoked or never registered)"
    )]
    Unavailable {
        /// The endpoint's name.
        endpoint: String,
    },
    /// No such tool on the thread's endpoints.
    #[error("no tool `{name}` on this thread's endpoints")]
    UnknownTool {
        /// The qualified name asked for (bounded by the name rule).
        name: String,
    },
}

impl ToolRefusal {
    /// The stable wire code (also a turn's failure code).
    pub fn code(&self) -> ErrorCode {
        match self {
            ToolRefusal::Invalid { .. } => ErrorCode::ToolInvalid,
            ToolRefusal::Limit { .. } => ErrorCode::ToolLimitExceeded,
            ToolRefusal::Restricted => ErrorCode::ToolsRestricted,
            ToolRefusal::Unavailable { .. } => ErrorCode::ToolEndpointUnavailable,
            ToolRefusal::UnknownTool { .. } => ErrorCode::ToolUnknown,
        }
    }
}

/// The name rule of tools (and of context block and memory item ids): 1-64
/// of `[A-Za-z0-9_-]`, starting alphanumeric.
pub fn valid_tool_name(name: &str) -> bool {
    crate::names::valid_name(name, 64) && !name.contains('.')
}

/// The name rule of endpoints: a tool name without `__` that does not end
/// in `_`, so that [`qualified`] joins unambiguously.
pub fn valid_endpoint_name(name: &str) -> bool {
    valid_tool_name(name) && !name.contains(QUALIFIED_SEPARATOR) && !name.ends_with('_')
}

/// Checks one `tools.register`: names, counts, sizes, schemas.
pub fn validate_endpoint(r: &ToolsRegister) -> Result<(), ToolRefusal> {
    let shown = if valid_endpoint_name(&r.endpoint) {
        r.endpoint.clone()
    } else {
        "?".into()
    };
    let invalid = |reason| ToolRefusal::Invalid {
        endpoint: shown.clone(),
        reason,
    };
    let limit = |what, limit| ToolRefusal::Limit { what, limit };
    if !valid_endpoint_name(&r.endpoint) {
        return Err(invalid(
            "the endpoint name must be 1-64 of [A-Za-z0-9_-], starting alphanumeric, \
             without `__` and not ending in `_` (agents are offered `<endpoint>__<tool>`)",
        ));
    }
    if r.tools.is_empty() {
        return Err(invalid("an endpoint needs at least one tool"));
    }
    if r.tools.len() > MAX_TOOLS {
        return Err(limit("tool count", MAX_TOOLS));
    }
    let mut names = BTreeSet::new();
    for t in &r.tools {
        if !valid_tool_name(&t.name) {
            return Err(invalid(
                "a tool name must be 1-64 of [A-Za-z0-9_-], starting alphanumeric",
            ));
        }
        if !names.insert(t.name.as_str()) {
            return Err(invalid("a tool name is used twice"));
        }
        if !offerable_name(&qualified(&r.endpoint, &t.name)) {
            return Err(invalid(
                "`<endpoint>__<tool>`, the name agents are offered, must be at most 64 bytes \
                 (the OpenAI and Anthropic function-name rule)",
            ));
        }
        if t.description.len() > MAX_TOOL_DESCRIPTION_BYTES {
            return Err(limit("description length", MAX_TOOL_DESCRIPTION_BYTES));
        }
        let bytes = serde_json::to_vec(&t.input_schema)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if bytes > MAX_TOOL_SCHEMA_BYTES {
            return Err(limit("input schema size", MAX_TOOL_SCHEMA_BYTES));
        }
        if t.input_schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(invalid(
                "an inputSchema must be a JSON Schema object with \"type\": \"object\"",
            ));
        }
    }
    Ok(())
}

/// Endpoint names a thread binds: bounded, valid, unique.
pub fn validate_binding(names: &[String]) -> Result<(), ToolRefusal> {
    if names.len() > MAX_TOOL_ENDPOINTS {
        return Err(ToolRefusal::Limit {
            what: "bound endpoint count",
            limit: MAX_TOOL_ENDPOINTS,
        });
    }
    let mut seen = BTreeSet::new();
    for n in names {
        if !valid_endpoint_name(n) {
            return Err(ToolRefusal::Invalid {
                endpoint: "?".into(),
                reason: "a bound endpoint name is invalid",
            });
        }
        if !seen.insert(n.as_str()) {
            return Err(ToolRefusal::Invalid {
                endpoint: n.clone(),
                reason: "the endpoint is bound twice",
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
