//! The watch (inotify, Linux): a tree nothing touched is answered without
//! a stat walk, and every touch between snapshots is seen.

use super::*;

#[tokio::test]
async fn a_watched_tree_nothing_touched_costs_no_stat_walk_and_every_touch_is_seen() {
    let (tmp, repo, _) = fixture();
    let dir = SnapshotDir::new(&tmp.path().join("home"), "watched");
    let (first, via) = takes(&dir, &repo).await;
    assert_eq!(via, Some(Via::Git));
    // The watch began after that snapshot: the next one states every
    // path; from then on the watch answers.
    let (tree, via) = takes(&dir, &repo).await;
    assert_ne!(via, Some(Via::Watched));
    assert_eq!(tree, first);
    until_watched(&dir, &repo, &first).await;
    // An ignored directory is not watched: nothing the tree holds.
    std::fs::write(repo.join("target/big.bin"), "still ignored").unwrap();
    assert_eq!(takes(&dir, &repo).await.1, Some(Via::Watched));

    // A change that keeps size and mtime is an event all the same.
    let b = repo.join("src/b.txt");
    let mtime = std::fs::metadata(&b).unwrap().modified().unwrap();
    std::fs::write(&b, "owt\n").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&b)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    assert!(!dir.likely_quick(), "an event is waiting");
    let (edited, via) = takes(&dir, &repo).await;
    assert_ne!(via, Some(Via::Watched));
    assert_ne!(edited, first, "the edit is in the tree");

    // A new directory: its watch is added by the snapshot that sees it,
    // so the next one states every path again before the watch answers.
    std::fs::create_dir_all(repo.join("src/deep")).unwrap();
    std::fs::write(repo.join("src/deep/c.txt"), "c\n").unwrap();
    let (with_dir, via) = takes(&dir, &repo).await;
    assert_ne!(via, Some(Via::Watched));
    assert_ne!(with_dir, edited);
    let (tree, via) = takes(&dir, &repo).await;
    assert_ne!(
        via,
        Some(Via::Watched),
        "a watch added last time is not trusted yet"
    );
    assert_eq!(tree, with_dir);
    let (tree, via) = takes(&dir, &repo).await;
    assert_eq!(
        (tree.as_ref(), via),
        (with_dir.as_ref(), Some(Via::Watched))
    );
    // A write in the new directory reaches the tree.
    std::fs::write(repo.join("src/deep/c.txt"), "c, changed\n").unwrap();
    let (tree, via) = takes(&dir, &repo).await;
    assert_ne!(via, Some(Via::Watched));
    assert_ne!(tree, with_dir);
    // And the user's rules: a new ignore rule is a change to the tree.
    let settled = takes(&dir, &repo).await.0;
    until_watched(&dir, &repo, &settled).await;
    std::fs::write(repo.join(".gitignore"), "target/\n*.txt\n").unwrap();
    let (ignoring, via) = takes(&dir, &repo).await;
    assert_ne!(via, Some(Via::Watched));
    assert_ne!(ignoring, tree);
}

#[tokio::test]
async fn a_rules_directory_that_does_not_exist_yet_is_watched_through_its_ancestor() {
    let (tmp, repo, _) = fixture();
    let dir = SnapshotDir::new(&tmp.path().join("home"), "rules");
    // An excludes file in a directory that does not exist (as
    // `~/.config/git/ignore` on most machines).
    let excludes = tmp.path().join("cfg/git/ignore");
    let value = excludes.to_str().unwrap();
    git(&repo, &["config", "core.excludesFile", value]);
    let (first, _) = takes(&dir, &repo).await;
    until_watched(&dir, &repo, &first).await;
    std::fs::create_dir_all(excludes.parent().unwrap()).unwrap();
    std::fs::write(&excludes, "*.log\n").unwrap();
    let (ignoring, via) = takes(&dir, &repo).await;
    assert_eq!(
        via,
        Some(Via::Git),
        "a new rules file sends the tree to git"
    );
    // The directory exists now: watched itself, and trusted again.
    until_watched(&dir, &repo, &ignoring).await;
    std::fs::write(repo.join("x.log"), "ignored\n").unwrap();
    std::fs::write(repo.join("x.txt"), "not\n").unwrap();
    let (with_new, via) = takes(&dir, &repo).await;
    assert_ne!(via, Some(Via::Watched));
    let whole = SnapshotDir::new(&tmp.path().join("home"), "rules-whole")
        .take(&repo, SnapshotPoint::Outcome, SnapshotBounds::default())
        .await;
    assert_eq!(with_new, whole.tree, "x.log is ignored, x.txt is not");
    until_watched(&dir, &repo, &with_new).await;
    std::fs::write(&excludes, "").unwrap();
    let (_, via) = takes(&dir, &repo).await;
    assert_eq!(
        via,
        Some(Via::Git),
        "a changed rules file sends the tree to git"
    );
}

