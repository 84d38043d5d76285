//! The turn runner: one prompt through one freshly started agent, with the
//! storage behind a [`TurnHooks`] implementation.
//!
//! The order of a turn is fixed: spawn → `initialize` → `session/new` →
//! [`TurnHooks::before_dispatch`] (the durable dispatch boundary) →
//! `session/prompt` → updates until the prompt's response → teardown.
//! Everything that goes wrong before the boundary is a plain `failed`; after
//! it, an outcome the agent did not report is `submission_unknown` (or
//! `interrupted` when a cancel was pending). The runner never re-sends a
//! prompt.

use std::sync::Arc;

use super::events::ActivityEvent;
use super::process::AgentProcess;
use super::session::{CallError, Session};
use super::turn::{ACP_PROTOCOL_VERSION, AUTH_REQUIRED, CancelSignal, TurnHooks, TurnRequest};

/// How a turn ended. `dispatched` says whether the boundary was passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnOutcome {
    /// The agent answered the prompt with a stop reason other than
    /// `cancelled` (`end_turn`, `max_tokens`, `refusal`, …), even after a
    /// cancel request.
    Completed {
        /// As sent by the agent.
        stop_reason: String,
    },
    /// The agent reported `stopReason: cancelled`, or the cancel came
    /// before the boundary (then `dispatched` is false).
    Cancelled {
        /// Whether the prompt had been sent.
        dispatched: bool,
    },
    /// A known failure: before the boundary (spawn, setup, auth) or an
    /// explicit error answer to the prompt.
    Failed {
        /// Short stable code.
        code: &'static str,
        /// Whether the prompt had been sent.
        dispatched: bool,
    },
    /// After the boundary the agent vanished or broke the protocol without
    /// a stop reason: the workspace must be fenced.
    SubmissionUnknown {
        /// Short stable code (`agent_exited`, `broken_pipe`, …).
        code: &'static str,
    },
    /// A cancel was requested and no stop reason came before the deadline
    /// (or the agent vanished meanwhile): fenced as well.
    Interrupted,
}

impl TurnOutcome {
    /// The turn state this outcome maps to.
    pub fn state(&self) -> &'static str {
        match self {
            TurnOutcome::Completed { .. } => "completed",
            TurnOutcome::Cancelled { .. } => "cancelled",
            TurnOutcome::Failed { .. } => "failed",
            TurnOutcome::SubmissionUnknown { .. } => "submission_unknown",
            TurnOutcome::Interrupted => "interrupted",
        }
    }

    /// The outcome code, when there is one.
    pub fn code(&self) -> Option<&str> {
        match self {
            TurnOutcome::Completed { stop_reason } => Some(stop_reason),
            TurnOutcome::Failed { code, .. } | TurnOutcome::SubmissionUnknown { code } => {
                Some(code)
            }
            TurnOutcome::Cancelled { .. } => None,
            TurnOutcome::Interrupted => Some("cancel_deadline"),
        }
    }

    /// Whether the outcome is unknown and the workspace must be fenced.
    pub fn fences(&self) -> bool {
        matches!(
            self,
            TurnOutcome::SubmissionUnknown { .. } | TurnOutcome::Interrupted
        )
    }
}

/// Runs one turn to its outcome and tears the agent down. Never panics on
/// agent misbehaviour; never sends the prompt twice.
pub async fn run_turn<H: TurnHooks>(
    request: TurnRequest,
    hooks: Arc<H>,
    cancel: CancelSignal,
) -> TurnOutcome {
    let limits = request.limits;
    let spawned = AgentProcess::spawn(
        &request.spec,
        &request.workspace,
        &request.lookup,
        limits.max_line_bytes,
        limits.stderr,
        request.registry.as_ref(),
    );
    let (process, pipes) = match spawned {
        Ok(p) => p,
        Err(err) => {
            tracing::warn!(provider = %request.spec.name, error = %err, "agent launch failed");
            return TurnOutcome::Failed {
                code: err.code(),
                dispatched: false,
            };
        }
    };
    let mut session = Session::start(pipes, hooks, cancel, &request);
    let outcome = drive(&mut session, &request).await;
    session.finish(process, limits.teardown).await;
    tracing::info!(provider = %request.spec.name, state = outcome.state(), code = ?outcome.code(), "turn finished");
    outcome
}

