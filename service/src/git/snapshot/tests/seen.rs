//! What stat data alone sees: the snapshots of a workspace without its
//! watch, after every kind of change.

use super::*;

#[tokio::test]
async fn an_unchanged_tree_is_answered_without_git_and_a_racy_edit_still_reaches_git() {
    let (tmp, repo, dir) = fixture();
    let bounds = SnapshotBounds::default();
    // Everything in the fixture is stamped before the next snapshot's
    // reference second.
    wait_for_clock(tmp.path(), clock(tmp.path()), true);
    let (first, via) = dir.take_via(&repo, SnapshotPoint::Boundary, bounds).await;
    assert_eq!(via, Some(Via::Git));
    let (again, via) = dir.take_via(&repo, SnapshotPoint::Outcome, bounds).await;
    assert_eq!(via, Some(Via::Seen));
    assert_eq!(
        (again.tree.as_deref(), again.files),
        (first.tree.as_deref(), first.files)
    );
    // An ignored file changing is nothing the tree holds.
    std::fs::write(repo.join("target/big.bin"), "still ignored").unwrap();
    let (_, via) = dir.take_via(&repo, SnapshotPoint::Outcome, bounds).await;
    assert_eq!(via, Some(Via::Seen));

    // The same size and the old mtime: only the ctime moved, within the
    // second of the last look (git's racy case).
    let b = repo.join("src/b.txt");
    let mtime = std::fs::metadata(&b).unwrap().modified().unwrap();
    std::fs::write(&b, "owt\n").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&b)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let (edited, via) = dir.take_via(&repo, SnapshotPoint::Outcome, bounds).await;
    assert_eq!(via, Some(Via::Refresh));
    let (from, to) = (first.tree.unwrap(), edited.tree.unwrap());
    let files = dir.diff(&repo, &from, &to, bounds).await.unwrap();
    assert_eq!(
        files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(),
        ["src/b.txt"]
    );
}

#[tokio::test]
async fn every_kind_of_change_is_seen_by_comparing_stat_data_alone() {
    use std::os::unix::fs::PermissionsExt;
    let (tmp, repo, dir) = fixture();
    // A clock far ahead: no path is ever too recent, so each change below
    // is noticed by its stat data or not at all.
    let dir = dir.with_reference(i64::MAX);
    let bounds = SnapshotBounds::default();
    std::fs::create_dir_all(repo.join("empty")).unwrap();
    std::fs::create_dir_all(repo.join("logs")).unwrap();
    std::fs::write(repo.join("logs/a.log"), "ignored\n").unwrap();
    std::fs::write(repo.join("secret.txt"), "s\n").unwrap();
    std::fs::write(repo.join(".git/info/exclude"), "*.log\nsecret.txt\n").unwrap();

    type Change = fn(&Path);
    let cases: [(&str, Change, &str, Via); 9] = [
        (
            "a longer file",
            |r| std::fs::write(r.join("a.txt"), "one\ntwo\n").unwrap(),
            "a.txt",
            Via::Refresh,
        ),
        (
            "same size, old mtime",
            |r| {
                let b = r.join("src/b.txt");
                let mtime = std::fs::metadata(&b).unwrap().modified().unwrap();
                std::fs::write(&b, "TWO\n").unwrap();
                let f = std::fs::File::options().write(true).open(&b).unwrap();
                f.set_modified(mtime).unwrap();
            },
            "src/b.txt",
            Via::Refresh,
        ),
        (
            "a new file",
            |r| std::fs::write(r.join("new.txt"), "n\n").unwrap(),
            "new.txt",
            Via::Refresh,
        ),
        (
            "a new file in an empty directory",
            |r| std::fs::write(r.join("empty/x.txt"), "x\n").unwrap(),
            "empty/x.txt",
            Via::Refresh,
        ),
        (
            "a new file beside only ignored ones",
            |r| std::fs::write(r.join("logs/new.txt"), "l\n").unwrap(),
            "logs/new.txt",
            Via::Refresh,
        ),
        (
            "a new directory",
            |r| {
                std::fs::create_dir_all(r.join("src/deep/er")).unwrap();
                std::fs::write(r.join("src/deep/er/f.txt"), "f\n").unwrap()
            },
            "src/deep/er/f.txt",
            Via::Refresh,
        ),
        (
            "a deletion",
            |r| std::fs::remove_file(r.join("new.txt")).unwrap(),
            "new.txt",
            Via::Refresh,
        ),
        (
            "an executable bit",
            |r| {
                let p = r.join("a.txt");
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap()
            },
            "a.txt",
            Via::Refresh,
        ),
        (
            "an exclude rule dropped",
            |r| std::fs::write(r.join(".git/info/exclude"), "*.log\n").unwrap(),
            "secret.txt",
            Via::Git,
        ),
    ];
    for (what, change, path, way) in cases {
        // The first look goes to git; after a change, the look that saw it.
        let (before, _) = dir.take_via(&repo, SnapshotPoint::Boundary, bounds).await;
        let (again, via) = dir.take_via(&repo, SnapshotPoint::Boundary, bounds).await;
        assert_eq!(
            (via, &again.tree),
            (Some(Via::Seen), &before.tree),
            "{what}"
        );
        // The change gets a later stamp than anything the look recorded.
        wait_for_clock(tmp.path(), clock(tmp.path()), false);
        change(&repo);
        let (after, via) = dir.take_via(&repo, SnapshotPoint::Outcome, bounds).await;
        assert_eq!(via, Some(way), "{what}: not seen as expected");
        let (from, to) = (before.tree.unwrap(), after.tree.unwrap());
        let files = dir.diff(&repo, &from, &to, bounds).await.unwrap();
        let paths: Vec<_> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, [path], "{what}");
    }
}

