//! Worktree workspaces (`workspaces.add` with `worktree`,
//! `workspaces.remove` with `deleteWorktree`): see [`crate::git::worktree`].
//!
//! What must stay true: the repository a worktree is made of must lie
//! under a workspace root the configuration grants, like any workspace,
//! and so must the git dir its `.git` points at (where the branch and the
//! worktree's administrative files are written)
//! (the worktree itself goes under the controller home, or to a path the
//! roots grant); a worktree the registration then refuses is removed
//! again, so a refused call leaves nothing behind; a worktree is deleted
//! only after its workspace was removed (the store refuses while a turn is
//! queued, running or fenced there), and only when it is a linked worktree
//! without changes (or `force`).

use std::path::{Path, PathBuf};

use crate::auth::AuthSession;
use crate::git::snapshot::SnapshotDir;
use crate::git::worktree::{self, NewWorktree, WORKTREES_DIR, WorktreeError};
use crate::git::worktree_hook::{self, HookSubject};
use crate::store::canonical_workspace_dir;
use lapis_protocol::params::{WorkspaceResult, WorktreeSpec};
use lapis_protocol::{ErrorCode, RpcError};

use super::super::context::ServerContext;
use super::{actor, outside_roots, store_err};

fn invalid(msg: impl Into<String>) -> RpcError {
    RpcError::new(ErrorCode::InvalidRequest, msg)
}

/// A worktree refusal on the wire.
pub(super) fn worktree_err(e: WorktreeError) -> RpcError {
    match e {
        WorktreeError::Dirty { path, count } => RpcError::new(
            ErrorCode::WorkspaceDirty,
            format!(
                "{} has {count} changed or untracked path(s); commit or discard them, \
                 or remove it with `--force`",
                path.display()
            ),
        )
        .with_data("paths", count.into()),
        WorktreeError::NotLinked(path) => invalid(format!(
            "{} is not a linked git worktree: nothing was deleted (remove the workspace \
             without `--delete-worktree`)",
            path.display()
        )),
        other => invalid(other.to_string()),
    }
}

/// `workspaces.add` with `worktree`: creates the worktree, then registers it.
pub(super) async fn add(
    ctx: &ServerContext,
    session: &AuthSession,
    id: &str,
    path: &str,
    spec: &WorktreeSpec,
    command_id: Option<&str>,
) -> Result<WorkspaceResult, RpcError> {
    let of = Path::new(&spec.of);
    if !of.is_absolute() {
        return Err(invalid("`worktree.of` must be an absolute path"));
    }
    let repo = canonical_workspace_dir(of).map_err(store_err)?;
    let roots = ctx.reload.roots();
    if !roots.grants(Path::new(&repo)) {
        return Err(outside_roots(&repo));
    }
    // The repository git writes to is the one `.git` names, which may lie
    // anywhere (a `.git` file of a worktree or submodule): it must be
    // granted too, or a directory under the roots would make a branch and
    // a worktree in a repository outside them.
    let common = worktree::common_dir_of(Path::new(&repo))
        .await
        .map_err(|e| worktree_err(WorktreeError::Git(e)))?;
    if !roots.grants(&common) {
        return Err(outside_roots(&common.to_string_lossy()));
    }
    let home = ctx.core.store.options().home.clone();
    let config = ctx.reload.worktrees();
    let target = if path.is_empty() {
        // The owner's configured root, else the controller home's.
        let user_home = std::env::var_os("HOME").map(PathBuf::from);
        config
            .root_dir(user_home.as_deref())
            .unwrap_or_else(|| home.join(WORKTREES_DIR))
            .join(id)
    } else {
        let p = PathBuf::from(path);
        if !p.is_absolute() {
            return Err(invalid("workspace path must be absolute"));
        }
        let parent = p.parent().map(canonical_parent).unwrap_or_default();
        if !roots.grants(&parent) {
            return Err(outside_roots(&parent.to_string_lossy()));
        }
        p
    };
    let actor = actor(session);
    let command = command_id.map(|c| (&actor, c));
    // A retry of a call that created it: the registration answers.
    if target.exists() {
        let canonical = canonical_workspace_dir(&target).map_err(store_err)?;
        let known = ctx.core.store.list_workspaces().await.map_err(store_err)?;
        if known.iter().any(|w| w.id == id && w.path == canonical) {
            let receipt = ctx
                .core
                .store
                .add_workspace_as(id, canonical, command)
                .await
                .map_err(store_err)?;
            return Ok(WorkspaceResult {
                workspace: receipt.value,
                replayed: receipt.replayed,
            });
        }
    }
    let new = NewWorktree {
        of: PathBuf::from(&repo),
        path: target.clone(),
        branch: spec.branch.clone().unwrap_or_else(|| format!("lapis/{id}")),
        from: spec.from.clone(),
    };
    worktree::add(&new).await.map_err(worktree_err)?;
    if let Some(setup) = &config.setup {
        let subject = HookSubject {
            workspace: id,
            worktree: &target,
            repository: Path::new(&repo),
        };
        if let Err(failure) = worktree_hook::run("setup", setup, subject).await {
            tracing::warn!(workspace = %id, error = %failure, "worktree setup failed; removing the worktree");
            if let Err(undo) = worktree::remove(&target).await {
                tracing::warn!(error = %undo, "removing a worktree whose setup failed failed");
            }
            return Err(invalid(failure.to_string()).with_data("hook", "setup".into()));
        }
    }
    let registered = match canonical_workspace_dir(&target) {
        Ok(canonical) => {
            ctx.core
                .store
                .add_workspace_as(id, canonical, command)
                .await
        }
        Err(e) => Err(e),
    };
    match registered {
        Ok(receipt) => {
            tracing::info!(workspace = %id, repo = %repo, "worktree workspace created");
            Ok(WorkspaceResult {
                workspace: receipt.value,
                replayed: receipt.replayed,
            })
        }
        Err(e) => {
            // Nothing is left behind by a refused registration.
            if let Err(undo) = worktree::remove(&target).await {
                tracing::warn!(error = %undo, "removing a worktree whose registration was refused failed");
            }
            Err(store_err(e))
        }
    }
}

