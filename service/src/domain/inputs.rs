//! What the store takes and gives that never crosses the wire: mutation
//! inputs, receipts and the runner's claim (the AuthSession is in `session`).
//! The public records themselves live in `lapis-protocol`.

use serde::{Deserialize, Serialize};

use lapis_protocol::config::ProviderSpec;
use lapis_protocol::{
    ApprovalPolicy, McpEndpoint, OutcomeCode, PortsPatch, Retention, Thread, ThreadPorts, Turn,
    Workspace,
};

/// Who is asking: the authenticated principal and the application of its session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// The principal (e.g. `owner`).
    pub(crate) principal: String,
    /// The application name the session was opened for.
    pub(crate) application: String,
}

impl Actor {
    /// An actor from its two names.
    pub fn new(principal: impl Into<String>, application: impl Into<String>) -> Self {
        Actor {
            principal: principal.into(),
            application: application.into(),
        }
    }

    /// Whether `thread` is this actor's (see [`owned_by`]).
    pub(crate) fn owns(&self, thread: &Thread) -> bool {
        owned_by(thread, &self.principal, &self.application)
    }
}

/// Whether `thread` belongs to this principal speaking for this
/// application: the one ownership rule, for the store and the server.
pub(crate) fn owned_by(thread: &Thread, principal: &str, application: &str) -> bool {
    thread.principal == principal && thread.application == application
}

/// Input of `create_thread`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewThread {
    /// Optional caller-chosen command id; with it the creation is idempotent.
    pub command_id: Option<String>,
    /// Workspace id (must be registered).
    pub workspace_id: String,
    /// Provider name (the caller validates it against config).
    pub provider: String,
    /// Permission policy.
    pub approval: ApprovalPolicy,
    /// Restricted flag.
    pub restricted: bool,
    /// Journal retention.
    pub retention: Retention,
    /// Application MCP server names (validated by the caller).
    pub mcp_servers: Vec<String>,
    /// Application ports, by name (validated by the caller; the store
    /// checks the names again, and that a transcript store is only on a
    /// metadata-only thread).
    #[serde(flatten)]
    pub ports: ThreadPorts,
    /// The thread's own permission timeout in seconds (`None`: the
    /// provider's); the store checks its bounds.
    #[serde(default)]
    pub permission_timeout_seconds: Option<u64>,
    /// The thread's own budget; the store checks it. Omitted from the
    /// serialized input when `None`, so the receipt digest of a create
    /// without it is what it was before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<lapis_protocol::config::ThreadBudget>,
    /// A thread id the actor reserved (`reserve_thread`).
    pub thread_id: Option<String>,
}

/// Input of `configure_thread`: `None` fields are left unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadPatch {
    /// New provider.
    pub provider: Option<String>,
    /// New approval policy.
    pub approval: Option<ApprovalPolicy>,
    /// New restricted flag.
    pub restricted: Option<bool>,
    /// New retention (applies to events written from now on).
    pub retention: Option<Retention>,
    /// New permission timeout: `Some(None)` back to the provider's.
    /// Omitted from the serialized patch when `None`, so the receipt
    /// digest of a configure without it is what it was before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_timeout_seconds: Option<Option<u64>>,
    /// New budget: `Some(None)` clears it. Omitted when `None`, as above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Option<lapis_protocol::config::ThreadBudget>>,
    /// What changes of its ports (the transcript store: `Some(None)`
    /// unbinds it; omitted when unchanged, as above). Last, so the
    /// serialized patch — the receipt digest's input — is what it was when
    /// the member was spelled out here.
    #[serde(flatten)]
    pub ports: PortsPatch,
}

/// Input of `submit_turn`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubmitTurn {
    /// Caller-chosen command id: same id + same input = same receipt.
    pub command_id: String,
    /// Target thread.
    pub thread_id: String,
    /// The prompt text (a payload: never logged, never in errors).
    pub prompt: String,
    /// Optional turn this one continues (must belong to the same thread).
    pub continues: Option<String>,
    /// Deadline override in seconds (else the provider's `maxTurnSeconds`).
    #[serde(default)]
    pub max_turn_seconds: Option<u64>,
}

