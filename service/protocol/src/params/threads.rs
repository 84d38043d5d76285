//! Threads: `threads.create|attach|list|get|configure` and `mcp.register`,
//! params and results (see the module docs of `params`).

use serde::{Deserialize, Serialize};

/// `threads.create`.
///
/// Built one way: [`ThreadsCreate::new`] with the two required members,
/// then the setters (or assignments to the public fields) for the rest.
/// `#[non_exhaustive]` keeps it so outside this crate: a member added later
/// breaks no caller, and every omitted member is its wire default (absent).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
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
    /// The application ports it binds (`tools`, `context`, `memory`,
    /// `transcriptStore`; see [`crate::ThreadPorts`]), checked by the
    /// server before anything is stored and again at each claim.
    #[serde(flatten)]
    pub ports: crate::ThreadPorts,
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

impl ThreadsCreate {
    /// A thread of `provider` on workspace `workspace_id`, every other
    /// member absent (the server's defaults: `ask`, unrestricted, `full`).
    pub fn new(workspace_id: impl Into<String>, provider: impl Into<String>) -> Self {
        Self {
            workspace_id: workspace_id.into(),
            provider: provider.into(),
            approval: None,
            restricted: false,
            retention: None,
            mcp_servers: Vec::new(),
            ports: crate::ThreadPorts::default(),
            permission_timeout_seconds: None,
            budget: None,
            thread_id: None,
            command_id: None,
        }
    }

    /// Sets `approval`.
    #[must_use]
    pub fn approval(mut self, approval: crate::ApprovalPolicy) -> Self {
        self.approval = Some(approval);
        self
    }

    /// Sets `restricted`.
    #[must_use]
    pub fn restricted(mut self, restricted: bool) -> Self {
        self.restricted = restricted;
        self
    }

    /// Sets `retention`.
    #[must_use]
    pub fn retention(mut self, retention: crate::Retention) -> Self {
        self.retention = Some(retention);
        self
    }

    /// Sets `mcpServers` (registered MCP server names).
    #[must_use]
    pub fn mcp_servers<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.mcp_servers = names.into_iter().map(Into::into).collect();
        self
    }

    /// Sets `tools` (registered tool endpoint names).
    #[must_use]
    pub fn tools<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.ports.tools = names.into_iter().map(Into::into).collect();
        self
    }

    /// Sets `context` (a registered context port's name).
    #[must_use]
    pub fn context(mut self, port: impl Into<String>) -> Self {
        self.ports.context = Some(port.into());
        self
    }

    /// Sets `memory` (a registered memory port's name).
    #[must_use]
    pub fn memory(mut self, port: impl Into<String>) -> Self {
        self.ports.memory = Some(port.into());
        self
    }

    /// Sets `transcriptStore` (a registered transcript store's name; the
    /// thread must be `metadata-only`).
    #[must_use]
    pub fn transcript_store(mut self, port: impl Into<String>) -> Self {
        self.ports.transcript_store = Some(port.into());
        self
    }

    /// Sets `permissionTimeoutSeconds`.
    #[must_use]
    pub fn permission_timeout_seconds(mut self, seconds: u64) -> Self {
        self.permission_timeout_seconds = Some(seconds);
        self
    }

    /// Sets `budget`.
    #[must_use]
    pub fn budget(mut self, budget: crate::config::ThreadBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Sets `threadId` (an id from `threads.reserve`).
    #[must_use]
    pub fn thread_id(mut self, id: impl Into<String>) -> Self {
        self.thread_id = Some(id.into());
        self
    }

    /// Sets `commandId`.
    #[must_use]
    pub fn command_id(mut self, id: impl Into<String>) -> Self {
        self.command_id = Some(id.into());
        self
    }
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
    /// At most this many on the page: default and at most 1,000 (a larger
    /// value is bounded to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// The page after this cursor: the `next` of the previous page
    /// (opaque; a string no page returned is `invalid_request`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// `threads.configure`: optimistic on `expectedVersion`.
///
/// Built like [`ThreadsCreate`]: [`ThreadsConfigure::new`] with the thread
/// and the version, then the setters for what changes (`#[non_exhaustive]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
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
        deserialize_with = "crate::ports::present"
    )]
    pub permission_timeout_seconds: Option<Option<u64>>,
    /// New budget: `Some(Some(b))`; `Some(None)` (JSON `null`) clears it;
    /// `None` (absent) leaves it unchanged.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::ports::present"
    )]
    pub budget: Option<Option<crate::config::ThreadBudget>>,
    /// What changes of its ports (see [`crate::PortsPatch`]).
    #[serde(flatten)]
    pub ports: crate::PortsPatch,
    /// Makes the call idempotent (replays the first answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_id: Option<String>,
}

