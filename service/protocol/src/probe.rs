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
    /// The session lifecycle methods the agent advertised (`loadSession`
    /// and `sessionCapabilities.*`).
    #[serde(default)]
    pub session_capabilities: SessionCapabilities,
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

/// The session lifecycle an agent advertised in its `initialize`
/// response (ACP v1 schema 1.7: `agentCapabilities.loadSession` and
/// `agentCapabilities.sessionCapabilities.{list,resume,close,fork}`, each
/// supported when present and non-null). One reading of them for the
/// runner (resume before load, close on retirement) and `providers check`.
///
/// Usage (`usage_update`, the prompt response's `usage`) and elicitation
/// are not agent capabilities in ACP v1: an agent sends usage when it has
/// it, and elicitation is a *client* capability (this controller offers
/// `form` mode, answering empty forms as approvals).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionCapabilities {
    /// `session/load` (replays history).
    pub load: bool,
    /// `session/resume` (reconnects without replaying history).
    pub resume: bool,
    /// `session/list`.
    pub list: bool,
    /// `session/close`.
    pub close: bool,
    /// `session/fork` (unstable in ACP v1).
    pub fork: bool,
}

impl SessionCapabilities {
    /// Reads them from an `initialize` result.
    pub fn from_initialize(init: &Value) -> SessionCapabilities {
        let caps = init.get("agentCapabilities");
        let session = |name: &str| {
            caps.and_then(|c| c.get("sessionCapabilities"))
                .and_then(|s| s.get(name))
                .is_some_and(|v| !v.is_null())
        };
        SessionCapabilities {
            load: caps.and_then(|c| c.get("loadSession")) == Some(&Value::Bool(true)),
            resume: session("resume"),
            list: session("list"),
            close: session("close"),
            fork: session("fork"),
        }
    }
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
