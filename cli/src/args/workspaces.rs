//! The arguments of `workspaces`. Declarations only; `commands/` does the
//! work.

use std::path::PathBuf;

use clap::Subcommand;
use clap_complete::engine::ArgValueCandidates;

use super::candidates::Candidates;
use super::{CommandIdArg, JsonArg, ListArgs};

#[derive(Debug, Subcommand)]
pub(crate) enum WorkspacesCommand {
    /// Register a project directory under an id
    ///
    /// With `--worktree-of REPO`, the controller creates a linked git
    /// worktree of REPO (at DIR, else under the config's `worktrees.root` or
    /// the controller home's `worktrees/`) and registers it as its own
    /// workspace, so its turns run beside the main checkout's.
    Add {
        /// Workspace id.
        id: String,
        /// Project directory (with `--worktree-of`: where the worktree goes,
        /// which must not exist).
        #[arg(required_unless_present = "worktree_of")]
        dir: Option<PathBuf>,
        /// Create a git worktree of this repository and register it.
        #[arg(long, value_name = "REPO")]
        worktree_of: Option<PathBuf>,
        /// The worktree's branch: an existing one, or a new one (default
        /// `lapis/ID`).
        #[arg(long, value_name = "NAME", requires = "worktree_of")]
        branch: Option<String>,
        /// The commit a new branch starts at (default the repository's HEAD).
        #[arg(long, value_name = "REF", requires = "worktree_of")]
        from: Option<String>,
        #[command(flatten)]
        cmd: CommandIdArg,
        #[command(flatten)]
        out: JsonArg,
    },
    /// List registered workspaces.
    List(ListArgs),
    /// Unregister a workspace added at run time
    ///
    /// Its threads and journal stay readable but take no new turns; adding
    /// the same id for the same directory brings it back. Refused while a
    /// turn is queued, running or fenced there, and for a workspace the
    /// configuration declares. A worktree workspace's directory is deleted
    /// only with `--delete-worktree`, refusing one with changes or untracked
    /// files unless `--force`. With `--purge` its threads are deleted first
    /// (each leaves its content-free receipt in the journal).
    Remove {
        /// Workspace id.
        #[arg(add = ArgValueCandidates::new(Candidates::WorkspaceIds))]
        id: String,
        /// Also delete its git worktree (only a linked worktree).
        #[arg(long)]
        delete_worktree: bool,
        /// With `--delete-worktree`: delete it even with changes.
        #[arg(long, requires = "delete_worktree")]
        force: bool,
        /// Delete each of its threads first, as `threads delete` does
        /// (owner's token only), then remove the workspace.
        #[arg(long)]
        purge: bool,
        #[command(flatten)]
        out: JsonArg,
    },
}
