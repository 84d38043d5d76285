//! MCP servers as one turn hands them to its agent: resolved from launch
//! descriptions (the provider's and the thread's application servers)
//! with environment values read at dispatch, checked against the agent's
//! advertised capabilities, and written as ACP `mcpServers`.
//!
//! What must stay true: values live only in [`LaunchServer`], whose
//! `Debug` never shows them, and only [`LaunchServer::to_acp`] puts them on
//! the wire toward the agent. What persists of a server is its
//! [`McpEndpoint`] (name, transport, identity digest).

use std::collections::BTreeMap;
use std::ffi::OsString;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use lapis_protocol::config::ProviderSpec;
use std::path::Path;

use lapis_protocol::mcp::{McpEndpoint, McpRefusal, McpServer, McpTransport};
use lapis_protocol::tools::{BRIDGE_SERVER_NAME, BRIDGE_TICKET_ENV, ToolRefusal};

/// One server ready to be sent: its description and its environment values.
#[derive(Clone, PartialEq, Eq)]
pub struct LaunchServer {
    /// The description (names only).
    pub server: McpServer,
    /// `(name, value)` in the description's `env` order.
    env: Vec<(String, String)>,
}

impl std::fmt::Debug for LaunchServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchServer")
            .field("server", &self.server)
            .field("env", &"<redacted>")
            .finish()
    }
}

impl LaunchServer {
    /// The ACP `McpServer` object (stdio has no `type`; http and sse carry
    /// theirs and no headers).
    pub fn to_acp(&self) -> Value {
        let s = &self.server;
        match s.transport {
            McpTransport::Stdio => json!({
                "name": s.name,
                "command": s.command,
                "args": s.args,
                "env": self.env.iter().map(|(n, v)| json!({"name": n, "value": v})).collect::<Vec<_>>(),
            }),
            t => json!({"type": t.as_str(), "name": s.name, "url": s.url, "headers": []}),
        }
    }

    /// What persists of it.
    pub fn endpoint(&self) -> McpEndpoint {
        endpoint(&self.server)
    }

    /// The controller's MCP bridge for a thread with application tools:
    /// this binary's hidden `mcp-bridge` subcommand, connecting back to
    /// `socket`. Its ticket is set per agent session
    /// ([`LaunchServer::with_ticket`]); its description (hence identity)
    /// names the variable only.
    pub(crate) fn bridge(exe: &Path, socket: &Path) -> LaunchServer {
        LaunchServer {
            server: McpServer {
                name: BRIDGE_SERVER_NAME.to_owned(),
                transport: McpTransport::Stdio,
                command: Some(exe.display().to_string()),
                args: vec![
                    "mcp-bridge".to_owned(),
                    "--socket".to_owned(),
                    socket.display().to_string(),
                ],
                env: vec![BRIDGE_TICKET_ENV.to_owned()],
                url: None,
            },
            env: vec![(BRIDGE_TICKET_ENV.to_owned(), String::new())],
        }
    }

    /// Whether this is the controller's bridge.
    pub(crate) fn is_bridge(&self) -> bool {
        self.server.name == BRIDGE_SERVER_NAME
            && self.server.env.first().map(String::as_str) == Some(BRIDGE_TICKET_ENV)
    }

    /// Sets the bridge's ticket (the secret goes only into the agent's
    /// `mcpServers` env, never argv).
    pub(crate) fn with_ticket(&mut self, ticket: &str) {
        self.env = vec![(BRIDGE_TICKET_ENV.to_owned(), ticket.to_owned())];
    }
}