#[tokio::test]
async fn a_workspace_below_the_top_sees_the_ignore_rules_above_it() {
    let (tmp, repo, dir) = fixture();
    let dir = dir.with_reference(i64::MAX);
    let bounds = SnapshotBounds::default();
    std::fs::write(repo.join(".gitignore"), "target/\nsrc/*.tmp\n").unwrap();
    std::fs::write(repo.join("src/x.tmp"), "t\n").unwrap();
    let ws = repo.join("src");
    let (before, _) = dir.take_via(&ws, SnapshotPoint::Boundary, bounds).await;
    let (_, via) = dir.take_via(&ws, SnapshotPoint::Boundary, bounds).await;
    assert_eq!(via, Some(Via::Seen));
    // What the workspace answers for is its own path.
    let (_, via) = dir.take_via(&repo, SnapshotPoint::Boundary, bounds).await;
    assert_eq!(via, Some(Via::Git));
    let (_, _) = dir.take_via(&ws, SnapshotPoint::Boundary, bounds).await;
    wait_for_clock(tmp.path(), clock(tmp.path()), false);
    // The rule above the workspace goes: the file it hid is in the tree.
    std::fs::write(repo.join(".gitignore"), "target/\n").unwrap();
    let (after, via) = dir.take_via(&ws, SnapshotPoint::Outcome, bounds).await;
    assert_eq!(via, Some(Via::Git));
    let (from, to) = (before.tree.unwrap(), after.tree.unwrap());
    let files = dir.diff(&ws, &from, &to, bounds).await.unwrap();
    let paths: Vec<_> = files.iter().map(|f| f.path.as_str()).collect();
    assert!(paths.contains(&"src/x.tmp"), "{paths:?}");
}

