//! One application tool call from an agent session's MCP bridge, at most
//! once.
//!
//! The order, for every call: `tool_call_requested` is committed before
//! anything runs; for a mutating tool with a capture port, `capture.begin`
//! must be acknowledged; then the turn must still run with no cancel
//! pending (one step on the store's writer, `Store::may_invoke`; a
//! cancel or deadline that landed while `capture.begin` waited settles
//! the call `failed`); then `tools.invoke` (idempotency key = turn id +
//! call id); then `capture.finish` (after any answer or failure of the
//! invoke: a begun capture is always finished); then `tool_call_finished` is
//! committed; only then does the agent get the result. Read tools skip
//! capture.
//!
//! What must stay true: nothing here ever invokes a tool a second time —
//! there is no retry, and recovery after a crash never calls anything
//! (a mutating `tool_call_requested` without its finish is an unknown
//! tool effect). A mutating call whose application went away after the
//! request was sent is finished `effect_unknown`, never `failed`. A call
//! is refused before anything is journaled unless the ticket's session
//! runs a turn now, the thread binds the endpoint, the thread is not
//! restricted, and the endpoint is registered by the thread's own
//! application.
//!
//! The seam for controller-provided tools (issue 26's memory read tools):
//! a bridge lists what [`list`] returns and calls through [`call`]; tools
//! the controller serves itself join there — appended to the list after
//! the application endpoints' `<endpoint>__<tool>` names, and routed by
//! name in `call` before the endpoint lookup — so the bridge
//! (`cli/src/commands/mcp_bridge.rs`) stays a pass-through.

use std::time::Duration;

use lapis_protocol::callback;
use lapis_protocol::tools::{
    BridgeTool, CaptureAck, CaptureNotice, MAX_TOOL_RESULT_BYTES, ToolInvoke, ToolOutput,
    ToolRefusal, ToolsCall, ToolsListResult, idempotency_key, qualified, split_qualified,
};
use lapis_protocol::{
    ErrorCode, Payload, RpcError, ToolCallFinished, ToolCallOutcome, ToolCallRequested,
};

use super::fault::{self, Step};
use super::peer::PeerError;
use super::{Grant, Tools};
use crate::domain::{Retention, Thread};
use crate::store::Store;

/// How long the application has to answer one callback.
pub(crate) const CALLBACK_DEADLINE: Duration = Duration::from_secs(120);

fn refused(r: ToolRefusal) -> RpcError {
    RpcError::new(r.code(), r.to_string())
}

fn failed(message: impl Into<String>) -> RpcError {
    RpcError::new(ErrorCode::ToolCallFailed, message)
}

/// The ticket's thread, if its checks pass: restricted threads reach no
/// tools.
async fn thread_of(store: &Store, grant: &Grant) -> Result<Thread, RpcError> {
    let thread = store
        .get_thread(&grant.thread_id)
        .await
        .map_err(|_| failed("the ticket's thread cannot be read"))?;
    if thread.restricted && thread.ports.bridged() {
        return Err(refused(ToolRefusal::Restricted));
    }
    Ok(thread)
}

/// `tools.list`: the tools of the thread's endpoints registered now (an
/// endpoint that is gone lists nothing; calling it fails).
pub(crate) async fn list(
    tools: &Tools,
    store: &Store,
    grant: &Grant,
) -> Result<ToolsListResult, RpcError> {
    let thread = thread_of(store, grant).await?;
    let mut out = super::provided::list(tools, &thread);
    for name in &thread.ports.tools {
        let Ok(mut found) = tools.registry.lookup(
            &grant.principal,
            &grant.application,
            std::slice::from_ref(name),
        ) else {
            continue;
        };
        let endpoint = found.remove(0);
        for t in &endpoint.spec.tools {
            out.push(BridgeTool {
                name: qualified(name, &t.name),
                description: t.description.clone(),
                input_schema: t.input_schema.clone(),
                mutating: t.mutating,
            });
        }
    }
    Ok(ToolsListResult { tools: out })
}

fn new_call_id() -> Result<String, RpcError> {
    let mut raw = [0u8; 16];
    getrandom::fill(&mut raw).map_err(|_| failed("cannot read randomness"))?;
    Ok(format!("tcall_{}", hex::encode(raw)))
}

