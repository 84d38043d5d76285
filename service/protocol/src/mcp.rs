//! MCP server launch descriptions: what the controller hands an agent in
//! `session/new` / `session/load` (ACP `mcpServers`), from two sources —
//! a provider's `mcpServers` in the config, and servers an application
//! registers on its connection (`mcp.register`, gone with the connection).
//!
//! What must stay true: a description holds environment variable *names*
//! only; values are read from the controller's env file / environment at
//! dispatch and never leave the controller except toward the agent (never
//! a receipt, the journal, a log or CLI output). Every refusal is one
//! stable [`ErrorCode`] and its message names servers and positions, never
//! a value. The same rules hold for both sources ([`validate_servers`]).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::ErrorCode;
use crate::names::{valid_env_name, valid_name};

/// Most servers one source (a provider, or one `mcp.register`) may
/// describe, and most application servers one thread may select.
pub const MAX_MCP_SERVERS: usize = 16;
/// Most arguments of one server.
pub const MAX_MCP_ARGS: usize = 64;
/// Most environment names of one server.
pub const MAX_MCP_ENV: usize = 32;
/// Longest command, argument or URL, in bytes.
pub const MAX_MCP_STRING_BYTES: usize = 4096;
/// Largest description (its JSON), in bytes.
pub const MAX_MCP_SERVER_BYTES: usize = 32 * 1024;

/// The controller's identity variables: the names its own processes find
/// *which controller* they belong to by (the controller home,
/// [`crate::home::HOME_ENV`] and its old name
/// [`crate::home::HOME_ENV_DEPRECATED`]) and the ticket the controller hands its own
/// tool bridge ([`crate::tools::BRIDGE_TICKET_ENV`]). An MCP server given one could be pointed at
/// another controller's socket and journal, so no server may name them. Of
/// the `LAPIS_` names only these are reserved: any other (an application's
/// own `LAPIS_TICKETS_KEY`) is the application's to use. A name the
/// controller starts injecting into MCP servers joins this list.
pub const IDENTITY_ENV: [&str; 3] = [
    crate::home::HOME_ENV,
    crate::home::HOME_ENV_DEPRECATED,
    crate::tools::BRIDGE_TICKET_ENV,
];

/// Variables no MCP server may name besides [`IDENTITY_ENV`]: the ones the
/// controller itself runs on. An MCP server inherits nothing through them.
pub const RESERVED_ENV: [&str; 9] = [
    "HOME",
    "PATH",
    "USER",
    "SHELL",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
    "RUST_LOG",
];

/// Whether an environment name is reserved for the controller.
pub fn reserved_env(name: &str) -> bool {
    IDENTITY_ENV.contains(&name) || RESERVED_ENV.contains(&name)
}

/// How the agent reaches the server (ACP `McpServer` variants).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum McpTransport {
    /// The agent launches `command` (every ACP agent supports it).
    #[default]
    Stdio,
    /// Streamable HTTP at `url` (only if the agent advertises `mcpCapabilities.http`).
    Http,
    /// Server-sent events at `url` (only if the agent advertises `mcpCapabilities.sse`).
    Sse,
}

impl McpTransport {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            McpTransport::Stdio => "stdio",
            McpTransport::Http => "http",
            McpTransport::Sse => "sse",
        }
    }
}

/// One MCP server launch description (config and `mcp.register` alike).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpServer {
    /// Unique among the servers a session gets; 1-64 of `[A-Za-z0-9._-]`.
    pub name: String,
    /// `stdio` (default), `http` or `sse`.
    #[serde(default, skip_serializing_if = "is_stdio")]
    pub transport: McpTransport,
    /// stdio: the server's absolute executable path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// stdio: arguments (never secrets).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// stdio: names of variables the server gets, with values from the
    /// controller's env file, else its environment, at dispatch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// http/sse: the server's `http://` or `https://` URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

fn is_stdio(t: &McpTransport) -> bool {
    *t == McpTransport::Stdio
}

/// What persists and is shown of a server: its name, transport and
/// identity (a digest of the description, never an environment value).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpEndpoint {
    /// The server's name.
    pub name: String,
    /// Its transport (`stdio` when absent).
    #[serde(default)]
    pub transport: McpTransport,
    /// `mcp_` + lowercase hex SHA-256 of the description (name, transport,
    /// command, args, environment names, url).
    pub identity: String,
}

