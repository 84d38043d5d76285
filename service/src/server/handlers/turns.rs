//! Turns and permission answers.

use std::collections::HashMap;

use crate::auth::AuthSession;
use crate::domain::SubmitTurn;
use crate::engine::EngineError;
use crate::store::TurnFilter;
use lapis_protocol::params::{RespondResult, TurnResult, TurnsResult};
use lapis_protocol::{ErrorCode, RpcError, ThreadExpect, params};

use super::super::context::ServerContext;
use crate::domain::{Receipt, Turn};

use super::{actor, owned_turn, readable_turn, settleable_turn, store_err, visible_thread};

/// `turns.submit`: idempotent on (principal, command id). The prompt is
/// handed to the core and never logged.
pub(crate) async fn turns_submit(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::TurnsSubmit,
) -> Result<TurnResult, RpcError> {
    // The store checks that the session owns the thread, in the submit;
    // a token with grants has the thread checked against them first.
    if super::has_grants(ctx, session) {
        super::owned_thread(ctx, session, &p.thread_id).await?;
    }
    let input = SubmitTurn {
        command_id: p.command_id,
        thread_id: p.thread_id,
        prompt: p.prompt,
        continues: p.continues,
        max_turn_seconds: p.max_turn_seconds,
    };
    submit(ctx, session, input, p.expect).await
}

/// `turns.continue`: a linked attempt in the prior turn's thread with new
/// instructions and the thread's current configuration. The store refuses,
/// in the same step that queues the attempt, a prior that is not settled,
/// whose record is not whole, or that has an unknown tool effect
/// (`tool_effect_unknown`); the prompt is handed to the core and never
/// logged.
///
/// A prior of a thread that binds a transcript store, whose content the
/// journal no longer holds (a restart), is completed from the store and
/// submitted again once every payload verifies
/// ([`super::transcript::restore_prior`]; `transcript_unverified`
/// otherwise). `peer` is this connection's calling side, if it serves ports.
pub(crate) async fn turns_continue(
    ctx: &ServerContext,
    session: &AuthSession,
    peer: Option<&crate::tools::Peer>,
    p: params::TurnsContinue,
) -> Result<TurnResult, RpcError> {
    let prior = owned_turn(ctx, session, &p.turn_id).await?;
    let input = SubmitTurn {
        command_id: p.command_id,
        thread_id: prior.thread_id.clone(),
        prompt: p.prompt,
        continues: Some(prior.id.clone()),
        max_turn_seconds: p.max_turn_seconds,
    };
    match submit(ctx, session, input.clone(), p.expect.clone()).await {
        Err(e) if e.error_code() == Some(ErrorCode::TranscriptUnavailable) => {
            let thread = ctx
                .core
                .store
                .get_thread(&prior.thread_id)
                .await
                .map_err(store_err)?;
            if thread.ports.transcript_store.is_none() {
                return Err(e);
            }
            super::transcript::restore_prior(ctx, &thread, &prior.id, peer, e).await?;
            submit(ctx, session, input, p.expect).await
        }
        done => done,
    }
}

/// `turns.get`: by turn id, or by the command id of the caller's own
/// `turns.submit` (the turn of a lost answer, without resending the prompt).
/// Readable are the session's own turns and, with `turns:resolve-any`, a
/// fenced turn of another application of its principal: the operator reads
/// the evidence before it resolves (`turns resolve` shows it), and `status`
/// names that turn already. Any other foreign turn answers `not_found`.
pub(crate) async fn turns_get(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::TurnsGet,
) -> Result<TurnResult, RpcError> {
    let turn_id = match (p.turn_id, p.command_id) {
        (Some(id), None) => id,
        (None, Some(cmd)) => {
            ctx.core
                .store
                .turn_by_command(&actor(session), &cmd)
                .await
                .map_err(store_err)?
                .id
        }
        _ => {
            return Err(RpcError::new(
                ErrorCode::InvalidRequest,
                "`turns.get` needs exactly one of `turnId` or `commandId`",
            ));
        }
    };
    readable_turn(ctx, session, &turn_id).await?;
    let mut turn = ctx
        .core
        .store
        .get_turn_asked(&turn_id)
        .await
        .map_err(store_err)?;
    super::permissions::mark_turns(ctx, std::slice::from_mut(&mut turn));
    let unknown_tool_effects = ctx
        .core
        .store
        .unknown_tool_effects(Some(&turn.id))
        .await
        .map_err(store_err)?;
    let evidence = super::evidence::turn_evidence(ctx, &turn).await?;
    Ok(TurnResult {
        turn,
        replayed: None,
        unknown_tool_effects,
        evidence,
    })
}

