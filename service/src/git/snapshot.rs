//! Workspace snapshots: a workspace's working tree (tracked and untracked
//! files, ignored ones not) as a git tree id, built with a private index,
//! and the files that differ between two of them.
//!
//! Where things live, per workspace id, under `<controller home>/snapshots/<id>/`:
//! - `index`: the private index. It persists between snapshots, so its
//!   stat cache makes an unchanged tree cheap (git re-hashes only files
//!   whose stat data changed). The first snapshot seeds it from a copy of
//!   the repository's own index (read, never written), else from `HEAD`.
//! - `objects/`: the blobs and trees the snapshots write. The repository's
//!   object store is read as an alternate and never written, so no gc of
//!   the user's repository prunes a turn's evidence, and removing the
//!   workspace's snapshot directory removes all of it.
//!
//! Three ways to a tree, cheapest first ([`Via`]). When nothing changed
//! since the workspace's previous snapshot in this process, no git runs:
//! [`seen`] keeps what that snapshot saw (the stat data of every path its
//! tree depends on) and answers with the same tree once every path stats
//! the same. When a few paths changed (or were touched too close to that
//! snapshot to trust), git stages only those into the private index
//! ([`refresh`]) and what was seen is updated in place. Anything else (a
//! first snapshot, a changed ignore rule or configuration, many changes)
//! sends the whole tree to git.
//!
//! What must stay true: the user's index, HEAD, refs, stash and object
//! store are never written; one snapshot of a workspace runs at a time in
//! this process (its index and what it saw are locked by [`state_for`]);
//! every git command is bounded by [`SnapshotBounds::timeout`], and a tree
//! with more than [`SnapshotBounds::max_files`] entries is recorded
//! `too_large` instead.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use lapis_protocol::snapshot::{SnapshotPoint, SnapshotSkipped, WorkspaceSnapshot};

use super::command::{self, GitError};
use repo::Repo;

pub(crate) use diff::diff_or_skip;
pub(crate) use repo::may_be_git;

/// The directory under the controller home holding every workspace's
/// snapshot state.
pub(crate) const SNAPSHOTS_DIR: &str = "snapshots";

/// How far one snapshot may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotBounds {
    /// Each git command's deadline (the command is killed past it).
    pub timeout: Duration,
    /// The most files a snapshot's tree may hold.
    pub max_files: u64,
}

impl Default for SnapshotBounds {
    fn default() -> SnapshotBounds {
        SnapshotBounds {
            timeout: Duration::from_secs(10),
            max_files: 200_000,
        }
    }
}

/// Where one workspace's snapshot state lives.
#[derive(Debug, Clone)]
pub struct SnapshotDir {
    /// `<home>/snapshots/<workspace id>`.
    dir: PathBuf,
    /// A fixed reference second for what a snapshot saw (tests), else the
    /// file system's clock (see [`seen`]).
    reference: Option<i64>,
    /// The most directories a watch on the tree may take ([`watch`]); 0:
    /// no watch, every snapshot after the first states every path.
    watch_cap: usize,
}

/// What the previous snapshot of a workspace saw, and where its
/// repository is, if they can answer for the next one.
#[derive(Debug)]
struct Watched {
    /// What that snapshot saw.
    seen: seen::Seen,
    /// The repository, as discovered by the last full snapshot.
    repo: Repo,
    /// The inotify watch on the tree's directories, when it can be had
    /// (see [`watch`]); carried from snapshot to snapshot.
    watch: Option<watch::Watch>,
}

type Last = Option<Watched>;

/// One lock per private index in this process, guarding what its last
/// snapshot saw: the engine's boundary and outcome snapshots and the
/// server's fresh ones never share an index at the same time.
static STATE: LazyLock<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<Last>>>>> =
    LazyLock::new(Mutex::default);

fn state_for(dir: &Path) -> Arc<tokio::sync::Mutex<Last>> {
    let mut map = STATE.lock().unwrap_or_else(|p| p.into_inner());
    map.entry(dir.to_path_buf()).or_default().clone()
}

/// How a snapshot got its tree (public for the snapshot bench, which
/// checks which path it measured).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// The workspace's watch saw nothing happen since the previous
    /// snapshot: its tree, no path stated, no git run.
    Watched,
    /// Nothing changed since the previous snapshot: its tree, no git run.
    Seen,
    /// Git staged only the paths that changed since the previous snapshot.
    Refresh,
    /// Git staged the whole working tree into the private index and wrote it.
    Git,
}

/// How a snapshot after a previous one went.
enum Again {
    /// The watch saw nothing happen since the previous snapshot began.
    Quiet(Watched),
    /// Nothing changed.
    Same(Watched),
    /// Git staged the changed paths: the tree, its file count, and what was
    /// seen, updated.
    Refreshed(String, u64, Option<Watched>),
    /// The whole tree must go to git.
    Full,
    /// No snapshot can be taken.
    Skip(Skip),
}

