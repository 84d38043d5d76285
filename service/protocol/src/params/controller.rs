//! The controller itself: `status`, `config.reload`, `providers.check` and
//! `sessions.revoke`, params and results (see the module docs of
//! `params`).

use serde::{Deserialize, Serialize};

use super::InboxSummary;

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
    /// Also run a policy probe: a turn in a scratch workspace under the
    /// controller home asking the agent to write a file, whose permission
    /// is rejected; the verdict is recorded for the provider's current
    /// definition (implies `session`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub policy: bool,
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
    /// The recorded policy probes (`providers check --policy`), one per
    /// provider definition probed, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policy_probes: Vec<crate::probe::PolicyRecord>,
    /// The configuration's `defaultProvider` in effect (the provider
    /// `ask` uses without `--provider`; absent: `echo`), so a client on
    /// another host asks the controller instead of reading its own config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_provider: Option<String>,
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
    /// What turns used, in total and by workspace and application (from
    /// the turns' records, so it survives restarts).
    #[serde(default)]
    pub usage: UsageStatus,
    /// Each configured budget with what was spent against it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<BudgetStatus>,
    /// What the controller did since it started: its store's commits and
    /// statements, the processes it started. Read before this `status`
    /// call's own reads, so two calls in a row differ by exactly the first
    /// one's reads (the turn path's guards compare these per turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<WorkCounts>,
    /// Per workspace (configured, or with snapshots since start): its
    /// `evidence` setting and what its turns' snapshots cost (absent when
    /// the server runs no engine).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<crate::snapshot::EvidenceCost>,
    /// Where OpenTelemetry traces and metrics go (absent when `telemetry`
    /// is off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<TelemetryStatus>,
    /// The `history` retention policy and its last pass (absent when no
    /// `history` limit is configured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<crate::HistoryStatus>,
}

/// `status`'s `telemetry`: the OTLP/HTTP endpoints data is exported to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TelemetryStatus {
    /// Where traces go.
    pub traces: String,
    /// Where metrics go.
    pub metrics: String,
    /// The `service.name` the data is exported under.
    #[serde(default)]
    pub service_name: String,
}

/// What the controller did since it started (`status`'s `work`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkCounts {
    /// The store's commits, statements and rows.
    pub store: StoreCounts,
    /// The child processes started, by purpose.
    pub processes: ProcessCounts,
}

/// A store's durable commits (each one fsync), the pages they wrote, the
/// SQL statements its writer and readers started, and the rows those
/// returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreCounts {
    /// Transactions committed.
    pub commits: u64,
    /// Pages the writer wrote (WAL frames, one per dirty page per commit);
    /// 0 from a controller that does not count them.
    #[serde(default)]
    pub write_pages: u64,
    /// Statements the write connection started.
    pub write_statements: u64,
    /// Rows those returned.
    pub write_rows: u64,
    /// Statements the read connections started.
    pub read_statements: u64,
    /// Rows those returned.
    pub read_rows: u64,
}

/// Child processes started, by purpose.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessCounts {
    /// ACP agents (turns, probes, smoke turns).
    pub agents: u64,
    /// git commands (evidence snapshots, worktrees).
    pub git: u64,
    /// Notification commands.
    pub notify: u64,
    /// Worktree hooks.
    pub hooks: u64,
}

/// A budget and its spending (`status`, `budgets show`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetStatus {
    /// Its key (`budgets reset KEY`).
    pub key: String,
    /// The budget as configured.
    pub budget: crate::config::Budget,
    /// Spending counts from here (period start or last reset; ms since
    /// epoch, RFC 3339 UTC on the wire), `null` for all time.
    #[serde(default, with = "crate::time::rfc3339_opt")]
    pub since: Option<i64>,
    /// What was spent: one entry for a budget of one thread, workspace or
    /// application (or all), one per thread, workspace or application
    /// with spending for a budget covering each of them.
    pub spent: Vec<BudgetSpend>,
}

/// Spending against one budget.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetSpend {
    /// Which thread, workspace or application (`null` for `per: "all"`).
    pub id: Option<String>,
    /// Tokens spent.
    pub tokens: u64,
    /// Cost spent in the budget's currency.
    pub cost: crate::usage::Amount,
    /// The budget is spent: turns it covers fail `budget_exhausted`.
    pub exhausted: bool,
}

/// `budgets.reset` params.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BudgetsReset {
    /// The budget's key (see `status`'s `budgets`).
    pub key: String,
}

/// `budgets.reset` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetReset {
    /// The key.
    pub key: String,
    /// Spending counts from now (RFC 3339 UTC on the wire).
    #[serde(with = "crate::time::rfc3339")]
    pub reset_at: i64,
}

/// `status`'s usage: totals overall, by workspace id and by application.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageStatus {
    /// Every turn with a usage record.
    pub total: crate::usage::UsageTotals,
    /// By workspace id.
    #[serde(default)]
    pub workspaces: std::collections::BTreeMap<String, crate::usage::UsageTotals>,
    /// By application.
    #[serde(default)]
    pub applications: std::collections::BTreeMap<String, crate::usage::UsageTotals>,
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

/// `sessions.revoke` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevokeResult {
    /// Id of the revoked session.
    pub revoked: String,
}
