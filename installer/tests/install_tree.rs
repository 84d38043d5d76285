//! The public entry points the release pipeline uses: `install_tree` and
//! `install_staged` run the same stage → verify → smoke-test → activate
//! sequence as `install`, on an extracted release tree.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use lapis_installer::launcher::{self, LauncherState};
use lapis_installer::{
    InstallError, InstallOptions, PathOptions, Paths, ServiceKind, SnapshotOutcome, StagingDir,
    install_staged, install_tree,
};
use lapis_installer::{snapshot, staging};
use lapis_release::{BuildIdentity, MANIFEST_FILE, Manifest};

fn paths(home: &Path) -> Paths {
    Paths::resolve(&PathOptions {
        home: home.to_path_buf(),
        cwd: home.to_path_buf(),
        service_kind: Some(ServiceKind::Systemd),
        ..PathOptions::default()
    })
    .unwrap()
}

fn build(commit: &str) -> BuildIdentity {
    BuildIdentity {
        version: "9.9.9".into(),
        commit: commit.into(),
        date: "2026-01-01".into(),
        target: "test-target".into(),
    }
}

/// A release tree whose binary is a script answering `version --json` with
/// `reports`, described by a manifest claiming `claims`.
fn make_tree(dir: &Path, reports: &BuildIdentity, claims: &BuildIdentity) -> PathBuf {
    let tree = dir.join(format!("tree-{}", claims.commit));
    fs::create_dir_all(tree.join("bin")).unwrap();
    fs::create_dir_all(tree.join("share/doc")).unwrap();
    let doc = serde_json::json!({ "name": "lapis-ai-controller", "build": reports });
    let bin = tree.join("bin/lapis-ai-controller");
    fs::write(&bin, format!("#!/bin/sh\necho '{doc}'\n")).unwrap();
    fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(tree.join("share/doc/README"), b"docs").unwrap();
    symlink("lapis-ai-controller", tree.join("bin/lac")).unwrap();
    let manifest = Manifest::from_tree(&tree, claims.clone()).unwrap();
    fs::write(tree.join(MANIFEST_FILE), manifest.to_json()).unwrap();
    tree
}

fn opts() -> InstallOptions<'static> {
    let mut o = InstallOptions::new();
    o.bootstrap_config = false;
    o
}

#[test]
fn install_tree_stages_verifies_and_activates() {
    let dir = tempfile::tempdir().unwrap();
    let p = paths(dir.path());
    let tree = make_tree(dir.path(), &build("a"), &build("a"));
    let report = install_tree(&p, &tree, &opts()).unwrap();
    assert_eq!(report.snapshot, SnapshotOutcome::New);
    assert_eq!(report.build, build("a"));
    assert_eq!(
        launcher::state(&p).unwrap(),
        LauncherState::Ours {
            digest: report.digest.clone()
        }
    );
    let manifest = snapshot::verify(&p, &report.digest).unwrap();
    assert_eq!(manifest.entries.len(), 3);
    assert_eq!(
        fs::read_link(p.snapshot_dir(&report.digest).join("bin/lac")).unwrap(),
        Path::new("lapis-ai-controller")
    );
    let again = install_tree(&p, &tree, &opts()).unwrap();
    assert_eq!(again.snapshot, SnapshotOutcome::Reused);
    assert_eq!(again.previous.as_deref(), Some(report.digest.as_str()));
    assert!(!p.config.exists(), "bootstrap_config was off");
}

#[test]
fn a_tree_that_disagrees_with_its_manifest_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = paths(dir.path());
    let tree = make_tree(dir.path(), &build("a"), &build("a"));
    fs::write(tree.join("share/doc/README"), b"changed").unwrap();
    let err = install_tree(&p, &tree, &opts()).unwrap_err();
    assert_eq!(err.code(), "release_invalid", "{err}");
    assert!(err.to_string().contains("share/doc/README"), "{err}");
    assert!(snapshot::list_digests(&p).unwrap().is_empty());
    assert_eq!(launcher::state(&p).unwrap(), LauncherState::Missing);

    fs::write(tree.join("share/doc/README"), b"docs").unwrap();
    fs::write(tree.join("share/extra"), b"not listed").unwrap();
    let err = install_tree(&p, &tree, &opts()).unwrap_err();
    assert!(err.to_string().contains("share/extra"), "{err}");
    assert!(err.to_string().contains("not in the manifest"), "{err}");
    assert!(snapshot::list_digests(&p).unwrap().is_empty());
}

#[test]
fn a_failing_smoke_test_activates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = paths(dir.path());
    let good = make_tree(dir.path(), &build("a"), &build("a"));
    let first = install_tree(&p, &good, &opts()).unwrap();
    // The binary reports another build than its manifest claims.
    let bad = make_tree(dir.path(), &build("x"), &build("b"));
    let err = install_tree(&p, &bad, &opts()).unwrap_err();
    assert!(matches!(err, InstallError::Smoke(_)), "{err}");
    assert!(err.to_string().contains("nothing was activated"), "{err}");
    assert_eq!(
        snapshot::list_digests(&p).unwrap(),
        vec![first.digest.clone()]
    );
    assert_eq!(
        launcher::state(&p).unwrap().digest(),
        Some(first.digest.as_str())
    );
    let leftovers: Vec<_> = fs::read_dir(&p.releases_root)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".staging-"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn install_staged_renames_a_filled_staging_dir_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let p = paths(dir.path());
    let tree = make_tree(dir.path(), &build("a"), &build("a"));
    let staging = StagingDir::create(&p).unwrap();
    // What an archive extraction would do: write the tree into the dir.
    for rel in ["bin/lapis-ai-controller", "share/doc/README", MANIFEST_FILE] {
        let dst = staging.path().join(rel);
        fs::create_dir_all(dst.parent().unwrap()).unwrap();
        fs::copy(tree.join(rel), &dst).unwrap();
    }
    symlink("lapis-ai-controller", staging.path().join("bin/lac")).unwrap();
    let staged_path = staging.path().to_path_buf();
    let report = install_staged(&p, staging, &opts()).unwrap();
    assert_eq!(report.snapshot, SnapshotOutcome::New);
    assert!(!staged_path.exists(), "renamed, not copied");
    snapshot::verify(&p, &report.digest).unwrap();
}

#[test]
fn an_abandoned_staging_dir_is_cleaned_but_a_live_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let p = paths(dir.path());
    let live = StagingDir::create(&p).unwrap();
    let dead = p.releases_root.join(".staging-dead");
    fs::create_dir_all(dead.join("bin")).unwrap();
    let cleanup = staging::cleanup_leftovers(&p).unwrap();
    assert_eq!(cleanup.removed, vec![dead.clone()]);
    assert!(live.path().is_dir());
    assert!(!dead.exists());
}
