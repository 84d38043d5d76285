//! The files that differ between two of a workspace's snapshots
//! (`git diff-tree --numstat` on the private object store), and a fenced
//! turn's changes since its boundary.

use std::path::Path;

use lapis_protocol::snapshot::{
    ChangedFile, SnapshotDiff, SnapshotPoint, SnapshotSkipped, WorkspaceSnapshot,
};

use super::command;
use super::repo::discover;
use super::{SnapshotBounds, SnapshotDir, skip};

impl SnapshotDir {
    /// The files that differ between trees `from` and `to` of the
    /// workspace at `path` (`rev-parse` and `diff-tree`; none when they
    /// are the same tree).
    pub(crate) async fn diff(
        &self,
        path: &Path,
        from: &str,
        to: &str,
        bounds: SnapshotBounds,
    ) -> Result<Vec<ChangedFile>, SnapshotSkipped> {
        // One tree twice (a turn that changed nothing, read by every
        // `turns show`): no file differs, and no git needs to say so.
        if from == to {
            return Ok(Vec::new());
        }
        let repo = discover(path, bounds.timeout).await.map_err(|s| s.0)?;
        let env = self.env(&repo);
        let args = [
            "diff-tree",
            "-r",
            "-z",
            "--numstat",
            "--no-renames",
            from,
            to,
        ];
        let out = command::run(path, &args, &env, bounds.timeout)
            .await
            .map_err(|e| skip(e).0)?;
        Ok(parse_numstat(&out))
    }

    /// A snapshot taken now, compared with `boundary` (fenced turns).
    pub(crate) async fn since(
        &self,
        path: &Path,
        boundary: &WorkspaceSnapshot,
        bounds: SnapshotBounds,
    ) -> SnapshotDiff {
        let Some(from) = &boundary.tree else {
            return SnapshotDiff {
                files: Vec::new(),
                skipped: boundary.skipped.or(Some(SnapshotSkipped::Failed)),
            };
        };
        let now = self.take(path, SnapshotPoint::Outcome, bounds).await;
        match &now.tree {
            Some(to) => diff_or_skip(self.diff(path, from, to, bounds).await),
            None => SnapshotDiff {
                files: Vec::new(),
                skipped: now.skipped,
            },
        }
    }
}

/// A diff's files, or why there are none.
pub(crate) fn diff_or_skip(diff: Result<Vec<ChangedFile>, SnapshotSkipped>) -> SnapshotDiff {
    match diff {
        Ok(files) => SnapshotDiff {
            files,
            skipped: None,
        },
        Err(reason) => SnapshotDiff {
            files: Vec::new(),
            skipped: Some(reason),
        },
    }
}

/// `git diff-tree -r -z --numstat` output: `added\tdeleted\tpath\0` per
/// file, `-` counts for a binary file.
pub(super) fn parse_numstat(out: &[u8]) -> Vec<ChangedFile> {
    let mut files: Vec<ChangedFile> = out
        .split(|&b| b == 0)
        .filter(|rec| !rec.is_empty())
        .filter_map(|rec| {
            let rec = String::from_utf8_lossy(rec);
            let mut parts = rec.splitn(3, '\t');
            let (added, deleted, path) = (parts.next()?, parts.next()?, parts.next()?);
            Some(ChangedFile {
                path: path.to_owned(),
                added: added.parse().ok(),
                deleted: deleted.parse().ok(),
            })
        })
        .collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files
}
