//! The turn runner: one prompt through the thread's live agent or a freshly
//! started one, with the storage behind a [`TurnHooks`] implementation.
//!
//! The order of a turn is fixed: on a fresh agent spawn → `initialize` →
//! `session/resume` or `session/load` of the stored session, or `session/new`
//! (see `setup`); on
//! a live agent its open session is used as is; then
//! [`TurnHooks::before_dispatch`] (the durable dispatch boundary, which also
//! binds the session) → `session/prompt` → updates until the prompt's
//! response. The outcome is returned at once; keeping or tearing down the
//! agent ([`AfterTurn`]) is the caller's, after the outcome is durable.
//! Everything that goes wrong before the boundary is a plain `failed`; after
//! it, an outcome the agent did not report is `submission_unknown` (or
//! `interrupted` when a cancel was pending). The runner never re-sends a
//! prompt.

use std::sync::Arc;

use super::agent::LiveAgent;
use super::process::{AgentProcess, Stopped, TeardownLimits};
use super::session::{CallError, Conn, Session};
use super::setup::{SessionOrigin, Setup, establish};
use super::turn::{CancelSignal, TurnHooks, TurnOutcome, TurnRequest};
use lapis_protocol::usage::{ContextUsage, TokenUsage};
use lapis_protocol::{AgentStderr, Note, Observation, OutcomeCode};

/// Runs one turn to its outcome and tears the agent down. Never panics on
/// agent misbehaviour; never sends the prompt twice.
#[cfg(any(test, feature = "test-support"))]
pub async fn run_turn<H: TurnHooks>(
    request: TurnRequest,
    hooks: Arc<H>,
    cancel: CancelSignal,
) -> TurnOutcome {
    let (outcome, teardown) = run_turn_detached(request, hooks, cancel).await;
    if let Some(teardown) = teardown {
        teardown.run().await;
    }
    outcome
}

/// Runs one turn on a fresh agent to its outcome and hands back the agent's
/// teardown instead of running it, so the caller can make the outcome
/// durable first and keep the teardown off the turn's critical path.
#[cfg(any(test, feature = "test-support"))]
pub async fn run_turn_detached<H: TurnHooks>(
    mut request: TurnRequest,
    hooks: Arc<H>,
    cancel: CancelSignal,
) -> (TurnOutcome, Option<Teardown<H>>) {
    request.keep_alive = false;
    let run = run_turn_on(request, None, None, hooks, cancel).await;
    let teardown = match run.after {
        AfterTurn::Teardown(t) => Some(*t),
        AfterTurn::Keep(_) | AfterTurn::Gone => None,
    };
    (run.outcome, teardown)
}

/// What is left of the agent after a turn.
#[derive(Debug)]
pub(crate) enum AfterTurn<H> {
    /// Intact and reusable: the caller may keep it for the thread's next turn.
    Keep(Box<LiveAgent>),
    /// Must be torn down (by the caller, after the outcome is durable).
    Teardown(Box<Teardown<H>>),
    /// No agent was started.
    Gone,
}

/// A turn's result: its outcome, what it reported using, and the agent.
#[derive(Debug)]
pub(crate) struct TurnRun<H> {
    /// How the turn ended.
    pub(crate) outcome: TurnOutcome,
    /// Its last `usage_update` (context and cumulative session cost).
    pub(crate) context_usage: Option<ContextUsage>,
    /// This turn's tokens: the prompt response's `usage`, else the sum of
    /// the chunks' `_meta.usage`.
    pub(crate) tokens: Option<TokenUsage>,
    /// The agent, to keep or to tear down.
    pub(crate) after: AfterTurn<H>,
}

