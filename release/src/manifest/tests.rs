//! Unit tests of the manifest: digest stability, tampering, escaping links,
//! malformed manifests.

use super::*;
use std::os::unix::fs::symlink;

fn build() -> BuildIdentity {
    BuildIdentity {
        version: "0.1.0".into(),
        commit: "dev".into(),
        date: "dev".into(),
        target: "x86_64-unknown-linux-gnu".into(),
    }
}

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("bin")).unwrap();
    fs::write(dir.path().join("bin/lapis-ai-controller"), b"binary").unwrap();
    fs::set_permissions(
        dir.path().join("bin/lapis-ai-controller"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    symlink("bin/lapis-ai-controller", dir.path().join("current")).unwrap();
    dir
}

#[test]
fn digest_is_stable_and_round_trips() {
    let dir = tree();
    let m = Manifest::from_tree(dir.path(), build()).unwrap();
    assert_eq!(m.entries.len(), 2);
    fs::write(dir.path().join(MANIFEST_FILE), m.to_json()).unwrap();
    let again = Manifest::from_tree(dir.path(), build()).unwrap();
    assert_eq!(m.digest(), again.digest(), "release.json is not an entry");
    let parsed = Manifest::parse(&m.to_json()).unwrap();
    assert_eq!(parsed, m);
    parsed.verify_tree(dir.path()).unwrap();
    assert_eq!(
        String::from_utf8(m.canonical()).unwrap(),
        format!(
            "file 755 {} bin/lapis-ai-controller\nlink bin/lapis-ai-controller current\n",
            hex::encode(Sha256::digest(b"binary"))
        )
    );
}

#[test]
fn verify_reports_each_kind_of_tampering() {
    let dir = tree();
    let m = Manifest::from_tree(dir.path(), build()).unwrap();
    let bin = dir.path().join("bin/lapis-ai-controller");

    fs::write(&bin, b"binarz").unwrap();
    let err = m.verify_tree(dir.path()).unwrap_err().to_string();
    assert!(err.contains("contents differ"), "{err}");

    fs::write(&bin, b"binary").unwrap();
    fs::set_permissions(&bin, fs::Permissions::from_mode(0o777)).unwrap();
    let err = m.verify_tree(dir.path()).unwrap_err().to_string();
    assert!(err.contains("mode differs"), "{err}");

    fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(dir.path().join("bin/extra"), b"x").unwrap();
    let err = m.verify_tree(dir.path()).unwrap_err().to_string();
    assert!(err.contains("not in the manifest"), "{err}");

    fs::remove_file(dir.path().join("bin/extra")).unwrap();
    fs::remove_file(dir.path().join("current")).unwrap();
    let err = m.verify_tree(dir.path()).unwrap_err().to_string();
    assert!(err.contains("missing"), "{err}");
}

#[test]
fn escaping_links_are_refused() {
    let dir = tree();
    symlink("../../etc/passwd", dir.path().join("bin/evil")).unwrap();
    let err = Manifest::from_tree(dir.path(), build()).unwrap_err();
    assert!(err.to_string().contains("escapes"), "{err}");
    assert!(check_link_target("a/b", "../c").is_ok());
    assert!(check_link_target("a", "/etc").is_err());
}

#[test]
fn parse_refuses_bad_manifests() {
    let dir = tree();
    let m = Manifest::from_tree(dir.path(), build()).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&m.to_json()).unwrap();
    v["schema"] = 2.into();
    assert!(matches!(
        Manifest::parse(v.to_string().as_bytes()),
        Err(ManifestError::UnknownSchema { found: 2 })
    ));
    v["schema"] = 1.into();
    v["entries"][0]["path"] = "../x".into();
    assert!(Manifest::parse(v.to_string().as_bytes()).is_err());
    v["entries"][0]["path"] = "zz".into();
    let err = Manifest::parse(v.to_string().as_bytes()).unwrap_err();
    assert!(err.to_string().contains("sorted"), "{err}");
    assert!(Manifest::parse(b"{not json").is_err());
    assert!(Manifest::parse(br#"{"schema":1,"extra":true}"#).is_err());
}

/// Setuid, setgid and sticky bits are part of the full mode: a file that
/// gained one no longer matches its manifest (the scan used to mask them).
#[test]
fn special_permission_bits_are_a_mode_difference() {
    let dir = tree();
    let m = Manifest::from_tree(dir.path(), build()).unwrap();
    let bin = dir.path().join("bin/lapis-ai-controller");
    for special in [0o4755, 0o2755, 0o6755, 0o1755] {
        fs::set_permissions(&bin, fs::Permissions::from_mode(special)).unwrap();
        let err = m.verify_tree(dir.path()).unwrap_err().to_string();
        assert!(err.contains("mode differs"), "{special:o}: {err}");
        // Nor can such a tree be described: manifests hold permission bits only.
        let err = Manifest::from_tree(dir.path(), build())
            .unwrap_err()
            .to_string();
        assert!(err.contains("beyond 0o777"), "{special:o}: {err}");
    }
    fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).unwrap();
    m.verify_tree(dir.path()).unwrap();
}

/// A directory no entry lies under is an extra item of the tree, even empty.
#[test]
fn an_extra_empty_directory_is_caught() {
    let dir = tree();
    let m = Manifest::from_tree(dir.path(), build()).unwrap();
    // (what is created, the directory the error names, what to remove)
    for (extra, shown, remove) in [
        ("extra", "extra", "extra"),
        ("bin/empty", "bin/empty", "bin/empty"),
        ("deep/er/still", "deep", "deep"),
    ] {
        fs::create_dir_all(dir.path().join(extra)).unwrap();
        let err = m.verify_tree(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("directory not in the manifest"),
            "{extra}: {err}"
        );
        assert!(err.contains(&format!("{shown:?}")), "{extra}: {err}");
        let err = Manifest::from_tree(dir.path(), build())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("directory not in the manifest"),
            "{extra}: {err}"
        );
        fs::remove_dir_all(dir.path().join(remove)).unwrap();
    }
    m.verify_tree(dir.path()).unwrap();
}
