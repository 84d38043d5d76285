//! Session setup on a freshly started agent: `initialize`, then the
//! thread's stored session reopened — `session/resume` when the agent
//! advertises `sessionCapabilities.resume`, `session/load` (when it
//! advertises `loadSession`) as the fallback — or else `session/new`
//! (ACP v1, schema 1.7.0: resume and close stabilized April 2026).
//!
//! What must stay true: each way a stored session is reopened is journaled
//! with its reason (`session_resumed`, `session_loaded` with
//! `resumeFailed`, `context_reset` with its [`ResetReason`]); history the
//! agent replays while loading is never journaled as the turn's output (it
//! is counted, and the count observed); a stored session that cannot be
//! reopened is never silently replaced.

use lapis_protocol::OutcomeCode;
use serde_json::{Value, json};

use super::mcp;
use super::session::{CallError, Session};
use super::turn::{
    ACP_PROTOCOL_VERSION, AUTH_REQUIRED, TurnHooks, TurnOutcome, TurnRequest, initialize_params,
};
use lapis_protocol::probe::SessionCapabilities;
use lapis_protocol::{
    AskMode, ContextReset, ModeResult, Note, Observation, Payload, ResetReason, RestrictedMode,
    SessionLoaded, SessionResumed,
};

/// How a turn's session came to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionOrigin {
    /// No session was established (the turn failed or was cancelled first).
    None,
    /// `session/new` on a thread without a session to resume.
    New,
    /// The live agent's session was used again.
    Reused,
    /// `session/resume` reconnected the stored session.
    Resumed,
    /// `session/load` restored the stored session.
    Loaded,
    /// The stored session could not be resumed; a new one was started and
    /// a `context_reset` observation journaled.
    Reset,
}

/// What session setup established.
pub(crate) struct Setup {
    /// The session the prompt goes to.
    pub(crate) session_id: Option<String>,
    /// The session lifecycle the agent advertised.
    pub(crate) caps: SessionCapabilities,
    /// How the session came to be.
    pub(crate) origin: SessionOrigin,
}

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
        .map_err(|e| {
            setup_failure(
                e,
                OutcomeCode::InitializeFailed,
                OutcomeCode::InitializeTimeout,
            )
        })?;
    if init.get("protocolVersion").and_then(Value::as_u64) != Some(ACP_PROTOCOL_VERSION) {
        return Err(failed(OutcomeCode::ProtocolVersionUnsupported));
    }
    setup.caps = SessionCapabilities::from_initialize(&init);
    if let Err(refusal) = mcp::check_capabilities(&request.mcp, &init) {
        return Err(failed(OutcomeCode::Refused(refusal.code())));
    }
    let servers = mcp::acp_servers(&request.mcp);
    let mut reset = None;
    if let Some(previous) = &request.resume {
        match reopen(s, request, setup, previous, &servers).await? {
            Reopened::Yes => return Ok(previous.clone()),
            Reopened::No(reason) => reset = Some(reason),
        }
    }
    let new = json!({"cwd": request.workspace, "mcpServers": servers});
    let created = s.call("session/new", new, limit).await.map_err(|e| {
        setup_failure(
            e,
            OutcomeCode::SessionNewFailed,
            OutcomeCode::SessionNewTimeout,
        )
    })?;
    let session_id = match created.get("sessionId").and_then(Value::as_str) {
        Some(id)
            if !id.is_empty()
                && id.len() <= MAX_SESSION_ID_BYTES
                && !id.chars().any(char::is_control) =>
        {
            id.to_string()
        }
        _ => return Err(failed(OutcomeCode::SessionNewFailed)),
    };
    emit(
        s,
        Observation::SessionStarted {
            session_id: session_id.clone(),
        }
        .into(),
    )
    .await?;
    setup.origin = SessionOrigin::New;
    if let (Some(reason), Some(previous)) = (reset, &request.resume) {
        emit(
            s,
            Note::ContextReset(ContextReset {
                reason,
                previous_session_id: previous.clone(),
                session_id: session_id.clone(),
            })
            .into(),
        )
        .await?;
        setup.origin = SessionOrigin::Reset;
    }
    set_modes(s, request, &session_id, created.get("modes")).await?;
    setup.session_id = Some(session_id.clone());
    Ok(session_id)
}