/// Runs one turn on `agent` (a live agent of the thread, whose session is
/// reused) or on a freshly started agent (resuming `request.resume` when
/// the agent can load sessions). The agent comes back reusable only when
/// `request.keep_alive` is set, the agent reported the outcome, and the
/// connection is intact: never after `submission_unknown` or `interrupted`.
///
/// `ticket` keeps the tool ticket of a freshly started agent's MCP bridge
/// valid: it moves into the kept agent (a reused agent keeps its own) and
/// expires when the agent is torn down.
pub(crate) async fn run_turn_on<H: TurnHooks>(
    request: TurnRequest,
    agent: Option<LiveAgent>,
    ticket: Option<crate::tools::TicketHold>,
    hooks: Arc<H>,
    cancel: CancelSignal,
) -> TurnRun<H> {
    let limits = request.limits;
    let (ticket, agent) = match agent {
        Some(mut a) => (a.ticket.take(), Some(a)),
        None => (ticket, None),
    };
    let (process, conn, known) = match agent {
        Some(a) => (a.process, a.conn, Some((a.session_id, a.caps))),
        None => {
            let spawned = AgentProcess::spawn(
                &request.spec,
                &request.workspace,
                &request.lookup,
                limits.max_line_bytes,
                limits.stderr,
                request.registry.as_ref(),
            );
            match spawned {
                Ok((process, pipes)) => (process, Conn::open(pipes), None),
                Err(err) => {
                    tracing::warn!(provider = %request.spec.name, error = %err, "agent launch failed");
                    let outcome = TurnOutcome::Failed {
                        code: err.code(),
                        dispatched: false,
                    };
                    return TurnRun {
                        outcome,
                        context_usage: None,
                        tokens: None,
                        after: AfterTurn::Gone,
                    };
                }
            }
        }
    };
    let mut session = Session::start(conn, hooks, cancel, &request);
    let mut setup = Setup {
        session_id: None,
        caps: Default::default(),
        origin: SessionOrigin::None,
    };
    if let Some((id, caps)) = known {
        setup = Setup {
            session_id: Some(id),
            caps,
            origin: SessionOrigin::Reused,
        };
    }
    let mut tokens = None;
    let outcome = drive(&mut session, &request, &mut setup, &mut tokens).await;
    let context_usage = session.context_usage.take();
    // The response's per-turn `usage` is the turn's tokens; without it, the
    // sum of the per-call counts on its chunks (see `lapis_protocol::usage`).
    let tokens = tokens.or_else(|| session.chunk_tokens.take());
    let mut process = process;
    if says_why_in_stderr(&outcome) {
        journal_stderr_tail(&mut session, &mut process).await;
    }
    // A completed turn is a per-request line (its record is the journal):
    // formatting and writing it at `info` was ~2.4% of the runtime
    // workers' CPU per warm turn. Any other end stays at `info`.
    if matches!(outcome, TurnOutcome::Completed { .. }) {
        tracing::debug!(provider = %request.spec.name, state = outcome.state(), "turn finished");
    } else {
        tracing::info!(provider = %request.spec.name, state = outcome.state(), code = ?outcome.code(), "turn finished");
    }
    let keep = request.keep_alive
        && session.reusable()
        && matches!(
            outcome,
            TurnOutcome::Completed { .. }
                | TurnOutcome::Cancelled { dispatched: true }
                | TurnOutcome::Failed {
                    code: OutcomeCode::AgentError,
                    ..
                }
        );
    let after = match (keep, setup.session_id) {
        (true, Some(session_id)) => AfterTurn::Keep(Box::new(LiveAgent {
            process,
            conn: session.into_conn().await,
            session_id,
            caps: setup.caps,
            provider: request.spec.name.clone(),
            ticket,
        })),
        _ => AfterTurn::Teardown(Box::new(Teardown {
            session,
            process,
            limits: limits.teardown,
        })),
    };
    TurnRun {
        outcome,
        context_usage,
        tokens,
        after,
    }
}

/// Whether the agent's own stderr is the best account of how the turn
/// ended: every end but a reported completion or cancel — it failed setting
/// up (before dispatch), failed after it (`agent_error`, an invalid stop
/// reason), or its outcome is unknown (the agent exited or broke the
/// protocol after the prompt, or never confirmed a cancel).
fn says_why_in_stderr(outcome: &TurnOutcome) -> bool {
    matches!(
        outcome,
        TurnOutcome::Failed { .. }
            | TurnOutcome::SubmissionUnknown { .. }
            | TurnOutcome::Interrupted
    )
}

/// How long a failed turn waits for the last stderr lines of an agent that
/// already exited (the copy ends at the pipe's end of file).
const STDERR_SETTLE: std::time::Duration = std::time::Duration::from_millis(300);

/// Journals the agent's last stderr lines (redacted by the copy that logs
/// them, at most [`super::stderr_tail::TAIL_BYTES`] together; none for a
/// metadata-only thread, whose stderr is never read) as an `agent_stderr`
/// observation of the turn, its last event before its outcome, so its owner
/// sees why (`turns show`, the follow's last line) without the service log.
async fn journal_stderr_tail<H: TurnHooks>(session: &mut Session<H>, process: &mut AgentProcess) {
    let (tail, task) = process.stderr_watch();
    if process.exited()
        && let Some(task) = task
    {
        let _ = tokio::time::timeout(STDERR_SETTLE, task).await;
    }
    let lines = tail.within(super::stderr_tail::TAIL_BYTES);
    if lines.is_empty() {
        return;
    }
    let _ = session
        .emit(Note::AgentStderr(AgentStderr { lines }).into())
        .await;
}