impl SnapshotDir {
    /// The snapshot state of workspace `workspace_id` in controller home `home`.
    pub fn new(home: &Path, workspace_id: &str) -> SnapshotDir {
        SnapshotDir {
            dir: home.join(SNAPSHOTS_DIR).join(workspace_id),
            reference: None,
            watch_cap: watch::max_dirs(),
        }
    }

    /// The same state without a watch on the tree (a workspace's
    /// `evidence: "stat"`, and the bench of the stating path).
    pub fn without_watch(mut self) -> SnapshotDir {
        self.watch_cap = 0;
        self
    }

    /// The same state with a watch of at most `cap` directories (tests: a
    /// tree past it is not watched).
    #[cfg(test)]
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    fn with_watch_cap(mut self, cap: usize) -> SnapshotDir {
        self.watch_cap = cap;
        self
    }

    /// The same state with a fixed reference second (tests: a clock far
    /// ahead turns the ctime rule off, so only the comparison of stat data
    /// can notice a change).
    #[cfg(test)]
    fn with_reference(mut self, reference: i64) -> SnapshotDir {
        self.reference = Some(reference);
        self
    }

    /// Removes the workspace's snapshot state (its index and objects, and
    /// what its last snapshot saw).
    pub(crate) fn remove(&self) -> std::io::Result<()> {
        STATE
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.dir);
        match std::fs::remove_dir_all(&self.dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    fn index(&self) -> PathBuf {
        self.dir.join("index")
    }

    fn objects(&self) -> PathBuf {
        self.dir.join("objects")
    }

    /// The environment every command on this workspace's snapshots runs with.
    ///
    /// The private index is read and written by this process's git
    /// commands alone, so it is written as git's own `feature.manyFiles`
    /// writes a large one: without the trailing hash that would be
    /// computed on every write and verified on every read
    /// (`index.skipHash`). Each git command of a snapshot reads the whole
    /// index (about 4 MB for 50,000 files), so the hash is much of what
    /// staging one changed file costs. A git older than 2.40 ignores the
    /// setting.
    fn env(&self, repo: &Repo) -> Vec<(&'static str, OsString)> {
        vec![
            ("GIT_INDEX_FILE", self.index().into_os_string()),
            ("GIT_OBJECT_DIRECTORY", self.objects().into_os_string()),
            (
                "GIT_ALTERNATE_OBJECT_DIRECTORIES",
                repo.objects.clone().into_os_string(),
            ),
            ("GIT_CONFIG_COUNT", "1".into()),
            ("GIT_CONFIG_KEY_0", "index.skipHash".into()),
            ("GIT_CONFIG_VALUE_0", "true".into()),
        ]
    }

    /// Whether the next snapshot will very likely be answered by the
    /// workspace's watch at once (nothing happened in the tree since the
    /// last one): the engine then lets the claiming batch wait for the
    /// boundary instead of committing it alone. A hint only: a wrong
    /// answer costs latency, never evidence.
    pub(crate) fn likely_quick(&self) -> bool {
        let state = state_for(&self.dir);
        let Ok(last) = state.try_lock() else {
            return false;
        };
        last.as_ref()
            .and_then(|w| w.watch.as_ref())
            .is_some_and(watch::Watch::looks_quiet)
    }

    /// Snapshots the working tree at `path` (see the module docs); a
    /// snapshot not taken says why. Never fails otherwise.
    pub async fn take(
        &self,
        path: &Path,
        at: SnapshotPoint,
        bounds: SnapshotBounds,
    ) -> WorkspaceSnapshot {
        self.take_via(path, at, bounds).await.0
    }

    /// [`SnapshotDir::take`], and how the tree was got (`None` when not).
    pub async fn take_via(
        &self,
        path: &Path,
        at: SnapshotPoint,
        bounds: SnapshotBounds,
    ) -> (WorkspaceSnapshot, Option<Via>) {
        let state = state_for(&self.dir);
        let mut last = state.lock().await;
        // The watch outlives each snapshot's record of what it saw.
        let mut watch = last.as_mut().and_then(|w| w.watch.take());
        let again = match last.take() {
            Some(watched) => self.again(watched, &mut watch, path, bounds).await,
            None => Again::Full,
        };
        let taken = match again {
            Again::Quiet(mut watched) => {
                let tree = (watched.seen.tree.clone(), watched.seen.files);
                watched.watch = watch;
                *last = Some(watched);
                Ok((tree, Via::Watched))
            }
            Again::Same(watched) => {
                let tree = (watched.seen.tree.clone(), watched.seen.files);
                *last = self.watching(Some(watched), watch, bounds).await;
                Ok((tree, Via::Seen))
            }
            Again::Refreshed(tree, files, watched) => {
                *last = self.watching(watched, watch, bounds).await;
                Ok(((tree, files), Via::Refresh))
            }
            Again::Full => match self.take_locked(path, bounds).await {
                Ok((tree, files, watched)) => {
                    *last = self.watching(watched, watch, bounds).await;
                    Ok(((tree, files), Via::Git))
                }
                Err(skip) => Err(skip),
            },
            Again::Skip(skip) => Err(skip),
        };
        match taken {
            Ok(((tree, files), via)) => {
                let snap = WorkspaceSnapshot {
                    at,
                    tree: Some(tree),
                    files: Some(files),
                    skipped: None,
                };
                (snap, Some(via))
            }
            Err(Skip(reason)) => (WorkspaceSnapshot::skipped(at, reason), None),
        }
    }

    /// `watched` with its watch covering every directory its tree depends
    /// on (started if there is none yet; given up if it cannot cover them),
    /// off the async threads: a first watch of a large tree adds thousands.
    async fn watching(
        &self,
        watched: Option<Watched>,
        watch: Option<watch::Watch>,
        bounds: SnapshotBounds,
    ) -> Option<Watched> {
        let mut watched = watched?;
        if self.watch_cap == 0 {
            return Some(watched);
        }
        let (dirs, cap) = (watched.seen.watch_dirs(), self.watch_cap);
        let covered = blocking(bounds, move || {
            let mut watch = watch.or_else(watch::Watch::start)?;
            watch.cover(dirs, cap);
            Some(watch)
        });
        watched.watch = covered.await.flatten();
        Some(watched)
    }

    /// The snapshot after a previous one that saw `watched` (see
    /// [`seen`]): within the bound and with the private index still there,
    /// a quiet watch answers at once (nothing happened in the tree since
    /// the last snapshot began); otherwise every path the tree depends on
    /// is stated (off the async threads, within the command deadline) and a
    /// few changed ones are refreshed.
    async fn again(
        &self,
        watched: Watched,
        watch: &mut Option<watch::Watch>,
        path: &Path,
        bounds: SnapshotBounds,
    ) -> Again {
        if watched.seen.files > bounds.max_files || !self.index().is_file() {
            return Again::Full;
        }
        // Read before anything else looks at the tree: what happens from
        // here on is the next snapshot's to see.
        if watch.as_mut().is_some_and(watch::Watch::quiet) && watched.seen.answers_for(path) {
            return Again::Quiet(watched);
        }
        let root = path.to_path_buf();
        let checked = blocking(bounds, move || {
            let verdict = watched.seen.check(&root);
            (watched, verdict)
        });
        match checked.await {
            Some((watched, seen::Verdict::Same)) => Again::Same(watched),
            Some((watched, seen::Verdict::Changed(dirty))) => {
                match self.refresh(path, watched, dirty, bounds).await {
                    Ok(Some((tree, files, watched))) => Again::Refreshed(tree, files, watched),
                    Ok(None) => Again::Full,
                    Err(skip) => Again::Skip(skip),
                }
            }
            Some((_, seen::Verdict::Unknown)) | None => Again::Full,
        }
    }
}

/// `f` run off the async threads, within the command deadline; `None`
/// past it (or if it panicked).
async fn blocking<T: Send + 'static>(
    bounds: SnapshotBounds,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let run = tokio::task::spawn_blocking(f);
    tokio::time::timeout(bounds.timeout, run).await.ok()?.ok()
}

