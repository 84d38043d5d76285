//! `hello` and the routing of every other method to its handler.
//!
//! The route is an exhaustive `match` over [`Method`], so a method added to
//! the scopes table without a handler does not compile.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::auth::AuthSession;
use lapis_protocol::call::{self, Call};
use lapis_protocol::{ErrorCode, HelloParams, HelloResult, Method, PROTOCOL, Request, RpcError};

use super::admission::Serves;
use super::conn::Conn;
use super::context::ServerContext;
use super::failure::internal;
use super::handlers;

/// Checks the protocol, then the credential, in that order: an unsupported
/// protocol is refused before any credential is compared.
pub(crate) fn authenticate(
    ctx: &ServerContext,
    params: &HelloParams,
) -> Result<HelloResult, RpcError> {
    if params.protocol != PROTOCOL {
        return Err(RpcError::new(
            ErrorCode::ProtocolUnsupported,
            format!("this server speaks {PROTOCOL}"),
        )
        .with_data("supported", json!([PROTOCOL])));
    }
    let auth = ctx.authority.hello(params)?;
    Ok(HelloResult {
        session: auth.session.view(),
        bearer: auth.bearer,
        server: ctx.identity.view(),
    })
}

/// `hello`: (re)authenticates the connection.
pub(super) async fn hello(
    ctx: &Arc<ServerContext>,
    conn: &mut Conn,
    request: &Request,
) -> Result<Value, RpcError> {
    // The protocol member is read first, on its own, so a wrong protocol is
    // reported as such even when other members are malformed.
    if let Some(protocol) = request.params.get("protocol").and_then(Value::as_str)
        && protocol != PROTOCOL
    {
        return Err(RpcError::new(
            ErrorCode::ProtocolUnsupported,
            format!("this server speaks {PROTOCOL}"),
        )
        .with_data("supported", json!([PROTOCOL])));
    }
    let params = params::<call::Hello>(request)?;
    if let Some(ticket) = &params.ticket {
        return bridge_hello(ctx, conn, &params, ticket);
    }
    if conn
        .slot
        .as_ref()
        .is_some_and(|s| s.serves() == Serves::Bridge)
    {
        // Before the credential is compared: no session is issued here.
        return Err(RpcError::new(
            ErrorCode::Forbidden,
            "this socket serves a managed controller's MCP bridge only (a `hello` with a tool ticket); applications talk to a managed controller over its stdin/stdout",
        ));
    }
    let result = authenticate(ctx, &params)?;
    let session = ctx.authority.check(&result.session.id)?;
    if let Some(slot) = &conn.slot {
        slot.admit_token(crate::auth::Authority::token_of(&session))
            .map_err(|refusal| {
                tracing::warn!(
                    conn = conn.number,
                    limit = refusal.limit(),
                    "hello refused over a connection quota"
                );
                RpcError::new(ErrorCode::LimitReached, refusal.message())
                    .with_data("limit", refusal.limit().into())
            })?;
    }
    if conn.session.as_ref().is_some_and(|s| s.id != session.id) {
        // A different session on the same connection: subscriptions of the
        // old one must not leak into the new one.
        conn.subscriptions.stop_all();
        conn.mcp = None;
        conn.tools = None;
    }
    conn.session = Some(session);
    conn.bridge = None;
    reply::<call::Hello>(Ok(result))
}

/// `hello` with a tool ticket: the connection becomes an agent session's
/// MCP bridge, for `tools.list` and `tools.call` of that session's thread
/// only. Never combined with a token or a bearer; an unknown or expired
/// ticket is `unauthenticated` and says nothing about why.
fn bridge_hello(
    ctx: &Arc<ServerContext>,
    conn: &mut Conn,
    params: &HelloParams,
    ticket: &str,
) -> Result<Value, RpcError> {
    if params.token.is_some() || params.bearer.is_some() || conn.session.is_some() {
        return Err(RpcError::new(
            ErrorCode::InvalidRequest,
            "a tool ticket is never combined with a token, a bearer or a session",
        ));
    }
    let grant =
        ctx.core.tools.tickets.check(ticket).ok_or_else(|| {
            RpcError::new(ErrorCode::Unauthenticated, "unknown or expired ticket")
        })?;
    // Authenticated for its principal under the connection cap: never shed
    // by a flood of newcomers while idle between tool calls, and held to a
    // non-owner token's share and its agent session's own cap (see
    // `admission`).
    if let Some(slot) = &conn.slot {
        slot.admit_bridge(&grant.principal, grant.session)
            .map_err(|refusal| {
                tracing::warn!(
                    conn = conn.number,
                    limit = refusal.limit(),
                    "bridge hello refused over a connection quota"
                );
                RpcError::new(ErrorCode::LimitReached, refusal.message())
                    .with_data("limit", refusal.limit().into())
            })?;
    }
    tracing::debug!(conn = conn.number, thread = %grant.thread_id, "mcp bridge connected");
    let result = HelloResult {
        session: lapis_protocol::SessionView {
            id: format!("bridge_{}", grant.session),
            principal: grant.principal.clone(),
            application: grant.application.clone(),
            scopes: Vec::new(),
            read_only: None,
        },
        bearer: None,
        server: ctx.identity.view(),
    };
    conn.bridge = Some((ticket.to_owned(), grant));
    reply::<call::Hello>(Ok(result))
}

