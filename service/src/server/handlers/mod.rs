//! Method handlers: decode nothing (params arrive typed), check resource
//! ownership, call the core, return the method's typed result (a
//! `lapis_protocol::params` result or record, the same type the SDK decodes);
//! `dispatch` turns it into JSON, nothing here builds a result by hand.
//!
//! Resource isolation lives here and nowhere else: a thread belongs to the
//! principal and application of the session that created it, and every
//! handler that names a thread or a turn goes through [`owned_thread`] or
//! [`owned_turn`] before touching it. What must stay true: another
//! principal's or application's thread or turn answers exactly like an
//! unknown id (`not_found`, same message), never `forbidden`, so ids cannot
//! be probed; `forbidden` is only ever about the session's own scopes.

mod budgets;
mod evidence;
mod fit;
mod journal;
mod mcp;
mod permissions;
mod providers;
mod status;
mod threads;
mod tools;
mod transcript;
mod turns;
mod workspaces;
mod worktrees;

use serde_json::json;

use crate::auth::AuthSession;
use crate::domain::{Actor, StoreError, Thread, Turn};
use lapis_protocol::config::WORKSPACE_ROOTS_FIELD;
use lapis_protocol::params::RevokeResult;
use lapis_protocol::{ErrorCode, RpcError, Scope, params};

use super::conn::Conn;
use super::context::ServerContext;
use super::failure::internal;

pub(crate) use budgets::budgets_reset;
pub(crate) use journal::{journal_replay, journal_subscribe, journal_unsubscribe};
pub(crate) use mcp::mcp_register;
pub(crate) use permissions::permissions_list;
pub(crate) use providers::providers_check;
pub(crate) use status::status;
pub(crate) use threads::{
    threads_attach, threads_configure, threads_create, threads_get, threads_list, threads_reserve,
};
pub(crate) use tools::{
    context_register, context_unregister, memory_register, memory_unregister, tools_register,
    tools_unregister, transcript_register, transcript_unregister,
};
pub(crate) use turns::{
    permissions_respond, turns_cancel, turns_continue, turns_get, turns_list, turns_resolve,
    turns_submit,
};
pub(crate) use workspaces::{workspaces_add, workspaces_list, workspaces_remove};

/// Maps a core error to the wire. Request-level codes pass through with the
/// core's (content-free) message; anything else is `internal`.
pub(super) fn store_err(e: StoreError) -> RpcError {
    if let Some(condition) = e.storage_condition() {
        tracing::error!(condition, error = %e, "store write failed");
        return RpcError::new(
            ErrorCode::StorageUnavailable,
            format!(
                "the controller cannot write its store ({condition}); reads still work and writes resume when the condition clears"
            ),
        )
        .with_data("condition", condition.into());
    }
    if let StoreError::BindingMismatch { fields } = &e {
        let fields = json!(fields);
        return RpcError::new(ErrorCode::BindingMismatch, e.to_string())
            .with_data("fields", fields);
    }
    if let StoreError::WorkspaceOverlaps { existing, .. } = &e {
        let existing = existing.clone();
        return RpcError::new(ErrorCode::WorkspaceOverlaps, e.to_string())
            .with_data("existing", existing.into());
    }
    if let StoreError::ToolEffectUnknown { call, .. } = &e {
        let call = call.clone();
        return RpcError::new(ErrorCode::ToolEffectUnknown, e.to_string())
            .with_data("callId", call.into());
    }
    match e.error_code() {
        ErrorCode::Internal => internal(e),
        // The code already says "conflict"; the message is the reason alone,
        // so clients do not print "conflict: … [conflict]".
        code @ ErrorCode::Conflict => match e {
            StoreError::Conflict { reason } => RpcError::new(code, reason),
            other => RpcError::new(code, other.to_string()),
        },
        code => RpcError::new(code, e.to_string()),
    }
}

