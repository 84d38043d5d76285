//! The whole tree to git: a first snapshot, or one after a change the
//! stat data cannot narrow down (see the parent module). `add -A` and
//! `write-tree` on the private index (seeded once), with git's listing of
//! what it ignores and of the configuration it reads beside them, so the
//! next snapshot knows which paths to state and which directories to watch.

use std::path::Path;

use lapis_protocol::snapshot::SnapshotSkipped;

use super::command::{self, GitError};
use super::repo::{Repo, discover};
use super::{Skip, SnapshotBounds, SnapshotDir, Watched, blocking, index_entries, seen, skip};

impl SnapshotDir {
    pub(super) async fn take_locked(
        &self,
        path: &Path,
        bounds: SnapshotBounds,
    ) -> Result<(String, u64, Option<Watched>), Skip> {
        let repo = discover(path, bounds.timeout).await?;
        std::fs::create_dir_all(self.objects()).map_err(|e| {
            tracing::warn!(error = %e, "cannot create the snapshot directory");
            Skip(SnapshotSkipped::Failed)
        })?;
        // Before git or the observation looks at anything (see [`seen`]).
        let reference = self.reference.or_else(|| seen::reference(&self.dir));
        // Only this process uses the private index, under `lock_for`: a
        // lock left by a command killed at its deadline is stale.
        let _ = std::fs::remove_file(self.dir.join("index.lock"));
        let seeded = !self.index().exists();
        if seeded {
            self.seed(path, &repo, bounds).await?;
        }
        // A tree already known to be over the bound is not walked again.
        if index_entries(&self.index()).is_some_and(|n| n > bounds.max_files) {
            return Err(Skip(SnapshotSkipped::TooLarge));
        }
        let env = self.env(&repo);
        // What is ignored and which configuration git reads, asked while
        // it stages (the answers do not depend on the staging).
        let ignored_args = [
            "ls-files",
            "-z",
            "--others",
            "--ignored",
            "--exclude-standard",
            "--directory",
        ];
        let config_args = ["config", "-z", "--list", "--show-origin"];
        let (add, ignored, config) = tokio::join!(
            command::run(path, &["add", "-A", "--", "."], &env, bounds.timeout),
            command::run(path, &ignored_args, &env, bounds.timeout),
            command::run(&repo.toplevel, &config_args, &env, bounds.timeout),
        );
        if let Err(e) = add {
            if !seeded && !matches!(e, GitError::Timeout(_) | GitError::Missing) {
                // A private index git no longer reads (a seed copied with
                // extensions it cannot follow, a git upgrade): start over.
                tracing::warn!(error = %e, "snapshot index refused; reseeding");
                let _ = std::fs::remove_file(self.index());
                self.seed(path, &repo, bounds).await?;
                command::run(path, &["add", "-A", "--", "."], &env, bounds.timeout)
                    .await
                    .map_err(skip)?;
            } else {
                return Err(skip(e));
            }
        }
        let files = index_entries(&self.index()).unwrap_or(0);
        if files > bounds.max_files {
            return Err(Skip(SnapshotSkipped::TooLarge));
        }
        let tree = command::run(path, &["write-tree"], &env, bounds.timeout)
            .await
            .map_err(skip)?;
        let tree = command::line(&tree);
        let seen = match (reference, ignored, config) {
            (Some(reference), Ok(ignored), Ok(config)) => {
                let rules = seen::rule_files(path, &repo.toplevel, &repo.rules, &config);
                let (root, built, max) =
                    (path.to_path_buf(), (tree.clone(), files), bounds.max_files);
                blocking(bounds, move || {
                    seen::Seen::observe(&root, built, reference, &ignored, rules, max)
                })
                .await
                .flatten()
            }
            _ => None,
        };
        Ok((
            tree,
            files,
            seen.map(|seen| Watched {
                seen,
                repo,
                watch: None,
            }),
        ))
    }

    /// Seeds the private index: a copy of the repository's index (its stat
    /// cache makes the first snapshot cheap), else `HEAD`'s tree, else
    /// nothing (an unborn branch).
    async fn seed(&self, path: &Path, repo: &Repo, bounds: SnapshotBounds) -> Result<(), Skip> {
        if std::fs::copy(&repo.index, self.index()).is_ok() {
            return Ok(());
        }
        let env = self.env(repo);
        match command::run(path, &["read-tree", "HEAD"], &env, bounds.timeout).await {
            Ok(_) => Ok(()),
            Err(GitError::Failed { .. }) => Ok(()),
            Err(e) => Err(skip(e)),
        }
    }
}