/// Why the servers of a turn's agent session were refused: an MCP rule or
/// a tool rule, each with its own stable code (the turn's outcome).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchRefusal {
    /// An MCP server rule.
    #[error(transparent)]
    Mcp(#[from] McpRefusal),
    /// A tool endpoint rule.
    #[error(transparent)]
    Tools(#[from] ToolRefusal),
}

impl LaunchRefusal {
    /// The stable code.
    pub fn code(&self) -> lapis_protocol::ErrorCode {
        match self {
            LaunchRefusal::Mcp(r) => r.code(),
            LaunchRefusal::Tools(r) => r.code(),
        }
    }
}

/// `mcp_` + lowercase hex SHA-256 of the description: the server's identity
/// (names, never values; a rotated secret is the same server).
pub fn identity(server: &McpServer) -> String {
    let canonical = json!({
        "name": server.name, "transport": server.transport.as_str(),
        "command": server.command, "args": server.args, "env": server.env, "url": server.url,
    });
    let digest = Sha256::digest(canonical.to_string().as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("mcp_{hex}")
}

/// Name, transport and identity of a description.
pub fn endpoint(server: &McpServer) -> McpEndpoint {
    McpEndpoint {
        name: server.name.clone(),
        transport: server.transport,
        identity: identity(server),
    }
}

/// The `mcpServers` array of `session/new` and `session/load`.
pub fn acp_servers(servers: &[LaunchServer]) -> Value {
    Value::Array(servers.iter().map(LaunchServer::to_acp).collect())
}

/// Refuses servers whose transport the agent did not advertise in
/// `initialize` (`agentCapabilities.mcpCapabilities`); stdio is always
/// supported.
pub fn check_capabilities(servers: &[LaunchServer], init: &Value) -> Result<(), McpRefusal> {
    for s in servers {
        let key = match s.server.transport {
            McpTransport::Stdio => continue,
            McpTransport::Http => "http",
            McpTransport::Sse => "sse",
        };
        let pointer = format!("/agentCapabilities/mcpCapabilities/{key}");
        if init.pointer(&pointer) != Some(&Value::Bool(true)) {
            return Err(McpRefusal::TransportUnsupported {
                server: s.server.name.clone(),
                transport: key,
            });
        }
    }
    Ok(())
}

/// Everything a turn's agent gets: the provider's servers, then the
/// application's (in the thread's order), with values from `env` (the env
/// file, then the controller's environment). Refuses, before anything is
/// launched: any server on a restricted thread, a name used twice, an
/// application server naming a variable outside the provider's
/// `mcpEnvAllowlist`, a variable without a value, and a variable whose
/// value differs from what the agent itself is given.
pub fn resolve(
    spec: &ProviderSpec,
    restricted: bool,
    app: &[McpServer],
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<Vec<LaunchServer>, McpRefusal> {
    if spec.mcp_servers.is_empty() && app.is_empty() {
        return Ok(Vec::new());
    }
    if restricted {
        return Err(McpRefusal::Restricted);
    }
    // What the agent's own environment holds: one name, one value.
    let mut values: BTreeMap<String, String> = spec
        .agent_env(&env)
        .into_iter()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let mut names = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    let sources = spec
        .mcp_servers
        .iter()
        .map(|s| (s, false))
        .chain(app.iter().map(|s| (s, true)));
    for (server, from_app) in sources {
        if !names.insert(server.name.as_str()) {
            return Err(McpRefusal::DuplicateName {
                server: server.name.clone(),
            });
        }
        let mut resolved = Vec::with_capacity(server.env.len());
        for (i, name) in server.env.iter().enumerate() {
            let at = |server: &McpServer| (server.name.clone(), i + 1);
            if from_app && !spec.mcp_env_allowlist.contains(name) {
                let (server, position) = at(server);
                return Err(McpRefusal::EnvNotAllowed { server, position });
            }
            let Some(value) = env(name).and_then(|v| v.into_string().ok()) else {
                let (server, position) = at(server);
                return Err(McpRefusal::EnvUnset { server, position });
            };
            match values.get(name) {
                Some(existing) if *existing != value => {
                    let (server, position) = at(server);
                    return Err(McpRefusal::EnvConflict { server, position });
                }
                Some(_) => {}
                None => {
                    values.insert(name.clone(), value.clone());
                }
            }
            resolved.push((name.clone(), value));
        }
        out.push(LaunchServer {
            server: server.clone(),
            env: resolved,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(v: Value) -> ProviderSpec {
        ProviderSpec::from_json("p", &v).unwrap()
    }

    fn server(v: Value) -> McpServer {
        serde_json::from_value(v).unwrap()
    }

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |n| {
            pairs
                .iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| OsString::from(v))
        }
    }

    fn code(r: Result<Vec<LaunchServer>, McpRefusal>) -> &'static str {
        r.unwrap_err().code().as_str()
    }

    #[test]
    fn provider_and_application_servers_resolve_in_order_with_values() {
        let p = spec(json!({"command": "agent",
            "mcpServers": [{"name": "files", "command": "/bin/files", "env": ["FILES_KEY"]}],
            "mcpEnvAllowlist": ["APP_KEY"]}));
        let app = [server(
            json!({"name": "tickets", "command": "/bin/t", "args": ["-v"], "env": ["APP_KEY"]}),
        )];
        let out = resolve(
            &p,
            false,
            &app,
            env(&[("FILES_KEY", "f-secret"), ("APP_KEY", "a-secret")]),
        )
        .unwrap();
        let acp = acp_servers(&out);
        assert_eq!(
            acp,
            json!([
                {"name": "files", "command": "/bin/files", "args": [], "env": [{"name": "FILES_KEY", "value": "f-secret"}]},
                {"name": "tickets", "command": "/bin/t", "args": ["-v"], "env": [{"name": "APP_KEY", "value": "a-secret"}]},
            ])
        );
        let debug = format!("{out:?}");
        assert!(!debug.contains("secret"), "{debug}");
        assert!(out[0].endpoint().identity.starts_with("mcp_"));
    }

    #[test]
    fn dispatch_refusals_have_their_codes() {
        let p = spec(json!({"command": "agent", "env": {"SHARED": "agent-value"},
            "mcpServers": [{"name": "files", "command": "/bin/files"}], "mcpEnvAllowlist": ["OK", "SHARED"]}));
        let none: [McpServer; 0] = [];
        assert_eq!(code(resolve(&p, true, &none, env(&[]))), "mcp_restricted");
        let dup = [server(json!({"name": "files", "command": "/bin/x"}))];
        assert_eq!(
            code(resolve(&p, false, &dup, env(&[]))),
            "mcp_server_invalid"
        );
        let outside = [server(
            json!({"name": "a", "command": "/bin/x", "env": ["OTHER"]}),
        )];
        assert_eq!(
            code(resolve(&p, false, &outside, env(&[("OTHER", "v")]))),
            "mcp_env_not_allowed"
        );
        let unset = [server(
            json!({"name": "a", "command": "/bin/x", "env": ["OK"]}),
        )];
        assert_eq!(code(resolve(&p, false, &unset, env(&[]))), "mcp_env_unset");
        let conflict = [server(
            json!({"name": "a", "command": "/bin/x", "env": ["SHARED"]}),
        )];
        assert_eq!(
            code(resolve(
                &p,
                false,
                &conflict,
                env(&[("SHARED", "controller-value")])
            )),
            "mcp_env_conflict"
        );
        // The same value the agent gets is no conflict.
        resolve(&p, false, &conflict, env(&[("SHARED", "agent-value")])).unwrap();
        let plain = spec(json!({"command": "agent"}));
        assert!(resolve(&plain, true, &none, env(&[])).unwrap().is_empty());
    }

    #[test]
    fn transports_need_the_advertised_capability() {
        let p = spec(json!({"command": "agent", "mcpServers": [
            {"name": "web", "transport": "http", "url": "http://127.0.0.1:1/mcp"},
            {"name": "files", "command": "/bin/files"}]}));
        let out = resolve(&p, false, &[], env(&[])).unwrap();
        assert_eq!(
            out[0].to_acp(),
            json!({"type": "http", "name": "web", "url": "http://127.0.0.1:1/mcp", "headers": []})
        );
        let yes = json!({"agentCapabilities": {"mcpCapabilities": {"http": true}}});
        check_capabilities(&out, &yes).unwrap();
        for no in [
            json!({}),
            json!({"agentCapabilities": {"mcpCapabilities": {"http": false, "sse": true}}}),
        ] {
            assert_eq!(
                check_capabilities(&out, &no).unwrap_err().code().as_str(),
                "mcp_transport_unsupported"
            );
        }
        check_capabilities(&out[1..], &json!({})).unwrap();
    }

    #[test]
    fn identity_covers_the_description_not_values() {
        let a = server(json!({"name": "a", "command": "/bin/x", "env": ["K"]}));
        let b = server(json!({"name": "a", "command": "/bin/x", "env": ["K", "L"]}));
        assert_eq!(identity(&a), identity(&a.clone()));
        assert_ne!(identity(&a), identity(&b));
        assert_eq!(identity(&a).len(), 4 + 64);
    }
}
