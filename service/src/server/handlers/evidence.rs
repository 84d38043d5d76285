//! A turn's workspace evidence for `turns.get`: its journaled snapshots,
//! what changed between them, and, for a fenced turn, what changed since
//! its boundary (a snapshot taken now).
//!
//! What must stay true: the fresh snapshot is taken only for a fenced
//! turn (nothing else has an outcome to decide) and only while the
//! workspace is still registered; it runs in git child processes bounded
//! like every snapshot, never on the store's writer thread; a comparison
//! that could not be made says why instead of reading as "no changes".

use std::path::Path;

use lapis_protocol::RpcError;
use lapis_protocol::snapshot::{SnapshotPoint, SnapshotSkipped, TurnEvidence};

use crate::domain::Turn;
use crate::git::snapshot::{SnapshotBounds, SnapshotDir, diff_or_skip};

use super::super::context::ServerContext;
use super::store_err;

/// The evidence of `turn`; `None` when no snapshot was journaled for it
/// (it never reached its boundary, or ran before snapshots existed).
pub(super) async fn turn_evidence(
    ctx: &ServerContext,
    turn: &Turn,
) -> Result<Option<TurnEvidence>, RpcError> {
    let store = &ctx.core.store;
    let snapshots = store
        .turn_snapshots(&turn.thread_id, &turn.id)
        .await
        .map_err(store_err)?;
    let boundary = snapshots
        .iter()
        .find(|s| s.at == SnapshotPoint::Boundary)
        .cloned();
    let outcome = snapshots
        .iter()
        .rfind(|s| s.at == SnapshotPoint::Outcome)
        .cloned();
    let Some(boundary) = boundary else {
        return Ok(None);
    };
    let home = store.options().home.clone();
    let dir = SnapshotDir::new(&home, &turn.workspace_id);
    let bounds = SnapshotBounds::default();
    let path = store
        .list_workspaces()
        .await
        .map_err(store_err)?
        .into_iter()
        .find(|w| w.id == turn.workspace_id)
        .map(|w| w.path);
    let changes = match (
        &boundary.tree,
        outcome.as_ref().and_then(|o| o.tree.as_ref()),
        &path,
    ) {
        (Some(from), Some(to), Some(path)) => Some(diff_or_skip(
            dir.diff(Path::new(path), from, to, bounds).await,
        )),
        _ => None,
    };
    let since_boundary = if turn.state.is_fenced() {
        Some(match &path {
            Some(path) => dir.since(Path::new(path), &boundary, bounds).await,
            None => lapis_protocol::snapshot::SnapshotDiff {
                files: Vec::new(),
                skipped: Some(SnapshotSkipped::Failed),
            },
        })
    } else {
        None
    };
    Ok(Some(TurnEvidence {
        boundary: Some(boundary),
        outcome,
        changes,
        since_boundary,
    }))
}
