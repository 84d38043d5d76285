//! Parameters of every method after `hello`. Each refuses unknown fields, so
//! a typo is an `invalid_request`, not a silently ignored option; every
//! closed vocabulary (approval, retention, turn state, resolution) is an
//! enum, so an unknown value is refused the same way, by the decoder, with
//! a message naming the accepted spellings (`unknown variant `x`, expected
//! `ask` or `allow-all``), before any handler runs.
//!
//! Results are the core's records serialized as they are (camelCase), wrapped
//! in a named member (`{"thread": …}`) so fields can be added beside them.
//!
//! One file per resource: `workspaces`, `threads`, `turns` (with their
//! permission requests), `journal`, `controller` (status, reload, provider
//! checks, sessions); every type is re-exported here, so callers name
//! `params::X` whatever file holds it.

use serde::{Deserialize, Serialize};

mod controller;
mod journal;
mod threads;
mod turns;
mod workspaces;

pub use controller::{
    BudgetReset, BudgetSpend, BudgetStatus, BudgetsReset, EngineCounters, ProcessCounts,
    ProvidersCheck, ProvidersChecked, QueueStatus, ReloadResult, RevokeResult, SessionsRevoke,
    StatusResult, StatusTurn, StoreCounts, TelemetryStatus, UsageStatus, WorkCounts,
};
pub use journal::{
    JournalReplay, JournalSubscribe, JournalUnsubscribe, SubscribeResult, UnsubscribeResult,
};
pub use threads::{
    McpRegister, McpRegisterResult, ThreadRef, ThreadReserved, ThreadResult, ThreadsAttach,
    ThreadsConfigure, ThreadsCreate, ThreadsList, ThreadsReserve, ThreadsResult,
};
pub use turns::{
    InboxSummary, OldestRequest, PermissionsList, PermissionsRespond, PermissionsResult,
    RespondResult, TurnResult, TurnsCancel, TurnsContinue, TurnsGet, TurnsList, TurnsResolve,
    TurnsResult, TurnsSubmit,
};
pub use workspaces::{
    WorkspaceRemoved, WorkspaceResult, WorkspacesAdd, WorkspacesRemove, WorkspacesResult,
    WorktreeSpec,
};

pub use crate::deletion::ThreadDeletedResult;
pub use crate::import::{ThreadImportedResult, ThreadsImport};

/// Methods without parameters (`status`, `workspaces.list`): `{}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}
