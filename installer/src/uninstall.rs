//! `uninstall`: the reverse of `install`, for one instance.
//!
//! The launcher and the snapshots are shared by all instances, so they are
//! removed only when no other instance still has a service unit. The config
//! (which holds the tokens applications use) and the controller home (the
//! journal) are removed only with `--purge`, and never when the controller
//! home would be `HOME` itself or one of its ancestors, nor when it is a
//! non-empty directory without `controller.db` or the `controller.home`
//! marker (a `controllerHome` pointing at a project). The worktree
//! workspaces inside the home (`worktrees/<id>`) are removed through git
//! first, so their repositories keep no stale worktree entry, and a purge
//! that would delete uncommitted or unpushed work in them is refused,
//! listing them, unless confirmed (`--yes`), before anything is removed.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::config;
use crate::error::InstallError;
use crate::fsx::{self, FsError, LockMode};
use crate::install::lock_releases;
use crate::launcher::{self, LauncherState};
use crate::paths::Paths;
use crate::service;
use crate::snapshot;
use crate::staging;

mod worktrees;
pub use worktrees::WorktreeAtRisk;

/// What `uninstall` did.
#[derive(Clone, Debug, Default)]
pub struct UninstallReport {
    /// The unit file was removed.
    pub removed_unit: bool,
    /// A service manager warning (the removal went on).
    pub service_warning: Option<String>,
    /// The launcher was removed.
    pub removed_launcher: bool,
    /// What the launcher path holds that was left alone.
    pub kept_foreign_launcher: Option<String>,
    /// Snapshots removed.
    pub removed_snapshots: Vec<String>,
    /// Other instances whose units keep the shared launcher and snapshots.
    pub kept_for_instances: Vec<String>,
    /// Config removed (`--purge`).
    pub removed_config: Option<PathBuf>,
    /// Controller home removed (`--purge`).
    pub removed_controller_home: Option<PathBuf>,
    /// Worktrees of the controller home removed through git (`--purge`).
    pub removed_worktrees: Vec<PathBuf>,
}

/// [`uninstall_with`] without confirmation: a purge that would delete
/// worktrees holding work found nowhere else is refused.
pub fn uninstall(paths: &Paths, purge: bool) -> Result<UninstallReport, InstallError> {
    uninstall_with(paths, purge, false)
}

/// Stops and removes this instance's service; removes the launcher and every
/// snapshot unless another instance's unit still uses them; with `purge`, also
/// the config (with its tokens) and the controller home, its worktrees
/// removed through git. Without `confirmed`, a purge whose home holds
/// worktrees with uncommitted or unpushed work fails
/// [`InstallError::WorktreesAtRisk`], listing them, before anything is
/// removed.
pub fn uninstall_with(
    paths: &Paths,
    purge: bool,
    confirmed: bool,
) -> Result<UninstallReport, InstallError> {
    let mut report = UninstallReport::default();
    // Serialised with installs like every other change; when nothing was
    // ever installed there is no lock to take (and nothing is created).
    let lock = if paths.releases_root.is_dir() {
        Some(lock_releases(paths, LockMode::Exclusive)?)
    } else {
        None
    };
    // Read the config's controller home before anything is removed.
    let config_home = config::read(&paths.config)
        .ok()
        .flatten()
        .and_then(|(_, s)| s.controller_home);
    if purge && !confirmed {
        let home = paths.controller_home_for(config_home.as_deref()).path;
        let risk = worktrees::at_risk_in(&home);
        if !risk.is_empty() {
            return Err(InstallError::WorktreesAtRisk(risk));
        }
    }
    let removed = service::stop_and_remove(paths)?;
    report.removed_unit = removed.removed_unit;
    report.service_warning = removed.warning;
    report.kept_for_instances = service::other_instance_units(paths);
    if report.kept_for_instances.is_empty() {
        match launcher::state(paths)? {
            LauncherState::Ours { .. } => {
                report.removed_launcher = launcher::remove_if_ours(paths)?;
            }
            LauncherState::Foreign { what, .. } => report.kept_foreign_launcher = Some(what),
            LauncherState::Missing => {}
        }
        if lock.is_some() {
            staging::cleanup_leftovers(paths)?;
            for digest in snapshot::list_digests(paths)? {
                snapshot::remove_snapshot(paths, &digest)?;
                report.removed_snapshots.push(digest);
            }
            for entry in fs::read_dir(&paths.releases_root)
                .map_err(|e| FsError::new("read directory", &paths.releases_root, e))?
                .flatten()
            {
                let name = entry.file_name().to_string_lossy().into_owned();
                // The lock file stays: a waiting installer holds it open.
                if name != ".lock" {
                    fsx::remove_tree(&entry.path())?;
                }
            }
        }
    }
    if purge {
        if paths.config.exists() {
            fs::remove_file(&paths.config).map_err(|e| FsError::new("remove", &paths.config, e))?;
            let dir = fsx::parent_of(&paths.config);
            let _ = fs::remove_dir(dir);
            report.removed_config = Some(paths.config.clone());
        }
        let home = paths.controller_home_for(config_home.as_deref()).path;
        if home.exists() {
            check_removable_home(paths, &home)?;
            check_is_controller_home(&home)?;
            report.removed_worktrees = worktrees::remove_all(&home);
            fsx::remove_tree(&home)?;
            report.removed_controller_home = Some(home);
        }
    }
    Ok(report)
}

