//! `tools.register` / `tools.unregister`, the named port kinds'
//! `<kind>.register` / `<kind>.unregister` (one generic pair), and the
//! port checks of `threads.create`, `threads.configure` and
//! `threads.attach`.

use crate::auth::AuthSession;
use crate::domain::Retention;
use crate::tools::registry::{Port, PortKind, PortOwner};
use lapis_protocol::RpcError;
use lapis_protocol::context::{
    PortRefusal, PortRegisterResult, PortUnregister, PortView, validate_port_binding,
};
use lapis_protocol::tools::{
    ToolRefusal, ToolsRegister, ToolsRegisterResult, ToolsUnregister, ToolsUnregisterResult,
    validate_binding,
};
use lapis_protocol::transcript::store::TranscriptRegister;
use lapis_protocol::{PortIdentities, ThreadPorts};

use super::super::conn::Conn;
use super::super::context::ServerContext;

/// The wire error of a refusal: its stable code, a message naming
/// endpoints, tools and positions only.
pub(super) fn refusal(r: ToolRefusal) -> RpcError {
    RpcError::new(r.code(), r.to_string())
}

/// The wire error of a port refusal.
fn port_refusal(r: PortRefusal) -> RpcError {
    RpcError::new(r.code(), r.to_string())
}

/// This connection's calling side, made by its first port registration.
fn peer_of(conn: &mut Conn) -> crate::tools::Peer {
    conn.peer
        .get_or_insert_with(|| crate::tools::Peer::new(conn.outbox.0.clone()))
        .clone()
}

/// `<kind>.register` of a named port kind (`lapis_protocol::port_kinds!`,
/// routed by `server/dispatch.rs`): one port of kind `S::KIND` served by
/// this connection, on its lease, until it closes or unregisters it.
pub(crate) fn register_port<S: Port<Refusal = PortRefusal>>(
    ctx: &ServerContext,
    conn: &mut Conn,
    session: &AuthSession,
    p: S,
) -> Result<PortRegisterResult, RpcError> {
    let peer = peer_of(conn);
    let name = p.name().to_owned();
    let identity = ctx
        .core
        .tools
        .registry
        .register_port(
            &mut conn.tools,
            &session.principal,
            &session.application,
            p,
            peer,
        )
        .map_err(port_refusal)?;
    tracing::info!(conn = conn.number, application = %session.application, kind = ?S::KIND, port = %name, "port registered");
    Ok(PortRegisterResult {
        port: PortView { name, identity },
    })
}

/// `<kind>.unregister`: revokes one port of `kind` of this connection at
/// once (a callback waiting on it fails its turn closed).
pub(crate) fn unregister_port(
    ctx: &ServerContext,
    conn: &mut Conn,
    kind: PortKind,
    p: PortUnregister,
) -> Result<ToolsUnregisterResult, RpcError> {
    let revoked = ctx
        .core
        .tools
        .registry
        .unregister_port(kind, conn.tools.as_ref(), &p.port);
    if revoked {
        tracing::info!(conn = conn.number, kind = ?kind, port = %p.port, "port revoked");
    }
    Ok(ToolsUnregisterResult { revoked })
}

