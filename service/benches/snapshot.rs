//! `cargo bench -p lapis-service --bench snapshot [-- FILES RUNS]`: the
//! cost of a workspace snapshot (issue 31's figure: ≤ 150 ms on a
//! 50k-file repository when nothing changed since the previous snapshot).
//!
//! Generates a repository of FILES files (default 50,000: 500 directories
//! of 100 small files) in a temp dir, commits it, then measures, RUNS times
//! each (default 15): the snapshot when nothing changed (answered from
//! what the previous one saw, without git, once the files are older than
//! the previous look; the row says how many runs still went to git); the
//! snapshot after one file changed and after one new file (each row says
//! how many runs git refreshed only the changed paths and how many staged
//! the whole tree); and, as the floor measured in the same run, `git status
//! --porcelain` and `git update-index --refresh` on the user's own index
//! (what any git tool pays to look at that tree). Measure in the default
//! bench profile, optimised as the shipped binary is: `--profile dev`
//! builds faster but its per-path bookkeeping is unoptimised (nothing
//! changed read 322.7 ms there against 187.8 ms optimised, at load 3–5).
//! Every row is measured twice, on one tree: with `evidence: "stat"`
//! (each snapshot states every path) and with the workspace's watch
//! (`"watch"`, the default where inotify works: a snapshot of a tree
//! nothing touched reads one empty event queue). Issue 39's figures: the
//! 1.4k-file case (`-- 1400 31`, about this repository) and the 50k-file
//! case (the default). Prints Markdown rows (three decimals: a watched
//! snapshot takes microseconds); no thresholds.

// Bench and test code starts its own processes (the counted-spawn rule of
// service/clippy.toml is for the library).
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use lapis_protocol::snapshot::SnapshotPoint;
use lapis_service::git::snapshot::{SnapshotBounds, SnapshotDir, Via};

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=b", "-c", "user.email=b@b"])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdout(std::process::Stdio::null())
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

fn stats(mut ms: Vec<f64>) -> (f64, f64, f64) {
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (ms[ms.len() / 2], ms[0], ms[ms.len() - 1])
}

fn timed(runs: usize, mut f: impl FnMut()) -> (f64, f64, f64) {
    let ms = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    stats(ms)
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let files: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let runs: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(15);
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let per_dir = 100;
    for i in 0..files {
        let dir = repo.join(format!("src/d{:04}", i / per_dir));
        if i % per_dir == 0 {
            std::fs::create_dir_all(&dir).unwrap();
        }
        std::fs::write(
            dir.join(format!("f{:03}.txt", i % per_dir)),
            format!("file {i}\n"),
        )
        .unwrap();
    }
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "init"]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let home = tmp.path().join("home");
    let stat = measure(
        &rt,
        SnapshotDir::new(&home, "stat").without_watch(),
        &repo,
        files,
        runs,
        0,
    );
    let watch = measure(
        &rt,
        SnapshotDir::new(&home, "watch"),
        &repo,
        files + runs,
        runs,
        1,
    );
    let status = timed(runs, || git(&repo, &["status", "--porcelain"]));
    let refresh = timed(runs, || git(&repo, &["update-index", "-q", "--refresh"]));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "{files} files, {runs} runs, load average at end: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!("| measurement | evidence | median | min | max |");
    println!("|---|---|---|---|---|");
    for (mode, rows) in [("stat", stat), ("watch", watch)] {
        for (name, (med, min, max)) in rows {
            println!("| {name} | {mode} | {med:.3} ms | {min:.3} ms | {max:.3} ms |");
        }
    }
    for (name, (med, min, max)) in [
        ("floor: `git status --porcelain`", status),
        ("floor: `git update-index --refresh`", refresh),
    ] {
        println!("| {name} | | {med:.3} ms | {min:.3} ms | {max:.3} ms |");
    }
}

/// The rows of one way of taking snapshots (`dir`) of the `files`-file
/// repository `repo`: the first, nothing changed, one file changed, one
/// new file (in `src/d0001`, tagged `tag` so two runs do not collide).
fn measure(
    rt: &tokio::runtime::Runtime,
    dir: SnapshotDir,
    repo: &Path,
    files: usize,
    runs: usize,
    tag: usize,
) -> Vec<(String, (f64, f64, f64))> {
    let bounds = SnapshotBounds::default();
    let take_via = || rt.block_on(dir.take_via(repo, SnapshotPoint::Boundary, bounds));
    let t = Instant::now();
    let (first, _) = take_via();
    let first_ms = t.elapsed().as_secs_f64() * 1e3;
    assert!(first.tree.is_some(), "{first:?}");
    assert_eq!(first.files, Some(files as u64));
    // The files were just written: the first look after them goes to git
    // (they are too recent to trust their stat data), later ones need not;
    // a watch is trusted from the third snapshot on.
    let mut unchanged_via = Vec::new();
    let unchanged = timed(runs, || {
        let (s, via) = take_via();
        assert_eq!(s.tree, first.tree);
        unchanged_via.push(via);
    });
    let mut n = 0;
    let mut changed_via = Vec::new();
    let one_changed = timed(runs, || {
        n += 1;
        let edit = format!("edit {tag} {n}\n");
        std::fs::write(repo.join("src/d0000/f000.txt"), edit).unwrap();
        let (s, via) = take_via();
        assert!(s.tree.is_some());
        changed_via.push(via);
    });
    let mut new_via = Vec::new();
    let one_new = timed(runs, || {
        n += 1;
        let new = repo.join(format!("src/d0001/new{tag}-{n}.txt"));
        std::fs::write(new, "new\n").unwrap();
        let (s, via) = take_via();
        assert_eq!(s.files, Some((files + new_via.len() + 1) as u64));
        new_via.push(via);
    });
    let ways = |vias: &[Option<Via>]| {
        let count = |v| vias.iter().filter(|w| **w == Some(v)).count();
        let mut out = Vec::new();
        for (v, name) in [
            (Via::Watched, "watched"),
            (Via::Seen, "stated"),
            (Via::Refresh, "refreshed"),
            (Via::Git, "whole tree"),
        ] {
            if count(v) > 0 {
                out.push(format!("{} {name}", count(v)));
            }
        }
        out.join(", ")
    };
    vec![
        (
            "first snapshot (seeds the private index)".into(),
            (first_ms, first_ms, first_ms),
        ),
        (
            format!(
                "nothing changed since the previous one ({})",
                ways(&unchanged_via)
            ),
            unchanged,
        ),
        (
            format!("one file changed ({})", ways(&changed_via)),
            one_changed,
        ),
        (format!("one new file ({})", ways(&new_via)), one_new),
    ]
}
