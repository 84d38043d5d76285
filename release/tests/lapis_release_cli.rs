//! The `lapis-release` binary as CI runs it: two builds from the same binary
//! are byte-identical, coreutils `sha256sum -c` accepts the checksum list,
//! and `verify` catches tampering before anything would be published.

use std::path::Path;
use std::process::{Command, Output};

fn lapis_release(args: &[&str], epoch: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lapis-release"))
        .args(args)
        .env("SOURCE_DATE_EPOCH", epoch)
        .env_remove("LAPIS_BUILD_COMMIT")
        .env_remove("LAPIS_BUILD_VERSION")
        .output()
        .expect("run lapis-release")
}

#[track_caller]
fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn build(binary: &Path, out: &Path, target: &str) -> Output {
    lapis_release(
        &[
            "build",
            "--binary",
            binary.to_str().unwrap(),
            "--target",
            target,
            "--out",
            out.to_str().unwrap(),
            "--version",
            "1.2.3",
            "--commit",
            "0123abc",
            "--json",
        ],
        "1767225600",
    )
}

const TARGET: &str = "x86_64-unknown-linux-gnu";
const NAME: &str = "lapis-ai-controller-1.2.3-x86_64-unknown-linux-gnu.tar.gz";

#[test]
fn builds_are_reproducible_and_sha256sum_accepts_the_list() {
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("lapis-ai-controller");
    std::fs::write(&binary, vec![7u8; 300_000]).unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let doc: serde_json::Value = serde_json::from_str(&ok(&build(&binary, &a, TARGET))).unwrap();
    ok(&build(&binary, &b, TARGET));
    assert_eq!(doc["name"], NAME);
    assert_eq!(doc["build"]["date"], "2026-01-01");
    assert_eq!(doc["build"]["commit"], "0123abc");
    assert_eq!(
        std::fs::read(a.join(NAME)).unwrap(),
        std::fs::read(b.join(NAME)).unwrap(),
        "two builds must be byte-identical"
    );
    assert_eq!(
        std::fs::read(a.join("SHA256SUMS")).unwrap(),
        std::fs::read(b.join("SHA256SUMS")).unwrap()
    );

    // The real coreutils tool (macOS ships the same format as `shasum -a 256`).
    let check = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .arg("SHA256SUMS")
            .current_dir(&a)
            .output()
    };
    let out = match check("sha256sum", &["-c", "--strict"]) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => check("shasum", &["-a", "256", "-c"]),
        other => other,
    }
    .expect("sha256sum (or shasum) must be installed");
    let text = ok(&out);
    assert!(text.contains(&format!("{NAME}: OK")), "{text}");

    let verified = ok(&lapis_release(
        &["verify", a.to_str().unwrap(), "--json"],
        "0",
    ));
    let doc: serde_json::Value = serde_json::from_str(&verified).unwrap();
    assert_eq!(doc["verified"][0]["name"], NAME);
    assert_eq!(doc["verified"][0]["target"], TARGET);
}

#[test]
fn verify_catches_tampering_and_missing_entries() {
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("lapis-ai-controller");
    std::fs::write(&binary, b"\x7fELF stand-in").unwrap();
    let out = dir.path().join("out");
    ok(&build(&binary, &out, TARGET));
    ok(&build(&binary, &out, "aarch64-apple-darwin"));
    let sums = std::fs::read_to_string(out.join("SHA256SUMS")).unwrap();
    assert_eq!(sums.lines().count(), 2, "{sums}");
    ok(&lapis_release(&["verify", out.to_str().unwrap()], "0"));

    let verify_fails = |needle: &str| {
        let res = lapis_release(&["verify", out.to_str().unwrap()], "0");
        assert_eq!(res.status.code(), Some(2));
        let err = String::from_utf8_lossy(&res.stderr);
        assert!(err.contains(needle), "expected {needle:?} in {err}");
    };

    // A flipped byte in one archive.
    let archive = out.join(NAME);
    let good = std::fs::read(&archive).unwrap();
    let mut bad = good.clone();
    bad[40] ^= 1;
    std::fs::write(&archive, &bad).unwrap();
    verify_fails("SHA-256 mismatch");
    std::fs::write(&archive, &good).unwrap();

    // SHA256SUMS without one archive's entry.
    let only_one: String = sums
        .lines()
        .filter(|l| !l.contains(NAME))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(out.join("SHA256SUMS"), only_one).unwrap();
    verify_fails("no entry for");

    // A renamed archive (name no longer matches its manifest).
    std::fs::write(out.join("SHA256SUMS"), &sums).unwrap();
    let renamed = NAME.replace("1.2.3", "9.9.9");
    std::fs::rename(&archive, out.join(&renamed)).unwrap();
    ok(&lapis_release(&["checksums", out.to_str().unwrap()], "0"));
    verify_fails("should be named");

    // No checksum list at all.
    std::fs::remove_file(out.join("SHA256SUMS")).unwrap();
    verify_fails("SHA256SUMS");
}

#[test]
fn archives_carry_the_licences_and_verify_refuses_one_without() {
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("lapis-ai-controller");
    std::fs::write(&binary, b"\x7fELF stand-in").unwrap();
    let out = dir.path().join("out");
    ok(&build(&binary, &out, TARGET));
    // What `tar` itself lists.
    let listing = Command::new("tar")
        .args(["-tzf", out.join(NAME).to_str().unwrap()])
        .output()
        .expect("tar");
    let listing = ok(&listing);
    assert_eq!(
        listing.lines().collect::<Vec<_>>(),
        [
            "LICENSE-APACHE",
            "LICENSE-MIT",
            "bin/",
            "bin/lapis-ai-controller",
            "release.json"
        ]
    );

    // The same binary packed as a bare tree (binary and release.json only):
    // installable, but never publishable.
    let build_identity: lapis_release::BuildIdentity = serde_json::from_value(
        serde_json::json!({"version": "1.2.3", "commit": "0123abc", "date": "2026-01-01", "target": TARGET}),
    )
    .unwrap();
    let bytes = std::fs::read(&binary).unwrap();
    let bare = lapis_release::archive::manifest_for_binary(&bytes, build_identity).unwrap();
    let archive = lapis_release::archive::archive_bytes(&bytes, &bare, 0).unwrap();
    std::fs::write(out.join(NAME), archive).unwrap();
    ok(&lapis_release(&["checksums", out.to_str().unwrap()], "0"));
    let res = lapis_release(&["verify", out.to_str().unwrap()], "0");
    assert_eq!(res.status.code(), Some(2));
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains("does not carry LICENSE-APACHE"), "{err}");
}

/// The release build's glibc gate on a real gnu binary (this crate's own
/// `lapis-release`), with a floor it meets and one it cannot.
#[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
#[test]
fn check_glibc_passes_under_the_floor_and_fails_above_it() {
    let exe = env!("CARGO_BIN_EXE_lapis-release");
    let text = ok(&lapis_release(
        &["check-glibc", exe, "--floor", "99.0"],
        "0",
    ));
    assert!(text.contains("needs GLIBC_2."), "{text}");
    let res = lapis_release(&["check-glibc", exe, "--floor", "2.0"], "0");
    assert_eq!(res.status.code(), Some(2));
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains("newer than the floor GLIBC_2.0"), "{err}");
    // A file that is not ELF never passes.
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script");
    std::fs::write(&script, b"#!/bin/sh\n").unwrap();
    let res = lapis_release(&["check-glibc", script.to_str().unwrap()], "0");
    assert_eq!(res.status.code(), Some(2));
}
