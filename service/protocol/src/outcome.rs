//! Turn outcome codes: the short stable reasons a turn's `outcome` carries
//! when the controller (not the agent) decided how it ended.
//!
//! A completed turn's `outcome` is the agent's own stop reason (`end_turn`,
//! `max_tokens`, …), which the controller passes through unchanged; every
//! other outcome is one of these codes. A code, once published, never
//! changes spelling or meaning (like [`ErrorCode`]); clients compare them
//! through [`crate::Turn::outcome_code`], never as text.
//!
//! What must stay true: the spellings are snake_case and distinct (a test
//! checks); a turn refused before dispatch because of its MCP servers
//! carries the refusal's [`ErrorCode`] ([`OutcomeCode::Refused`]), so one
//! code names one reason everywhere.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ErrorCode;

/// Why a turn ended, when the controller says so.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutcomeCode {
    // ---- launch and setup (before the dispatch boundary: `failed`) ----
    /// The provider's command is not on `PATH` or `$HOME/.local/bin`.
    CommandNotFound,
    /// The provider's command exists but cannot be executed.
    CommandNotExecutable,
    /// The workspace directory cannot be entered.
    WorkspaceUnavailable,
    /// The agent process could not be started.
    SpawnFailed,
    /// The agent answered `initialize` with an error.
    InitializeFailed,
    /// The agent did not answer `initialize` in time.
    InitializeTimeout,
    /// The agent speaks another ACP version.
    ProtocolVersionUnsupported,
    /// The agent requires authentication first.
    AuthRequired,
    /// The agent answered `session/load` with an error.
    SessionLoadFailed,
    /// The agent did not answer `session/load` in time.
    SessionLoadTimeout,
    /// The agent answered `session/new` with an error or no session.
    SessionNewFailed,
    /// The agent did not answer `session/new` in time.
    SessionNewTimeout,
    /// The agent refused the requested session mode.
    SetModeFailed,
    /// The agent did not answer `session/set_mode` in time.
    SetModeTimeout,
    /// A restricted thread's agent offers no mode that keeps asking.
    RestrictedModeUnavailable,
    /// An `ask` turn's agent cannot be made to ask before acting: its
    /// provider's asking mode was not applied, or the provider definition's
    /// recorded policy probe found it `ignored` (unless `allowUnasked`).
    AskUnavailable,
    /// The thread's provider is no longer configured.
    UnknownProvider,
    /// A budget covering the turn was spent when it was claimed
    /// (`budgets` in the config): nothing was asked of a port or an agent.
    BudgetExhausted,
    /// The budgets covering the turn could not be read when it was
    /// claimed (the store refused the spending query): budgets fail
    /// closed, so nothing was asked of a port or an agent.
    BudgetUnavailable,
    /// The turn's MCP servers were refused before anything was launched
    /// (the refusal's code, `mcp_server_unavailable`, …).
    Refused(ErrorCode),
    /// The store refused the dispatch boundary (a cancel was pending).
    BoundaryNotPersisted,
    /// A continuation whose prior turn no longer qualifies at claim.
    ContinuationRefused,
    /// The queued turn's stored input (prompt, continued turn, deadline)
    /// no longer matches the digest chained in its `turn_submitted` event:
    /// the `turns` row was edited at rest, so it is never dispatched.
    PromptMismatch,
    /// The controller restarted while the turn was being set up.
    SetupInterrupted,

    // ---- the agent's answer ----
    /// The agent answered the prompt with an error.
    AgentError,
    /// The agent answered the prompt with a `stopReason` outside ACP's
    /// enum (empty, misspelt, oversized): a protocol error after the
    /// dispatch, so the turn failed; the value itself is never recorded.
    InvalidStopReason,

    // ---- lost outcomes (after the boundary: `submission_unknown`) ----
    /// The agent exited without a stop reason.
    AgentExited,
    /// The agent's stdin closed while writing to it.
    BrokenPipe,
    /// The agent broke the protocol (a malformed or unexpected frame).
    ProtocolError,
    /// The agent sent a line that is not JSON.
    InvalidJson,
    /// The agent sent a line longer than the frame bound.
    LineTooLong,
    /// Reading the agent's stdout failed.
    ReadError,
    /// The prompt response carried no stop reason.
    MissingStopReason,
    /// The controller stopped while the outcome was unknown.
    OutcomeLost,
    /// An event of the turn could not be journaled by the runner.
    JournalFailed,
    /// Streamed output of the turn was refused by the store (disk full, …).
    JournalWriteFailed,
    /// The store refused to record the turn's reported end (a value it
    /// cannot record): the outcome is the owner's to confirm.
    EndRefused,

    // ---- cancellation and limits ----
    /// The agent confirmed the cancel.
    Cancelled,
    /// Cancelled before the prompt was written.
    CancelledBeforeDispatch,
    /// Cancelled while still queued.
    CancelledBeforeStart,
    /// A cancel was requested and the agent did not confirm in time.
    CancelDeadline,
    /// The turn's deadline (`maxTurnSeconds`) passed.
    DeadlineExceeded,
    /// The controller shut down while the turn ran.
    ControllerShutdown,

    // ---- resolution ----
    /// A fenced turn its owner resolved (`turns.resolve`).
    ResolvedByOwner,
}

