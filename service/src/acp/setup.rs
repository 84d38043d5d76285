//! Session setup on a freshly started agent: `initialize`, then either
//! `session/load` of the thread's stored session (when the agent advertises
//! `loadSession`) or `session/new`.
//!
//! What must stay true: history the agent replays while loading is never
//! journaled as the turn's output (it is counted, and the count observed);
//! a stored session that cannot be resumed is never silently replaced — the
//! turn carries a `context_reset` observation saying why.

use serde_json::{Value, json};

use super::events::ActivityEvent;
use super::mcp;
use super::runner::{SessionOrigin, Setup, TurnOutcome};
use super::session::{CallError, Session};
use super::turn::{ACP_PROTOCOL_VERSION, AUTH_REQUIRED, TurnHooks, TurnRequest, initialize_params};

/// Longest native session id accepted from an agent (the store's bound).
const MAX_SESSION_ID_BYTES: usize = 512;

/// Establishes the session the prompt goes to; a failure is the turn's
/// outcome (always before the dispatch boundary).
pub(super) async fn establish<H: TurnHooks>(
    s: &mut Session<H>,
    request: &TurnRequest,
    setup: &mut Setup,
) -> Result<String, TurnOutcome> {
    let limit = Some(request.limits.setup_timeout);
    let init = s
        .call("initialize", initialize_params(), limit)
        .await
        .map_err(|e| setup_failure(e, "initialize_failed", "initialize_timeout"))?;
    if init.get("protocolVersion").and_then(Value::as_u64) != Some(ACP_PROTOCOL_VERSION) {
        return Err(failed("protocol_version_unsupported"));
    }
    setup.load_session = init.pointer("/agentCapabilities/loadSession") == Some(&Value::Bool(true));
    if let Err(refusal) = mcp::check_capabilities(&request.mcp, &init) {
        return Err(failed(refusal.code().as_str()));
    }
    let servers = mcp::acp_servers(&request.mcp);
    let mut reset = None;
    if let Some(previous) = &request.resume {
        if setup.load_session {
            s.set_replaying(true);
            let load =
                json!({"sessionId": previous, "cwd": request.workspace, "mcpServers": servers});
            let loaded = s.call("session/load", load, limit).await;
            let replayed = s.set_replaying(false);
            match loaded {
                Ok(_) => {
                    emit(
                        s,
                        observation(
                            "session_loaded",
                            json!({
                                "sessionId": previous, "replayedUpdates": replayed,
                            }),
                        ),
                    )
                    .await?;
                    setup.origin = SessionOrigin::Loaded;
                    setup.session_id = Some(previous.clone());
                    return Ok(previous.clone());
                }
                Err(CallError::Rpc { .. }) => reset = Some("load_failed"),
                Err(e) => {
                    return Err(setup_failure(
                        e,
                        "session_load_failed",
                        "session_load_timeout",
                    ));
                }
            }
        } else {
            reset = Some("load_unsupported");
        }
    }
    let new = json!({"cwd": request.workspace, "mcpServers": servers});
    let created = s
        .call("session/new", new, limit)
        .await
        .map_err(|e| setup_failure(e, "session_new_failed", "session_new_timeout"))?;
    let session_id = match created.get("sessionId").and_then(Value::as_str) {
        Some(id)
            if !id.is_empty()
                && id.len() <= MAX_SESSION_ID_BYTES
                && !id.chars().any(char::is_control) =>
        {
            id.to_string()
        }
        _ => return Err(failed("session_new_failed")),
    };
    emit(
        s,
        ActivityEvent::SessionStarted {
            session_id: session_id.clone(),
        },
    )
    .await?;
    setup.origin = SessionOrigin::New;
    if let (Some(reason), Some(previous)) = (reset, &request.resume) {
        emit(
            s,
            observation(
                "context_reset",
                json!({
                    "reason": reason, "previousSessionId": previous, "sessionId": session_id,
                }),
            ),
        )
        .await?;
        setup.origin = SessionOrigin::Reset;
    }
    setup.session_id = Some(session_id.clone());
    Ok(session_id)
}

fn observation(kind: &str, payload: Value) -> ActivityEvent {
    ActivityEvent::Observation {
        kind: kind.into(),
        payload,
    }
}

async fn emit<H: TurnHooks>(s: &mut Session<H>, event: ActivityEvent) -> Result<(), TurnOutcome> {
    s.emit(event).await.map_err(|_| failed("journal_failed"))
}

fn failed(code: &'static str) -> TurnOutcome {
    TurnOutcome::Failed {
        code,
        dispatched: false,
    }
}

fn setup_failure(err: CallError, rpc_code: &'static str, timeout: &'static str) -> TurnOutcome {
    match err {
        CallError::Rpc { code, .. } if code == AUTH_REQUIRED => failed("auth_required"),
        CallError::Rpc { .. } => failed(rpc_code),
        CallError::Closed(code) => failed(code),
        CallError::Timeout => failed(timeout),
        CallError::Cancelled => TurnOutcome::Cancelled { dispatched: false },
        CallError::Hook => failed("journal_failed"),
        CallError::Interrupted => failed("cancelled"),
    }
}
