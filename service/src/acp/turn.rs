//! What a turn is made of, shared by the runner and the agent session: the
//! request, its bounds, the storage hooks and the cancel signal. Its own file
//! so `runner` and `session` both depend on it without depending on each
//! other.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::watch;

use super::process::{StderrLimits, TeardownLimits};
use super::registry::AgentRegistry;
use lapis_protocol::ApprovalPolicy;
use lapis_protocol::OutcomeCode;
use lapis_protocol::config::{CommandLookup, ProviderSpec};
use lapis_protocol::{Invocation, Payload, PermissionAnswer, PermissionOption};

/// The ACP protocol version this client speaks (pinned).
pub(crate) const ACP_PROTOCOL_VERSION: u64 = 1;

/// JSON-RPC error code ACP uses for "authentication required".
pub(crate) const AUTH_REQUIRED: i64 = -32000;

/// The `initialize` params every launch sends (turns and `providers check`
/// alike, so a check sees what a turn will).
pub(super) fn initialize_params() -> serde_json::Value {
    serde_json::json!({
        "protocolVersion": ACP_PROTOCOL_VERSION,
        // Elicitation: form mode only (empty forms are approvals); no URL
        // mode, so an agent never asks this client to open one.
        "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false,
            "elicitation": {"form": {}}},
        "clientInfo": {"name": "lapis-ai-controller", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// Bounds and deadlines of one turn.
#[derive(Debug, Clone, Copy)]
pub struct RunnerLimits {
    /// Longest accepted stdout line from the agent.
    pub max_line_bytes: usize,
    /// Deadline for each handshake request (`initialize`, `session/new`,
    /// `session/load`); the engine sets the provider's `handshakeSeconds`.
    pub setup_timeout: Duration,
    /// How long a permission request may stay unanswered.
    pub permission_timeout: Duration,
    /// After `session/cancel`, how long to wait for `stopReason: cancelled`.
    pub cancel_timeout: Duration,
    /// Teardown waits.
    pub teardown: TeardownLimits,
    /// Stderr logging bounds.
    pub stderr: StderrLimits,
}

impl Default for RunnerLimits {
    fn default() -> Self {
        RunnerLimits {
            max_line_bytes: 8 * 1024 * 1024,
            setup_timeout: Duration::from_secs(30),
            permission_timeout: Duration::from_secs(600),
            cancel_timeout: Duration::from_secs(30),
            teardown: TeardownLimits {
                exit_grace: Duration::from_secs(2),
                term_grace: Duration::from_secs(2),
            },
            stderr: StderrLimits {
                line_bytes: 4096,
                total_bytes: 64 * 1024,
                keep: true,
            },
        }
    }
}

/// Everything a turn needs besides its hooks.
#[derive(Debug, Clone)]
pub struct TurnRequest {
    /// The provider to launch.
    pub spec: ProviderSpec,
    /// The agent's working directory (the agent workspace).
    pub workspace: PathBuf,
    /// The user's prompt text.
    pub prompt: String,
    /// The thread's approval policy.
    pub approval: ApprovalPolicy,
    /// Restricted threads never get automatic approval.
    pub restricted: bool,
    /// Deadlines and bounds.
    pub limits: RunnerLimits,
    /// Where bare command names are found.
    pub lookup: CommandLookup,
    /// Where the agent's process group is recorded for crash cleanup.
    pub registry: Option<AgentRegistry>,
    /// The thread's stored native session, reopened when a new agent must be
    /// started: `session/resume` when it advertises that, else
    /// `session/load` when it advertises `loadSession`.
    pub resume: Option<String>,
    /// Whether the caller keeps the agent for the thread's next turn.
    pub keep_alive: bool,
    /// MCP servers the session gets (`session/new` and `session/load`),
    /// resolved with their environment values; checked against the
    /// agent's advertised MCP capabilities before the session is made.
    pub mcp: Vec<super::mcp::LaunchServer>,
    /// A continuation's digest of its prior turn: sent (before the prompt
    /// text, like all context) only when the session is new (not reused,
    /// not loaded), so an agent that lost the thread's history still sees
    /// what came before.
    pub continuation: Option<super::PromptContext>,
    /// The blocks the thread's context port prepared for this turn, sent
    /// before the prompt text (after a continuation's digest) on every
    /// turn.
    pub context: Vec<super::PromptContext>,
}

/// A storage failure reported by a hook. Carries no payload.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HookError(pub String);

/// A permission request handed to [`TurnHooks::ask`].
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionRequest {
    /// Unique within the turn.
    pub(crate) request_id: String,
    /// The tool call it is about.
    pub invocation: Invocation,
    /// The only acceptable answers.
    pub options: Vec<PermissionOption>,
    /// When the runner stops waiting and answers by itself.
    pub(crate) deadline: std::time::SystemTime,
}

/// What the runner needs from storage. Implementations decide durability;
/// the runner decides order.
pub trait TurnHooks: Send + Sync + 'static {
    /// Durably records the dispatch boundary. Awaited immediately before
    /// `session/prompt` is written; an error means the prompt is not sent
    /// and the turn is `failed`.
    /// `session_id` is the native session the prompt goes to; the store
    /// binds it to the turn and the thread in the same commit.
    fn before_dispatch(
        &self,
        session_id: &str,
    ) -> impl Future<Output = Result<(), HookError>> + Send;

    /// Journals one event, in order. An error ends the turn.
    fn event(&self, event: Payload) -> impl Future<Output = Result<(), HookError>> + Send;

    /// Creates a pending interaction and waits for its answer. The
    /// interaction must exist once the future has been polled once: the
    /// runner polls it before journaling the request, so a client that
    /// answers as soon as it reads the `permission_requested` event finds it
    /// waiting. The runner bounds the wait and drops the future when the deadline passes or the
    /// turn is cancelled; the resolution is then reported as an event. An
    /// answer naming an option that was not offered is treated as
    /// `cancelled`, never as approval.
    fn ask(&self, request: PermissionRequest) -> impl Future<Output = PermissionAnswer> + Send;
}

/// Sends the cancel request for one turn.
#[cfg(any(test, feature = "test-support"))]
#[derive(Debug, Clone)]
pub struct CancelHandle(std::sync::Arc<watch::Sender<bool>>);

/// The runner's side of [`CancelHandle`].
#[derive(Debug, Clone)]
pub struct CancelSignal(pub(super) watch::Receiver<bool>);

/// A new cancel pair.
#[cfg(any(test, feature = "test-support"))]
pub fn cancel_channel() -> (CancelHandle, CancelSignal) {
    let (tx, rx) = watch::channel(false);
    (CancelHandle(std::sync::Arc::new(tx)), CancelSignal(rx))
}

impl From<watch::Receiver<bool>> for CancelSignal {
    /// Adopts an existing flag (e.g. the store's per-turn cancel watch).
    fn from(rx: watch::Receiver<bool>) -> CancelSignal {
        CancelSignal(rx)
    }
}

#[cfg(any(test, feature = "test-support"))]
impl CancelHandle {
    /// Requests cancellation (idempotent).
    pub fn cancel(&self) {
        self.0.send_replace(true);
    }
}

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
        code: OutcomeCode,
        /// Whether the prompt had been sent.
        dispatched: bool,
    },
    /// After the boundary the agent vanished or broke the protocol without
    /// a stop reason: the workspace must be fenced.
    SubmissionUnknown {
        /// Short stable code (`agent_exited`, `broken_pipe`, …).
        code: OutcomeCode,
    },
    /// A cancel was requested and no stop reason came before the deadline
    /// (or the agent vanished meanwhile): fenced as well.
    Interrupted,
}

impl TurnOutcome {
    /// The turn state this outcome maps to.
    pub(crate) fn state(&self) -> &'static str {
        match self {
            TurnOutcome::Completed { .. } => "completed",
            TurnOutcome::Cancelled { .. } => "cancelled",
            TurnOutcome::Failed { .. } => "failed",
            TurnOutcome::SubmissionUnknown { .. } => "submission_unknown",
            TurnOutcome::Interrupted => "interrupted",
        }
    }

    /// The outcome code, when there is one.
    pub(crate) fn code(&self) -> Option<&str> {
        match self {
            TurnOutcome::Completed { stop_reason } => Some(stop_reason),
            TurnOutcome::Failed { code, .. } | TurnOutcome::SubmissionUnknown { code } => {
                Some(code.as_str())
            }
            TurnOutcome::Cancelled { .. } => None,
            TurnOutcome::Interrupted => Some(OutcomeCode::CancelDeadline.as_str()),
        }
    }

    /// Whether the outcome is unknown and the workspace must be fenced.
    #[cfg(any(test, feature = "test-support"))]
    pub fn fences(&self) -> bool {
        matches!(
            self,
            TurnOutcome::SubmissionUnknown { .. } | TurnOutcome::Interrupted
        )
    }
}