/// The rest of a turn after its outcome: answer what is pending, journal
/// late output, and end the agent's process group.
#[derive(Debug)]
pub struct Teardown<H> {
    /// The connection (stdin is closed by the teardown).
    session: Session<H>,
    /// The agent.
    process: AgentProcess,
    /// Teardown waits.
    limits: TeardownLimits,
}

impl<H: TurnHooks> Teardown<H> {
    /// Runs the teardown to its end; returns what ended the agent.
    pub async fn run(self) -> Stopped {
        self.session.finish(self.process, self.limits).await
    }
}

/// ACP v1's `StopReason` values, the only ones a turn records as its own.
pub(crate) const STOP_REASONS: [&str; 5] = [
    "end_turn",
    "max_tokens",
    "max_turn_requests",
    "refusal",
    "cancelled",
];

async fn drive<H: TurnHooks>(
    s: &mut Session<H>,
    request: &TurnRequest,
    setup: &mut Setup,
    tokens: &mut Option<TokenUsage>,
) -> TurnOutcome {
    let session_id = match setup.session_id.clone() {
        Some(id) => id,
        None => match establish(s, request, setup).await {
            Ok(id) => id,
            Err(outcome) => return outcome,
        },
    };
    if s.cancel_requested() {
        return TurnOutcome::Cancelled { dispatched: false };
    }
    if let Err(err) = s.hooks().before_dispatch(&session_id).await {
        tracing::warn!(provider = %request.spec.name, error = %err, "dispatch boundary not persisted; prompt not sent");
        return TurnOutcome::Failed {
            code: OutcomeCode::BoundaryNotPersisted,
            dispatched: false,
        };
    }
    s.mark_dispatched(session_id.clone());
    let continuation = match (&request.continuation, &setup.origin) {
        (Some(c), SessionOrigin::New | SessionOrigin::Reset) => Some(c),
        _ => None,
    };
    let context: Vec<&super::PromptContext> =
        continuation.into_iter().chain(&request.context).collect();
    let blocks = super::prompt::blocks(&request.prompt, &context);
    let prompt = serde_json::json!({ "sessionId": session_id, "prompt": blocks });
    let answered = s.call("session/prompt", prompt, None).await;
    // Each tool call's last state is journaled before the outcome.
    let flushed = s.flush_tool_calls().await;
    let answered = match (answered, flushed) {
        (Ok(_), Err(e)) => Err(e),
        (answered, _) => answered,
    };
    match answered {
        Ok(result) => {
            let Some(stop) = result.get("stopReason").and_then(|v| v.as_str()) else {
                return unknown(s, OutcomeCode::MissingStopReason);
            };
            // Only ACP's own values are recorded; anything else is the
            // agent's protocol error, recorded as one fixed code (the value
            // itself is neither journaled nor logged).
            let known = STOP_REASONS.contains(&stop);
            let stop = if known {
                stop
            } else {
                OutcomeCode::InvalidStopReason.as_str()
            };
            // This turn's tokens (the schema's unstable end-turn usage),
            // journaled typed before the completion marker.
            if let Some(usage) = result
                .get("usage")
                .and_then(|u| serde_json::from_value::<TokenUsage>(u.clone()).ok())
            {
                let _ = s.emit(Note::PromptUsage(usage.clone()).into()).await;
                *tokens = Some(usage);
            }
            let _ = s
                .emit(
                    Observation::Stopped {
                        stop_reason: stop.to_owned(),
                        meta: result.get("_meta").cloned(),
                    }
                    .into(),
                )
                .await;
            match stop {
                "cancelled" => TurnOutcome::Cancelled { dispatched: true },
                _ if !known => TurnOutcome::Failed {
                    code: OutcomeCode::InvalidStopReason,
                    dispatched: true,
                },
                _ => TurnOutcome::Completed {
                    stop_reason: stop.to_owned(),
                },
            }
        }
        Err(CallError::Rpc { .. }) => TurnOutcome::Failed {
            code: OutcomeCode::AgentError,
            dispatched: true,
        },
        Err(CallError::Closed(code)) => unknown(s, code),
        Err(CallError::Interrupted) => TurnOutcome::Interrupted,
        Err(CallError::Hook) => unknown(s, OutcomeCode::JournalFailed),
        // No deadline on the prompt itself, and cancels after the boundary
        // are handled inside the call.
        Err(CallError::Timeout) | Err(CallError::Cancelled) => {
            unknown(s, OutcomeCode::ProtocolError)
        }
    }
}

/// An unreported outcome after the boundary; `interrupted` if a cancel was
/// already sent.
fn unknown<H: TurnHooks>(s: &Session<H>, code: OutcomeCode) -> TurnOutcome {
    if s.cancel_sent() {
        TurnOutcome::Interrupted
    } else {
        TurnOutcome::SubmissionUnknown { code }
    }
}