/// Why MCP servers were refused. Messages name servers and positions only.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum McpRefusal {
    /// A description breaks a shape rule.
    #[error("mcp server #{position}: {reason}")]
    Invalid {
        /// 1-based position in its list.
        position: usize,
        /// What is wrong (no values).
        reason: &'static str,
    },
    /// Too many servers, arguments or names, or something too long.
    #[error("mcp servers: {what} exceeds the limit of {limit}")]
    Limit {
        /// What was counted.
        what: &'static str,
        /// The bound.
        limit: usize,
    },
    /// An environment name is reserved for the controller.
    #[error(
        "mcp server `{server}`: environment name #{position} is reserved (the controller's identity or one it runs on)"
    )]
    EnvReserved {
        /// The server's name.
        server: String,
        /// 1-based position in its `env`.
        position: usize,
    },
    /// An application server names a variable outside the provider's `mcpEnvAllowlist`.
    #[error(
        "mcp server `{server}`: environment name #{position} is not in the provider's mcpEnvAllowlist"
    )]
    EnvNotAllowed {
        /// The server's name.
        server: String,
        /// 1-based position in its `env`.
        position: usize,
    },
    /// A variable a server needs has no value in the controller's env file or environment.
    #[error(
        "mcp server `{server}`: environment name #{position} has no value in the controller's env file or environment"
    )]
    EnvUnset {
        /// The server's name.
        server: String,
        /// 1-based position in its `env`.
        position: usize,
    },
    /// One variable would get two different values (a server's vs the agent's own `env`).
    #[error(
        "mcp server `{server}`: environment name #{position} conflicts with a different value the agent is given"
    )]
    EnvConflict {
        /// The server's name.
        server: String,
        /// 1-based position in its `env`.
        position: usize,
    },
    /// The agent did not advertise the server's transport.
    #[error("mcp server `{server}`: the agent does not advertise the {transport} transport")]
    TransportUnsupported {
        /// The server's name.
        server: String,
        /// `http` or `sse`.
        transport: &'static str,
    },
    /// Restricted threads get no MCP servers.
    #[error("restricted threads get no MCP servers")]
    Restricted,
    /// An application server the thread selected is not registered (its
    /// connection closed, or it never was).
    #[error(
        "mcp server `{server}` is not registered by the thread's application (its connection is gone)"
    )]
    Unavailable {
        /// The server's name.
        server: String,
    },
    /// Two servers of one session share a name.
    #[error("mcp server name `{server}` is used twice")]
    DuplicateName {
        /// The repeated name.
        server: String,
    },
}

impl McpRefusal {
    /// The stable wire code (also a turn's failure code).
    pub fn code(&self) -> ErrorCode {
        match self {
            McpRefusal::Invalid { .. } | McpRefusal::DuplicateName { .. } => {
                ErrorCode::McpServerInvalid
            }
            McpRefusal::Limit { .. } => ErrorCode::McpLimitExceeded,
            McpRefusal::EnvReserved { .. } => ErrorCode::McpEnvReserved,
            McpRefusal::EnvNotAllowed { .. } => ErrorCode::McpEnvNotAllowed,
            McpRefusal::EnvUnset { .. } => ErrorCode::McpEnvUnset,
            McpRefusal::EnvConflict { .. } => ErrorCode::McpEnvConflict,
            McpRefusal::TransportUnsupported { .. } => ErrorCode::McpTransportUnsupported,
            McpRefusal::Restricted => ErrorCode::McpRestricted,
            McpRefusal::Unavailable { .. } => ErrorCode::McpServerUnavailable,
        }
    }
}

/// The name rule (the config's names): 1-64 of `[A-Za-z0-9._-]`, starting
/// alphanumeric.
pub fn valid_server_name(name: &str) -> bool {
    valid_name(name, 64)
}