#[tokio::test]
async fn a_refreshed_tree_is_the_tree_a_whole_snapshot_builds() {
    let (tmp, repo, dir) = fixture();
    let bounds = SnapshotBounds::default();
    let home = tmp.path().join("home");
    std::fs::write(repo.join(".git/info/exclude"), "*.log\n").unwrap();
    std::fs::create_dir_all(repo.join("old/inner")).unwrap();
    std::fs::write(repo.join("old/inner/o.txt"), "o\n").unwrap();
    std::fs::write(repo.join("old/keep.log"), "ignored\n").unwrap();
    type Change = fn(&Path);
    let steps: [(&str, Change, Via); 9] = [
        (
            "an edit",
            |r| std::fs::write(r.join("a.txt"), "1\n").unwrap(),
            Via::Refresh,
        ),
        (
            "a rename",
            |r| std::fs::rename(r.join("src/b.txt"), r.join("src/c.txt")).unwrap(),
            Via::Refresh,
        ),
        (
            "a new directory holding an ignored file and one that is not",
            |r| {
                std::fs::create_dir_all(r.join("fresh/sub")).unwrap();
                std::fs::write(r.join("fresh/sub/x.log"), "i\n").unwrap();
                std::fs::write(r.join("fresh/sub/y.txt"), "y\n").unwrap();
            },
            Via::Refresh,
        ),
        (
            "a file in the new directory",
            |r| std::fs::write(r.join("fresh/z.txt"), "z\n").unwrap(),
            Via::Refresh,
        ),
        (
            "only an ignored file",
            |r| std::fs::write(r.join("top.log"), "i\n").unwrap(),
            Via::Refresh,
        ),
        (
            "a file under an ignored directory",
            |r| std::fs::write(r.join("target/t.txt"), "t\n").unwrap(),
            Via::Seen,
        ),
        (
            "a directory removed",
            |r| std::fs::remove_dir_all(r.join("old")).unwrap(),
            Via::Refresh,
        ),
        (
            "the removed directory back, empty",
            |r| std::fs::create_dir_all(r.join("old")).unwrap(),
            Via::Refresh,
        ),
        (
            "a file in it",
            |r| std::fs::write(r.join("old/back.txt"), "b\n").unwrap(),
            Via::Refresh,
        ),
    ];
    // The rules files written above are settled before the first look
    // (one touched within its second would send every look to git).
    wait_for_clock(tmp.path(), clock(tmp.path()), true);
    let first = dir.take(&repo, SnapshotPoint::Boundary, bounds).await;
    assert!(first.tree.is_some());
    for (i, (what, change, way)) in steps.into_iter().enumerate() {
        // The change gets a later stamp than anything the last look recorded.
        wait_for_clock(tmp.path(), clock(tmp.path()), false);
        change(&repo);
        let (refreshed, via) = dir.take_via(&repo, SnapshotPoint::Outcome, bounds).await;
        let whole = SnapshotDir::new(&home, &format!("whole{i}"))
            .take(&repo, SnapshotPoint::Outcome, bounds)
            .await;
        assert_eq!(
            (refreshed.tree.as_deref(), refreshed.files),
            (whole.tree.as_deref(), whole.files),
            "{what}"
        );
        // Within the second of the last look a path is suspect and goes to
        // git again, so only a path git never reads can be answered from
        // what was seen here.
        assert!(
            via == Some(way) || (way == Via::Seen && via == Some(Via::Refresh)),
            "{what}: {via:?}"
        );
    }
    let (_, via) = dir.take_via(&repo, SnapshotPoint::Outcome, bounds).await;
    assert_ne!(via, Some(Via::Git), "what was seen survives the refreshes");
}

#[tokio::test]
async fn many_changes_or_a_new_nested_repository_stage_the_whole_tree() {
    let (tmp, repo, dir) = fixture();
    let dir = dir.with_reference(i64::MAX);
    let bounds = SnapshotBounds::default();
    let many = crate::git::snapshot::seen::MAX_CHANGES + 1;
    std::fs::create_dir_all(repo.join("many")).unwrap();
    for i in 0..many {
        std::fs::write(repo.join(format!("many/{i}.txt")), "a\n").unwrap();
    }
    let (before, _) = dir.take_via(&repo, SnapshotPoint::Boundary, bounds).await;
    wait_for_clock(tmp.path(), clock(tmp.path()), false);
    for i in 0..many {
        std::fs::write(repo.join(format!("many/{i}.txt")), "bb\n").unwrap();
    }
    let (after, via) = dir.take_via(&repo, SnapshotPoint::Outcome, bounds).await;
    assert_eq!(via, Some(Via::Git));
    let (from, to) = (before.tree.unwrap(), after.tree.clone().unwrap());
    let files = dir.diff(&repo, &from, &to, bounds).await.unwrap();
    assert_eq!(files.len(), many);

    // One change fewer than the limit is refreshed.
    wait_for_clock(tmp.path(), clock(tmp.path()), false);
    for i in 0..crate::git::snapshot::seen::MAX_CHANGES {
        std::fs::write(repo.join(format!("many/{i}.txt")), "ccc\n").unwrap();
    }
    let (_, via) = dir.take_via(&repo, SnapshotPoint::Outcome, bounds).await;
    assert_eq!(via, Some(Via::Refresh));

    // A repository appearing inside the tree: git records its HEAD commit.
    wait_for_clock(tmp.path(), clock(tmp.path()), false);
    let nested = repo.join("nested");
    std::fs::create_dir_all(&nested).unwrap();
    git(&nested, &["init", "-q"]);
    std::fs::write(nested.join("n.txt"), "n\n").unwrap();
    git(&nested, &["add", "-A"]);
    git(&nested, &["commit", "-qm", "n"]);
    let (_, via) = dir.take_via(&repo, SnapshotPoint::Outcome, bounds).await;
    assert_eq!(via, Some(Via::Git));
}
