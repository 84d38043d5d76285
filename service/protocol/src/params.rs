//! Parameters of every method after `hello`. Each refuses unknown fields, so
//! a typo is an `invalid_request`, not a silently ignored option; every
//! closed vocabulary (approval, retention, turn state, resolution) is an
//! enum, so an unknown value is refused the same way, by the decoder, with
//! a message naming the accepted spellings (`unknown variant `x`, expected
//! `ask` or `allow-all``), before any handler runs.
//!
//! Results are the core's records serialized as they are (camelCase), wrapped
//! in a named member (`{"thread": …}`) so fields can be added beside them.

use serde::{Deserialize, Serialize};

/// Methods without parameters (`status`, `workspaces.list`): `{}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// `workspaces.add`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkspacesAdd {
    /// Workspace id.
    pub id: String,
    /// Project directory (absolute).
    pub path: String,
    /// Makes the call idempotent: a receipt of (principal, application,
    /// command id) replays the first answer; other input is `conflict`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_id: Option<String>,
}

/// `workspaces.remove`: unregisters a workspace added at run time. Its
/// threads and their journal stay (readable, verifiable); nothing new can
/// start there. Refused with `workspace_busy` while it has a queued or
/// claimed turn, `workspace_fenced` while a turn fences it, and
/// `invalid_request` for a workspace the configuration declares.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkspacesRemove {
    /// Workspace id.
    pub id: String,
}

/// `providers.check`: the controller starts a configured provider's agent
/// exactly as a turn would (its own command resolution, `PATH`,
/// environment rule and secrets) in a scratch directory and runs
/// `initialize` (and `session/new` with `session`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProvidersCheck {
    /// A configured provider's name, or `echo`.
    pub name: String,
    /// Also open a session.
    #[serde(default)]
    pub session: bool,
    /// Seconds each step may take (1-600, default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

/// `providers.check` result: `report` when the agent started and answered
/// `initialize`, else `failure` (a failed check is a result, not an error).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvidersChecked {
    /// The provider.
    pub provider: String,
    /// What the agent advertised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<crate::probe::ProbeReport>,
    /// Why it could not be checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<crate::probe::ProbeFailed>,
}

/// `threads.create`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadsCreate {
    /// Workspace id.
    pub workspace_id: String,
    /// Provider name (`echo` or one from the config).
    pub provider: String,
    /// `ask` (default) or `allow-all`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<crate::ApprovalPolicy>,
    /// Restricted threads never auto-approve.
    #[serde(default)]
    pub restricted: bool,
    /// `full` (default) or `metadata-only`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<crate::Retention>,
    /// Names of MCP servers this application registered (`mcp.register`)
    /// that every turn of the thread gives the agent, besides the
    /// provider's own. A turn whose server is no longer registered fails
    /// `mcp_server_unavailable` before dispatch. Refused on restricted threads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<String>,
    /// Names of tool endpoints this application registered
    /// (`tools.register`) whose tools every turn's agent session reaches
    /// through the controller's MCP bridge. Only the names persist; a turn
    /// whose endpoint is gone fails `tool_endpoint_unavailable` at claim.
    /// Refused on restricted threads (`tools_restricted`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// The name of a context port this application registered
    /// (`context.register`): every turn's claim asks it for context blocks
    /// (`context.prepare`) before the dispatch boundary. Only the name
    /// persists; a turn whose port is gone, late or refusing fails
    /// `context_unavailable` before its agent sees the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The name of a memory port this application registered
    /// (`memory.register`): every turn's preparation recalls from it (a
    /// labelled block before the prompt), and the agent gets the read tools
    /// `memory_search` and `memory_read` on the controller's MCP bridge. A
    /// turn whose port is gone or late fails `context_unavailable` before
    /// dispatch. Refused on restricted threads (`tools_restricted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// A thread id this application reserved (`threads.reserve`): the
    /// thread gets that id. Another application's, or one never reserved,
    /// is `not_found`; one already taken by a thread is `conflict`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// Makes the creation idempotent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_id: Option<String>,
}

/// `mcp.register`: the MCP servers this connection offers its
/// application's threads (replacing what it registered before; an empty
/// list withdraws them). Volatile: they are gone when the connection closes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpRegister {
    /// Launch descriptions (environment *names* only).
    pub servers: Vec<crate::mcp::McpServer>,
}

/// `mcp.register` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpRegisterResult {
    /// What is registered now: names, transports and identities.
    pub servers: Vec<crate::mcp::McpEndpoint>,
}