/// `tools.register`: one endpoint served by this connection until it
/// closes or unregisters it.
pub(crate) fn tools_register(
    ctx: &ServerContext,
    conn: &mut Conn,
    session: &AuthSession,
    p: ToolsRegister,
) -> Result<ToolsRegisterResult, RpcError> {
    let peer = peer_of(conn);
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

/// The one check of the ports a thread binds, before anything is stored
/// (`threads.create`): each binding well formed; no application tools and
/// no memory port on a restricted thread; a transcript store only on a
/// `metadata-only` thread; every port registered by this application now.
/// The claim checks again (the connection may close). In kind order, each
/// kind's refusal in its own terms. The answer is the identity of each
/// bound port now, which the thread records.
pub(super) fn check_ports(
    ctx: &ServerContext,
    session: &AuthSession,
    restricted: bool,
    retention: Retention,
    ports: &ThreadPorts,
) -> Result<PortIdentities, RpcError> {
    let registry = &ctx.core.tools.registry;
    let owner = PortOwner::session(&session.principal, &session.application);
    validate_binding(&ports.tools).map_err(refusal)?;
    if restricted && !ports.tools.is_empty() {
        return Err(refusal(ToolRefusal::Restricted));
    }
    let mut identities = PortIdentities::default();
    for name in &ports.tools {
        let endpoint = registry
            .owned::<ToolsRegister>(owner, name)
            .map_err(refusal)?;
        identities.tools.insert(name.clone(), endpoint.identity);
    }
    check_named(ctx, session, restricted, retention, ports, &mut identities)?;
    Ok(identities)
}

/// Each named kind's binding (`lapis_protocol::port_kinds!`), in kind
/// order, into its member of the identities.
macro_rules! named_checks {
    ($(
        $(#[$doc:meta])*
        $Kind:ident {
            member: $member:ident = $wire:literal,
            label: $label:literal,
            binding: { $(#[$bdoc:meta])* },
            params: $params:ty,
            register: $Reg:ident = $reg:literal, $reg_fn:ident,
            unregister: $Unreg:ident = $unreg:literal, $unreg_fn:ident,
            handler: $Handler:path, $setter:ident, $serve:ident, $answer:path, [$($cb:path),+ $(,)?],
        }
    )*) => {

        /// [`bound`] for each named kind `ports` binds.
        fn check_named(
            ctx: &ServerContext,
            session: &AuthSession,
            restricted: bool,
            retention: Retention,
            ports: &ThreadPorts,
            identities: &mut PortIdentities,
        ) -> Result<(), RpcError> {
            $(
                identities.$member =
                    bound::<$params>(ctx, session, restricted, retention, ports.$member.as_deref())?;
            )*
            Ok(())
        }
    };
}

lapis_protocol::port_kinds!(named_checks);

/// A named port binding (absent, or a valid name) that the kind admits on
/// this thread (`Port::admits`) and that this application has registered
/// now, and its identity.
fn bound<S: Port<Refusal = PortRefusal>>(
    ctx: &ServerContext,
    session: &AuthSession,
    restricted: bool,
    retention: Retention,
    port: Option<&str>,
) -> Result<Option<String>, RpcError> {
    validate_port_binding(port).map_err(port_refusal)?;
    let Some(port) = port else { return Ok(None) };
    S::admits(restricted, retention)?;
    let owner = PortOwner::session(&session.principal, &session.application);
    ctx.core
        .tools
        .registry
        .owned::<S>(owner, port)
        .map(|e| Some(e.identity))
        .map_err(port_refusal)
}

/// What `threads.configure` checks of the transcript store it binds: as
/// `threads.create` does ([`bound`]: a valid name, `metadata-only`
/// retention, registered by this application now; the claim checks again
/// before each prompt). The thread's restriction is
/// [`check_restricted`]'s (a store is not bridged).
pub(super) fn check_transcript_store(
    ctx: &ServerContext,
    session: &AuthSession,
    retention: Retention,
    port: Option<&str>,
) -> Result<Option<String>, RpcError> {
    bound::<TranscriptRegister>(ctx, session, false, retention, port)
}

/// A restricted thread binds no application tools and no memory port
/// (memory's read tools ride the same bridge). One rule for every place a
/// thread's restriction or bindings are relied on after creation:
/// `threads.configure` and `threads.attach` refuse with `tools_restricted`
/// here, so a claim never has to discover it.
pub(super) fn check_restricted(restricted: bool, ports: &ThreadPorts) -> Result<(), RpcError> {
    if restricted && ports.bridged() {
        return Err(refusal(ToolRefusal::Restricted));
    }
    Ok(())
}
