//! A turn's workspace snapshots ([`crate::git::snapshot`]): one at the
//! dispatch boundary, one at the outcome, each journaled as a
//! `workspace_snapshot` event before the record it belongs with.
//!
//! What must stay true: the boundary snapshot is queued before the
//! boundary itself, so a durable boundary always has its snapshot record
//! (the writer commits in order); the outcome snapshot is queued before the
//! turn's end, while the turn still holds its workspace, so the next turn's
//! agent cannot have touched the tree yet. Snapshots run in git child
//! processes, never on the store's writer thread, each bounded by
//! [`SnapshotBounds`]. An outcome snapshot is taken only when the boundary
//! one was (a non-git workspace says so once per turn).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use lapis_protocol::Payload;
use lapis_protocol::snapshot::{
    EvidenceMode, SnapshotCost, SnapshotPoint, SnapshotSkipped, SnapshotVia, WorkspaceSnapshot,
};

use super::evidence_cost::EvidenceCosts;
use crate::git::snapshot::{SnapshotBounds, SnapshotDir, Via};

/// The snapshots of one claimed turn.
#[derive(Debug)]
pub(super) struct Evidence {
    /// The workspace's snapshot state under the controller home.
    dir: SnapshotDir,
    /// The workspace's path.
    path: PathBuf,
    /// How far a snapshot may go.
    bounds: SnapshotBounds,
    /// The workspace's `evidence` setting (`off`: nothing is looked at).
    mode: EvidenceMode,
    /// Whether the boundary snapshot produced a tree (then the outcome
    /// one is taken too).
    boundary_taken: Mutex<bool>,
    /// The workspace id, and where each snapshot's cost is recorded.
    costs: (String, Arc<EvidenceCosts>),
}

impl Evidence {
    /// The evidence of a turn in workspace `workspace_id` at `path`.
    pub(super) fn new(
        home: &std::path::Path,
        workspace_id: &str,
        path: PathBuf,
        mode: EvidenceMode,
        costs: Arc<EvidenceCosts>,
    ) -> Evidence {
        let dir = SnapshotDir::new(home, workspace_id);
        Evidence {
            dir: match mode {
                EvidenceMode::Stat | EvidenceMode::Off => dir.without_watch(),
                EvidenceMode::Watch => dir,
            },
            path,
            bounds: SnapshotBounds::default(),
            mode,
            boundary_taken: Mutex::new(false),
            costs: (workspace_id.to_owned(), costs),
        }
    }

    /// Whether a boundary snapshot may take long (the workspace may be in
    /// a repository: a first snapshot runs git, later ones may stat the
    /// tree); otherwise it is answered at once (`not_git`, `off`).
    pub(super) fn may_take_long(&self) -> bool {
        self.mode != EvidenceMode::Off
            && crate::git::snapshot::may_be_git(&self.path)
            && !self.dir.likely_quick()
    }

    /// The boundary snapshot, as the payload to journal.
    pub(super) async fn at_boundary(&self) -> Payload {
        let snap = self.take(SnapshotPoint::Boundary).await;
        *self
            .boundary_taken
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = snap.tree.is_some();
        Payload::WorkspaceSnapshot(snap)
    }

    /// The outcome snapshot, as the payload to journal; `None` when the
    /// boundary had none to compare it with.
    pub(super) async fn at_outcome(&self) -> Option<Payload> {
        if !*self
            .boundary_taken
            .lock()
            .unwrap_or_else(|p| p.into_inner())
        {
            return None;
        }
        Some(Payload::WorkspaceSnapshot(
            self.take(SnapshotPoint::Outcome).await,
        ))
    }

    async fn take(&self, at: SnapshotPoint) -> WorkspaceSnapshot {
        if self.mode == EvidenceMode::Off {
            return WorkspaceSnapshot::skipped(at, SnapshotSkipped::Off);
        }
        let started = std::time::Instant::now();
        let ((snap, via), git) =
            crate::children::tally_git(self.dir.take_via(&self.path, at, self.bounds)).await;
        let via = match via {
            Some(Via::Watched) => SnapshotVia::Watched,
            Some(Via::Seen) => SnapshotVia::Seen,
            Some(Via::Refresh) => SnapshotVia::Refresh,
            Some(Via::Git) => SnapshotVia::Git,
            None => SnapshotVia::Skipped,
        };
        let walked = match via {
            SnapshotVia::Seen | SnapshotVia::Refresh | SnapshotVia::Git => snap.files.unwrap_or(0),
            SnapshotVia::Watched | SnapshotVia::Skipped => 0,
        };
        let (workspace, costs) = &self.costs;
        costs.record(
            workspace,
            SnapshotCost {
                micros: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
                via,
                files_walked: walked,
                git,
            },
        );
        if let Some(reason) = snap.skipped {
            tracing::debug!(
                at = at.as_str(),
                reason = reason.as_str(),
                "workspace snapshot skipped"
            );
        }
        snap
    }
}