/// Whether the stored session was reopened.
enum Reopened {
    /// Resumed or loaded; the setup says which.
    Yes,
    /// Neither: a new session follows, for this reason.
    No(ResetReason),
}

/// Reopens the stored session `previous`: `session/resume` first when
/// advertised (no history replayed), then `session/load`. An agent's
/// refusal moves on to the next way; a broken connection or a deadline
/// fails the turn (before the boundary).
async fn reopen<H: TurnHooks>(
    s: &mut Session<H>,
    request: &TurnRequest,
    setup: &mut Setup,
    previous: &str,
    servers: &Value,
) -> Result<Reopened, TurnOutcome> {
    let limit = Some(request.limits.setup_timeout);
    let params = json!({"sessionId": previous, "cwd": request.workspace, "mcpServers": servers});
    let mut resume_failed = false;
    if setup.caps.resume {
        match s.call("session/resume", params.clone(), limit).await {
            Ok(resumed) => {
                emit(
                    s,
                    Note::SessionResumed(SessionResumed {
                        session_id: previous.to_owned(),
                    })
                    .into(),
                )
                .await?;
                set_modes(s, request, previous, resumed.get("modes")).await?;
                setup.origin = SessionOrigin::Resumed;
                setup.session_id = Some(previous.to_owned());
                return Ok(Reopened::Yes);
            }
            Err(CallError::Rpc { .. }) => resume_failed = true,
            Err(e) => {
                return Err(setup_failure(
                    e,
                    OutcomeCode::SessionLoadFailed,
                    OutcomeCode::SessionLoadTimeout,
                ));
            }
        }
    }
    if !setup.caps.load {
        return Ok(Reopened::No(if resume_failed {
            ResetReason::ResumeFailed
        } else {
            ResetReason::LoadUnsupported
        }));
    }
    s.set_replaying(true);
    let loaded = s.call("session/load", params, limit).await;
    let replayed = s.set_replaying(false);
    match loaded {
        Ok(loaded) => {
            emit(
                s,
                Note::SessionLoaded(SessionLoaded {
                    session_id: previous.to_owned(),
                    replayed_updates: replayed,
                    resume_failed,
                })
                .into(),
            )
            .await?;
            set_modes(s, request, previous, loaded.get("modes")).await?;
            setup.origin = SessionOrigin::Loaded;
            setup.session_id = Some(previous.to_owned());
            Ok(Reopened::Yes)
        }
        Err(CallError::Rpc { .. }) => Ok(Reopened::No(ResetReason::LoadFailed)),
        Err(e) => Err(setup_failure(
            e,
            OutcomeCode::SessionLoadFailed,
            OutcomeCode::SessionLoadTimeout,
        )),
    }
}

/// The session mode a new or reopened session is put in: a restricted
/// thread's restricted mode, else an `ask` thread's asking mode.
async fn set_modes<H: TurnHooks>(
    s: &mut Session<H>,
    request: &TurnRequest,
    session_id: &str,
    modes: Option<&Value>,
) -> Result<(), TurnOutcome> {
    if request.restricted {
        restrict(s, request, session_id, modes).await
    } else {
        ask(s, request, session_id, modes).await
    }
}

/// Requests the provider's restricted mode on a restricted thread's new or
/// loaded session and journals the native result (`restricted_mode`
/// observation). Anything but `applied` fails the turn before the dispatch
/// boundary (`restricted_mode_unavailable`) unless the provider allows
/// running without it.
async fn restrict<H: TurnHooks>(
    s: &mut Session<H>,
    request: &TurnRequest,
    session_id: &str,
    modes: Option<&Value>,
) -> Result<(), TurnOutcome> {
    let policy = &request.spec.restricted;
    let result = request_mode(
        s,
        request.limits.setup_timeout,
        session_id,
        modes,
        policy.mode.as_deref(),
    )
    .await?;
    let allowed = result == ModeResult::Applied || policy.allow_unrestricted;
    emit(
        s,
        Note::RestrictedMode(RestrictedMode {
            mode: policy.mode.clone(),
            result,
            runs_unrestricted: result != ModeResult::Applied && allowed,
        })
        .into(),
    )
    .await?;
    if allowed {
        Ok(())
    } else {
        Err(failed(OutcomeCode::RestrictedModeUnavailable))
    }
}