/// The answer to an idempotent mutation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt<T> {
    /// The resource as it is now.
    pub value: T,
    /// `true` when the command id was seen before with the same input.
    pub(crate) replayed: bool,
}

/// How the runner ends a turn. A completion carries the agent's own stop
/// reason; every other end carries the controller's [`OutcomeCode`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "as", content = "code")]
pub enum TurnEnd {
    /// The agent finished (`end_turn`, `max_tokens`, …).
    Completed(String),
    /// Authoritative failure (spawn error, agent error response, …).
    Failed(OutcomeCode),
    /// The agent confirmed cancellation (or cancelled before dispatch).
    Cancelled(OutcomeCode),
    /// Outcome lost after dispatch: `submission_unknown`, or `interrupted` if a
    /// cancel was pending. Before the dispatch boundary it is recorded as
    /// `failed` (the prompt was never written).
    Unknown(OutcomeCode),
    /// Cancel deadline passed without the agent confirming: `interrupted`
    /// (`failed` before the dispatch boundary).
    Interrupted(OutcomeCode),
}

/// The result of a state change requested by the runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransitionOutcome {
    /// The turn after the request.
    pub turn: Turn,
    /// `false` when the table refused the change (the turn had already moved
    /// on); the request was journaled as an observation and changed nothing.
    pub applied: bool,
}

/// What the engine knows of a thread's provider when one of its turns is
/// claimed (the store holds no configuration). It goes into the turn's
/// prepared record and back out in the [`Claim`], so the turn runs with
/// exactly the definition that was recorded, even if a reload follows.
#[derive(Debug, Clone)]
pub struct ProviderFacts {
    /// The provider definition the turn runs with.
    pub spec: ProviderSpec,
    /// Its identity fingerprint (lowercase hex SHA-256).
    pub fingerprint: String,
    /// The MCP servers the agent session is given, by identity.
    pub mcp_servers: Vec<McpEndpoint>,
    /// The same servers resolved with their environment values (never
    /// persisted; `Debug` hides the values), or why they were refused: the
    /// runner fails the turn with that code before anything is launched.
    pub mcp: Result<Vec<crate::acp::mcp::LaunchServer>, crate::acp::mcp::LaunchRefusal>,
}

/// Called by the store's writer inside the claim, with the claimed turn's
/// thread as it is at that moment; `None` when no provider of the thread's
/// name is configured. Must be quick and must not call the store.
pub(crate) type Preparer = std::sync::Arc<dyn Fn(&Thread) -> Option<ProviderFacts> + Send + Sync>;

/// A turn handed to the runner by the scheduler. The workspace lease is held
/// until the turn reaches a terminal or fenced state.
#[derive(Debug)]
pub struct Claim {
    /// The turn, now `preparing`, with its prepared configuration.
    pub turn: Turn,
    /// The provider the turn was prepared with (`None`: not configured at
    /// claim; the runner fails the turn `unknown_provider`).
    pub provider: Option<ProviderFacts>,
    /// Its thread.
    pub(crate) thread: Thread,
    /// Its workspace.
    pub(crate) workspace: Workspace,
    /// The prompt (a payload).
    pub(crate) prompt: String,
    /// For a continuation: the bounded digest of the prior turn, sent as a
    /// separate content block only when the agent session is not resumed.
    pub(crate) context: Option<String>,
    /// Flips to `true` when a cancel is requested.
    pub(crate) cancel: tokio::sync::watch::Receiver<bool>,
}

/// Counters for `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreStatus {
    /// Turns in `queued`.
    pub(crate) queue_depth: usize,
    /// The bound on `queue_depth`.
    pub(crate) queue_capacity: usize,
    /// Workspaces with a turn in flight.
    pub running_workspaces: Vec<String>,
    /// Workspaces fenced by a turn with an unknown outcome.
    pub fenced_workspaces: Vec<String>,
}
