//! What `providers check` reports: what an agent advertised when started
//! exactly as a turn starts it, and why it could not be checked. One
//! definition for the service's probe (`lapis_service::acp::probe`), the
//! `providers.check` method and the CLI.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the agent advertised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeReport {
    /// The executable that was started.
    pub command: PathBuf,
    /// `initialize` → `protocolVersion` (always the pinned one on success).
    pub protocol_version: u64,
    /// `agentInfo` (name, title, version) when given.
    pub agent_info: Option<Value>,
    /// `agentCapabilities.loadSession`.
    pub load_session: bool,
    /// `agentCapabilities.mcpCapabilities` (`http`, `sse`).
    pub mcp_capabilities: Value,
    /// `agentCapabilities.promptCapabilities` (`image`, `audio`,
    /// `embeddedContext`).
    pub prompt_capabilities: Value,
    /// `authMethods` (id, name, description).
    pub auth_methods: Vec<Value>,
    /// The session check, when asked for.
    pub session: Option<SessionProbe>,
}

/// How `session/new` went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum SessionProbe {
    /// A session was opened; `modes` is what the agent offered.
    Opened {
        /// `modes` (`currentModeId`, `availableModes`), when given.
        modes: Option<Value>,
    },
    /// The agent needs a login first (see the report's `auth_methods`).
    AuthRequired,
    /// Any other failure, with a stable code.
    Failed {
        /// `session_new_failed`, `session_new_timeout`, `agent_exited`, …
        code: String,
    },
}

/// A check that did not get a report: the stable code (`command_not_found`,
/// `initialize_failed`, …), the message and the agent's last stderr lines
/// (redacted and bounded by the runner; empty when it never started).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeFailed {
    /// The stable code.
    pub code: String,
    /// What went wrong (no secret, no prompt).
    pub message: String,
    /// The agent's last stderr lines.
    #[serde(default)]
    pub stderr: Vec<String>,
}