/// Requests the provider's asking mode on an unrestricted `ask` thread's
/// new or reopened session, when it has one, and journals the native
/// result (`ask_mode` observation): an agent in its own automatic mode
/// would act without asking the person who chose `ask`. `applied` runs;
/// so does `unreported` (an agent that reports no modes has no automatic
/// one to leave); `unsupported` (the mode is not offered, or there is no
/// `session/set_mode`) and `rejected` fail the turn before the dispatch
/// boundary (`ask_unavailable`) unless the owner accepted the provider
/// (`allowUnasked`).
async fn ask<H: TurnHooks>(
    s: &mut Session<H>,
    request: &TurnRequest,
    session_id: &str,
    modes: Option<&Value>,
) -> Result<(), TurnOutcome> {
    let policy = &request.spec.ask;
    let Some(mode) = policy.mode.as_deref() else {
        return Ok(());
    };
    if request.approval != lapis_protocol::ApprovalPolicy::Ask {
        return Ok(());
    }
    let result = request_mode(
        s,
        request.limits.setup_timeout,
        session_id,
        modes,
        Some(mode),
    )
    .await?;
    let asks = matches!(result, ModeResult::Applied | ModeResult::Unreported);
    let allowed = asks || policy.allow_unasked;
    emit(
        s,
        Note::AskMode(AskMode {
            mode: Some(mode.to_owned()),
            result: Some(result),
            probe_ignored: false,
            runs_unasked: !asks && allowed,
        })
        .into(),
    )
    .await?;
    if allowed {
        Ok(())
    } else {
        Err(failed(OutcomeCode::AskUnavailable))
    }
}

/// Puts the session into `mode` (`None`: the provider names none), never
/// inferring success from having asked: `applied` when the agent reports
/// it is in the mode already or accepts `session/set_mode`.
pub(super) async fn request_mode<H: TurnHooks>(
    s: &mut Session<H>,
    timeout: std::time::Duration,
    session_id: &str,
    modes: Option<&Value>,
    mode: Option<&str>,
) -> Result<ModeResult, TurnOutcome> {
    let offered = |mode: &str| {
        modes
            .and_then(|m| m.get("availableModes"))
            .and_then(Value::as_array)
            .is_some_and(|list| {
                list.iter()
                    .any(|m| m.get("id").and_then(Value::as_str) == Some(mode))
            })
    };
    Ok(match (mode, modes) {
        (None, _) => ModeResult::Unsupported,
        (Some(_), None) => ModeResult::Unreported,
        (Some(mode), Some(m)) if m.get("currentModeId").and_then(Value::as_str) == Some(mode) => {
            ModeResult::Applied
        }
        (Some(mode), Some(_)) if !offered(mode) => ModeResult::Unsupported,
        (Some(mode), Some(_)) => {
            let params = json!({"sessionId": session_id, "modeId": mode});
            match s.call("session/set_mode", params, Some(timeout)).await {
                Ok(_) => ModeResult::Applied,
                Err(CallError::Rpc { code }) if code == METHOD_NOT_FOUND => ModeResult::Unsupported,
                Err(CallError::Rpc { .. }) => ModeResult::Rejected,
                Err(e) => {
                    return Err(setup_failure(
                        e,
                        OutcomeCode::SetModeFailed,
                        OutcomeCode::SetModeTimeout,
                    ));
                }
            }
        }
    })
}

/// JSON-RPC "method not found".
const METHOD_NOT_FOUND: i64 = -32601;

async fn emit<H: TurnHooks>(s: &mut Session<H>, event: Payload) -> Result<(), TurnOutcome> {
    s.emit(event)
        .await
        .map_err(|_| failed(OutcomeCode::JournalFailed))
}

fn failed(code: OutcomeCode) -> TurnOutcome {
    TurnOutcome::Failed {
        code,
        dispatched: false,
    }
}

fn setup_failure(err: CallError, rpc_code: OutcomeCode, timeout: OutcomeCode) -> TurnOutcome {
    match err {
        CallError::Rpc { code, .. } if code == AUTH_REQUIRED => failed(OutcomeCode::AuthRequired),
        CallError::Rpc { .. } => failed(rpc_code),
        CallError::Closed(code) => failed(code),
        CallError::Timeout => failed(timeout),
        CallError::Cancelled => TurnOutcome::Cancelled { dispatched: false },
        CallError::Hook => failed(OutcomeCode::JournalFailed),
        CallError::Interrupted => failed(OutcomeCode::Cancelled),
    }
}
