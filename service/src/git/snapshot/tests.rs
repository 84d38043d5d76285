//! Snapshots of real repositories made with the git CLI in a temp dir.

use std::path::Path;
use std::process::Command;

use super::*;

/// Runs git in `dir` for a fixture (identity given, no global config).
fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

/// A repository with two committed files, one ignored file and a home.
fn fixture() -> (tempfile::TempDir, PathBuf, SnapshotDir) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    std::fs::write(repo.join("src/b.txt"), "two\n").unwrap();
    std::fs::write(repo.join(".gitignore"), "target/\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "init"]);
    std::fs::create_dir_all(repo.join("target")).unwrap();
    std::fs::write(repo.join("target/big.bin"), "ignored").unwrap();
    // These tests check what stat data and git see: without the watch,
    // which would answer most of their snapshots first (tested below).
    let dir = SnapshotDir::new(&tmp.path().join("home"), "w1").without_watch();
    (tmp, repo, dir)
}

fn bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

#[tokio::test]
async fn a_snapshot_sees_changes_and_untracked_files_but_never_writes_the_users_repo() {
    let (_tmp, repo, dir) = fixture();
    // The user has something staged: their index differs from HEAD.
    std::fs::write(repo.join("a.txt"), "one\nstaged\n").unwrap();
    git(&repo, &["add", "a.txt"]);
    let (index, head) = (
        bytes(&repo.join(".git/index")),
        bytes(&repo.join(".git/HEAD")),
    );
    let refs = bytes(&repo.join(".git/refs/heads/main"));
    let objects = std::fs::read_dir(repo.join(".git/objects"))
        .unwrap()
        .count();

    let bounds = SnapshotBounds::default();
    let first = dir.take(&repo, SnapshotPoint::Boundary, bounds).await;
    let tree1 = first.tree.clone().expect("a tree");
    assert_eq!(first.skipped, None);
    assert_eq!(first.files, Some(3));

    // Nothing changed: the same tree.
    let again = dir.take(&repo, SnapshotPoint::Boundary, bounds).await;
    assert_eq!(again.tree.as_deref(), Some(tree1.as_str()));

    // A change, a new untracked file and a deletion.
    std::fs::write(repo.join("src/b.txt"), "two\nthree\n").unwrap();
    std::fs::write(repo.join("new.txt"), "n\n").unwrap();
    std::fs::remove_file(repo.join("a.txt")).unwrap();
    std::fs::write(repo.join("target/more.bin"), "ignored too").unwrap();
    let second = dir.take(&repo, SnapshotPoint::Outcome, bounds).await;
    let tree2 = second.tree.clone().expect("a tree");
    assert_ne!(tree1, tree2);
    let files = dir.diff(&repo, &tree1, &tree2, bounds).await.unwrap();
    let paths: Vec<_> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["a.txt", "new.txt", "src/b.txt"]);
    assert_eq!((files[2].added, files[2].deleted), (Some(1), Some(0)));

    // The user's index, HEAD, branch and object store are untouched.
    assert_eq!(bytes(&repo.join(".git/index")), index);
    assert_eq!(bytes(&repo.join(".git/HEAD")), head);
    let refs_after = bytes(&repo.join(".git/refs/heads/main"));
    assert_eq!(refs_after, refs);
    assert_eq!(
        std::fs::read_dir(repo.join(".git/objects"))
            .unwrap()
            .count(),
        objects
    );
    assert!(!repo.join(".git/refs/stash").exists());
}

#[tokio::test]
async fn a_fenced_turn_sees_what_changed_since_its_boundary() {
    let (_tmp, repo, dir) = fixture();
    let bounds = SnapshotBounds::default();
    let boundary = dir.take(&repo, SnapshotPoint::Boundary, bounds).await;
    let none = dir.since(&repo, &boundary, bounds).await;
    assert_eq!(
        none,
        SnapshotDiff {
            files: vec![],
            skipped: None
        }
    );
    std::fs::write(repo.join("touched.txt"), "x\n").unwrap();
    let diff = dir.since(&repo, &boundary, bounds).await;
    let paths: Vec<_> = diff.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["touched.txt"]);
}