/// Methods that name one thread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadRef {
    /// Thread id.
    pub thread_id: String,
}

/// `threads.attach`: (re)attach to a thread stating the binding relied on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadsAttach {
    /// Thread id.
    pub thread_id: String,
    /// The expected binding; a difference is `binding_mismatch`.
    #[serde(default)]
    pub expect: crate::ThreadExpect,
}

/// `threads.list`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadsList {
    /// Only threads of this workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<String>,
    /// At most this many (the server bounds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `threads.configure`: optimistic on `expectedVersion`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadsConfigure {
    /// Thread id.
    pub thread_id: String,
    /// The version the caller last saw.
    pub expected_version: u64,
    /// New provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// New approval policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<crate::ApprovalPolicy>,
    /// New restricted flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restricted: Option<bool>,
    /// New retention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<crate::Retention>,
    /// Makes the call idempotent (replays the first answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_id: Option<String>,
}

/// `turns.submit`. The prompt is a payload: never logged.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnsSubmit {
    /// Thread id.
    pub thread_id: String,
    /// Idempotency key: same id + same input = same turn.
    pub command_id: String,
    /// Prompt text.
    pub prompt: String,
    /// A turn of the same thread this one continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continues: Option<String>,
    /// Deadline for this turn in seconds (1-604800), overriding the
    /// provider's `maxTurnSeconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turn_seconds: Option<u64>,
    /// The binding the caller relies on: checked in the same step that
    /// queues the turn; a difference is `binding_mismatch` and nothing is
    /// queued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<crate::ThreadExpect>,
}

impl std::fmt::Debug for TurnsSubmit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnsSubmit")
            .field("thread_id", &self.thread_id)
            .field("command_id", &self.command_id)
            .field("prompt", &format_args!("<{} bytes>", self.prompt.len()))
            .finish_non_exhaustive()
    }
}

/// `turns.continue`: a linked attempt after a settled turn, in its thread,
/// with new instructions. The prompt is a payload: never logged.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnsContinue {
    /// The prior turn (completed, failed or cancelled).
    pub turn_id: String,
    /// Idempotency key: same id + same input = same turn.
    pub command_id: String,
    /// The new instructions (the prior prompt is never sent again).
    pub prompt: String,
    /// Deadline for this turn in seconds (1-604800), overriding the
    /// provider's `maxTurnSeconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turn_seconds: Option<u64>,
    /// The binding the caller relies on, as for `turns.submit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<crate::ThreadExpect>,
}

impl std::fmt::Debug for TurnsContinue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnsContinue")
            .field("turn_id", &self.turn_id)
            .field("command_id", &self.command_id)
            .field("prompt", &format_args!("<{} bytes>", self.prompt.len()))
            .finish_non_exhaustive()
    }
}

/// `turns.get`: by turn id, or by the command id of the `turns.submit` that
/// created it (exactly one): finds the turn of a lost answer without
/// resending the prompt.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnsGet {
    /// Turn id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// The submit's command id (the caller's own principal and application).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_id: Option<String>,
}

/// `turns.cancel`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnsCancel {
    /// Turn id.
    pub turn_id: String,
    /// Makes the call idempotent (replays the first answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_id: Option<String>,
}

/// `turns.list`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnsList {
    /// Only turns of this thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// Only turns in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<crate::TurnState>,
    /// At most this many (the server bounds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `turns.resolve`: the owner's confirmation, recorded with an audit event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnsResolve {
    /// Turn id.
    pub turn_id: String,
    /// `failed` or `cancelled`.
    #[serde(rename = "as")]
    pub resolve_as: crate::ResolveAs,
    /// Must be `true`: the owner confirms the agent is no longer running it.
    #[serde(default)]
    pub confirm_stopped: bool,
    /// Makes the call idempotent (replays the first answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_id: Option<String>,
}

/// `journal.replay`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JournalReplay {
    /// One thread (cursor: `threadSeq`); absent = every thread of the
    /// session's principal and application (cursor: `seq`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// Return events after this cursor (0 = from the start).
    #[serde(default)]
    pub after: u64,
    /// Page size (the server bounds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `journal.subscribe`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JournalSubscribe {
    /// As for replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// Replay events after this cursor before going live; absent = live only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
    /// Only attention events ([`crate::AttentionKind::of`]), each naming its
    /// kinds; with `permissions:respond-any` over every application of the
    /// session's principal. The cursor stays the journal's `seq`, so it
    /// resumes gap-free like any subscription.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub attention: bool,
}

