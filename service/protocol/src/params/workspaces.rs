//! `workspaces.add`, `workspaces.list` and `workspaces.remove`: params and
//! results (see the module docs of `params` for the rules every one keeps).

use serde::{Deserialize, Serialize};

use super::StatusTurn;

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
