//! `permissions.list` and the live `awaitingInput` flag of turns and thread
//! snapshots. Both read the engine's broker, which holds a request exactly
//! while the runner waits for its answer; isolation is the same as for
//! every other read (a request is shown only to its thread's owner).

use std::collections::HashMap;
use std::time::UNIX_EPOCH;

use crate::auth::AuthSession;
use crate::domain::Turn;
use crate::engine::PendingPermission;
use lapis_protocol::params::PermissionsResult;
use lapis_protocol::{PendingRequest, RpcError, ThreadSnapshot, params};

use super::super::context::ServerContext;
use super::{owned_thread, owned_turn};

/// `permissions.list`: pending requests of the session's threads, oldest
/// deadline first.
pub(crate) async fn permissions_list(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::PermissionsList,
) -> Result<PermissionsResult, RpcError> {
    if let Some(turn) = &p.turn_id {
        owned_turn(ctx, session, turn).await?;
    }
    if let Some(thread) = &p.thread_id {
        owned_thread(ctx, session, thread).await?;
    }
    let mut visible: HashMap<String, bool> = HashMap::new();
    let mut shown = Vec::new();
    for pending in ctx.core.pending_permissions(p.turn_id.as_deref()) {
        if p.thread_id
            .as_ref()
            .is_some_and(|t| *t != pending.thread_id)
        {
            continue;
        }
        let ok = match visible.get(&pending.thread_id) {
            Some(ok) => *ok,
            None => {
                let ok = owned_thread(ctx, session, &pending.thread_id).await.is_ok();
                visible.insert(pending.thread_id.clone(), ok);
                ok
            }
        };
        if ok {
            shown.push(pending);
        }
    }
    shown.sort_by(|a, b| {
        (a.deadline, &a.turn_id, &a.request_id).cmp(&(b.deadline, &b.turn_id, &b.request_id))
    });
    let requests = shown.into_iter().map(view).collect();
    Ok(PermissionsResult { requests })
}

/// The wire view of a pending request.
fn view(p: PendingPermission) -> PendingRequest {
    let ms = p
        .deadline
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    PendingRequest {
        id: p.request_id,
        turn_id: p.turn_id,
        thread_id: p.thread_id,
        tool_call: p.invocation,
        options: p.options,
        deadline: ms,
    }
}

/// Sets `awaitingInput` on turns from the broker's live state.
pub(super) fn mark_turns(ctx: &ServerContext, turns: &mut [Turn]) {
    let pending = ctx.core.pending_permissions(None);
    for turn in turns {
        turn.awaiting_input = pending.iter().any(|p| p.turn_id == turn.id);
    }
}

/// Sets `awaitingInput` on a snapshot and its recent turns.
pub(super) fn mark_snapshot(ctx: &ServerContext, snapshot: &mut ThreadSnapshot) {
    mark_turns(ctx, &mut snapshot.recent_turns);
    snapshot.awaiting_input = ctx
        .core
        .pending_permissions(None)
        .iter()
        .any(|p| p.thread_id == snapshot.thread.id);
}
