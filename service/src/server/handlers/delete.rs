//! `threads.delete`, and the threads `workspaces.remove` with `purge`
//! deletes first (see the store's `ops_delete`).

use lapis_protocol::params::ThreadDeletedResult;
use lapis_protocol::{ErrorCode, RpcError, params};

use crate::auth::AuthSession;
use crate::domain::StoreError;

use super::super::context::ServerContext;
use super::{actor, deleted_or, sees, thread_if};

/// `threads.delete`: for the thread's own session, or the owner's token
/// for any thread of its principal; another's thread answers as an
/// unknown one. Refused with `thread_busy` / `thread_fenced` naming the
/// turn; a deleted thread answers `thread_deleted`.
pub(crate) async fn threads_delete(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::ThreadRef,
) -> Result<ThreadDeletedResult, RpcError> {
    let thread = thread_if(ctx, session, &p.thread_id, sees).await?;
    delete_one(ctx, session, &thread.id).await
}

/// Deletes `id` (ownership already checked) as `session`.
pub(super) async fn delete_one(
    ctx: &ServerContext,
    session: &AuthSession,
    id: &str,
) -> Result<ThreadDeletedResult, RpcError> {
    let token = ctx.authority.spec_of(session).map(|t| t.name.clone());
    let (receipt, seq) = ctx
        .core
        .store
        .delete_thread(&actor(session), token, id)
        .await
        .map_err(|e| match e {
            StoreError::ThreadBusy { turn, state, .. } => RpcError::new(
                ErrorCode::ThreadBusy,
                format!(
                    "thread `{id}` has turn `{turn}` {state}; wait for it to finish or cancel it \
                     (`turns cancel {turn}`), then delete the thread"
                ),
            )
            .with_data("turn", turn.into())
            .with_data("state", state.as_str().into()),
            StoreError::ThreadFenced { turn, .. } => RpcError::new(
                ErrorCode::ThreadFenced,
                format!(
                    "thread `{id}` has turn `{turn}`, whose outcome is unknown; resolve it \
                     (`turns resolve {turn} --as failed|cancelled`), then delete the thread"
                ),
            )
            .with_data("turn", turn.into()),
            other => deleted_or(ctx, session, other),
        })?;
    Ok(ThreadDeletedResult { receipt, seq })
}

/// `workspaces.remove` with `purge`: the owner's token only (it deletes
/// every application's threads there); each thread of the workspace is
/// deleted in turn. A busy or fenced thread stops the purge with its
/// code: the threads before it stay deleted, the workspace stays.
/// Returns how many were deleted.
pub(super) async fn purge_workspace(
    ctx: &ServerContext,
    session: &AuthSession,
    workspace: &str,
) -> Result<u64, RpcError> {
    if !ctx.authority.is_owner(session) {
        return Err(RpcError::new(
            ErrorCode::Forbidden,
            "`purge` deletes every thread of the workspace: only the owner's token may",
        ));
    }
    let threads = ctx
        .core
        .store
        .workspace_threads(workspace)
        .await
        .map_err(super::store_err)?;
    let mut deleted = 0;
    for id in threads {
        delete_one(ctx, session, &id).await?;
        deleted += 1;
    }
    Ok(deleted)
}
