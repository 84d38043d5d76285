//! Several snapshots: `releases list`, `rollback`, `releases gc`, a tampered
//! snapshot, and `uninstall`.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;

use lapis_e2e::TestContext;

use crate::install_support::*;

fn digest(doc: &serde_json::Value) -> String {
    doc["digest"].as_str().unwrap().to_owned()
}

fn list(ctx: &TestContext) -> serde_json::Value {
    let out = ctx.run(["releases", "list", "--json"]);
    out.success();
    out.json()
}

fn entry<'a>(list: &'a serde_json::Value, digest: &str) -> &'a serde_json::Value {
    list["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["digest"] == digest)
        .unwrap_or_else(|| panic!("{digest} not listed: {list}"))
}

#[test]
fn rollback_and_gc_across_snapshots() {
    let ctx = TestContext::new();
    let vs: Vec<_> = ["v1", "v2", "v3", "v4"]
        .iter()
        .map(|t| variant(&ctx, t))
        .collect();
    let d: Vec<String> = vs.iter().map(|v| digest(&install(&ctx, v, &[]))).collect();
    assert_eq!(snapshots(&ctx).len(), 4);

    let l = list(&ctx);
    assert_eq!(l["active"], d[3].as_str());
    assert_eq!(l["previous"], d[2].as_str());
    assert_eq!(entry(&l, &d[3])["active"], true);
    assert_eq!(entry(&l, &d[2])["previous"], true);
    assert!(
        entry(&l, &d[0])["installedAt"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    assert_eq!(
        entry(&l, &d[0])["build"]["version"],
        env!("CARGO_PKG_VERSION")
    );

    // Rollback without a target goes to the previous snapshot, and back.
    let out = ctx.run(["rollback", "--json"]);
    let doc = out.success().json();
    assert_eq!(doc["from"], d[3].as_str());
    assert_eq!(doc["to"], d[2].as_str());
    assert_eq!(active(&ctx).as_deref(), Some(d[2].as_str()));
    let l = list(&ctx);
    assert_eq!(l["previous"], d[3].as_str());

    // A unique prefix names a snapshot.
    let out = ctx.run(["rollback", "--json", "--to", &d[0][..10]]);
    assert_eq!(out.success().json()["to"], d[0].as_str());
    let out = ctx.run(["rollback", "--json", "--to", "zz"]);
    out.expect_code(2);
    assert_eq!(out.json()["error"]["code"], "not_found");
    let out = ctx.run(["rollback", "--to", &d[2]]);
    out.success();
    assert_eq!(active(&ctx).as_deref(), Some(d[2].as_str()));
    // Now: active v3, previous v1.

    // `releases list` run from the active snapshot is not a user of it.
    let own = ctx.output(ctx.command_for(&launcher(&ctx), ["releases", "list", "--json"]));
    let own = own.success().json();
    assert_eq!(entry(&own, &d[2])["usedBy"], serde_json::json!([]), "{own}");

    // A process running from v2's snapshot keeps it: start one there that
    // pauses (it installs into another HOME, so it holds no lock of ours).
    let other = TestContext::new();
    let v2_bin = releases_root(&ctx).join(&d[1]).join("bin").join(PRODUCT);
    let runner = start_paused(&other, &v2_bin, "locked").expect("pauses");
    let l = list(&ctx);
    let users = entry(&l, &d[1])["usedBy"].as_array().unwrap().clone();
    assert_eq!(users, vec![serde_json::json!(runner.id())]);

    let out = ctx.run(["releases", "gc", "--keep", "0", "--json"]);
    let gc = out.success().json();
    let reasons: Vec<(String, String)> = gc["kept"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["digest"].as_str().unwrap().to_owned(),
                k["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(reasons.contains(&(d[2].clone(), "active".into())), "{gc}");
    assert!(reasons.contains(&(d[0].clone(), "previous".into())), "{gc}");
    assert!(reasons.contains(&(d[1].clone(), "in use".into())), "{gc}");
    assert_eq!(gc["removed"], serde_json::json!([d[3]]));
    assert_eq!(snapshots(&ctx).len(), 3);

    kill9(runner);
    let gc = ctx
        .run(["releases", "gc", "--keep", "0", "--json"])
        .success()
        .json();
    assert_eq!(gc["removed"], serde_json::json!([d[1]]));
    let mut left = snapshots(&ctx);
    left.sort();
    let mut want = vec![d[0].clone(), d[2].clone()];
    want.sort();
    assert_eq!(left, want);
    assert_consistent(&ctx, None);
    assert!(leftovers(&ctx, ".trash-").is_empty());
}

/// Appends a byte to a snapshot's binary (making its directories writable
/// first, as an attacker or a careless tool would).
fn tamper(ctx: &TestContext, digest: &str) {
    let dir = releases_root(ctx).join(digest);
    let bin_dir = dir.join("bin");
    for d in [&dir, &bin_dir] {
        fs::set_permissions(d, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(bin_dir.join(PRODUCT))
        .unwrap();
    f.write_all(b"tampered").unwrap();
}

/// A snapshot's binary with a second name outside the snapshot (a hard
/// link) can be rewritten through that name, so the snapshot is not sealed:
/// `rollback` refuses it as `snapshot_tampered`, naming the file.
#[test]
fn a_snapshot_file_hard_linked_from_outside_fails_verification() {
    let ctx = TestContext::new();
    let (v1, v2) = (variant(&ctx, "v1"), variant(&ctx, "v2"));
    let d1 = digest(&install(&ctx, &v1, &[]));
    let d2 = digest(&install(&ctx, &v2, &[]));
    let bin = releases_root(&ctx).join(&d1).join("bin").join(PRODUCT);
    fs::hard_link(&bin, ctx.home().join("outside-link")).unwrap();

    let out = ctx.run(["rollback", "--json"]);
    out.expect_code(2);
    assert_eq!(out.json()["error"]["code"], "snapshot_tampered");
    assert!(out.stderr.contains("hard link"), "{}", out.stderr);
    assert!(
        out.stderr.contains("bin/lapis-ai-controller"),
        "{}",
        out.stderr
    );
    assert_eq!(active(&ctx).as_deref(), Some(d2.as_str()));
}

#[test]
fn tampered_snapshot_is_refused_and_restaged() {
    let ctx = TestContext::new();
    let (v1, v2) = (variant(&ctx, "v1"), variant(&ctx, "v2"));
    let d1 = digest(&install(&ctx, &v1, &[]));
    let d2 = digest(&install(&ctx, &v2, &[]));
    tamper(&ctx, &d1);

    // rollback re-verifies and refuses; the launcher does not move.
    let out = ctx.run(["rollback", "--json"]);
    out.expect_code(2);
    assert_eq!(out.json()["error"]["code"], "snapshot_tampered");
    assert!(out.stderr.contains(&d1), "{}", out.stderr);
    assert!(
        out.stderr.contains("bin/lapis-ai-controller"),
        "{}",
        out.stderr
    );
    assert_eq!(active(&ctx).as_deref(), Some(d2.as_str()));

    // install never reuses it: it says what it found and stages a fresh copy.
    let doc = install(&ctx, &v1, &[]);
    assert_eq!(doc["digest"], d1.as_str());
    assert_eq!(doc["snapshot"], "restaged");
    assert!(
        doc["found"]
            .as_str()
            .unwrap()
            .contains("bin/lapis-ai-controller"),
        "{doc}"
    );
    let quarantined = std::path::PathBuf::from(doc["quarantined"].as_str().unwrap());
    assert!(quarantined.starts_with(releases_root(&ctx)));
    assert!(quarantined.is_dir());
    verify_snapshot(&ctx, &d1).unwrap();
    assert_eq!(active(&ctx).as_deref(), Some(d1.as_str()));

    // A tampered manifest is caught too (the name no longer matches).
    let json = releases_root(&ctx).join(&d2).join("release.json");
    fs::set_permissions(
        releases_root(&ctx).join(&d2),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    fs::set_permissions(&json, fs::Permissions::from_mode(0o644)).unwrap();
    let text = fs::read_to_string(&json)
        .unwrap()
        .replace("\"dev\"", "\"evil\"");
    fs::write(&json, text).unwrap();
    let out = ctx.run(["rollback", "--to", &d2]);
    out.expect_code(2);
    assert_eq!(active(&ctx).as_deref(), Some(d1.as_str()));

    // gc removes quarantined copies.
    let gc = ctx.run(["releases", "gc", "--json"]).success().json();
    assert_eq!(gc["removedQuarantine"].as_array().unwrap().len(), 1);
    assert!(!quarantined.exists());
}

/// Full mode (setuid, setgid, sticky; not masked to 0o777) of `path`.
fn full_mode(path: &std::path::Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Runs `change` on snapshot `digest` with its directories and manifest
/// writable for a moment, then seals them again: the same modes as before,
/// so only the change itself can be noticed.
fn with_unsealed(ctx: &TestContext, digest: &str, change: impl FnOnce(&std::path::Path)) {
    let dir = releases_root(ctx).join(digest);
    let (bin_dir, json) = (dir.join("bin"), dir.join("release.json"));
    let set = |p: &std::path::Path, m: u32| {
        fs::set_permissions(p, fs::Permissions::from_mode(m)).unwrap()
    };
    set(&dir, 0o755);
    set(&bin_dir, 0o755);
    set(&json, 0o644);
    change(&dir);
    set(&json, 0o444);
    set(&bin_dir, 0o555);
    set(&dir, 0o555);
}

/// Issue 15 item 4: what the snapshot check used to let through. Each change
/// keeps the digest (no entry's bytes, path or permission bits change), yet
/// `rollback --to` must refuse the snapshot and `install` must not reuse it.
#[test]
fn special_bits_extra_directories_and_edited_identity_are_never_trusted() {
    let ctx = TestContext::new();
    let (v1, v2) = (variant(&ctx, "v1"), variant(&ctx, "v2"));
    let d1 = digest(&install(&ctx, &v1, &[]));
    let d2 = digest(&install(&ctx, &v2, &[]));
    let snap = releases_root(&ctx).join(&d1);
    let bin = snap.join("bin").join(PRODUCT);
    // Snapshot files are read-only: the binary 0555, the manifest 0444, the
    // directories 0555.
    assert_eq!(full_mode(&bin), 0o555);
    assert_eq!(full_mode(&snap.join("release.json")), 0o444);
    assert_eq!(full_mode(&snap), 0o555);
    assert_eq!(full_mode(&snap.join("bin")), 0o555);

    let chmod = |p: &std::path::Path, m: u32| {
        fs::set_permissions(p, fs::Permissions::from_mode(m)).unwrap()
    };
    type Change<'a> = Box<dyn Fn() + 'a>;
    let cases: Vec<(&str, Change, &str)> = vec![
        (
            "setuid+setgid binary",
            Box::new(|| chmod(&bin, 0o6555)),
            "mode differs",
        ),
        (
            "sticky snapshot directory",
            Box::new(|| chmod(&snap, 0o1555)),
            "sealed",
        ),
        (
            "extra empty directory",
            Box::new(|| with_unsealed(&ctx, &d1, |dir| fs::create_dir(dir.join("extra")).unwrap())),
            "directory not in the manifest",
        ),
        (
            "edited build identity",
            Box::new(|| {
                with_unsealed(&ctx, &d1, |dir| {
                    let json = dir.join("release.json");
                    let mut doc: serde_json::Value =
                        serde_json::from_slice(&fs::read(&json).unwrap()).unwrap();
                    doc["build"]["commit"] = "0000000edited".into();
                    fs::write(&json, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
                })
            }),
            "build identity",
        ),
    ];
    for (what, change, found) in cases {
        assert_eq!(active(&ctx).as_deref(), Some(d2.as_str()), "{what}");
        change();

        // rollback re-verifies and refuses; the launcher does not move.
        let out = ctx.run(["rollback", "--json", "--to", &d1]);
        out.expect_code(2);
        let code = out.json()["error"]["code"].clone();
        assert!(
            code == "snapshot_tampered"
                || (what == "edited build identity" && code == "smoke_test_failed"),
            "{what}: {code} {}",
            out.stderr
        );
        assert_eq!(active(&ctx).as_deref(), Some(d2.as_str()), "{what}");

        // install never reuses it: it says what it found and stages afresh.
        let doc = install(&ctx, &v1, &[]);
        assert_eq!(doc["digest"], d1.as_str(), "{what}");
        assert_eq!(doc["snapshot"], "restaged", "{what}: {doc}");
        assert!(
            doc["found"].as_str().unwrap().contains(found),
            "{what}: {doc}"
        );
        verify_snapshot(&ctx, &d1).unwrap();
        assert_eq!(full_mode(&bin), 0o555, "{what}");
        assert_eq!(full_mode(&snap), 0o555, "{what}");
        assert!(!snap.join("extra").exists(), "{what}");
        // Back to v2 (reused: it was never touched).
        let doc = install(&ctx, &v2, &[]);
        assert_eq!(doc["snapshot"], "reused", "{what}");
    }
    let gc = ctx.run(["releases", "gc", "--json"]).success().json();
    assert_eq!(gc["removedQuarantine"].as_array().unwrap().len(), 4);
}

#[test]
fn uninstall_removes_launcher_and_snapshots_and_purge_removes_config() {
    let mut ctx = TestContext::new();
    let log = use_systemctl_standin(&mut ctx);
    install(&ctx, &variant(&ctx, "v1"), &[]);
    install(&ctx, &TestContext::bin(), &[]);
    let out = ctx.run(["uninstall", "--json"]);
    let doc = out.success().json();
    assert_eq!(doc["removedLauncher"], true);
    assert_eq!(doc["removedSnapshots"].as_array().unwrap().len(), 2);
    assert!(!launcher(&ctx).exists());
    assert!(snapshots(&ctx).is_empty());
    assert!(config_path(&ctx).exists(), "config kept without --purge");
    // No unit was installed (--no-service), so systemctl was not needed.
    assert!(!log.exists());

    install(&ctx, &TestContext::bin(), &[]);
    let out = ctx.run(["uninstall", "--purge", "--yes", "--json"]);
    let doc = out.success().json();
    assert_eq!(
        doc["removedConfig"],
        config_path(&ctx).display().to_string()
    );
    assert!(!config_path(&ctx).exists());
    assert!(!ctx.home().join(".lapis/ai-controller").exists());
    let out = ctx.run(["releases", "list", "--json"]);
    assert!(
        out.success().json()["snapshots"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}
