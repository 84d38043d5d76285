//! The crate's error type: one enum over the per-module errors, with a
//! stable code for scripts. Messages name paths and digests, never secrets.

use thiserror::Error;

use crate::archive::ArchiveError;
use crate::config::ConfigError;
use crate::fsx::FsError;
use crate::launcher::LauncherError;
use crate::paths::PathError;
use crate::service::ServiceError;
use crate::smoke::SmokeError;
use crate::snapshot::SnapshotError;

/// Any failure of an installer operation.
#[derive(Debug, Error)]
pub enum InstallError {
    /// Bad instance name or unusable HOME.
    #[error(transparent)]
    Path(#[from] PathError),
    /// Malformed or missing config.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The launcher path cannot be used.
    #[error(transparent)]
    Launcher(#[from] LauncherError),
    /// A snapshot or release tree does not verify, or is not found.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// The staged binary failed its smoke test; nothing was activated.
    #[error("{0}; nothing was activated")]
    Smoke(#[from] SmokeError),
    /// The service step failed.
    #[error(transparent)]
    Service(#[from] ServiceError),
    /// Another file-system failure.
    #[error(transparent)]
    Fs(#[from] FsError),
    /// A release archive was not fetched, verified or extracted; nothing
    /// changed.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// `rollback` without a target and no earlier snapshot to go back to.
    #[error("there is no previous snapshot to roll back to; see `releases list`")]
    NoPrevious,
    /// `uninstall --purge` would delete worktrees holding work found
    /// nowhere else, and that was not confirmed; nothing was removed.
    #[error(
        "uninstall --purge would delete {} worktree(s) holding work found nowhere else:\n{}\nnothing was removed; commit and push (or copy) that work, or confirm with --yes",
        .0.len(),
        .0.iter().map(|w| format!("  {w}")).collect::<Vec<_>>().join("\n")
    )]
    WorktreesAtRisk(Vec<crate::uninstall::WorktreeAtRisk>),
}

impl InstallError {
    /// Stable machine-readable code.
    pub fn code(&self) -> &'static str {
        use crate::launcher::LauncherError as L;
        use crate::snapshot::SnapshotError as S;
        match self {
            InstallError::Path(PathError::InvalidInstance { .. }) => "invalid_instance",
            InstallError::Path(_) => "invalid_environment",
            InstallError::Config(ConfigError::Missing(_)) => "config_missing",
            InstallError::Config(ConfigError::Malformed { .. }) => "invalid_config",
            InstallError::Config(ConfigError::Fs(_)) => "io",
            InstallError::Config(ConfigError::Invalid(e)) => e.code(),
            InstallError::Launcher(L::Foreign { .. } | L::Directory { .. }) => "launcher_conflict",
            InstallError::Launcher(L::Unwritable { .. }) => "install_path_unwritable",
            InstallError::Launcher(L::Fs(_)) => "io",
            InstallError::Snapshot(S::Tampered { .. }) => "snapshot_tampered",
            InstallError::Snapshot(S::BadTree { .. }) => "release_invalid",
            InstallError::Snapshot(S::NotFound(_) | S::Ambiguous(_)) => "not_found",
            InstallError::Snapshot(S::Fs(_)) => "io",
            InstallError::Smoke(_) => "smoke_test_failed",
            InstallError::Service(ServiceError::Unavailable(_)) => "service_manager_unavailable",
            InstallError::Service(_) => "service_failed",
            InstallError::Fs(_) => "io",
            InstallError::Archive(e) => e.code(),
            InstallError::NoPrevious => "not_found",
            InstallError::WorktreesAtRisk(_) => "worktrees_at_risk",
        }
    }

    /// Whether the failure is "the service or its manager is unavailable"
    /// (exit class 3) rather than a plain failure.
    ///
    /// A release server that cannot be reached at all (offline) counts:
    /// `update` on a machine without a network exits 3, not 2.
    pub fn is_unavailable(&self) -> bool {
        match self {
            InstallError::Service(
                ServiceError::Unavailable(_)
                | ServiceError::NotReady { .. }
                | ServiceError::Failed(_)
                | ServiceError::Command { .. },
            ) => true,
            InstallError::Archive(ArchiveError::Update(e)) => e.is_unreachable(),
            InstallError::Archive(ArchiveError::Fetch(e)) => e.is_unreachable(),
            _ => false,
        }
    }
}