#[tokio::test]
async fn a_directory_moved_away_and_another_put_in_its_place_is_watched_anew() {
    let (tmp, repo, _) = fixture();
    let dir = SnapshotDir::new(&tmp.path().join("home"), "moved");
    std::fs::create_dir_all(repo.join("src/inner")).unwrap();
    std::fs::write(repo.join("src/inner/i.txt"), "i\n").unwrap();
    let (first, _) = takes(&dir, &repo).await;
    until_watched(&dir, &repo, &first).await;
    // The watched directories move (their watches with them) and new ones
    // take their paths.
    std::fs::rename(repo.join("src"), repo.join("old")).unwrap();
    std::fs::create_dir_all(repo.join("src/inner")).unwrap();
    std::fs::write(repo.join("src/inner/i.txt"), "new i\n").unwrap();
    let (swapped, via) = takes(&dir, &repo).await;
    assert_ne!(via, Some(Via::Watched));
    assert_ne!(swapped, first);
    until_watched(&dir, &repo, &swapped).await;
    // A write in the directory now at the old path is an event.
    std::fs::write(repo.join("src/inner/i.txt"), "newer i\n").unwrap();
    let (written, via) = takes(&dir, &repo).await;
    assert_ne!(via, Some(Via::Watched), "the new src/inner is watched");
    assert_ne!(written, swapped);
    // And in the moved one.
    until_watched(&dir, &repo, &written).await;
    std::fs::write(repo.join("old/inner/i.txt"), "moved i\n").unwrap();
    let (moved, via) = takes(&dir, &repo).await;
    assert_ne!(via, Some(Via::Watched), "old/inner is watched");
    assert_ne!(moved, written);
}

#[tokio::test]
async fn a_tree_past_the_watch_cap_states_its_paths() {
    let (tmp, repo, _) = fixture();
    // The fixture has 2 directories of the tree besides the rules ones.
    let dir = SnapshotDir::new(&tmp.path().join("home"), "capped").with_watch_cap(2);
    let (first, _) = takes(&dir, &repo).await;
    for _ in 0..4 {
        wait_for_clock(tmp.path(), clock(tmp.path()), true);
        let (tree, via) = takes(&dir, &repo).await;
        assert_eq!(tree, first);
        assert_ne!(
            via,
            Some(Via::Watched),
            "a tree past the cap is not watched"
        );
    }
    assert!(!dir.likely_quick());
}

#[test]
fn a_full_event_queue_is_never_quiet() {
    let max: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(16_384);
    if max > 200_000 {
        return; // Too many writes for a unit test on this machine.
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().to_path_buf();
    let mut w = crate::git::snapshot::watch::Watch::start().expect("inotify");
    // Only `x` matters in the directory (as a rules directory).
    let dirs = vec![(d.clone(), Some(vec![std::ffi::OsString::from("x")]))];
    w.cover(dirs.clone(), 16);
    w.cover(dirs.clone(), 16);
    assert!(w.quiet(), "trusted, nothing happened");
    std::fs::write(d.join("other"), "o").unwrap();
    w.cover(dirs.clone(), 16);
    assert!(w.quiet(), "a name that does not matter");
    // More events than the queue holds, none naming `x`: the overflow
    // alone says something may have been missed. Two files in turn, so
    // the kernel merges no event into the one before it.
    for i in 0..max {
        let name = if i % 2 == 0 { "a" } else { "b" };
        std::fs::write(d.join(name), "x").unwrap();
    }
    assert!(!w.quiet(), "an overflowed queue is not quiet");
    w.cover(dirs, 16);
    assert!(w.quiet(), "trusted again once drained and covered");
}
