//! Which repository a workspace path is in ([`Repo`]): found with a few
//! `stat` calls first ([`may_be_git`]), then one `git rev-parse`.
//!
//! What must stay true: a plain directory costs no git process; a bare
//! repository or a path inside `.git` is `not_git` (no working tree).

use std::path::{Path, PathBuf};
use std::time::Duration;

use lapis_protocol::snapshot::SnapshotSkipped;

use super::{Skip, skip};
use crate::git::command;

/// The repository a workspace path belongs to.
#[derive(Debug)]
pub(super) struct Repo {
    /// The top of its working tree.
    pub(super) toplevel: PathBuf,
    /// The repository's own object directory (read as an alternate).
    pub(super) objects: PathBuf,
    /// The repository's index (copied to seed the private one).
    pub(super) index: PathBuf,
    /// Its `info/exclude`, `info/attributes`, `config` and
    /// `config.worktree` (whether they exist or not).
    pub(super) rules: Vec<PathBuf>,
}

/// Whether `path` may be inside a git work tree: some ancestor holds a
/// `.git` entry. A few `stat` calls, so a turn in a plain directory pays
/// no git process; `false` is final (git finds repositories the same way,
/// and the controller's own `GIT_DIR` never reaches it).
pub(crate) fn may_be_git(path: &Path) -> bool {
    path.ancestors()
        .any(|dir| std::fs::symlink_metadata(dir.join(".git")).is_ok())
}

/// The repository `path` is in; a plain directory is `not_git` at once,
/// without a git process (every snapshot and diff comes through here).
pub(super) async fn discover(path: &Path, timeout: Duration) -> Result<Repo, Skip> {
    if !path.is_dir() {
        return Err(Skip(SnapshotSkipped::Failed));
    }
    if !may_be_git(path) {
        return Err(Skip(SnapshotSkipped::NotGit));
    }
    let args = [
        "rev-parse",
        "--path-format=absolute",
        "--is-inside-work-tree",
        "--git-path",
        "objects",
        "--git-path",
        "index",
        "--git-path",
        "info/exclude",
        "--git-path",
        "info/attributes",
        "--git-path",
        "config",
        "--git-path",
        "config.worktree",
        // Not `--show-toplevel`, which fails inside `.git`.
        "--show-cdup",
    ];
    let out = command::run(path, &args, &[], timeout)
        .await
        .map_err(skip)?;
    let text = String::from_utf8_lossy(&out);
    let lines: Vec<&str> = text.lines().collect();
    match lines.as_slice() {
        ["true", objects, index, rules @ .., cdup] if rules.len() == 4 => Ok(Repo {
            toplevel: up(path, cdup),
            objects: PathBuf::from(objects),
            index: PathBuf::from(index),
            rules: rules.iter().map(PathBuf::from).collect(),
        }),
        // A bare repository or inside `.git`: no working tree to snapshot.
        _ => Err(Skip(SnapshotSkipped::NotGit)),
    }
}

/// `path` moved up by `cdup` (`git rev-parse --show-cdup`: `../` once per
/// level, empty at the top).
fn up(path: &Path, cdup: &str) -> PathBuf {
    let levels = Path::new(cdup)
        .components()
        .filter(|c| matches!(c, std::path::Component::ParentDir))
        .count();
    path.ancestors().nth(levels).unwrap_or(path).to_path_buf()
}
