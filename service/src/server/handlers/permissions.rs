//! `permissions.list` (the durable inbox, `store::inbox`), who may see and
//! answer a request, and the live `awaitingInput` flag of turns and thread
//! snapshots.
//!
//! What must stay true: a request is listed only while the inbox holds it
//! pending *and* the engine's broker holds its live wait (an answer can
//! reach it); a session sees the requests of its own threads, and with
//! `permissions:respond-any` those of every application of its principal
//! (never another principal's). A thread the session may not see answers
//! like an unknown one (`not_found`), as everywhere (see `handlers`).

use std::collections::{HashMap, HashSet};

use crate::auth::AuthSession;
use crate::domain::{Thread, Turn};
use lapis_protocol::params::PermissionsResult;
use lapis_protocol::{RpcError, Scope, ThreadSnapshot, params};

use super::super::context::ServerContext;
use super::{foreign, owns, store_err};

/// Whether the session may see and answer the permission requests of
/// `thread`: its own, or — with `permissions:respond-any` — any of its
/// principal's applications'.
fn answers_for(ctx: &ServerContext, session: &AuthSession, thread: &Thread) -> bool {
    owns(ctx, session, thread)
        || (thread.principal == session.principal
            && session.scopes.contains(&Scope::PermissionsRespondAny))
}

/// Loads a thread whose requests the session may see ([`answers_for`]).
async fn answerable_thread(
    ctx: &ServerContext,
    session: &AuthSession,
    thread_id: &str,
) -> Result<Thread, RpcError> {
    super::thread_if(ctx, session, thread_id, answers_for).await
}

/// Loads a turn whose requests the session may see and answer.
pub(super) async fn answerable_turn(
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
    if answers_for(ctx, session, &thread) {
        Ok(turn)
    } else {
        Err(foreign("turn", turn_id))
    }
}

/// `permissions.list`: pending requests the session may answer, across
/// every workspace, soonest deadline first.
pub(crate) async fn permissions_list(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::PermissionsList,
) -> Result<PermissionsResult, RpcError> {
    if let Some(turn) = &p.turn_id {
        answerable_turn(ctx, session, turn).await?;
    }
    if let Some(thread) = &p.thread_id {
        answerable_thread(ctx, session, thread).await?;
    }
    // The live waits: a row without one is being settled right now.
    let live: HashSet<(String, String)> = ctx
        .core
        .pending_permissions(p.turn_id.as_deref())
        .into_iter()
        .map(|w| (w.turn_id, w.request_id))
        .collect();
    let pending = ctx
        .core
        .store
        .pending_permissions()
        .await
        .map_err(store_err)?;
    let mut visible: HashMap<String, bool> = HashMap::new();
    let mut requests = Vec::new();
    for entry in pending {
        let r = entry.request;
        if p.turn_id.as_ref().is_some_and(|t| *t != r.turn_id)
            || p.thread_id.as_ref().is_some_and(|t| *t != r.thread_id)
            || !live.contains(&(r.turn_id.clone(), r.id.clone()))
        {
            continue;
        }
        let ok = match visible.get(&r.thread_id) {
            Some(ok) => *ok,
            None => {
                let ok = answerable_thread(ctx, session, &r.thread_id).await.is_ok();
                visible.insert(r.thread_id.clone(), ok);
                ok
            }
        };
        if ok {
            requests.push(r);
        }
    }
    // Soonest deadline first, as documented (deadlines differ per provider).
    requests.sort_by(|a, b| (a.deadline, &a.turn_id, &a.id).cmp(&(b.deadline, &b.turn_id, &b.id)));
    Ok(PermissionsResult { requests })
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
