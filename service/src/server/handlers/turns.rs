//! Turns and permission answers.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::auth::AuthSession;
use crate::domain::{ResolveAs, SubmitTurn, TurnState};
use crate::store::TurnFilter;
use lapis_protocol::{ErrorCode, RpcError, params};

use super::super::context::ServerContext;
use super::{actor, owned_thread, owned_turn, store_err, wrap};

/// `turns.submit`: idempotent on (principal, command id). The prompt is
/// handed to the core and never logged.
pub async fn turns_submit(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::TurnsSubmit,
) -> Result<Value, RpcError> {
    owned_thread(ctx, session, &p.thread_id).await?;
    let input = SubmitTurn {
        command_id: p.command_id,
        thread_id: p.thread_id,
        prompt: p.prompt,
        continues: p.continues,
        max_turn_seconds: p.max_turn_seconds,
    };
    let receipt = ctx
        .core
        .store
        .submit_turn(&actor(session), input)
        .await
        .map_err(store_err)?;
    Ok(json!({ "turn": receipt.value, "replayed": receipt.replayed }))
}

/// `turns.get`.
pub async fn turns_get(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::TurnRef,
) -> Result<Value, RpcError> {
    let mut turn = owned_turn(ctx, session, &p.turn_id).await?;
    super::permissions::mark_turns(ctx, std::slice::from_mut(&mut turn));
    wrap("turn", turn)
}

/// `turns.list`: one thread's turns, or every turn of the session's threads.
pub async fn turns_list(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::TurnsList,
) -> Result<Value, RpcError> {
    let state = p
        .state
        .as_deref()
        .map(|s| {
            TurnState::parse(s)
                .ok_or_else(|| RpcError::new(ErrorCode::InvalidRequest, "unknown turn state"))
        })
        .transpose()?;
    if let Some(thread) = &p.thread_id {
        owned_thread(ctx, session, thread).await?;
    }
    let filter = TurnFilter {
        thread_id: p.thread_id.clone(),
        principal: Some(session.principal.clone()),
        state,
        limit: p.limit.unwrap_or(0),
    };
    let mut turns = ctx.core.store.list_turns(filter).await.map_err(store_err)?;
    if p.thread_id.is_none() {
        // The principal's turns may span applications: keep this one's.
        let mut visible: HashMap<String, bool> = HashMap::new();
        let mut kept = Vec::with_capacity(turns.len());
        for turn in turns {
            let ok = match visible.get(&turn.thread_id) {
                Some(ok) => *ok,
                None => {
                    let ok = owned_thread(ctx, session, &turn.thread_id).await.is_ok();
                    visible.insert(turn.thread_id.clone(), ok);
                    ok
                }
            };
            if ok {
                kept.push(turn);
            }
        }
        turns = kept;
    }
    super::permissions::mark_turns(ctx, &mut turns);
    wrap("turns", turns)
}

/// `turns.cancel`: asks the runner to stop the agent; the turn keeps its
/// workspace until the agent confirms or the deadline passes.
pub async fn turns_cancel(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::TurnRef,
) -> Result<Value, RpcError> {
    owned_turn(ctx, session, &p.turn_id).await?;
    let mut turn = ctx
        .core
        .store
        .request_cancel(&actor(session), &p.turn_id)
        .await
        .map_err(store_err)?;
    super::permissions::mark_turns(ctx, std::slice::from_mut(&mut turn));
    wrap("turn", turn)
}

/// `turns.resolve`: only with `confirmStopped: true`, only for fenced turns.
pub async fn turns_resolve(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::TurnsResolve,
) -> Result<Value, RpcError> {
    let resolve_as = match p.resolve_as.as_str() {
        "failed" => ResolveAs::Failed,
        "cancelled" => ResolveAs::Cancelled,
        _ => {
            return Err(RpcError::new(
                ErrorCode::InvalidRequest,
                "`as` must be `failed` or `cancelled`",
            ));
        }
    };
    if !p.confirm_stopped {
        return Err(RpcError::new(
            ErrorCode::InvalidRequest,
            "resolution requires `confirmStopped: true`: confirm the agent is no longer running this turn",
        ));
    }
    owned_turn(ctx, session, &p.turn_id).await?;
    let turn = ctx
        .core
        .store
        .resolve_turn(&actor(session), &p.turn_id, resolve_as, true)
        .await
        .map_err(store_err)?;
    wrap("turn", turn)
}

/// `permissions.respond`: delivered to the engine running the turn.
pub async fn permissions_respond(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::PermissionsRespond,
) -> Result<Value, RpcError> {
    owned_turn(ctx, session, &p.turn_id).await?;
    let Some(engine) = &ctx.core.permissions else {
        return Err(RpcError::new(
            ErrorCode::NotFound,
            "no pending permission request with that id",
        ));
    };
    engine
        .respond(&p.turn_id, &p.request_id, &p.option_id)
        .await?;
    Ok(json!({ "accepted": true }))
}