/// `journal.unsubscribe`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JournalUnsubscribe {
    /// The id `journal.subscribe` returned.
    pub subscription: String,
}

/// `permissions.list`: pending requests of the session's threads, optionally
/// of one thread or one turn.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PermissionsList {
    /// Only requests of this thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// Only requests of this turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
}

/// `permissions.respond`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PermissionsRespond {
    /// The turn that asked.
    pub turn_id: String,
    /// The pending request's id.
    pub request_id: String,
    /// One of the exact option ids the agent offered.
    pub option_id: String,
    /// Makes the call idempotent: a lost answer is asked for again with the
    /// same id and replays `accepted` instead of `not_found`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_id: Option<String>,
}

/// `sessions.revoke`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionsRevoke {
    /// Session to revoke; absent = the caller's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// `status` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusResult {
    /// `lapis-ai-controller/1`.
    pub protocol: String,
    /// Version of the running build.
    pub version: String,
    /// Build identity.
    pub build: crate::BuildInfo,
    /// Release snapshot digest, when running from an installed snapshot.
    pub snapshot: Option<String>,
    /// Server process id.
    pub pid: u32,
    /// Seconds since the server started.
    pub uptime_seconds: u64,
    /// Scheduler queue.
    pub queue: QueueStatus,
    /// Workspaces with a turn in flight.
    pub running_workspaces: Vec<String>,
    /// Workspaces fenced by a turn with an unknown outcome.
    pub fenced_workspaces: Vec<String>,
    /// Present while the controller cannot write its store: `disk_full`,
    /// `read_only` or `io_error`. Reads keep working; writes resume by
    /// themselves when the condition clears.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_fault: Option<String>,
    /// Agent processes running now.
    #[serde(default)]
    pub live_agents: usize,
    /// Turns in flight (preparing, dispatched, running), oldest first.
    #[serde(default)]
    pub running_turns: Vec<StatusTurn>,
    /// The turns fencing their workspaces, each until its owner resolves it
    /// (`turns.resolve`).
    #[serde(default)]
    pub fences: Vec<StatusTurn>,
    /// The durable permission inbox: how many requests wait for an
    /// answer, and the oldest of them.
    #[serde(default)]
    pub permissions: InboxSummary,
    /// Mutating tool calls whose effect is unknown, each on its turn
    /// (never re-invoked; those turns' continuations are refused).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown_tool_effects: Vec<crate::UnknownToolEffect>,
    /// The last configuration reload since start, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reload: Option<ReloadResult>,
    /// The engine's live agents and running turns with their limits
    /// (absent when the server runs no engine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents: Option<EngineCounters>,
}

/// The engine's counters and limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EngineCounters {
    /// Agent processes the engine keeps alive (running a turn or idle).
    pub live: usize,
    /// Of those, idle (kept for their thread's next turn).
    pub idle: usize,
    /// `server.maxLiveAgents`.
    pub max_live: usize,
    /// Turns running now.
    pub running_turns: usize,
    /// `server.maxRunningTurns`.
    pub max_running_turns: usize,
}

/// A turn as `status` shows it: which, where, in what state since when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusTurn {
    /// Turn id.
    pub turn: String,
    /// Its thread.
    pub thread: String,
    /// Its workspace.
    pub workspace: String,
    /// The application of its thread (the one that submitted it). A fence
    /// of another application is resolved by an operator session holding
    /// `turns:resolve-any`.
    #[serde(default)]
    pub application: String,
    /// Its state (`running`, `submission_unknown`, …).
    pub state: crate::TurnState,
    /// When it entered that state (ms since epoch; RFC 3339 UTC on the wire).
    #[serde(with = "crate::time::rfc3339")]
    pub since: i64,
}

/// `config.reload` result, also `status.lastReload`: what a reload did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReloadResult {
    /// When it ran (ms since epoch; RFC 3339 UTC on the wire).
    #[serde(with = "crate::time::rfc3339")]
    pub at: i64,
    /// Whether the new config was applied (false: refused, old one kept).
    pub applied: bool,
    /// Why it was refused: a stable code (`invalid_config`, `conflict`,
    /// `workspace_alias`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Why it was refused, naming the field, never a value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Provider names in effect afterwards (including `echo`).
    pub providers: Vec<String>,
    /// Workspaces this reload registered.
    pub workspaces_added: Vec<String>,
    /// Changed parts that only a restart applies (`tokens`, `server`,
    /// `controllerHome`).
    pub restart_needed: Vec<String>,
}