async fn drive<H: TurnHooks>(s: &mut Session<H>, request: &TurnRequest) -> TurnOutcome {
    let setup = request.limits.setup_timeout;
    let failed = |code| TurnOutcome::Failed {
        code,
        dispatched: false,
    };
    let setup_failure = |err: CallError, rpc_code: &'static str, timeout: &'static str| match err {
        CallError::Rpc { code, .. } if code == AUTH_REQUIRED => failed("auth_required"),
        CallError::Rpc { .. } => failed(rpc_code),
        CallError::Closed(code) => failed(code),
        CallError::Timeout => failed(timeout),
        CallError::Cancelled => TurnOutcome::Cancelled { dispatched: false },
        CallError::Hook => failed("journal_failed"),
        CallError::Interrupted => failed("cancelled"),
    };
    let init = serde_json::json!({
        "protocolVersion": ACP_PROTOCOL_VERSION,
        "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
        "clientInfo": {"name": "lapis-ai-controller", "version": env!("CARGO_PKG_VERSION")},
    });
    let init = match s.call("initialize", init, Some(setup)).await {
        Ok(v) => v,
        Err(e) => return setup_failure(e, "initialize_failed", "initialize_timeout"),
    };
    if init.get("protocolVersion").and_then(|v| v.as_u64()) != Some(ACP_PROTOCOL_VERSION) {
        return failed("protocol_version_unsupported");
    }
    let new = serde_json::json!({"cwd": request.workspace, "mcpServers": []});
    let session_id = match s.call("session/new", new, Some(setup)).await {
        Ok(v) => match v.get("sessionId").and_then(|v| v.as_str()) {
            Some(id) => id.to_string(),
            None => return failed("session_new_failed"),
        },
        Err(e) => return setup_failure(e, "session_new_failed", "session_new_timeout"),
    };
    if s.emit(ActivityEvent::SessionStarted {
        session_id: session_id.clone(),
    })
    .await
    .is_err()
    {
        return failed("journal_failed");
    }
    if s.cancel_requested() {
        return TurnOutcome::Cancelled { dispatched: false };
    }
    if let Err(err) = s.hooks().before_dispatch().await {
        tracing::warn!(provider = %request.spec.name, error = %err, "dispatch boundary not persisted; prompt not sent");
        return failed("boundary_not_persisted");
    }
    s.mark_dispatched(session_id.clone());
    let prompt = serde_json::json!({
        "sessionId": session_id,
        "prompt": [{"type": "text", "text": request.prompt}],
    });
    match s.call("session/prompt", prompt, None).await {
        Ok(result) => {
            let Some(stop) = result.get("stopReason").and_then(|v| v.as_str()) else {
                return unknown(s, "missing_stop_reason");
            };
            let stop = stop.to_string();
            let _ = s
                .emit(ActivityEvent::Stopped {
                    stop_reason: stop.clone(),
                    meta: result.get("_meta").cloned(),
                })
                .await;
            if stop == "cancelled" {
                TurnOutcome::Cancelled { dispatched: true }
            } else {
                TurnOutcome::Completed { stop_reason: stop }
            }
        }
        Err(CallError::Rpc { .. }) => TurnOutcome::Failed {
            code: "agent_error",
            dispatched: true,
        },
        Err(CallError::Closed(code)) => unknown(s, code),
        Err(CallError::Interrupted) => TurnOutcome::Interrupted,
        Err(CallError::Hook) => unknown(s, "journal_failed"),
        // No deadline on the prompt itself, and cancels after the boundary
        // are handled inside the call.
        Err(CallError::Timeout) | Err(CallError::Cancelled) => unknown(s, "protocol_error"),
    }
}

/// An unreported outcome after the boundary; `interrupted` if a cancel was
/// already sent.
fn unknown<H: TurnHooks>(s: &Session<H>, code: &'static str) -> TurnOutcome {
    if s.cancel_sent() {
        TurnOutcome::Interrupted
    } else {
        TurnOutcome::SubmissionUnknown { code }
    }
}
