//! A snapshot after a few paths changed: git stages only those paths into
//! the private index and writes the tree, and what the previous snapshot
//! saw is updated in place instead of walked again.
//!
//! Why only those: the check that found them stated every other path the
//! tree depends on and found it unchanged (see [`seen`]), so the private
//! index's entries for them, written by the previous snapshot, still hold.
//! Git is asked which new names it ignores (`ls-files -o -i --directory`
//! on those names alone) because `git add` refuses a path it ignores.
//!
//! What must stay true: every path goes to git as a literal pathspec
//! (`GIT_LITERAL_PATHSPECS`), relative to the workspace; a refusal by git
//! hands the snapshot to the full path (which stages the whole tree), a
//! timeout or a missing git skips it as the full path would.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;

use lapis_protocol::snapshot::SnapshotSkipped;

use super::command::{self, GitError};
use super::seen::{self, Dirty};
use super::{Skip, SnapshotBounds, SnapshotDir, Watched, blocking, index_entries, skip};

/// A refreshed tree, its file count, and what was seen, updated.
type Refreshed = (String, u64, Option<Watched>);

impl SnapshotDir {
    /// The snapshot of the workspace at `path` after the paths `dirty`
    /// changed since `watched` was seen; `Ok(None)` when the whole tree
    /// must go to git instead.
    pub(super) async fn refresh(
        &self,
        path: &Path,
        watched: Watched,
        dirty: Vec<Dirty>,
        bounds: SnapshotBounds,
    ) -> Result<Option<Refreshed>, Skip> {
        let Watched { seen, repo, .. } = watched;
        // Before anything that is recorded is read: the changed
        // directories' names, the new directories' walk, the restating,
        // git's own reads (see [`seen`]). The check's stat data came
        // earlier and only says what to look at.
        let Some(reference) = self.reference.or_else(|| seen::reference(&self.dir)) else {
            return Ok(None);
        };
        let planned = blocking(bounds, move || {
            let changes = seen.changes(dirty);
            (seen, changes)
        });
        let Some((seen, Some(mut changes))) = planned.await else {
            return Ok(None);
        };
        let mut env = self.env(&repo);
        env.push(("GIT_LITERAL_PATHSPECS", OsString::from("1")));
        let mut ignored = Vec::new();
        let new: Vec<OsString> = changes.new_paths().map(os).collect();
        if !new.is_empty() {
            let args = [
                "ls-files",
                "-z",
                "--others",
                "--ignored",
                "--exclude-standard",
                "--directory",
                "--",
            ];
            match command::run(path, &with_paths(&args, new), &env, bounds.timeout).await {
                Ok(out) => ignored = out,
                Err(e) => return give_up(e),
            }
        }
        let max = bounds.max_files;
        let staged = blocking(bounds, move || {
            let stage = seen.stage(&mut changes, &ignored, max);
            (seen, changes, stage)
        });
        let Some((seen, changes, Some(stage))) = staged.await else {
            return Ok(None);
        };
        let (tree, files) = if stage.is_empty() {
            // Only names git ignores came or went: the index, so the
            // tree, is as it was.
            (seen.tree.clone(), seen.files)
        } else {
            // As in the full path: a lock left by a command killed at its
            // deadline is stale.
            let _ = std::fs::remove_file(self.dir.join("index.lock"));
            let args = with_paths(&["add", "-A", "--"], stage.into_iter().map(os).collect());
            if let Err(e) = command::run(path, &args, &env, bounds.timeout).await {
                return give_up(e);
            }
            let files = index_entries(&self.index()).unwrap_or(0);
            if files > bounds.max_files {
                return Err(Skip(SnapshotSkipped::TooLarge));
            }
            let tree = command::run(path, &["write-tree"], &env, bounds.timeout)
                .await
                .map_err(skip)?;
            (command::line(&tree), files)
        };
        let built = (tree.clone(), files);
        let seen = blocking(bounds, move || seen.refreshed(changes, built, reference))
            .await
            .flatten();
        Ok(Some((
            tree,
            files,
            seen.map(|seen| Watched {
                seen,
                repo,
                watch: None,
            }),
        )))
    }
}

/// After git refused: a timeout or a missing git skips the snapshot (the
/// full path would only meet them again); anything else goes to the full
/// path.
fn give_up(e: GitError) -> Result<Option<Refreshed>, Skip> {
    match e {
        GitError::Timeout(_) | GitError::Missing => Err(skip(e)),
        e => {
            tracing::debug!(error = %e, "snapshot refresh refused; staging the whole tree");
            Ok(None)
        }
    }
}

fn os(path: impl Into<Vec<u8>>) -> OsString {
    OsString::from_vec(path.into())
}

fn with_paths(args: &[&str], paths: Vec<OsString>) -> Vec<OsString> {
    args.iter().map(OsString::from).chain(paths).collect()
}