/// A snapshot not taken, and why.
#[derive(Debug)]
struct Skip(SnapshotSkipped);

fn skip(e: GitError) -> Skip {
    Skip(match e {
        GitError::Missing => SnapshotSkipped::GitMissing,
        GitError::NotRepository => SnapshotSkipped::NotGit,
        GitError::Timeout(_) => SnapshotSkipped::Timeout,
        e @ (GitError::Failed { .. } | GitError::Io(_)) => {
            tracing::warn!(error = %e, "workspace snapshot failed");
            SnapshotSkipped::Failed
        }
    })
}

/// The entry count in an index file's header (`DIRC`, version, count; all
/// big-endian), `None` when it cannot be read.
fn index_entries(index: &Path) -> Option<u64> {
    use std::io::Read;
    let mut header = [0u8; 12];
    std::fs::File::open(index)
        .ok()?
        .read_exact(&mut header)
        .ok()?;
    if &header[..4] != b"DIRC" {
        return None;
    }
    Some(u64::from(u32::from_be_bytes([
        header[8], header[9], header[10], header[11],
    ])))
}

mod diff;
mod full;
mod refresh;
mod repo;
mod seen;
#[cfg(test)]
#[allow(clippy::disallowed_methods)] // builds repositories with git itself
mod tests;
mod watch;
