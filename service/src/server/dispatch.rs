//! `hello` and the routing of every other method to its handler.
//!
//! The route is an exhaustive `match` over [`Method`], so a method added to
//! the scopes table without a handler does not compile.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::auth::AuthSession;
use lapis_protocol::{ErrorCode, HelloParams, HelloResult, Method, PROTOCOL, Request, RpcError};

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
    let params: HelloParams = request.params()?;
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
    }
    conn.session = Some(session);
    serde_json::to_value(result).map_err(internal)
}

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
            let _: Empty = request.params()?;
            reply(handlers::status(ctx).await)
        }
        Method::SessionsRevoke => reply(handlers::sessions_revoke(
            ctx,
            conn,
            session,
            request.params()?,
        )),
        Method::ConfigReload => {
            let _: Empty = request.params()?;
            let outcome = ctx
                .reload
                .reload(&ctx.core.store, &ctx.core.providers)
                .await;
            reply(Ok(outcome))
        }
        Method::WorkspacesAdd => {
            reply(handlers::workspaces_add(ctx, session, request.params()?).await)
        }
        Method::WorkspacesList => {
            let _: Empty = request.params()?;
            reply(handlers::workspaces_list(ctx).await)
        }
        Method::ThreadsCreate => {
            reply(handlers::threads_create(ctx, session, request.params()?).await)
        }
        Method::ThreadsGet => reply(handlers::threads_get(ctx, session, request.params()?).await),
        Method::ThreadsList => reply(handlers::threads_list(ctx, session, request.params()?).await),
        Method::ThreadsAttach => {
            reply(handlers::threads_attach(ctx, session, request.params()?).await)
        }
        Method::ThreadsConfigure => {
            reply(handlers::threads_configure(ctx, session, request.params()?).await)
        }
        Method::TurnsSubmit => reply(handlers::turns_submit(ctx, session, request.params()?).await),
        Method::TurnsContinue => {
            reply(handlers::turns_continue(ctx, session, request.params()?).await)
        }
        Method::TurnsGet => reply(handlers::turns_get(ctx, session, request.params()?).await),
        Method::TurnsList => reply(handlers::turns_list(ctx, session, request.params()?).await),
        Method::TurnsCancel => reply(handlers::turns_cancel(ctx, session, request.params()?).await),
        Method::TurnsResolve => {
            reply(handlers::turns_resolve(ctx, session, request.params()?).await)
        }
        Method::JournalReplay => {
            reply(handlers::journal_replay(ctx, session, request.params()?).await)
        }
        Method::JournalSubscribe => {
            reply(handlers::journal_subscribe(ctx, conn, session, request.params()?).await)
        }
        Method::JournalUnsubscribe => reply(handlers::journal_unsubscribe(conn, request.params()?)),
        Method::PermissionsList => {
            reply(handlers::permissions_list(ctx, session, request.params()?).await)
        }
        Method::PermissionsRespond => {
            reply(handlers::permissions_respond(ctx, session, request.params()?).await)
        }
        Method::McpRegister => handlers::mcp_register(ctx, conn, session, request.params()?),
    }
}

/// Serializes a handler's typed result (a `lapis_protocol::params` type or a
/// record) into the response's `result` member: the one place results
/// become JSON.
fn reply<T: Serialize>(result: Result<T, RpcError>) -> Result<Value, RpcError> {
    serde_json::to_value(result?).map_err(internal)
}

/// Params of methods that take none: an empty object (or nothing).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}
