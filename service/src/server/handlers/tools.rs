//! `tools.register` / `tools.unregister`, and the tool checks of
//! `threads.create`, `threads.configure` and `threads.attach`.

use crate::auth::AuthSession;
use lapis_protocol::RpcError;
use lapis_protocol::tools::{
    ToolRefusal, ToolsRegister, ToolsRegisterResult, ToolsUnregister, ToolsUnregisterResult,
    validate_binding,
};

use super::super::conn::Conn;
use super::super::context::ServerContext;

/// The wire error of a refusal: its stable code, a message naming
/// endpoints, tools and positions only.
pub(super) fn refusal(r: ToolRefusal) -> RpcError {
    RpcError::new(r.code(), r.to_string())
}

/// `tools.register`: one endpoint served by this connection until it
/// closes or unregisters it.
pub(crate) fn tools_register(
    ctx: &ServerContext,
    conn: &mut Conn,
    session: &AuthSession,
    p: ToolsRegister,
) -> Result<ToolsRegisterResult, RpcError> {
    let peer = conn
        .peer
        .get_or_insert_with(|| crate::tools::Peer::new(conn.outbox.0.clone()))
        .clone();
    let endpoint = ctx
        .core
        .tools
        .registry
        .register(
            &mut conn.tools,
            &session.principal,
            &session.application,
            p,
            peer,
        )
        .map_err(refusal)?;
    tracing::info!(
        conn = conn.number,
        application = %session.application,
        endpoint = %endpoint.name,
        tools = endpoint.tools.len(),
        "tool endpoint registered"
    );
    Ok(ToolsRegisterResult { endpoint })
}

/// `tools.unregister`: revokes one endpoint of this connection at once.
pub(crate) fn tools_unregister(
    ctx: &ServerContext,
    conn: &mut Conn,
    p: ToolsUnregister,
) -> Result<ToolsUnregisterResult, RpcError> {
    let revoked = ctx
        .core
        .tools
        .registry
        .unregister(conn.tools.as_ref(), &p.endpoint);
    if revoked {
        tracing::info!(conn = conn.number, endpoint = %p.endpoint, "tool endpoint revoked");
    }
    Ok(ToolsUnregisterResult { revoked })
}

/// What `threads.create` checks of the endpoints a thread binds, before
/// anything is stored: a valid binding; none at all on a restricted thread;
/// each endpoint registered by this application now. The claim checks
/// again (the connection may close).
pub(super) fn check_create(
    ctx: &ServerContext,
    session: &AuthSession,
    restricted: bool,
    names: &[String],
) -> Result<(), RpcError> {
    validate_binding(names).map_err(refusal)?;
    check_restricted(restricted, names)?;
    ctx.core
        .tools
        .registry
        .lookup(&session.principal, &session.application, names)
        .map_err(refusal)?;
    Ok(())
}

/// A restricted thread binds no application tools.
pub(super) fn check_restricted(restricted: bool, names: &[String]) -> Result<(), RpcError> {
    if restricted && !names.is_empty() {
        return Err(refusal(ToolRefusal::Restricted));
    }
    Ok(())
}