/// A not-yet-existing path's parent, canonical where it exists.
fn canonical_parent(parent: &Path) -> PathBuf {
    parent
        .canonicalize()
        .unwrap_or_else(|_| parent.to_path_buf())
}

/// Before `workspaces.remove` with `deleteWorktree`: the workspace's path
/// when it is registered and removable (`None`: not registered, the store
/// answers).
pub(super) async fn before_remove(
    ctx: &ServerContext,
    id: &str,
    force: bool,
) -> Result<Option<PathBuf>, RpcError> {
    let known = ctx.core.store.list_workspaces().await.map_err(store_err)?;
    let Some(ws) = known.into_iter().find(|w| w.id == id) else {
        return Ok(None);
    };
    let path = PathBuf::from(ws.path);
    worktree::check_removable(&path, force)
        .await
        .map_err(worktree_err)?;
    Ok(Some(path))
}

/// After the workspace was removed: deletes its worktree and its
/// snapshot state.
pub(super) async fn after_remove(
    ctx: &ServerContext,
    id: &str,
    path: &Path,
) -> Result<(), RpcError> {
    if let Some(teardown) = &ctx.reload.worktrees().teardown {
        let repository = worktree::repository_of(path).await.unwrap_or_default();
        let subject = HookSubject {
            workspace: id,
            worktree: path,
            repository: &repository,
        };
        // Logged, never blocking: the workspace is removed already.
        if let Err(failure) = worktree_hook::run("teardown", teardown, subject).await {
            tracing::warn!(workspace = %id, error = %failure, "worktree teardown failed; deleting the worktree anyway");
        }
    }
    worktree::remove(path).await.map_err(|e| {
        RpcError::new(
            ErrorCode::Internal,
            format!(
                "workspace `{id}` was removed but its worktree {} was not deleted ({e}); \
                 delete it with `git worktree remove`",
                path.display()
            ),
        )
    })?;
    let home = &ctx.core.store.options().home;
    if let Err(e) = SnapshotDir::new(home, id).remove() {
        tracing::warn!(workspace = %id, error = %e, "removing the workspace's snapshots failed");
    }
    Ok(())
}
