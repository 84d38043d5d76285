//! Snapshots of real repositories made with the git CLI in a temp dir.

use std::path::Path;
use std::process::Command;

use lapis_protocol::snapshot::SnapshotDiff;

use super::diff::parse_numstat;
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

mod counts;
mod seen;
#[cfg(target_os = "linux")]
mod watch;
