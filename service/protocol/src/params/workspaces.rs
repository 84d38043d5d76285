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
    /// Project directory (absolute). With `worktree`: where the new
    /// worktree goes (it must not exist); empty: `<worktree root>/<id>`.
    #[serde(default)]
    pub path: String,
    /// Create a linked git worktree of a repository and register it (the
    /// worktree is its own workspace: its turns run beside the main
    /// checkout's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeSpec>,
    /// Makes the call idempotent: a receipt of (principal, application,
    /// command id) replays the first answer; other input is `conflict`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_id: Option<String>,
}

/// `workspaces.add`'s `worktree`: which repository, which branch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorktreeSpec {
    /// A directory of the repository (absolute; its main checkout or any
    /// worktree).
    pub of: String,
    /// The branch to check out: an existing branch, or a new one; default
    /// `lapis/<workspace id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The commit a new branch starts at (default the repository's `HEAD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// `workspaces.remove`: unregisters a workspace added at run time. Its
/// threads and their journal stay (readable, verifiable); nothing new can
/// start there. Refused with `workspace_busy` while it has a queued or
/// claimed turn, `workspace_fenced` while a turn fences it, and
/// `invalid_request` for a workspace the configuration declares.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkspacesRemove {
    /// Workspace id.
    pub id: String,
    /// Also delete the workspace's directory when it is a linked git
    /// worktree (`invalid_request` otherwise; nothing is removed then).
    /// A worktree with uncommitted changes or untracked files is refused
    /// (`workspace_dirty`) unless `force`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delete_worktree: bool,
    /// With `deleteWorktree`: delete a worktree with changes too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
    /// Delete each of its threads first, as `threads.delete` does (each
    /// leaves its content-free receipt), then remove the workspace.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub purge: bool,
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
    /// True when its worktree was deleted (`deleteWorktree`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub worktree_deleted: bool,
    /// Threads deleted first (`purge`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub threads_deleted: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
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