impl OutcomeCode {
    /// Every code of the controller's own (the [`OutcomeCode::Refused`]
    /// ones are the MCP error codes of [`ErrorCode`]).
    pub const ALL: [OutcomeCode; 43] = [
        OutcomeCode::CommandNotFound,
        OutcomeCode::CommandNotExecutable,
        OutcomeCode::WorkspaceUnavailable,
        OutcomeCode::SpawnFailed,
        OutcomeCode::InitializeFailed,
        OutcomeCode::InitializeTimeout,
        OutcomeCode::ProtocolVersionUnsupported,
        OutcomeCode::AuthRequired,
        OutcomeCode::SessionLoadFailed,
        OutcomeCode::SessionLoadTimeout,
        OutcomeCode::SessionNewFailed,
        OutcomeCode::SessionNewTimeout,
        OutcomeCode::SetModeFailed,
        OutcomeCode::SetModeTimeout,
        OutcomeCode::RestrictedModeUnavailable,
        OutcomeCode::AskUnavailable,
        OutcomeCode::UnknownProvider,
        OutcomeCode::BudgetExhausted,
        OutcomeCode::BudgetUnavailable,
        OutcomeCode::BoundaryNotPersisted,
        OutcomeCode::ContinuationRefused,
        OutcomeCode::PromptMismatch,
        OutcomeCode::SetupInterrupted,
        OutcomeCode::AgentError,
        OutcomeCode::InvalidStopReason,
        OutcomeCode::AgentExited,
        OutcomeCode::BrokenPipe,
        OutcomeCode::ProtocolError,
        OutcomeCode::InvalidJson,
        OutcomeCode::LineTooLong,
        OutcomeCode::ReadError,
        OutcomeCode::MissingStopReason,
        OutcomeCode::OutcomeLost,
        OutcomeCode::JournalFailed,
        OutcomeCode::JournalWriteFailed,
        OutcomeCode::EndRefused,
        OutcomeCode::Cancelled,
        OutcomeCode::CancelledBeforeDispatch,
        OutcomeCode::CancelledBeforeStart,
        OutcomeCode::CancelDeadline,
        OutcomeCode::DeadlineExceeded,
        OutcomeCode::ControllerShutdown,
        OutcomeCode::ResolvedByOwner,
    ];