/// Refuses to purge a controller home that is `/`, `$HOME` or one of its
/// ancestors (a mistyped `controllerHome` must not wipe a user's files).
fn check_removable_home(paths: &Paths, home: &Path) -> Result<(), InstallError> {
    let dangerous: BTreeSet<&Path> = paths.home.ancestors().collect();
    if dangerous.contains(home) || home.parent().is_none() {
        return Err(FsError::new(
            "purge controller home",
            home,
            std::io::Error::other("refusing to remove HOME or one of its ancestors"),
        )
        .into());
    }
    Ok(())
}

/// Refuses to purge a non-empty directory that is not marked as a
/// controller home (see [`lapis_protocol::home::is_marked_home`]): only a
/// directory the controller made is ever removed.
fn check_is_controller_home(home: &Path) -> Result<(), InstallError> {
    if lapis_protocol::home::is_marked_home(home) {
        return Ok(());
    }
    let empty = fs::read_dir(home)
        .map_err(|e| FsError::new("read directory", home, e))?
        .next()
        .is_none();
    if empty {
        return Ok(());
    }
    Err(FsError::new(
        "purge controller home",
        home,
        std::io::Error::other(format!(
            "not a controller home (it holds neither {} nor {}); nothing was removed from it",
            lapis_protocol::home::DB_FILE,
            lapis_protocol::home::MARKER_FILE
        )),
    )
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::paths::test_paths as paths;

    #[test]
    fn uninstall_of_nothing_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        let report = uninstall(&p, true).unwrap();
        assert!(!report.removed_launcher && report.removed_snapshots.is_empty());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn purge_refuses_home_and_ancestors() {
        let p = paths(Path::new("/home/u"));
        assert!(check_removable_home(&p, Path::new("/home/u")).is_err());
        assert!(check_removable_home(&p, Path::new("/home")).is_err());
        assert!(check_removable_home(&p, Path::new("/")).is_err());
        assert!(check_removable_home(&p, Path::new("/home/u/.lapis/ai-controller")).is_ok());
    }

    /// A `controllerHome` that names someone's directory is not purged;
    /// a marked (or empty) one is.
    #[test]
    fn purge_refuses_a_directory_that_is_not_a_controller_home() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        let home = p.controller_home_for(None).path;
        fs::create_dir_all(&home).unwrap();
        fs::write(home.join("notes.txt"), "mine").unwrap();
        // A link named like the marker does not make it a home.
        std::os::unix::fs::symlink(home.join("notes.txt"), home.join("controller.home")).unwrap();
        let err = uninstall(&p, true).unwrap_err().to_string();
        assert!(err.contains("not a controller home"), "{err}");
        assert!(home.join("notes.txt").is_file());
        fs::remove_file(home.join("controller.home")).unwrap();
        fs::write(home.join("controller.home"), "marker").unwrap();
        let report = uninstall(&p, true).unwrap();
        assert_eq!(
            report.removed_controller_home.as_deref(),
            Some(home.as_path())
        );
        assert!(!home.exists());
        // An empty directory has nothing to lose.
        fs::create_dir_all(&home).unwrap();
        assert!(
            uninstall(&p, true)
                .unwrap()
                .removed_controller_home
                .is_some()
        );
    }

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A purge whose home holds worktrees with uncommitted or unpushed
    /// work is refused, listing them (and not the clean one), with nothing
    /// removed; confirmed, it removes them through git: the repository
    /// keeps no stale worktree entry, and the branches stay.
    #[test]
    fn purge_lists_worktrees_holding_work_refuses_unconfirmed_and_removes_them_through_git() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        let home = p.controller_home_for(None).path;
        fs::create_dir_all(&home).unwrap();
        fs::write(home.join("controller.home"), "marker").unwrap();
        let repo = dir.path().join("repo");
        fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        fs::write(repo.join("a.txt"), "a\n").unwrap();
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-qm", "init"]);
        let wt = |id: &str| home.join("worktrees").join(id);
        for id in ["dirty", "ahead", "clean"] {
            let path = wt(id).to_string_lossy().into_owned();
            git(
                &repo,
                &["worktree", "add", "-q", "-b", &format!("lapis/{id}"), &path],
            );
        }
        fs::write(wt("dirty").join("new.txt"), "uncommitted\n").unwrap();
        fs::write(wt("ahead").join("a.txt"), "b\n").unwrap();
        git(&wt("ahead"), &["commit", "-qam", "only here"]);
        let err = uninstall(&p, true).unwrap_err();
        assert_eq!(err.code(), "worktrees_at_risk");
        let InstallError::WorktreesAtRisk(risk) = &err else {
            panic!("{err}");
        };
        let listed: Vec<(&Path, usize, usize)> = risk
            .iter()
            .map(|r| (r.path.as_path(), r.uncommitted, r.unpushed))
            .collect();
        let (ahead, dirty) = (wt("ahead"), wt("dirty"));
        assert_eq!(listed, [(ahead.as_path(), 0, 1), (dirty.as_path(), 1, 0)]);
        let text = err.to_string();
        assert!(
            text.contains("lapis/dirty") && text.contains("--yes"),
            "{text}"
        );
        assert!(!text.contains("lapis/clean"), "{text}");
        assert!(wt("dirty").join("new.txt").is_file() && home.join("controller.home").is_file());
        let report = uninstall_with(&p, true, true).unwrap();
        assert_eq!(
            report.removed_worktrees.len(),
            3,
            "{:?}",
            report.removed_worktrees
        );
        assert!(!home.exists());
        let list = git(&repo, &["worktree", "list", "--porcelain"]);
        assert_eq!(
            list.matches("worktree ").count(),
            1,
            "only the main checkout: {list}"
        );
        let branches = git(&repo, &["branch", "--list", "lapis/*"]);
        assert_eq!(branches.lines().count(), 3, "{branches}");
    }
}