/// Checks one source's list: counts, sizes, shapes, unique names, reserved
/// environment names. The same rules for the config and `mcp.register`.
pub fn validate_servers(servers: &[McpServer]) -> Result<(), McpRefusal> {
    if servers.len() > MAX_MCP_SERVERS {
        return Err(McpRefusal::Limit {
            what: "server count",
            limit: MAX_MCP_SERVERS,
        });
    }
    let mut names = BTreeSet::new();
    for (i, s) in servers.iter().enumerate() {
        validate_server(i + 1, s)?;
        if !names.insert(s.name.as_str()) {
            return Err(McpRefusal::DuplicateName {
                server: s.name.clone(),
            });
        }
    }
    Ok(())
}

fn validate_server(position: usize, s: &McpServer) -> Result<(), McpRefusal> {
    let invalid = |reason| McpRefusal::Invalid { position, reason };
    let limit = |what, limit| McpRefusal::Limit { what, limit };
    if !valid_server_name(&s.name) {
        return Err(invalid(
            "`name` must be 1-64 of [A-Za-z0-9._-], starting alphanumeric",
        ));
    }
    let long = |v: &str| v.len() > MAX_MCP_STRING_BYTES;
    match s.transport {
        McpTransport::Stdio => {
            let Some(command) = &s.command else {
                return Err(invalid("a stdio server needs `command`"));
            };
            if s.url.is_some() {
                return Err(invalid("a stdio server has no `url`"));
            }
            if long(command) {
                return Err(limit("command length", MAX_MCP_STRING_BYTES));
            }
            if !command.starts_with('/') || command.contains('\0') {
                return Err(invalid("`command` must be an absolute path"));
            }
        }
        McpTransport::Http | McpTransport::Sse => {
            let Some(url) = &s.url else {
                return Err(invalid("an http or sse server needs `url`"));
            };
            if s.command.is_some() || !s.args.is_empty() || !s.env.is_empty() {
                return Err(invalid(
                    "an http or sse server has no `command`, `args` or `env`",
                ));
            }
            if long(url) {
                return Err(limit("url length", MAX_MCP_STRING_BYTES));
            }
            let rest = url
                .strip_prefix("http://")
                .or_else(|| url.strip_prefix("https://"));
            if rest.is_none_or(|r| {
                r.is_empty() || r.chars().any(|c| c.is_whitespace() || c.is_control())
            }) {
                return Err(invalid("`url` must be an http:// or https:// URL"));
            }
        }
    }
    if s.args.len() > MAX_MCP_ARGS {
        return Err(limit("argument count", MAX_MCP_ARGS));
    }
    if s.args.iter().any(|a| long(a)) {
        return Err(limit("argument length", MAX_MCP_STRING_BYTES));
    }
    if s.args.iter().any(|a| a.contains('\0')) {
        return Err(invalid("`args` entries must not contain NUL"));
    }
    if s.env.len() > MAX_MCP_ENV {
        return Err(limit("environment name count", MAX_MCP_ENV));
    }
    let mut seen = BTreeSet::new();
    for (j, name) in s.env.iter().enumerate() {
        // Reported by position: a value pasted where a name belongs may
        // still look like a name.
        if !valid_env_name(name) {
            return Err(invalid("an `env` entry is not a variable name"));
        }
        if reserved_env(name) {
            return Err(McpRefusal::EnvReserved {
                server: s.name.clone(),
                position: j + 1,
            });
        }
        if !seen.insert(name.as_str()) {
            return Err(invalid("an `env` name is listed twice"));
        }
    }
    let bytes = serde_json::to_vec(s).map(|v| v.len()).unwrap_or(usize::MAX);
    if bytes > MAX_MCP_SERVER_BYTES {
        return Err(limit("description size", MAX_MCP_SERVER_BYTES));
    }
    Ok(())
}

/// Names a thread selects: bounded, valid, unique.
pub fn validate_selection(names: &[String]) -> Result<(), McpRefusal> {
    if names.len() > MAX_MCP_SERVERS {
        return Err(McpRefusal::Limit {
            what: "selected server count",
            limit: MAX_MCP_SERVERS,
        });
    }
    let mut seen = BTreeSet::new();
    for (i, n) in names.iter().enumerate() {
        if !valid_server_name(n) {
            return Err(McpRefusal::Invalid {
                position: i + 1,
                reason: "a selected server name is invalid",
            });
        }
        if !seen.insert(n.as_str()) {
            return Err(McpRefusal::DuplicateName { server: n.clone() });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
