//! Workspace snapshots: what a turn's working tree was at its dispatch
//! boundary and at its outcome, as git tree ids, and what changed between
//! them. The evidence an owner resolves a fenced turn with.
//!
//! What must stay true:
//! - a [`WorkspaceSnapshot`] is metadata (a tree id, a count, a reason),
//!   never file content: it is journaled as `workspace_snapshot` and kept
//!   under every retention;
//! - a snapshot that was not taken says why ([`SnapshotSkipped`]), so
//!   "nothing changed" and "nothing was looked at" never read alike;
//! - [`ChangedFile`] lists paths and line counts only, never content.

use serde::{Deserialize, Serialize};

/// How a workspace's turns keep evidence of its working tree (config
/// `workspaces.<id>.evidence`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum EvidenceMode {
    /// A snapshot at the dispatch boundary and at the outcome; the
    /// controller watches the tree (inotify) so a snapshot of a tree
    /// nothing touched costs no stat walk and no git. The default: where
    /// the watch cannot be had (no inotify, too many directories, the
    /// user's watches used up) every snapshot states its paths as `stat`.
    #[default]
    Watch,
    /// The same snapshots without the watch: each one states every path
    /// the tree depends on (for a tree written where the kernel raises no
    /// event: a network file system written by another host, shared
    /// `mmap` writes).
    Stat,
    /// No snapshots: turns journal a snapshot skipped as `off`, and a
    /// fenced turn has no evidence to show.
    Off,
}

impl EvidenceMode {
    /// The config name.
    pub fn as_str(self) -> &'static str {
        match self {
            EvidenceMode::Watch => "watch",
            EvidenceMode::Stat => "stat",
            EvidenceMode::Off => "off",
        }
    }

    /// Whether this is the default (`watch`).
    pub fn is_default(&self) -> bool {
        *self == EvidenceMode::Watch
    }
}

/// Where in a turn a snapshot was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotPoint {
    /// Right before the prompt was written to the agent (the dispatch
    /// boundary).
    Boundary,
    /// When the agent's outcome arrived, before it was recorded.
    Outcome,
}

impl SnapshotPoint {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            SnapshotPoint::Boundary => "boundary",
            SnapshotPoint::Outcome => "outcome",
        }
    }
}

/// Why a snapshot was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotSkipped {
    /// The workspace is not inside a git repository.
    NotGit,
    /// No `git` executable was found.
    GitMissing,
    /// The tree has more files than the snapshot bound.
    TooLarge,
    /// Git did not finish within the snapshot bound.
    Timeout,
    /// Git failed (its exit status is in the service log).
    Failed,
    /// The workspace's configuration turns evidence off
    /// (`evidence: "off"`).
    Off,
}

impl SnapshotSkipped {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            SnapshotSkipped::NotGit => "not_git",
            SnapshotSkipped::GitMissing => "git_missing",
            SnapshotSkipped::TooLarge => "too_large",
            SnapshotSkipped::Timeout => "timeout",
            SnapshotSkipped::Failed => "failed",
            SnapshotSkipped::Off => "off",
        }
    }
}

/// `workspace_snapshot`: one snapshot of a turn's workspace. Exactly one
/// of `tree` and `skipped` is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceSnapshot {
    /// Where in the turn.
    pub at: SnapshotPoint,
    /// The git tree id of the working tree (tracked and untracked files,
    /// ignored ones not), when taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree: Option<String>,
    /// How many files the tree holds, when taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<u64>,
    /// Why it was not taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<SnapshotSkipped>,
}

impl WorkspaceSnapshot {
    /// A snapshot not taken, for `reason`.
    pub fn skipped(at: SnapshotPoint, reason: SnapshotSkipped) -> WorkspaceSnapshot {
        WorkspaceSnapshot {
            at,
            tree: None,
            files: None,
            skipped: Some(reason),
        }
    }
}

/// One file that differs between two snapshots (`git diff-tree --numstat`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangedFile {
    /// Its path, relative to the repository's top level.
    pub path: String,
    /// Lines added (`None`: a binary file).
    pub added: Option<u64>,
    /// Lines deleted (`None`: a binary file).
    pub deleted: Option<u64>,
}

/// What changed between two points, or why it is not known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotDiff {
    /// The files that differ, in path order (empty: nothing changed).
    #[serde(default)]
    pub files: Vec<ChangedFile>,
    /// Set when the comparison could not be made: the reason the later
    /// snapshot was not taken (`files` is then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<SnapshotSkipped>,
}

/// A turn's snapshots and what they show (`turns.get`'s `evidence`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnEvidence {
    /// The snapshot at the dispatch boundary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boundary: Option<WorkspaceSnapshot>,
    /// The snapshot at the outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<WorkspaceSnapshot>,
    /// Boundary → outcome, when both were taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<SnapshotDiff>,
    /// Fenced turns only: boundary → a snapshot taken now, for the owner
    /// deciding the unknown outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_boundary: Option<SnapshotDiff>,
}

/// How a snapshot got its tree (`status`'s evidence costs), cheapest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotVia {
    /// The workspace's watch saw nothing happen: no path stated, no git.
    Watched,
    /// Every path the tree depends on stated the same: no git.
    Seen,
    /// Every path stated; git staged the few that changed.
    Refresh,
    /// Git staged the whole working tree.
    Git,
    /// No tree (see the snapshot's `skipped`).
    Skipped,
}

/// What one snapshot cost its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotCost {
    /// Wall time, microseconds.
    pub micros: u64,
    /// How it got its tree.
    pub via: SnapshotVia,
    /// Paths it stated or git staged (the tree's files; 0 when the watch
    /// answered or nothing was looked at).
    pub files_walked: u64,
    /// git processes it started.
    pub git: u64,
}

/// A workspace's evidence setting and what its snapshots cost since
/// `serve` started (`status`'s `evidence`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceCost {
    /// The workspace id.
    pub workspace: String,
    /// Its `evidence` setting now.
    pub mode: EvidenceMode,
    /// Snapshots taken since `serve` started (two per turn).
    pub snapshots: u64,
    /// Median wall time of the last snapshots (up to
    /// [`EvidenceCost::RECENT`]), microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_micros: Option<u64>,
    /// The slowest of them, microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_micros: Option<u64>,
    /// The last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<SnapshotCost>,
}

impl EvidenceCost {
    /// How many recent snapshots the median and the maximum cover.
    pub const RECENT: usize = 32;
}