/// Routes a bridge method: the ticket is checked again first (it expires
/// with its agent session, which may have ended since `hello`).
pub(super) async fn bridge(
    ctx: &Arc<ServerContext>,
    conn: &mut Conn,
    method: Method,
    request: &Request,
) -> Result<Value, RpcError> {
    let Some((ticket, _)) = conn.bridge.as_ref() else {
        return Err(RpcError::new(
            ErrorCode::Unauthenticated,
            "only an MCP bridge authenticated with a tool ticket may call this",
        ));
    };
    let Some(grant) = ctx.core.tools.tickets.check(ticket) else {
        conn.bridge = None;
        return Err(RpcError::new(
            ErrorCode::Unauthenticated,
            "the ticket expired with its agent session",
        ));
    };
    let (tools, store) = (&ctx.core.tools, &ctx.core.store);
    match method {
        Method::ToolsList => {
            let _ = params::<call::ToolsList>(request)?;
            reply::<call::ToolsList>(crate::tools::call::list(tools, store, &grant).await)
        }
        Method::ToolsCall => reply::<call::ToolsCall>(
            crate::tools::call::call(tools, store, &grant, request.params()?).await,
        ),
        _ => Err(RpcError::new(
            ErrorCode::Forbidden,
            "a tool ticket authenticates `tools.list` and `tools.call` only",
        )),
    }
}

/// The `register`/`unregister` methods of every named port kind, from the
/// one declaration (`lapis_protocol::port_kinds!`): a pattern of them for
/// [`method`]'s exhaustive match, and their route (one generic handler
/// pair, typed by the kind's registration params).
macro_rules! named_ports {
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

        /// Every named port kind's `register` and `unregister`.
        macro_rules! named_port_method {
            () => { $(Method::$Reg | Method::$Unreg)|* };
        }

        /// Routes a named port kind's `register` or `unregister`.
        fn named_port(
            ctx: &ServerContext,
            conn: &mut Conn,
            session: &AuthSession,
            method: Method,
            request: &Request,
        ) -> Result<Value, RpcError> {
            match method {
                $(
                    Method::$Reg => reply::<call::$Reg>(handlers::register_port::<$params>(
                        ctx,
                        conn,
                        session,
                        request.params()?,
                    )),
                    Method::$Unreg => reply::<call::$Unreg>(handlers::unregister_port(
                        ctx,
                        conn,
                        lapis_protocol::PortKind::$Kind,
                        request.params()?,
                    )),
                )*
                other => Err(internal(format!("{other:?} is not a named port's method"))),
            }
        }
    };
}

lapis_protocol::port_kinds!(named_ports);