/// The refusal of a directory outside every root: names the field that
/// grants roots and how to widen it, never the roots themselves (they are
/// the owner's file, not the caller's business).
pub(super) fn outside_roots(canonical: &str) -> RpcError {
    RpcError::new(
        ErrorCode::WorkspaceOutsideRoots,
        format!(
            "{canonical} is outside the workspace roots the configuration grants \
             (`{WORKSPACE_ROOTS_FIELD}`, default: the controller user's home directory); \
             add a root containing it to `{WORKSPACE_ROOTS_FIELD}` in the configuration \
             file and run `lapis-ai-controller config reload`, or declare the workspace \
             under `workspaces` there"
        ),
    )
    .with_data("field", WORKSPACE_ROOTS_FIELD.into())
}

/// The actor a session's mutations are recorded as.
pub(super) fn actor(session: &AuthSession) -> Actor {
    Actor::new(session.principal.clone(), session.application.clone())
}

/// Whether the session may see `thread`.
fn owns(session: &AuthSession, thread: &Thread) -> bool {
    crate::domain::owned_by(thread, &session.principal, &session.application)
}

/// A resource of another principal or application answers exactly as an
/// unknown one (`not_found`, the same message), so a caller cannot learn
/// that an id exists by trying it.
fn foreign(kind: &'static str, id: &str) -> RpcError {
    store_err(StoreError::not_found(kind, id))
}

/// Loads a thread the session owns.
pub(super) async fn owned_thread(
    ctx: &ServerContext,
    session: &AuthSession,
    thread_id: &str,
) -> Result<Thread, RpcError> {
    let thread = ctx
        .core
        .store
        .get_thread(thread_id)
        .await
        .map_err(store_err)?;
    if owns(session, &thread) {
        Ok(thread)
    } else {
        Err(foreign("thread", thread_id))
    }
}

/// Loads a turn whose thread the session owns.
pub(super) async fn owned_turn(
    ctx: &ServerContext,
    session: &AuthSession,
    turn_id: &str,
) -> Result<Turn, RpcError> {
    let turn = ctx.core.store.get_turn(turn_id).await.map_err(store_err)?;
    let thread = ctx
        .core
        .store
        .get_thread(&turn.thread_id)
        .await
        .map_err(store_err)?;
    if owns(session, &thread) {
        Ok(turn)
    } else {
        Err(foreign("turn", turn_id))
    }
}

/// Loads a turn the session may settle: its own, or — with
/// `turns:resolve-any` — a *fenced* turn of another application of the same
/// principal (the operator unblocking a workspace). Never crosses
/// principals; a foreign turn that is not fenced answers as unknown
/// (`not_found`). `turns.get` reads by the same rule.
pub(super) async fn settleable_turn(
    ctx: &ServerContext,
    session: &AuthSession,
    turn_id: &str,
) -> Result<Turn, RpcError> {
    let turn = ctx.core.store.get_turn(turn_id).await.map_err(store_err)?;
    let thread = ctx
        .core
        .store
        .get_thread(&turn.thread_id)
        .await
        .map_err(store_err)?;
    let operator = thread.principal == session.principal
        && session.scopes.contains(&Scope::TurnsResolveAny)
        && turn.state.is_fenced();
    if owns(session, &thread) || operator {
        Ok(turn)
    } else {
        Err(foreign("turn", turn_id))
    }
}

/// `sessions.revoke`: a principal revokes its own sessions (default: the
/// caller's). Revoking the caller's session ends its subscriptions at once.
pub(super) fn sessions_revoke(
    ctx: &ServerContext,
    conn: &mut Conn,
    session: &AuthSession,
    p: params::SessionsRevoke,
) -> Result<RevokeResult, RpcError> {
    let revoked = ctx.authority.revoke(session, p.session_id.as_deref())?;
    if revoked == session.id {
        conn.subscriptions.stop_all();
    }
    Ok(RevokeResult { revoked })
}
