//! Workspaces: registering, listing, removing.
//!
//! What must stay true: a directory is registered at run time only when its
//! canonical path lies under a workspace root the configuration grants
//! (`workspaceRoots`), for every principal alike, and the path checked is
//! the path stored; a workspace the configuration declares is never
//! removed at run time (the next `serve` or reload would register it
//! again), and a removal's refusal names the turn in the way and what to do
//! about it.

use std::path::Path;

use crate::auth::AuthSession;
use crate::domain::StoreError;
use crate::store::canonical_workspace_dir;
use lapis_protocol::config::{WORKSPACE_ID_RULE, valid_workspace_id};
use lapis_protocol::params::{WorkspaceRemoved, WorkspaceResult, WorkspacesResult};
use lapis_protocol::{ErrorCode, RpcError, params};

use super::super::context::ServerContext;
use super::{actor, outside_roots, store_err};

fn invalid(msg: impl Into<String>) -> RpcError {
    RpcError::new(ErrorCode::InvalidRequest, msg)
}

/// `workspaces.add`: only under a configured root
/// (`workspace_outside_roots`), one id per canonical path
/// (`workspace_alias`).
pub(crate) async fn workspaces_add(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::WorkspacesAdd,
) -> Result<WorkspaceResult, RpcError> {
    if !valid_workspace_id(&p.id) {
        return Err(invalid(format!("workspace id must be {WORKSPACE_ID_RULE}")));
    }
    super::check_grants(ctx, session, Some(&p.id), None)?;
    if let Some(spec) = &p.worktree {
        let command = p.command_id.as_deref();
        return super::worktrees::add(ctx, session, &p.id, &p.path, spec, command).await;
    }
    let path = Path::new(&p.path);
    if !path.is_absolute() {
        return Err(invalid("workspace path must be absolute"));
    }
    let canonical = canonical_workspace_dir(path).map_err(store_err)?;
    if !ctx.reload.roots().grants(Path::new(&canonical))
        && !registered(ctx, &p.id, &canonical).await?
    {
        return Err(outside_roots(&canonical));
    }
    let actor = actor(session);
    let command = p.command_id.as_deref().map(|c| (&actor, c));
    let receipt = ctx
        .core
        .store
        .add_workspace_as(&p.id, canonical, command)
        .await
        .map_err(store_err)?;
    Ok(WorkspaceResult {
        workspace: receipt.value,
        replayed: receipt.replayed,
    })
}

/// Whether `id` is registered (and not removed) for `canonical` already:
/// adding it again registers nothing, so it answers `replayed` like any
/// repeat, also for a declared workspace outside the roots. Only asked on
/// the way to a refusal.
async fn registered(ctx: &ServerContext, id: &str, canonical: &str) -> Result<bool, RpcError> {
    let known = ctx.core.store.list_workspaces().await.map_err(store_err)?;
    Ok(known.iter().any(|w| w.id == id && w.path == canonical))
}

/// `workspaces.list`: every workspace, and the turns fencing any of them
/// (turn, thread, application, since when).
///
/// An application token's session gets the workspaces its token is granted
/// and the fences of the threads it sees only.
pub(crate) async fn workspaces_list(
    ctx: &ServerContext,
    session: &AuthSession,
) -> Result<WorkspacesResult, RpcError> {
    let store = &ctx.core.store;
    let mut workspaces = store.list_workspaces().await.map_err(store_err)?;
    let mut fences =
        super::status::fences(store, !store.status().fenced_workspaces.is_empty()).await?;
    if !ctx.authority.is_owner(session) {
        let spec = ctx.authority.spec_of(session);
        workspaces.retain(|w| spec.as_ref().is_some_and(|s| s.allows_workspace(&w.id)));
        fences = super::status::visible_turns(ctx, session, fences).await;
    }
    Ok(WorkspacesResult { workspaces, fences })
}

/// `workspaces.remove`: refused for a configured workspace
/// (`invalid_request`), while a turn is queued or claimed there
/// (`workspace_busy`) or fences it (`workspace_fenced`), each naming the
/// turn; otherwise the workspace is marked removed (see the store's
/// `ops_workspaces`).
pub(crate) async fn workspaces_remove(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::WorkspacesRemove,
) -> Result<WorkspaceRemoved, RpcError> {
    if !valid_workspace_id(&p.id) {
        return Err(invalid(format!("workspace id must be {WORKSPACE_ID_RULE}")));
    }
    super::check_grants(ctx, session, Some(&p.id), None)?;
    if ctx.reload.declares_workspace(&p.id) {
        return Err(invalid(format!(
            "workspace `{id}` is declared in the configuration file (`workspaces.{id}`); \
             delete it there, run `config reload`, then remove it",
            id = p.id
        ))
        .with_data("configured", true.into()));
    }
    let id = p.id.clone();
    // A worktree to delete is checked (linked, clean unless forced) before
    // anything is removed, and deleted only once the workspace is.
    let worktree = if p.delete_worktree {
        super::worktrees::before_remove(ctx, &p.id, p.force).await?
    } else {
        None
    };
    let purged = if p.purge {
        super::delete::purge_workspace(ctx, session, &p.id).await?
    } else {
        0
    };
    let mut removed = ctx
        .core
        .store
        .remove_workspace(&actor(session), &p.id)
        .await
        .map_err(|e| match e {
            StoreError::WorkspaceBusy { turn, state, .. } => RpcError::new(
                ErrorCode::WorkspaceBusy,
                format!(
                    "workspace `{id}` has turn `{turn}` {state}; wait for it to finish or \
                     cancel it (`turns cancel {turn}`), then remove the workspace"
                ),
            )
            .with_data("turn", turn.into())
            .with_data("state", state.as_str().into()),
            StoreError::WorkspaceFenced { turn, .. } => RpcError::new(
                ErrorCode::WorkspaceFenced,
                format!(
                    "workspace `{id}` is fenced by turn `{turn}`, whose outcome is unknown; \
                     resolve it (`turns resolve {turn} --as failed|cancelled`), then remove the workspace"
                ),
            )
            .with_data("turn", turn.into()),
            other => store_err(other),
        })?;
    removed.threads_deleted = purged;
    if let Some(path) = worktree {
        super::worktrees::after_remove(ctx, &p.id, &path).await?;
        removed.worktree_deleted = true;
    }
    Ok(removed)
}