/// Routes an authorized request.
pub(super) async fn method(
    ctx: &Arc<ServerContext>,
    conn: &mut Conn,
    session: &AuthSession,
    method: Method,
    request: &Request,
) -> Result<Value, RpcError> {
    match method {
        Method::Hello => hello(ctx, conn, request).await,
        Method::Status => {
            let _ = params::<call::Status>(request)?;
            reply::<call::Status>(handlers::status(ctx, session).await)
        }
        Method::SessionsRevoke => reply::<call::SessionsRevoke>(handlers::sessions_revoke(
            ctx,
            conn,
            session,
            request.params()?,
        )),
        Method::ConfigReload => {
            let _ = params::<call::ConfigReload>(request)?;
            let outcome = ctx
                .reload
                .reload(&ctx.core.store, &ctx.core.providers, &ctx.authority)
                .await;
            reply::<call::ConfigReload>(Ok(outcome))
        }
        Method::BudgetsReset => {
            reply::<call::BudgetsReset>(handlers::budgets_reset(ctx, request.params()?).await)
        }
        Method::ProvidersCheck => {
            reply::<call::ProvidersCheck>(handlers::providers_check(ctx, request.params()?).await)
        }
        Method::WorkspacesAdd => reply::<call::WorkspacesAdd>(
            handlers::workspaces_add(ctx, session, request.params()?).await,
        ),
        Method::WorkspacesList => {
            let _ = params::<call::WorkspacesList>(request)?;
            reply::<call::WorkspacesList>(handlers::workspaces_list(ctx, session).await)
        }
        Method::WorkspacesRemove => reply::<call::WorkspacesRemove>(
            handlers::workspaces_remove(ctx, session, request.params()?).await,
        ),
        Method::ThreadsCreate => reply::<call::ThreadsCreate>(
            handlers::threads_create(ctx, session, request.params()?).await,
        ),
        Method::ThreadsReserve => reply::<call::ThreadsReserve>(
            handlers::threads_reserve(ctx, session, request.params()?).await,
        ),
        Method::ThreadsGet => {
            reply::<call::ThreadsGet>(handlers::threads_get(ctx, session, request.params()?).await)
        }
        Method::ThreadsList => reply::<call::ThreadsList>(
            handlers::threads_list(ctx, session, request.params()?).await,
        ),
        Method::ThreadsAttach => reply::<call::ThreadsAttach>(
            handlers::threads_attach(ctx, session, request.params()?).await,
        ),
        Method::ThreadsDelete => reply::<call::ThreadsDelete>(
            handlers::threads_delete(ctx, session, request.params()?).await,
        ),
        Method::ThreadsImport => reply::<call::ThreadsImport>(
            handlers::threads_import(ctx, session, request.params()?).await,
        ),
        Method::ThreadsConfigure => reply::<call::ThreadsConfigure>(
            handlers::threads_configure(ctx, session, request.params()?).await,
        ),
        Method::TurnsSubmit => reply::<call::TurnsSubmit>(
            handlers::turns_submit(ctx, session, request.params()?).await,
        ),
        Method::TurnsContinue => reply::<call::TurnsContinue>(
            handlers::turns_continue(ctx, session, conn.peer.as_ref(), request.params()?).await,
        ),
        Method::TurnsGet => {
            reply::<call::TurnsGet>(handlers::turns_get(ctx, session, request.params()?).await)
        }
        Method::TurnsList => {
            reply::<call::TurnsList>(handlers::turns_list(ctx, session, request.params()?).await)
        }
        Method::TurnsCancel => reply::<call::TurnsCancel>(
            handlers::turns_cancel(ctx, session, request.params()?).await,
        ),
        Method::TurnsResolve => reply::<call::TurnsResolve>(
            handlers::turns_resolve(ctx, session, request.params()?).await,
        ),
        Method::JournalReplay => reply::<call::JournalReplay>(
            handlers::journal_replay(ctx, session, conn.peer.as_ref(), request.params()?).await,
        ),
        Method::JournalSubscribe => reply::<call::JournalSubscribe>(
            handlers::journal_subscribe(ctx, conn, session, request.params()?).await,
        ),
        Method::JournalUnsubscribe => reply::<call::JournalUnsubscribe>(
            handlers::journal_unsubscribe(conn, request.params()?),
        ),
        Method::PermissionsList => reply::<call::PermissionsList>(
            handlers::permissions_list(ctx, session, request.params()?).await,
        ),
        Method::PermissionsRespond => reply::<call::PermissionsRespond>(
            handlers::permissions_respond(ctx, session, request.params()?).await,
        ),
        Method::McpRegister => reply::<call::McpRegister>(handlers::mcp_register(
            ctx,
            conn,
            session,
            request.params()?,
        )),
        Method::ToolsRegister => reply::<call::ToolsRegister>(handlers::tools_register(
            ctx,
            conn,
            session,
            request.params()?,
        )),
        Method::ToolsUnregister => {
            reply::<call::ToolsUnregister>(handlers::tools_unregister(ctx, conn, request.params()?))
        }
        named_port_method!() => named_port(ctx, conn, session, method, request),
        Method::ToolsList | Method::ToolsCall => bridge(ctx, conn, method, request).await,
    }
}

/// Serializes a handler's typed result into the response's `result` member:
/// the one place results become JSON. The result must be call `C`'s, the
/// type the SDK decodes (`lapis_protocol::call`), so the two cannot drift.
fn reply<C: Call>(result: Result<C::Result, RpcError>) -> Result<Value, RpcError> {
    serde_json::to_value(result?).map_err(internal)
}

/// Decodes the params of call `C` (for methods whose handler takes none).
fn params<C: Call>(request: &Request) -> Result<C::Params, RpcError> {
    request.params()
}
