//! The git processes a snapshot of a git workspace starts, counted (the
//! guard of issue 39: a turn takes two snapshots; the bound per snapshot
//! is stated here and in docs/operations.md).

use super::*;
use crate::children::git_started_here;

/// The git processes `f` started on this thread.
async fn git_runs<T>(f: impl std::future::Future<Output = T>) -> (u64, T) {
    let before = git_started_here();
    let out = f.await;
    (git_started_here() - before, out)
}

#[tokio::test]
async fn git_processes_per_snapshot_are_bounded_and_none_when_nothing_changed() {
    let (tmp, repo, _) = fixture();
    for (name, dir) in [
        (
            "stat",
            SnapshotDir::new(&tmp.path().join("home"), "c-stat").without_watch(),
        ),
        (
            "watch",
            SnapshotDir::new(&tmp.path().join("home"), "c-watch"),
        ),
    ] {
        // What was written before (rules files among them) is settled
        // before the first look, so what follows is answered from it.
        wait_for_clock(tmp.path(), clock(tmp.path()), true);
        // The first: `rev-parse`, then `add`, `ls-files` and `config` side
        // by side, then `write-tree` (the seed is a copy of the user's index).
        let (n, (first, via)) = git_runs(takes(&dir, &repo)).await;
        assert_eq!((via, n), (Some(Via::Git), 5), "{name}: first snapshot");
        // Nothing changed: no git, whether stated or watched.
        for _ in 0..4 {
            wait_for_clock(tmp.path(), clock(tmp.path()), true);
            let (n, (tree, via)) = git_runs(takes(&dir, &repo)).await;
            assert_eq!(tree, first);
            assert!(
                matches!(via, Some(Via::Seen | Via::Watched)),
                "{name}: {via:?}"
            );
            assert_eq!(n, 0, "{name}: git runs for an unchanged tree");
        }
        // One file edited: `add` and `write-tree` of that path alone.
        wait_for_clock(tmp.path(), clock(tmp.path()), false);
        std::fs::write(repo.join("a.txt"), format!("{name}\n")).unwrap();
        let (n, (_, via)) = git_runs(takes(&dir, &repo)).await;
        assert_eq!((via, n), (Some(Via::Refresh), 2), "{name}: one edit");
        // One new file: `ls-files` asks whether it is ignored, then the same.
        wait_for_clock(tmp.path(), clock(tmp.path()), false);
        std::fs::write(repo.join(format!("{name}.txt")), "n\n").unwrap();
        let (n, (_, via)) = git_runs(takes(&dir, &repo)).await;
        assert_eq!((via, n), (Some(Via::Refresh), 3), "{name}: one new file");
        // A diff (`turns show`, a fenced turn): `rev-parse` and `diff-tree`.
        let bounds = SnapshotBounds::default();
        let now = dir.take(&repo, SnapshotPoint::Outcome, bounds).await;
        let (from, to) = (first.clone().unwrap(), now.tree.unwrap());
        let (n, _) = git_runs(dir.diff(&repo, &from, &to, bounds)).await;
        assert_eq!(n, 2, "{name}: a diff");
        let (n, files) = git_runs(dir.diff(&repo, &to, &to, bounds)).await;
        assert_eq!(
            (n, files.unwrap().len()),
            (0, 0),
            "{name}: a tree against itself"
        );
    }
}
