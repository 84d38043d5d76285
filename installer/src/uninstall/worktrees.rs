//! The worktree workspaces inside a controller home (`worktrees/<id>`,
//! made by `workspaces add --worktree-of`), as `uninstall --purge` sees
//! them: which hold work that is nowhere else, and removing them through
//! git so their repositories keep no stale worktree entry.
//!
//! What must stay true: nothing here changes a repository but `git
//! worktree remove` of a linked worktree inside the home being purged (its
//! branch stays); a worktree whose state cannot be read counts as holding
//! work, so it is listed, never silently deleted.

use std::path::{Path, PathBuf};
use std::process::Command;

use lapis_protocol::home::WORKTREES_DIR;

/// A worktree whose deletion would lose work, or may.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorktreeAtRisk {
    /// The worktree.
    pub path: PathBuf,
    /// Its branch (`None`: detached, or unreadable).
    pub branch: Option<String>,
    /// Paths `git status` lists as changed or untracked.
    pub uncommitted: usize,
    /// Commits reachable from its HEAD that no other branch and no
    /// remote-tracking ref holds.
    pub unpushed: usize,
    /// Why git could not tell (its repository is gone, git is missing).
    pub unreadable: Option<String>,
}

impl std::fmt::Display for WorktreeAtRisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(b) = &self.branch {
            write!(f, " (branch {b})")?;
        }
        match &self.unreadable {
            Some(why) => write!(f, ": git cannot read it ({why})"),
            None => write!(
                f,
                ": {} uncommitted path(s), {} commit(s) on no other branch or remote",
                self.uncommitted, self.unpushed
            ),
        }
    }
}

/// Runs git in `dir` with a clean configuration of its own; stdout when it
/// succeeded.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|e| format!("git did not start: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(err.lines().next().unwrap_or("git failed").trim().to_owned())
    }
}

/// The git dir and common dir of the work tree at `dir`.
fn git_dirs(dir: &Path) -> Result<(PathBuf, PathBuf), String> {
    let out = git(
        dir,
        &[
            "rev-parse",
            "--path-format=absolute",
            "--git-dir",
            "--git-common-dir",
        ],
    )?;
    let mut lines = out.lines();
    match (lines.next(), lines.next()) {
        (Some(a), Some(b)) => Ok((PathBuf::from(a), PathBuf::from(b))),
        _ => Err("not a git work tree".into()),
    }
}

/// The worktree directories of the home (`worktrees/*`), sorted.
fn dirs(home: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(home.join(WORKTREES_DIR)) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// What deleting the worktree at `dir` would lose, if anything.
fn at_risk(dir: &Path) -> Option<WorktreeAtRisk> {
    let mut risk = WorktreeAtRisk {
        path: dir.to_path_buf(),
        branch: None,
        uncommitted: 0,
        unpushed: 0,
        unreadable: None,
    };
    let read = (|| -> Result<(), String> {
        let (git_dir, common) = git_dirs(dir)?;
        if git_dir == common {
            return Err("not a linked worktree".into());
        }
        let status = git(dir, &["status", "--porcelain", "-z"])?;
        risk.uncommitted = status.split('\0').filter(|p| !p.is_empty()).count();
        let branch = git(dir, &["symbolic-ref", "--quiet", "--short", "HEAD"])
            .ok()
            .map(|b| b.trim().to_owned())
            .filter(|b| !b.is_empty());
        let exclude = branch.as_deref().map(|b| format!("--exclude={b}"));
        let mut args = vec!["rev-list", "--count", "HEAD", "--not", "--remotes"];
        if let Some(e) = &exclude {
            args.push(e);
        }
        args.push("--branches");
        risk.unpushed = git(dir, &args)?.trim().parse().unwrap_or(0);
        risk.branch = branch;
        Ok(())
    })();
    if let Err(why) = read {
        risk.unreadable = Some(why);
    }
    let risky = risk.unreadable.is_some() || risk.uncommitted > 0 || risk.unpushed > 0;
    risky.then_some(risk)
}

/// The worktrees of `home` that hold work found nowhere else.
pub(crate) fn at_risk_in(home: &Path) -> Vec<WorktreeAtRisk> {
    dirs(home).iter().filter_map(|d| at_risk(d)).collect()
}

/// Removes every linked worktree of `home` through its repository (`git
/// worktree remove --force`, run from the common dir), so the repository
/// forgets it; returns those removed. One git cannot remove is left for
/// the purge's tree removal.
pub(crate) fn remove_all(home: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for dir in dirs(home) {
        let Ok((git_dir, common)) = git_dirs(&dir) else {
            continue;
        };
        if git_dir == common {
            continue;
        }
        let target = dir.to_string_lossy().into_owned();
        if git(
            &common,
            &["worktree", "remove", "--force", "--force", &target],
        )
        .is_ok()
        {
            removed.push(dir);
        }
    }
    removed
}
