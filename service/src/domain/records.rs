//! The records the controller keeps, as plain data.
//!
//! Ids are strings with a kind prefix (`thr_`, `turn_`, `ses_`) and 32 random
//! hex digits; workspace ids are chosen by the owner. Times are milliseconds
//! since the Unix epoch, from the store's injected clock.

use serde::{Deserialize, Serialize};

use super::state::TurnState;

/// Who is asking: the authenticated principal and the application of its session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// The principal (e.g. `owner`).
    pub principal: String,
    /// The application name the session was opened for.
    pub application: String,
}

impl Actor {
    /// An actor from its two names.
    pub fn new(principal: impl Into<String>, application: impl Into<String>) -> Self {
        Actor {
            principal: principal.into(),
            application: application.into(),
        }
    }
}

/// A registered agent workspace: one id per canonical path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workspace {
    /// The owner-chosen id.
    pub id: String,
    /// The canonical absolute path (symlinks resolved).
    pub path: String,
    /// When it was registered.
    pub created_at: i64,
}

/// How a thread answers agent permission requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalPolicy {
    /// Every request waits for an authorized client's answer (the default).
    Ask,
    /// Offered allow options are chosen automatically (never on restricted threads).
    AllowAll,
}

impl ApprovalPolicy {
    /// Stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::Ask => "ask",
            ApprovalPolicy::AllowAll => "allow-all",
        }
    }

    /// Parse a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ask" => Some(ApprovalPolicy::Ask),
            "allow-all" => Some(ApprovalPolicy::AllowAll),
            _ => None,
        }
    }
}

/// What the journal keeps of a thread's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Retention {
    /// Payloads are stored durably.
    Full,
    /// Only sequence and metadata are stored; payloads live in memory until restart.
    MetadataOnly,
}

impl Retention {
    /// Stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Retention::Full => "full",
            Retention::MetadataOnly => "metadata-only",
        }
    }

    /// Parse a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "full" => Some(Retention::Full),
            "metadata-only" => Some(Retention::MetadataOnly),
            _ => None,
        }
    }
}

/// A conversation bound to one workspace and one provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Thread {
    /// `thr_…`.
    pub id: String,
    /// Owning principal.
    pub principal: String,
    /// Owning application (stamped from the creating session).
    pub application: String,
    /// The workspace every turn of the thread runs in.
    pub workspace_id: String,
    /// Provider name (from config).
    pub provider: String,
    /// Permission policy.
    pub approval: ApprovalPolicy,
    /// Restricted threads never get automatic approval.
    pub restricted: bool,
    /// Journal retention.
    pub retention: Retention,
    /// Optimistic version, bumped by every configure.
    pub version: u64,
    /// Creation time.
    pub created_at: i64,
    /// Last configuration time.
    pub updated_at: i64,
    /// The native agent session the thread is bound to, once a turn was
    /// dispatched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_session: Option<SessionBinding>,
}

/// A thread's native agent session and what it was made under: a turn whose
/// provider definition (fingerprint) or thread version differs replaces it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionBinding {
    /// The agent's own session id (from `session/new`), 1-512 bytes.
    pub session_id: String,
    /// Lowercase hex SHA-256 of the provider definition's identity
    /// (command, args, environment names, `vcsIdentity`).
    pub fingerprint: String,
    /// The thread's configuration version when the session was bound.
    pub thread_version: u64,
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
}

/// One turn: a prompt run once by the thread's provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    /// `turn_…`.
    pub id: String,
    /// The thread.
    pub thread_id: String,
    /// The thread's workspace at submission.
    pub workspace_id: String,
    /// The submitting principal.
    pub principal: String,
    /// The caller's command id (idempotency key with the principal).
    pub command_id: String,
    /// Current state.
    pub state: TurnState,
    /// Short outcome code once finished or fenced (`end_turn`, `setup_interrupted`, …).
    pub outcome: Option<String>,
    /// A cancel was requested and the runner should stop the agent.
    pub cancel_requested: bool,
    /// The turn this one continues, if any.
    pub continues: Option<String>,
    /// Global FIFO position (submission order).
    pub queue_seq: u64,
    /// Submission time.
    pub created_at: i64,
    /// Last state change.
    pub updated_at: i64,
    /// Claimed by the runner.
    pub prepared_at: Option<i64>,
    /// The dispatch boundary.
    pub dispatched_at: Option<i64>,
    /// Agent acknowledged.
    pub started_at: Option<i64>,
    /// Reached a terminal or fenced state.
    pub finished_at: Option<i64>,
    /// Resolved by the owner.
    pub resolved_at: Option<i64>,
    /// The native agent session the prompt was sent to (set at dispatch).
    #[serde(default)]
    pub agent_session_id: Option<String>,
    /// Per-turn deadline override (seconds), if the submitter set one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turn_seconds: Option<u64>,
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
    pub replayed: bool,
}

/// How the runner ends a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "as", content = "code")]
pub enum TurnEnd {
    /// The agent finished (`end_turn`, `max_tokens`, …).
    Completed(String),
    /// Authoritative failure (spawn error, agent error response, …).
    Failed(String),
    /// The agent confirmed cancellation (or cancelled before dispatch).
    Cancelled(String),
    /// Outcome lost after dispatch: `submission_unknown`, or `interrupted` if a
    /// cancel was pending. Before the dispatch boundary it is recorded as
    /// `failed` (the prompt was never written).
    Unknown(String),
    /// Cancel deadline passed without the agent confirming: `interrupted`
    /// (`failed` before the dispatch boundary).
    Interrupted(String),
}

/// What an owner's resolution records the fenced turn as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolveAs {
    /// Record as failed.
    Failed,
    /// Record as cancelled.
    Cancelled,
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

/// A turn handed to the runner by the scheduler. The workspace lease is held
/// until the turn reaches a terminal or fenced state.
#[derive(Debug)]
pub struct Claim {
    /// The turn, now `preparing`.
    pub turn: Turn,
    /// Its thread.
    pub thread: Thread,
    /// Its workspace.
    pub workspace: Workspace,
    /// The prompt (a payload).
    pub prompt: String,
    /// Flips to `true` when a cancel is requested.
    pub cancel: tokio::sync::watch::Receiver<bool>,
}

/// Counters for `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreStatus {
    /// Turns in `queued`.
    pub queue_depth: usize,
    /// The bound on `queue_depth`.
    pub queue_capacity: usize,
    /// Workspaces with a turn in flight.
    pub running_workspaces: Vec<String>,
    /// Workspaces fenced by a turn with an unknown outcome.
    pub fenced_workspaces: Vec<String>,
}

/// A persistent authenticated session (one per credential).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthSession {
    /// `ses_…`.
    pub id: String,
    /// The config credential (token name) it was issued for.
    pub credential: String,
    /// Principal.
    pub principal: String,
    /// Application.
    pub application: String,
    /// Granted scopes.
    pub scopes: Vec<String>,
    /// Lowercase hex SHA-256 of the bearer (the bearer itself is never stored).
    pub bearer_sha256: String,
    /// Issue time.
    pub created_at: i64,
    /// Expiry, if any.
    pub expires_at: Option<i64>,
    /// Revocation time, if revoked.
    pub revoked_at: Option<i64>,
}

/// Input of `issue_session`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewAuthSession {
    /// The config credential name.
    pub credential: String,
    /// Principal.
    pub principal: String,
    /// Application.
    pub application: String,
    /// Granted scopes.
    pub scopes: Vec<String>,
    /// Lowercase hex SHA-256 of the bearer the caller generated.
    pub bearer_sha256: String,
    /// Optional expiry.
    pub expires_at: Option<i64>,
}