#[tokio::test]
async fn snapshots_that_cannot_be_taken_say_why() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = tmp.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let dir = SnapshotDir::new(&tmp.path().join("home"), "w2");
    let bounds = SnapshotBounds::default();
    let s = dir.take(&plain, SnapshotPoint::Boundary, bounds).await;
    assert_eq!(s.skipped, Some(SnapshotSkipped::NotGit), "{s:?}");
    assert_eq!(s.tree, None);

    let (_tmp, repo, dir) = fixture();
    let small = SnapshotBounds {
        max_files: 2,
        ..bounds
    };
    let s = dir.take(&repo, SnapshotPoint::Boundary, small).await;
    assert_eq!(s.skipped, Some(SnapshotSkipped::TooLarge), "{s:?}");
    // The same tree fits a larger bound.
    let s = dir.take(&repo, SnapshotPoint::Boundary, bounds).await;
    assert!(s.tree.is_some(), "{s:?}");

    let since = dir
        .since(
            &repo,
            &WorkspaceSnapshot::skipped(SnapshotPoint::Boundary, SnapshotSkipped::Timeout),
            bounds,
        )
        .await;
    assert_eq!(since.skipped, Some(SnapshotSkipped::Timeout));
}

#[test]
fn numstat_output_parses_with_binary_files() {
    let out = b"1\t2\tb.txt\0-\t-\timg.png\0";
    let files = parse_numstat(out);
    assert_eq!(files[0].path, "b.txt");
    assert_eq!((files[0].added, files[0].deleted), (Some(1), Some(2)));
    assert_eq!((files[1].added, files[1].deleted), (None, None));
}

/// Waits until the file system clock stamps a file written in `dir` later
/// than `after` (whole seconds when `whole`, else any tick): a condition,
/// not a duration.
fn wait_for_clock(dir: &Path, after: (i64, i64), whole: bool) {
    use std::os::unix::fs::MetadataExt;
    let probe = dir.join("clock-probe");
    loop {
        std::fs::write(&probe, "x").unwrap();
        let m = std::fs::metadata(&probe).unwrap();
        let now = (m.mtime(), m.mtime_nsec());
        if (whole && now.0 > after.0) || (!whole && now > after) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// The file system clock's time now, as a file written in `dir` gets it.
fn clock(dir: &Path) -> (i64, i64) {
    use std::os::unix::fs::MetadataExt;
    let probe = dir.join("clock-probe");
    std::fs::write(&probe, "x").unwrap();
    let m = std::fs::metadata(&probe).unwrap();
    (m.mtime(), m.mtime_nsec())
}

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
    let many = seen::MAX_CHANGES + 1;
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
    for i in 0..seen::MAX_CHANGES {
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

/// One snapshot of `repo`: its tree and how it was got.
async fn takes(dir: &SnapshotDir, repo: &Path) -> (Option<String>, Option<Via>) {
    let (snap, via) = dir
        .take_via(repo, SnapshotPoint::Outcome, SnapshotBounds::default())
        .await;
    (snap.tree, via)
}

/// Snapshots until the watch answers (a file touched within the reference
/// second is re-staged once more first), each time with tree `want`.
async fn until_watched(dir: &SnapshotDir, repo: &Path, want: &Option<String>) {
    for _ in 0..8 {
        let (tree, via) = takes(dir, repo).await;
        assert_eq!(&tree, want);
        if via == Some(Via::Watched) {
            return;
        }
        wait_for_clock(repo.parent().unwrap(), clock(repo.parent().unwrap()), true);
    }
    panic!("the watch never answered");
}

#[cfg(target_os = "linux")]
#[tokio::test]
#[ignore = "issue 39: the watch never answers quiet here yet (events not yet accounted for); evidence defaults to stat until it does"]
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
