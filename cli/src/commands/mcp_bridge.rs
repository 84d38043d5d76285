//! `mcp-bridge` (hidden): the stdio MCP server an agent session of a thread
//! with application tools is given in its `mcpServers`. It speaks MCP to
//! the agent through the official Rust SDK (`rmcp`) and forwards
//! `tools/list` and `tools/call` to the controller's `tools.list` and
//! `tools.call` over the socket, authenticated with the session's ticket.
//!
//! What must stay true: the ticket is read from the environment the
//! controller set for this process (never argv) and is sent only inside
//! `hello`; the bridge adds nothing of its own to a call — the controller
//! journals it, runs it at most once and decides what the agent gets. A
//! controller refusal reaches the agent as a tool error result naming the
//! stable code, never as a protocol failure that would end the session.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lapis_protocol::call;
use lapis_protocol::client::{Client, ClientError};
use lapis_protocol::params::NoParams;
use lapis_protocol::tools::{BRIDGE_TICKET_ENV, ToolOutput, ToolsCall};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use crate::exit::{CliError, CliResult};

/// How long one forwarded request may wait: beyond the controller's own
/// callback deadlines (capture begin, invoke, capture finish).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(400);

/// The MCP side: one controller connection, used one request at a time.
#[derive(Clone)]
struct Bridge {
    /// The ticket-authenticated connection.
    client: Arc<Mutex<Client>>,
}

impl Bridge {
    /// Runs `f` on the connection off the async runtime (the SDK client
    /// blocks).
    async fn with_client<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, ClientError> + Send + 'static,
    ) -> Result<T, ClientError> {
        let client = self.client.clone();
        tokio::task::spawn_blocking(move || {
            let mut c = client.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut c)
        })
        .await
        .unwrap_or_else(|_| Err(ClientError::Protocol("bridge worker panicked".into())))
    }
}

fn tool_error(text: String) -> CallToolResult {
    serde_json::from_value(json!({"content": [{"type": "text", "text": text}], "isError": true}))
        .unwrap_or_default()
}

fn tool_result(out: ToolOutput) -> CallToolResult {
    let mut v = json!({"content": [{"type": "text", "text": out.text}], "isError": out.is_error});
    if let Some(s) = out.structured {
        v["structuredContent"] = s;
    }
    serde_json::from_value(v).unwrap_or_else(|_| tool_error("malformed tool result".into()))
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let listed = self
            .with_client(|c| c.request::<call::ToolsList>(&NoParams {}))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let tools: Vec<Value> = listed
            .tools
            .into_iter()
            .map(|t| {
                let mut v = json!({"name": t.name, "inputSchema": t.input_schema,
                    "annotations": {"readOnlyHint": !t.mutating}});
                if !t.description.is_empty() {
                    v["description"] = t.description.into();
                }
                v
            })
            .collect();
        // Built through serde: the SDK's result types are non-exhaustive.
        serde_json::from_value(json!({ "tools": tools }))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let params = ToolsCall {
            name: request.name.to_string(),
            arguments: request.arguments.map(Value::Object).unwrap_or(json!({})),
            mcp_request_id: None,
        };
        let result = self
            .with_client(move |c| c.request::<call::ToolsCall>(&params))
            .await;
        Ok(match result {
            Ok(out) => tool_result(out).into(),
            Err(ClientError::Rpc(e)) => {
                let code = e.error_code().map(|c| c.as_str()).unwrap_or("unknown");
                tool_error(format!("{} [{code}]", e.message)).into()
            }
            Err(e) => return Err(ErrorData::internal_error(e.to_string(), None)),
        })
    }
}

/// Connects with the ticket, then serves MCP on stdin/stdout until the
/// agent closes it.
pub(super) fn run(socket: PathBuf) -> CliResult {
    let ticket = std::env::var(BRIDGE_TICKET_ENV).map_err(|_| {
        CliError::failure(
            "mcp_bridge_no_ticket",
            anyhow::anyhow!(
                "{BRIDGE_TICKET_ENV} is not set (the controller sets it for agent sessions)"
            ),
        )
    })?;
    let mut client =
        Client::connect(&socket).map_err(|e| CliError::failure("mcp_bridge_connect", e))?;
    client
        .hello_ticket(&ticket)
        .map_err(|e| CliError::failure("mcp_bridge_hello", e))?;
    drop(ticket);
    client.set_request_timeout(Some(REQUEST_TIMEOUT));
    let bridge = Bridge {
        client: Arc::new(Mutex::new(client)),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::failure("mcp_bridge_runtime", e))?;
    runtime.block_on(async move {
        let service = bridge
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| CliError::failure("mcp_bridge_initialize", e))?;
        let _ = service.waiting().await;
        Ok(())
    })
}