    /// The stable spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeCode::CommandNotFound => "command_not_found",
            OutcomeCode::CommandNotExecutable => "command_not_executable",
            OutcomeCode::WorkspaceUnavailable => "workspace_unavailable",
            OutcomeCode::SpawnFailed => "spawn_failed",
            OutcomeCode::InitializeFailed => "initialize_failed",
            OutcomeCode::InitializeTimeout => "initialize_timeout",
            OutcomeCode::ProtocolVersionUnsupported => "protocol_version_unsupported",
            OutcomeCode::AuthRequired => "auth_required",
            OutcomeCode::SessionLoadFailed => "session_load_failed",
            OutcomeCode::SessionLoadTimeout => "session_load_timeout",
            OutcomeCode::SessionNewFailed => "session_new_failed",
            OutcomeCode::SessionNewTimeout => "session_new_timeout",
            OutcomeCode::SetModeFailed => "set_mode_failed",
            OutcomeCode::SetModeTimeout => "set_mode_timeout",
            OutcomeCode::RestrictedModeUnavailable => "restricted_mode_unavailable",
            OutcomeCode::AskUnavailable => "ask_unavailable",
            OutcomeCode::UnknownProvider => "unknown_provider",
            OutcomeCode::BudgetExhausted => "budget_exhausted",
            OutcomeCode::BudgetUnavailable => "budget_unavailable",
            OutcomeCode::Refused(code) => code.as_str(),
            OutcomeCode::BoundaryNotPersisted => "boundary_not_persisted",
            OutcomeCode::ContinuationRefused => "continuation_refused",
            OutcomeCode::PromptMismatch => "prompt_mismatch",
            OutcomeCode::SetupInterrupted => "setup_interrupted",
            OutcomeCode::AgentError => "agent_error",
            OutcomeCode::InvalidStopReason => "invalid_stop_reason",
            OutcomeCode::AgentExited => "agent_exited",
            OutcomeCode::BrokenPipe => "broken_pipe",
            OutcomeCode::ProtocolError => "protocol_error",
            OutcomeCode::InvalidJson => "invalid_json",
            OutcomeCode::LineTooLong => "line_too_long",
            OutcomeCode::ReadError => "read_error",
            OutcomeCode::MissingStopReason => "missing_stop_reason",
            OutcomeCode::OutcomeLost => "outcome_lost",
            OutcomeCode::JournalFailed => "journal_failed",
            OutcomeCode::JournalWriteFailed => "journal_write_failed",
            OutcomeCode::EndRefused => "end_refused",
            OutcomeCode::Cancelled => "cancelled",
            OutcomeCode::CancelledBeforeDispatch => "cancelled_before_dispatch",
            OutcomeCode::CancelledBeforeStart => "cancelled_before_start",
            OutcomeCode::CancelDeadline => "cancel_deadline",
            OutcomeCode::DeadlineExceeded => "deadline_exceeded",
            OutcomeCode::ControllerShutdown => "controller_shutdown",
            OutcomeCode::ResolvedByOwner => "resolved_by_owner",
        }
    }

    /// Parses a spelling: one of [`OutcomeCode::ALL`], or an MCP refusal's
    /// error code. `None` for anything else (an agent's stop reason).
    pub fn parse(s: &str) -> Option<OutcomeCode> {
        OutcomeCode::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .or_else(|| {
                ErrorCode::parse(s)
                    .filter(|c| c.as_str().starts_with("mcp_"))
                    .map(OutcomeCode::Refused)
            })
    }
}

impl std::fmt::Display for OutcomeCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for OutcomeCode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for OutcomeCode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        OutcomeCode::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown outcome code `{s}`")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_snake_case_distinct_and_round_trip() {
        let mut seen = std::collections::BTreeSet::new();
        for code in OutcomeCode::ALL {
            let s = code.as_str();
            assert!(s.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{s}");
            assert!(seen.insert(s), "{s} twice");
            assert_eq!(OutcomeCode::parse(s), Some(code));
            assert_eq!(serde_json::to_value(code).unwrap(), s);
            assert!(ErrorCode::parse(s).is_none(), "{s} is also an error code");
        }
        let refused = OutcomeCode::Refused(ErrorCode::McpServerUnavailable);
        assert_eq!(OutcomeCode::parse("mcp_server_unavailable"), Some(refused));
        assert_eq!(OutcomeCode::parse("end_turn"), None, "a stop reason");
        assert_eq!(OutcomeCode::parse("not_found"), None, "not an outcome");
    }
}
