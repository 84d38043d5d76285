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
mod delete;
mod evidence;
mod fit;
mod import;
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
pub(crate) use delete::threads_delete;
pub(crate) use import::threads_import;
pub(crate) use journal::{journal_replay, journal_subscribe, journal_unsubscribe};
pub(crate) use mcp::mcp_register;
pub(crate) use permissions::permissions_list;
pub(crate) use providers::providers_check;
pub(crate) use status::status;
pub(crate) use threads::{
    threads_attach, threads_configure, threads_create, threads_get, threads_list, threads_reserve,
};
pub(crate) use tools::{register_port, tools_register, tools_unregister, unregister_port};
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

/// Whether the session acts on `thread` as its own: the thread is of its
/// principal and application and inside its token's grants (workspaces,
/// providers).
fn owns(ctx: &ServerContext, session: &AuthSession, thread: &Thread) -> bool {
    crate::domain::owned_by(thread, &session.principal, &session.application)
        && granted(ctx, session, thread)
}

/// Whether the session may read `thread`: its own ([`owns`]), or any
/// thread of its principal when its token is the owner's (the model:
/// `service/PROTOCOL.md`, Authority).
fn sees(ctx: &ServerContext, session: &AuthSession, thread: &Thread) -> bool {
    owns(ctx, session, thread)
        || (thread.principal == session.principal && ctx.authority.is_owner(session))
}

/// Whether the session's token grants `thread`'s workspace and provider.
fn granted(ctx: &ServerContext, session: &AuthSession, thread: &Thread) -> bool {
    ctx.authority.spec_of(session).is_some_and(|t| {
        t.allows_workspace(&thread.workspace_id) && t.allows_provider(&thread.provider)
    })
}

/// Refuses a workspace or provider the session's token is not granted
/// (`forbidden`, naming the grant; decided before the workspace or provider
/// is looked up, so it tells nothing of what exists).
pub(super) fn check_grants(
    ctx: &ServerContext,
    session: &AuthSession,
    workspace: Option<&str>,
    provider: Option<&str>,
) -> Result<(), RpcError> {
    let Some(spec) = ctx.authority.spec_of(session) else {
        return Err(RpcError::new(
            ErrorCode::Unauthenticated,
            "session credential no longer configured",
        ));
    };
    if let Some(w) = workspace
        && !spec.allows_workspace(w)
    {
        return Err(RpcError::new(
            ErrorCode::Forbidden,
            format!(
                "token `{}` is not granted workspace `{w}` (its `workspaces` in the configuration)",
                spec.name
            ),
        ));
    }
    if let Some(p) = provider
        && !spec.allows_provider(p)
    {
        return Err(RpcError::new(
            ErrorCode::Forbidden,
            format!(
                "token `{}` is not granted provider `{p}` (its `providers` in the configuration)",
                spec.name
            ),
        ));
    }
    Ok(())
}

/// Whether the session's token limits it to workspaces or providers.
pub(super) fn has_grants(ctx: &ServerContext, session: &AuthSession) -> bool {
    ctx.authority
        .spec_of(session)
        .is_none_or(|t| t.workspaces.is_some() || t.providers.is_some())
}

/// The application a session's principal-wide reads keep: its own, or
/// `None` (every application of its principal) for the owner's token.
pub(super) fn reach(ctx: &ServerContext, session: &AuthSession) -> Option<String> {
    (!ctx.authority.is_owner(session)).then(|| session.application.clone())
}

/// A resource of another principal or application answers exactly as an
/// unknown one (`not_found`, the same message), so a caller cannot learn
/// that an id exists by trying it.
fn foreign(kind: &'static str, id: &str) -> RpcError {
    store_err(StoreError::not_found(kind, id))
}

/// Loads a thread the session may read ([`sees`]).
pub(super) async fn visible_thread(
    ctx: &ServerContext,
    session: &AuthSession,
    thread_id: &str,
) -> Result<Thread, RpcError> {
    thread_if(ctx, session, thread_id, sees).await
}

/// Loads a thread the session owns ([`owns`]): what it may change.
pub(super) async fn owned_thread(
    ctx: &ServerContext,
    session: &AuthSession,
    thread_id: &str,
) -> Result<Thread, RpcError> {
    thread_if(ctx, session, thread_id, owns).await
}

/// Loads a thread that `rule` lets the session reach; any other answers
/// as an unknown one ([`foreign`]). The one loader behind every rule.
pub(super) async fn thread_if(
    ctx: &ServerContext,
    session: &AuthSession,
    thread_id: &str,
    rule: fn(&ServerContext, &AuthSession, &Thread) -> bool,
) -> Result<Thread, RpcError> {
    let thread = ctx
        .core
        .store
        .get_thread(thread_id)
        .await
        .map_err(|e| deleted_or(ctx, session, e))?;
    if rule(ctx, session, &thread) {
        Ok(thread)
    } else {
        Err(foreign("thread", thread_id))
    }
}

/// A deleted thread answers `thread_deleted` to the principal (and
/// application, or the owner's token) it belonged to, and as an unknown
/// id to anyone else ([`foreign`]).
fn deleted_or(ctx: &ServerContext, session: &AuthSession, e: StoreError) -> RpcError {
    match e {
        StoreError::ThreadDeleted {
            thread,
            principal,
            application,
        } => {
            let theirs = principal == session.principal
                && (application == session.application || ctx.authority.is_owner(session));
            if theirs {
                RpcError::new(
                    ErrorCode::ThreadDeleted,
                    format!(
                        "thread `{thread}` was deleted; only its receipt remains in the journal"
                    ),
                )
            } else {
                foreign("thread", &thread)
            }
        }
        other => store_err(other),
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
    if owns(ctx, session, &thread) {
        Ok(turn)
    } else {
        Err(foreign("turn", turn_id))
    }
}

/// Loads a turn the session may settle: its own, or — with
/// `turns:resolve-any` — a *fenced* turn of another application of the same
/// principal (the operator unblocking a workspace). Never crosses
/// principals; a foreign turn that is not fenced answers as unknown
/// (`not_found`). `turns.get` reads by the same rule, and also reads every
/// turn of the principal for the owner's token ([`sees`]).
pub(super) async fn settleable_turn(
    ctx: &ServerContext,
    session: &AuthSession,
    turn_id: &str,
) -> Result<Turn, RpcError> {
    reachable_turn(ctx, session, turn_id, false).await
}

/// Loads a turn the session may read: [`settleable_turn`]'s, or any the
/// session [`sees`].
pub(super) async fn readable_turn(
    ctx: &ServerContext,
    session: &AuthSession,
    turn_id: &str,
) -> Result<Turn, RpcError> {
    reachable_turn(ctx, session, turn_id, true).await
}

async fn reachable_turn(
    ctx: &ServerContext,
    session: &AuthSession,
    turn_id: &str,
    read: bool,
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
    if owns(ctx, session, &thread) || operator || (read && sees(ctx, session, &thread)) {
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