/// `turns.list`: one thread's turns, or every turn of the threads the
/// session sees.
pub(crate) async fn turns_list(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::TurnsList,
) -> Result<TurnsResult, RpcError> {
    let state = p.state;
    if let Some(thread) = &p.thread_id {
        visible_thread(ctx, session, thread).await?;
    }
    let filter = TurnFilter {
        thread_id: p.thread_id.clone(),
        principal: Some(session.principal.clone()),
        state,
        limit: p.limit.unwrap_or(0),
    };
    let mut turns = ctx.core.store.list_turns(filter).await.map_err(store_err)?;
    if p.thread_id.is_none() {
        // The principal's turns may span applications: keep what the
        // session sees (its own application's, or all for the owner).
        let mut visible: HashMap<String, bool> = HashMap::new();
        let mut kept = Vec::with_capacity(turns.len());
        for turn in turns {
            let ok = match visible.get(&turn.thread_id) {
                Some(ok) => *ok,
                None => {
                    let ok = visible_thread(ctx, session, &turn.thread_id).await.is_ok();
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
    Ok(TurnsResult { turns })
}

/// `turns.cancel`: asks the runner to stop the agent; the turn keeps its
/// workspace until the agent confirms or the deadline passes. A fenced
/// turn is resolved `cancelled` (the owner's confirmation), also by an
/// operator holding `turns:resolve-any`.
pub(crate) async fn turns_cancel(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::TurnsCancel,
) -> Result<TurnResult, RpcError> {
    settleable_turn(ctx, session, &p.turn_id).await?;
    let mut receipt = ctx
        .core
        .store
        .cancel_turn(&actor(session), &p.turn_id, p.command_id.as_deref())
        .await
        .map_err(store_err)?;
    super::permissions::mark_turns(ctx, std::slice::from_mut(&mut receipt.value));
    Ok(receipted(receipt))
}

/// `turns.resolve`: only with `confirmStopped: true`, only for fenced turns;
/// the thread's application, or any application of the principal holding
/// `turns:resolve-any`.
pub(crate) async fn turns_resolve(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::TurnsResolve,
) -> Result<TurnResult, RpcError> {
    let resolve_as = p.resolve_as;
    if !p.confirm_stopped {
        return Err(RpcError::new(
            ErrorCode::InvalidRequest,
            "resolution requires `confirmStopped: true`: confirm the agent is no longer running this turn",
        ));
    }
    settleable_turn(ctx, session, &p.turn_id).await?;
    let receipt = ctx
        .core
        .store
        .resolve_turn(
            &actor(session),
            &p.turn_id,
            resolve_as,
            true,
            p.command_id.as_deref(),
        )
        .await
        .map_err(store_err)?;
    Ok(receipted(receipt))
}

/// `permissions.respond`: the session must be able to answer for the
/// turn (its own, or any of its principal's with `permissions:respond-any`:
/// `permissions::answerable_turn`); the engine does
/// the rest as one operation (receipt, delivery, journal: see
/// `engine::worker::permissions`).
pub(crate) async fn permissions_respond(
    ctx: &ServerContext,
    session: &AuthSession,
    p: params::PermissionsRespond,
) -> Result<RespondResult, RpcError> {
    super::permissions::answerable_turn(ctx, session, &p.turn_id).await?;
    let Some(engine) = &ctx.core.engine else {
        return Err(RpcError::new(
            ErrorCode::NotFound,
            "no pending permission request with that id",
        ));
    };
    engine
        .respond(&actor(session), &p)
        .await
        .map_err(|e| match e {
            EngineError::Store(e) => store_err(e),
            EngineError::Settled { settlement, .. } => RpcError::new(e.error_code(), e.to_string())
                .with_data("settlement", settlement.as_str().into()),
            e => RpcError::new(e.error_code(), e.to_string()),
        })
}

/// Queues `input` as the session's actor, checking the thread against
/// `expect` where the turn is queued (`turns.submit` and `turns.continue`).
async fn submit(
    ctx: &ServerContext,
    session: &AuthSession,
    input: SubmitTurn,
    expect: Option<ThreadExpect>,
) -> Result<TurnResult, RpcError> {
    let receipt = ctx
        .core
        .store
        .submit_turn_expecting(&actor(session), input, expect)
        .await
        .map_err(store_err)?;
    Ok(receipted(receipt))
}

/// A mutation's turn with its receipt flag (`replayed` always present).
fn receipted(receipt: Receipt<Turn>) -> TurnResult {
    TurnResult {
        turn: receipt.value,
        replayed: Some(receipt.replayed),
        unknown_tool_effects: Vec::new(),
        evidence: None,
    }
}
