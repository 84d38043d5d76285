//! Worktree workspaces: a linked git worktree of a repository, created
//! for one workspace id so two agents work on one repository at once
//! (the one-turn-per-workspace rule holds per worktree).
//!
//! What must stay true: a worktree is created only at a path that does not
//! exist yet, and removed only when asked, refusing a tree with changes or
//! untracked files unless forced; only a *linked* worktree is ever removed
//! (never a main checkout); the user's main checkout, index and HEAD are
//! never touched (`git worktree add` writes the new worktree's own HEAD
//! and index under `.git/worktrees/<name>` and, with a new branch, one
//! ref).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::command::{self, GitError};

/// How long a worktree's git commands may take (checking out a large tree
/// is slower than a snapshot).
pub(crate) const WORKTREE_TIMEOUT: Duration = Duration::from_secs(120);

/// The directory under the controller home that holds worktrees when no
/// root is configured (named in the protocol crate: the installer's purge
/// removes them).
pub(crate) use lapis_protocol::home::WORKTREES_DIR;

/// What to create.
#[derive(Debug, Clone)]
pub(crate) struct NewWorktree {
    /// The repository (any directory of its main checkout or a worktree).
    pub(crate) of: PathBuf,
    /// Where the worktree goes (must not exist).
    pub(crate) path: PathBuf,
    /// The branch to check out: an existing one, or a new one made from
    /// `from` (default `HEAD`).
    pub(crate) branch: String,
    /// The commit a new branch starts at.
    pub(crate) from: Option<String>,
}

/// Why a worktree was not created or removed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WorktreeError {
    /// Git refused or could not run.
    #[error(transparent)]
    Git(#[from] GitError),
    /// The target path exists already.
    #[error("{0} exists already")]
    Exists(PathBuf),
    /// The workspace is not a linked worktree (removing it would delete a
    /// checkout the controller did not make).
    #[error("{0} is not a linked git worktree")]
    NotLinked(PathBuf),
    /// The worktree has changes or untracked files.
    #[error("{path} has uncommitted changes or untracked files ({count} paths)")]
    Dirty {
        /// The worktree.
        path: PathBuf,
        /// How many paths `git status` lists.
        count: usize,
    },
}

/// Creates the worktree; returns its path.
pub(crate) async fn add(w: &NewWorktree) -> Result<PathBuf, WorktreeError> {
    if w.path.exists() {
        return Err(WorktreeError::Exists(w.path.clone()));
    }
    if let Some(parent) = w.path.parent() {
        std::fs::create_dir_all(parent).map_err(GitError::Io)?;
    }
    let target = w.path.to_string_lossy().into_owned();
    let exists = command::run(
        &w.of,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{}", w.branch),
        ],
        &[],
        WORKTREE_TIMEOUT,
    )
    .await
    .is_ok();
    let from = w.from.clone().unwrap_or_else(|| "HEAD".to_owned());
    let args: Vec<&str> = if exists {
        vec!["worktree", "add", "--quiet", &target, &w.branch]
    } else {
        vec![
            "worktree", "add", "--quiet", "-b", &w.branch, &target, &from,
        ]
    };
    command::run(&w.of, &args, &[], WORKTREE_TIMEOUT).await?;
    Ok(w.path.clone())
}

/// The git dir and common dir of the work tree at `path`.
async fn git_dirs(path: &Path) -> Result<(PathBuf, PathBuf), GitError> {
    let args = [
        "rev-parse",
        "--path-format=absolute",
        "--git-dir",
        "--git-common-dir",
    ];
    let out = command::run(path, &args, &[], WORKTREE_TIMEOUT).await?;
    let text = String::from_utf8_lossy(&out);
    let mut lines = text.lines();
    match (lines.next(), lines.next()) {
        (Some(a), Some(b)) => Ok((PathBuf::from(a), PathBuf::from(b))),
        _ => Err(GitError::NotRepository),
    }
}

/// The main checkout of the repository the work tree at `path` belongs to
/// (the parent of its common git dir).
pub(crate) async fn repository_of(path: &Path) -> Result<PathBuf, GitError> {
    let (_, common) = git_dirs(path).await?;
    Ok(common.parent().map(Path::to_path_buf).unwrap_or(common))
}

/// The repository's common git dir (where `git worktree add` writes the
/// new branch and the worktree's administrative files) for the work tree
/// at `path`, canonical: what `path`'s `.git` (a directory, or a file
/// naming one anywhere) really points at.
pub(crate) async fn common_dir_of(path: &Path) -> Result<PathBuf, GitError> {
    let (_, common) = git_dirs(path).await?;
    Ok(common.canonicalize().unwrap_or(common))
}

/// Whether `path` is a linked worktree (its git dir is not its repository's
/// common dir).
pub(crate) async fn is_linked(path: &Path) -> Result<bool, GitError> {
    let (git_dir, common) = git_dirs(path).await?;
    Ok(git_dir != common)
}

/// Refuses a linked worktree with changes or untracked files unless
/// `force`; refuses anything that is not a linked worktree.
pub(crate) async fn check_removable(path: &Path, force: bool) -> Result<(), WorktreeError> {
    if !is_linked(path).await.unwrap_or(false) {
        return Err(WorktreeError::NotLinked(path.to_path_buf()));
    }
    if force {
        return Ok(());
    }
    let out = command::run(
        path,
        &["status", "--porcelain", "-z"],
        &[],
        WORKTREE_TIMEOUT,
    )
    .await?;
    let count = out.split(|&b| b == 0).filter(|p| !p.is_empty()).count();
    if count > 0 {
        return Err(WorktreeError::Dirty {
            path: path.to_path_buf(),
            count,
        });
    }
    Ok(())
}

/// Removes a linked worktree (checked by [`check_removable`] first) and
/// its administrative files; its branch stays.
pub(crate) async fn remove(path: &Path) -> Result<(), WorktreeError> {
    // Run from the repository, not from inside the tree being removed.
    let (_, common) = git_dirs(path).await?;
    let target = path.to_string_lossy().into_owned();
    let args = ["worktree", "remove", "--force", &target];
    command::run(&common, &args, &[], WORKTREE_TIMEOUT).await?;
    Ok(())
}