impl ThreadsConfigure {
    /// A change of `thread_id` at `expected_version` that changes nothing
    /// yet (every member absent).
    pub fn new(thread_id: impl Into<String>, expected_version: u64) -> Self {
        Self {
            thread_id: thread_id.into(),
            expected_version,
            provider: None,
            approval: None,
            restricted: None,
            retention: None,
            permission_timeout_seconds: None,
            budget: None,
            ports: crate::PortsPatch::default(),
            command_id: None,
        }
    }

    /// Changes the provider.
    #[must_use]
    pub fn provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = Some(provider.into());
        self
    }

    /// Changes the approval policy.
    #[must_use]
    pub fn approval(mut self, approval: crate::ApprovalPolicy) -> Self {
        self.approval = Some(approval);
        self
    }

    /// Changes the restricted flag.
    #[must_use]
    pub fn restricted(mut self, restricted: bool) -> Self {
        self.restricted = Some(restricted);
        self
    }

    /// Changes the retention.
    #[must_use]
    pub fn retention(mut self, retention: crate::Retention) -> Self {
        self.retention = Some(retention);
        self
    }

    /// Changes the permission timeout: `Some(n)` seconds, or `None` back
    /// to the provider's `permissionTimeoutSeconds` (JSON `null`).
    #[must_use]
    pub fn permission_timeout_seconds(mut self, seconds: Option<u64>) -> Self {
        self.permission_timeout_seconds = Some(seconds);
        self
    }

    /// Changes the budget: `Some(b)`, or `None` to clear it (JSON `null`).
    #[must_use]
    pub fn budget(mut self, budget: Option<crate::config::ThreadBudget>) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Changes the transcript store: `Some(name)`, or `None` to unbind it
    /// (JSON `null`).
    #[must_use]
    pub fn transcript_store(mut self, port: Option<String>) -> Self {
        self.ports.transcript_store = Some(port);
        self
    }

    /// Sets `commandId`.
    #[must_use]
    pub fn command_id(mut self, id: impl Into<String>) -> Self {
        self.command_id = Some(id.into());
        self
    }
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
    /// The caller's threads, one page of them.
    pub threads: Vec<crate::Thread>,
    /// The cursor of the next page (`after`), or null after the last
    /// page (always null from a controller that does not page).
    #[serde(default)]
    pub next: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The constructors leave every optional member off the wire, and the
    /// setters put exactly their member on it: building through them does
    /// not change what a hand-written request carries.
    #[test]
    fn built_params_have_the_wire_shape_of_written_ones() {
        let bare = ThreadsCreate::new("proj", "echo");
        assert_eq!(
            serde_json::to_value(&bare).unwrap(),
            json!({"workspaceId": "proj", "provider": "echo", "restricted": false})
        );
        let full = ThreadsCreate::new("proj", "echo")
            .approval(crate::ApprovalPolicy::AllowAll)
            .restricted(true)
            .retention(crate::Retention::MetadataOnly)
            .tools(["notes"])
            .mcp_servers(vec![String::from("fs")])
            .context("ctx")
            .memory("mem")
            .permission_timeout_seconds(30)
            .thread_id("thr_1")
            .command_id("c1");
        let wire = json!({
            "workspaceId": "proj", "provider": "echo", "approval": "allow-all",
            "restricted": true, "retention": "metadata-only", "mcpServers": ["fs"],
            "tools": ["notes"], "context": "ctx", "memory": "mem",
            "permissionTimeoutSeconds": 30, "threadId": "thr_1", "commandId": "c1"
        });
        assert_eq!(serde_json::to_value(&full).unwrap(), wire);
        assert_eq!(serde_json::from_value::<ThreadsCreate>(wire).unwrap(), full);

        let configure = ThreadsConfigure::new("thr_1", 3)
            .approval(crate::ApprovalPolicy::Ask)
            .permission_timeout_seconds(None)
            .budget(None);
        let wire = json!({
            "threadId": "thr_1", "expectedVersion": 3, "approval": "ask",
            "permissionTimeoutSeconds": null, "budget": null
        });
        assert_eq!(serde_json::to_value(&configure).unwrap(), wire);
        assert_eq!(
            serde_json::from_value::<ThreadsConfigure>(wire).unwrap(),
            configure
        );
        assert_eq!(
            serde_json::to_value(ThreadsConfigure::new("thr_1", 3)).unwrap(),
            json!({"threadId": "thr_1", "expectedVersion": 3})
        );
    }
}
