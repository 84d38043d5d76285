//! `mcp.register` and the MCP checks of `threads.create`.

use crate::auth::AuthSession;
use lapis_protocol::RpcError;
use lapis_protocol::mcp::{McpRefusal, validate_selection};
use lapis_protocol::params::{self, McpRegisterResult};

use super::super::conn::Conn;
use super::super::context::ServerContext;

/// The wire error of a refusal: its stable code, a message naming servers
/// and positions only.
pub(super) fn refusal(r: McpRefusal) -> RpcError {
    RpcError::new(r.code(), r.to_string())
}

/// `mcp.register`: replaces the servers this connection offers its
/// application's threads; they are withdrawn when the connection closes.
pub(crate) fn mcp_register(
    ctx: &ServerContext,
    conn: &mut Conn,
    session: &AuthSession,
    p: params::McpRegister,
) -> Result<McpRegisterResult, RpcError> {
    let servers = ctx
        .core
        .mcp
        .register(
            &mut conn.mcp,
            &session.principal,
            &session.application,
            p.servers,
        )
        .map_err(refusal)?;
    tracing::info!(
        conn = conn.number,
        application = %session.application,
        servers = servers.len(),
        "mcp servers registered"
    );
    Ok(McpRegisterResult { servers })
}

/// What `threads.create` checks of MCP servers before anything is stored:
/// a valid selection; none at all on a restricted thread (neither the
/// application's nor the provider's); each selected server registered by
/// this application now. Dispatch checks again (the connection may close).
pub(super) fn check_create(
    ctx: &ServerContext,
    session: &AuthSession,
    provider: &str,
    restricted: bool,
    names: &[String],
) -> Result<(), RpcError> {
    validate_selection(names).map_err(refusal)?;
    check_restricted(ctx, provider, restricted, names)?;
    ctx.core
        .mcp
        .lookup(&session.principal, &session.application, names)
        .map_err(refusal)?;
    Ok(())
}

/// A restricted thread gets no MCP servers: neither the application's
/// (`names`) nor its provider's (`threads.create` and `threads.configure`).
pub(super) fn check_restricted(
    ctx: &ServerContext,
    provider: &str,
    restricted: bool,
    names: &[String],
) -> Result<(), RpcError> {
    if !restricted {
        return Ok(());
    }
    let provider_servers = ctx
        .core
        .engine
        .as_ref()
        .and_then(|e| e.provider_spec(provider))
        .is_some_and(|s| !s.mcp_servers.is_empty());
    if provider_servers || !names.is_empty() {
        return Err(refusal(McpRefusal::Restricted));
    }
    Ok(())
}