/// Queue depth and bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueStatus {
    /// Turns waiting.
    pub depth: usize,
    /// The bound (`queue_full` beyond it).
    pub capacity: usize,
}

/// Results of mutations that carry a receipt: the record, and whether an
/// earlier identical command (same command id, same input) produced it.
/// Results are read leniently (no `deny_unknown_fields`) so a server may add
/// members beside them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceResult {
    /// The workspace.
    pub workspace: crate::Workspace,
    /// True when the command id was seen before.
    #[serde(default)]
    pub replayed: bool,
}

/// `workspaces.remove` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceRemoved {
    /// The workspace as it was registered.
    pub workspace: crate::Workspace,
    /// Its threads, which stay readable (`threads.get`, `journal.replay`)
    /// but take no new turns.
    pub threads: u64,
    /// True when it had been removed already (a retry).
    #[serde(default)]
    pub replayed: bool,
}

/// `workspaces.list` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspacesResult {
    /// Every registered workspace.
    pub workspaces: Vec<crate::Workspace>,
    /// The turns fencing some of them (as in `status`): which turn, its
    /// thread and application, and since when.
    #[serde(default)]
    pub fences: Vec<StatusTurn>,
}

/// `threads.create` / `threads.configure` result (`replayed` also for
/// `threads.configure` with a command id seen before).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadResult {
    /// The thread.
    pub thread: crate::Thread,
    /// True when the command id was seen before.
    #[serde(default)]
    pub replayed: bool,
}

/// `threads.reserve`: a thread id for this application, before its thread
/// exists, so its ports can be set up for that id first (and set up again
/// for the same id after a reconnect). Idempotent by command id: the same
/// command id always answers the same id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadsReserve {
    /// Makes the reservation idempotent (required).
    pub command_id: String,
}

/// `threads.reserve` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadReserved {
    /// The reserved id (`thr_…`), for `threads.create`'s `threadId`.
    pub thread_id: String,
    /// True when the command id was seen before.
    #[serde(default)]
    pub replayed: bool,
}

/// `threads.list` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadsResult {
    /// The caller's threads.
    pub threads: Vec<crate::Thread>,
}

/// `turns.submit` / `turns.continue` / `turns.get` / `turns.cancel` /
/// `turns.resolve` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnResult {
    /// The turn.
    pub turn: crate::Turn,
    /// Whether the command id was seen before: present (true or false) in
    /// the results of `turns.submit`, `turns.continue`, `turns.cancel` and
    /// `turns.resolve`; absent from `turns.get`'s, which carries no receipt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replayed: Option<bool>,
    /// `turns.get` only: the turn's mutating tool calls whose effect is
    /// unknown (never re-invoked; its continuation is refused).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown_tool_effects: Vec<crate::UnknownToolEffect>,
}

/// `permissions.list` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionsResult {
    /// The pending requests, soonest deadline first.
    pub requests: Vec<crate::PendingRequest>,
}

/// `status.permissions`: the pending permission requests.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxSummary {
    /// Requests waiting for an answer, across every workspace.
    pub pending: u64,
    /// The one waiting longest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest: Option<OldestRequest>,
}

/// The pending permission request that has waited longest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OldestRequest {
    /// Its turn.
    pub turn_id: String,
    /// Its id within the turn.
    pub request_id: String,
    /// When it was journaled (RFC 3339 UTC with milliseconds).
    #[serde(with = "crate::time::rfc3339")]
    pub requested_at: i64,
}

/// `turns.list` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnsResult {
    /// The turns.
    pub turns: Vec<crate::Turn>,
}

/// `journal.subscribe` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscribeResult {
    /// Subscription id, named in every `journal.event` notification.
    pub subscription: String,
}

/// `journal.unsubscribe` result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnsubscribeResult {
    /// Whether the subscription was live.
    pub stopped: bool,
}

/// `permissions.respond` result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RespondResult {
    /// Always true: the answer reached the waiting turn.
    pub accepted: bool,
    /// True when the command id was seen before.
    #[serde(default)]
    pub replayed: bool,
}

/// `sessions.revoke` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevokeResult {
    /// Id of the revoked session.
    pub revoked: String,
}