/// `tools.call`: one call, at most once (see the module docs).
pub(crate) async fn call(
    tools: &Tools,
    store: &Store,
    grant: &Grant,
    p: ToolsCall,
) -> Result<ToolOutput, RpcError> {
    let running = tools
        .active
        .get(grant.session)
        .filter(|r| r.thread_id == grant.thread_id)
        .ok_or_else(|| failed("no turn of this agent session is running"))?;
    let thread = thread_of(store, grant).await?;
    if let Some(answer) = super::provided::call(tools, store, &thread, &running.turn_id, &p).await {
        return answer;
    }
    let unknown = || {
        refused(ToolRefusal::UnknownTool {
            name: if p.name.len() <= 129 {
                p.name.clone()
            } else {
                "?".into()
            },
        })
    };
    let (endpoint_name, tool_name) = split_qualified(&p.name).ok_or_else(unknown)?;
    if !thread.ports.tools.iter().any(|t| t == endpoint_name) {
        return Err(unknown());
    }
    let endpoint = tools
        .registry
        .lookup(
            &grant.principal,
            &grant.application,
            &[endpoint_name.to_owned()],
        )
        .map_err(refused)?
        .remove(0);
    let tool = endpoint.tool(tool_name).ok_or_else(unknown)?.clone();
    let call_id = new_call_id()?;
    let key = idempotency_key(&running.turn_id, &call_id);
    let full = thread.retention == Retention::Full;
    let requested = Payload::ToolCallRequested(ToolCallRequested {
        call_id: call_id.clone(),
        endpoint: endpoint_name.to_owned(),
        endpoint_identity: endpoint.identity.clone(),
        tool: tool_name.to_owned(),
        mutating: tool.mutating,
        idempotency_key: key.clone(),
        arguments: full.then(|| p.arguments.clone()),
    });
    // Durable before anything runs; a turn that ended meanwhile gets it as
    // a late observation, and then nothing runs.
    match store
        .append_activity(&running.turn_id, requested)
        .on_turn()
        .await
    {
        Ok(crate::store::Recorded::OnTurn) => {}
        Ok(crate::store::Recorded::TurnEnded) => {
            return Err(failed("the turn ended before the call could run"));
        }
        Err(_) => return Err(failed("the call could not be journaled; nothing ran")),
    }
    fault::step(Step::BeforeBegin).await;
    let finish = |outcome, code: Option<ErrorCode>, output: Option<ToolOutput>| {
        Payload::ToolCallFinished(ToolCallFinished {
            call_id: call_id.clone(),
            outcome,
            code,
            output: output.filter(|_| full),
        })
    };
    let notice = |is_error| CaptureNotice {
        endpoint: endpoint_name.to_owned(),
        tool: tool_name.to_owned(),
        idempotency_key: key.clone(),
        thread_id: thread.id.clone(),
        turn_id: running.turn_id.clone(),
        call_id: call_id.clone(),
        is_error,
    };
    let capture = tool.mutating && endpoint.spec.capture;
    if capture {
        let begun: Result<CaptureAck, PeerError> = endpoint
            .call::<callback::CaptureBegin>(&notice(None), CALLBACK_DEADLINE)
            .await;
        if let Err(e) = begun {
            // Never invoked: the capture did not acknowledge.
            let code = ErrorCode::ToolCallFailed;
            let _ = store
                .append_activity(
                    &running.turn_id,
                    finish(ToolCallOutcome::Failed, Some(code), None),
                )
                .await;
            return Err(failed(format!("capture begin: {e}; the tool did not run")));
        }
        fault::step(Step::AfterBegin).await;
    }
    // A cancel or deadline that landed meanwhile (while `capture.begin`
    // waited, above all) stops the call here: the writer reads the turn and
    // decides in one step, and a refused call is settled `failed` without
    // `tools.invoke` ever being sent.
    if tool.mutating && !store.may_invoke(&running.turn_id).await.unwrap_or(false) {
        if capture {
            // The capture that began is closed, as an error: nothing ran.
            let done: Result<CaptureAck, PeerError> = endpoint
                .call::<callback::CaptureFinish>(&notice(Some(true)), CALLBACK_DEADLINE)
                .await;
            if let Err(e) = done {
                tracing::warn!(call = %call_id, error = %e, "capture finish of a call that never ran was not acknowledged");
            }
        }
        let code = ErrorCode::ToolCallFailed;
        let _ = store
            .append_activity(
                &running.turn_id,
                finish(ToolCallOutcome::Failed, Some(code), None),
            )
            .await;
        return Err(failed(
            "the turn was cancelled or reached its deadline before the tool ran; the tool did not run",
        ));
    }
    let invoke = ToolInvoke {
        endpoint: endpoint_name.to_owned(),
        tool: tool_name.to_owned(),
        arguments: p.arguments,
        idempotency_key: key.clone(),
        thread_id: thread.id.clone(),
        turn_id: running.turn_id.clone(),
        call_id: call_id.clone(),
        mutating: tool.mutating,
    };
    let result: Result<ToolOutput, PeerError> = endpoint
        .call::<callback::ToolsInvoke>(&invoke, CALLBACK_DEADLINE)
        .await;
    let result = result.and_then(|out| {
        let size = serde_json::to_vec(&out).map_or(usize::MAX, |v| v.len());
        if size > MAX_TOOL_RESULT_BYTES {
            Err(PeerError::Malformed)
        } else {
            Ok(out)
        }
    });
    fault::step(Step::AfterInvoke).await;
    if capture {
        // Every begun capture is finished, whatever the invoke gave: an
        // error answer (`isError`, or the application refusing the call)
        // finishes with `isError: true`; a failed transport (deadline,
        // connection gone, an unreadable answer), where the tool may have
        // run, without `isError` (the controller does not know).
        let is_error = match &result {
            Ok(out) => Some(out.is_error),
            Err(PeerError::Refused(_)) => Some(true),
            Err(_) => None,
        };
        let done: Result<CaptureAck, PeerError> = endpoint
            .call::<callback::CaptureFinish>(&notice(is_error), CALLBACK_DEADLINE)
            .await;
        if let Err(e) = done {
            tracing::warn!(call = %call_id, error = %e, "capture finish was not acknowledged; the result is kept");
        }
        fault::step(Step::AfterCaptureFinish).await;
    }
    let (event, answer) = match result {
        Ok(out) => {
            let outcome = if out.is_error {
                ToolCallOutcome::Error
            } else {
                ToolCallOutcome::Ok
            };
            (finish(outcome, None, Some(out.clone())), Ok(out))
        }
        Err(PeerError::Refused(_)) => (
            finish(
                ToolCallOutcome::Failed,
                Some(ErrorCode::ToolCallFailed),
                None,
            ),
            Err(failed("the application refused the call")),
        ),
        Err(e) if tool.mutating => (
            finish(
                ToolCallOutcome::EffectUnknown,
                Some(ErrorCode::ToolEffectUnknown),
                None,
            ),
            Err(RpcError::new(
                ErrorCode::ToolEffectUnknown,
                format!("{e}; whether the tool ran is unknown and it will not be called again"),
            )),
        ),
        Err(e) => (
            finish(
                ToolCallOutcome::Failed,
                Some(ErrorCode::ToolCallFailed),
                None,
            ),
            Err(failed(e.to_string())),
        ),
    };
    let Ok(noted) = store.append_activity(&running.turn_id, event).await else {
        // The result is not journaled: the agent must not act on it, and
        // a mutating call's effect stays unknown (its request has no finish).
        return Err(failed("the result could not be journaled"));
    };
    fault::step(Step::AfterFinish).await;
    // A thread bound to a transcript store: the result reaches the agent
    // only once the store acknowledged its note; a refusal, its deadline or
    // a lost store fail closed (an error result here, the turn failed
    // `transcript_store_failed` at its end).
    // A cancel while it waits withholds the result too (the turn ends
    // cancelled, not failed).
    if let Some(gate) = &running.gate
        && answer.is_ok()
        && crate::tools::transcript::authorizes(&noted)
        && let Err(withheld) = gate.result_acknowledged(noted.thread_seq).await
    {
        use crate::tools::transcript::Withheld;
        return Err(match withheld {
            Withheld::Refused(refusal) => {
                tracing::warn!(call = %call_id, thread_seq = noted.thread_seq, error = %refusal,
                    "the transcript store did not acknowledge a tool result: it does not reach the agent");
                RpcError::new(refusal.code(), refusal.to_string())
            }
            Withheld::Cancelled => {
                tracing::info!(call = %call_id, thread_seq = noted.thread_seq,
                    "the turn was cancelled while its transcript store answered: the tool result does not reach the agent");
                failed(
                    "the turn was cancelled before the transcript store acknowledged the result; the tool ran once",
                )
            }
        });
    }
    answer
}
