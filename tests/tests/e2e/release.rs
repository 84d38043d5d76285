//! `install --from`: release archives from a path or a 127.0.0.1 URL, verified
//! before they are parsed, refused (with everything left as it was) when
//! anything about them is wrong.

use lapis_e2e::archives::{
    Fingerprint, RawEntry, craft, release_archive, script_binary, sha256_hex, valid_entries,
    with_version,
};
use lapis_e2e::http::{HttpServer, Route};
use lapis_e2e::{Output, TestContext};
use lapis_release::BuildIdentity;

/// The identity of the binary under test, as it reports it.
pub fn host_build(ctx: &TestContext) -> BuildIdentity {
    let doc = ctx.run(["version", "--json"]).success().json();
    serde_json::from_value(doc["build"].clone()).expect("build identity")
}

/// Writes `bytes` to `<home>/dl/<name>` and returns the path as a string.
pub fn put(ctx: &TestContext, name: &str, bytes: &[u8]) -> String {
    let dir = ctx.home().join("dl");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Asserts a refusal: exit 2, the stable code, a message mentioning `needle`.
#[track_caller]
pub fn refused(out: &Output, code: &str, needle: &str) {
    out.expect_code(2);
    let doc = out.json();
    assert_eq!(doc["error"]["code"], code, "{doc}");
    let text = format!("{doc}").to_lowercase();
    assert!(text.contains(needle), "expected {needle:?} in {doc}");
}

/// Installs a script-binary release of `version` from a local archive.
fn install_script_release(ctx: &TestContext, version: &str) -> serde_json::Value {
    let build = with_version(&host_build(ctx), version);
    let (name, bytes) = release_archive(&script_binary(&build), &build);
    let path = put(ctx, &name, &bytes);
    let sha = sha256_hex(&bytes);
    ctx.run([
        "install",
        "--from",
        &path,
        "--sha256",
        &sha,
        "--no-service",
        "--json",
    ])
    .success()
    .json()
}

#[test]
fn install_from_a_real_release_archive_activates_it() {
    let ctx = TestContext::new();
    let build = host_build(&ctx);
    let out = ctx.home().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let built = lapis_release::build_archive(&TestContext::bin(), build.clone(), &out, 0).unwrap();
    lapis_release::write_checksums(&out).unwrap();
    let sums = out.join("SHA256SUMS");
    let doc = ctx
        .run([
            "install",
            "--from",
            built.path.to_str().unwrap(),
            "--checksums",
            sums.to_str().unwrap(),
            "--no-service",
            "--json",
        ])
        .success()
        .json();
    assert_eq!(doc["digest"], built.manifest.digest());
    assert_eq!(doc["snapshot"], "new");
    assert_eq!(doc["build"]["target"], build.target.as_str());
    let launcher = ctx.home().join(".local/bin/lapis-ai-controller");
    let version = ctx.output(ctx.command_for(&launcher, ["version", "--json"]));
    assert_eq!(
        version.success().json()["snapshot"],
        built.manifest.digest()
    );
    // One binary, one digest: the same executable installed directly is the
    // snapshot the archive made (its files read-only, the binary 0555).
    let snap = ctx
        .home()
        .join(".local/lib/lapis-ai-controller/releases")
        .join(built.manifest.digest());
    let mode = |p: &std::path::Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    };
    assert_eq!(mode(&snap.join("bin/lapis-ai-controller")), 0o555);
    assert_eq!(mode(&snap.join("release.json")), 0o444);
    let direct = ctx
        .run(["install", "--no-service", "--json"])
        .success()
        .json();
    assert_eq!(direct["digest"], built.manifest.digest());
    assert_eq!(direct["snapshot"], "reused", "{direct}");
}

#[test]
fn install_from_needs_a_checksum_and_a_safe_url() {
    let ctx = TestContext::new();
    let build = host_build(&ctx);
    let (name, bytes) = release_archive(&script_binary(&build), &build);
    let path = put(&ctx, &name, &bytes);
    let before = Fingerprint::of(ctx.home());
    let out = ctx.run(["install", "--from", &path, "--no-service", "--json"]);
    refused(&out, "checksum_required", "never installed unverified");
    let out = ctx.run([
        "install",
        "--from",
        "http://example.com/x.tar.gz",
        "--sha256",
        &sha256_hex(&bytes),
        "--json",
    ]);
    refused(&out, "insecure_url", "only https://");
    let out = ctx.run(["install", "--from", &path, "--sha256", "abc", "--json"]);
    refused(&out, "invalid_checksum", "64 hexadecimal");
    assert_eq!(Fingerprint::of(ctx.home()), before, "nothing may change");
}

#[test]
fn bad_archives_are_refused_and_change_nothing() {
    let ctx = TestContext::new();
    install_script_release(&ctx, "0.0.1");
    let before = Fingerprint::of(ctx.home());
    assert!(before.launcher.is_some() && before.config.is_some());

    let build = with_version(&host_build(&ctx), "0.0.2");
    let binary = script_binary(&build);
    let (name, good) = release_archive(&binary, &build);
    let good_sha = sha256_hex(&good);

    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x04;
    let truncated = good[..good.len() - 100].to_vec();
    let with = |extra: RawEntry| {
        let mut entries = valid_entries(&binary, &build);
        entries.push(extra);
        craft(&entries)
    };
    let traversal = with(RawEntry::file("../../escaped", 0o644, b"x"));
    let symlink = with(RawEntry::special(
        "bin/link",
        tar::EntryType::Symlink,
        "lapis-ai-controller",
    ));
    let hardlink = with(RawEntry::special(
        "bin/hard",
        tar::EntryType::Link,
        "bin/lapis-ai-controller",
    ));
    let duplicate = with(RawEntry::file("bin/lapis-ai-controller", 0o755, &binary));
    let mut lying = valid_entries(&binary, &build);
    lying[0].data = b"#!/bin/sh\necho tampered\n".to_vec();
    let lying = craft(&lying);
    let other = BuildIdentity {
        target: "riscv64gc-unknown-linux-gnu".into(),
        ..build.clone()
    };
    let (_, other_target) = release_archive(&script_binary(&other), &other);

    // (label, archive bytes, --sha256, code, words in the message)
    let cases: Vec<(&str, Vec<u8>, String, &str, &str)> = vec![
        (
            "bit-flipped",
            flipped,
            good_sha.clone(),
            "checksum_mismatch",
            "sha-256 mismatch",
        ),
        (
            "truncated",
            truncated,
            good_sha.clone(),
            "checksum_mismatch",
            "sha-256 mismatch",
        ),
        (
            "wrong checksum",
            good.clone(),
            sha256_hex(b"other"),
            "checksum_mismatch",
            "sha-256 mismatch",
        ),
        (
            "traversal",
            traversal.clone(),
            sha256_hex(&traversal),
            "invalid_archive",
            "unsafe path",
        ),
        (
            "symlink",
            symlink.clone(),
            sha256_hex(&symlink),
            "invalid_archive",
            "symbolic link",
        ),
        (
            "hardlink",
            hardlink.clone(),
            sha256_hex(&hardlink),
            "invalid_archive",
            "hard link",
        ),
        (
            "duplicate",
            duplicate.clone(),
            sha256_hex(&duplicate),
            "invalid_archive",
            "more than once",
        ),
        (
            "manifest disagrees",
            lying.clone(),
            sha256_hex(&lying),
            "invalid_archive",
            "does not verify",
        ),
        (
            "other target",
            other_target.clone(),
            sha256_hex(&other_target),
            "wrong_target",
            "riscv64gc",
        ),
    ];
    for (label, bytes, sha, code, needle) in cases {
        let path = put(&ctx, &name, &bytes);
        let out = ctx.run([
            "install",
            "--from",
            &path,
            "--sha256",
            &sha,
            "--no-service",
            "--json",
        ]);
        refused(&out, code, needle);
        assert!(
            out.stderr.contains("nothing was changed"),
            "{label}: {}",
            out.stderr
        );
        assert_eq!(
            Fingerprint::of(ctx.home()),
            before,
            "{label} changed something"
        );
    }
    assert!(!ctx.home().join(".local/lib/escaped").exists());
    assert!(!ctx.home().join(".local/escaped").exists());

    // A checksum list that does not list the archive.
    let path = put(&ctx, &name, &good);
    let sums = put(
        &ctx,
        "SHA256SUMS",
        format!("{good_sha}  lapis-ai-controller-0.0.2-other.tar.gz\n").as_bytes(),
    );
    let out = ctx.run([
        "install",
        "--from",
        &path,
        "--checksums",
        &sums,
        "--no-service",
        "--json",
    ]);
    refused(&out, "checksum_missing", "no entry for");
    assert_eq!(Fingerprint::of(ctx.home()), before);

    // And the good archive, listed, still installs afterwards.
    let sums = put(
        &ctx,
        "SHA256SUMS",
        format!("{good_sha}  {name}\n").as_bytes(),
    );
    let doc = ctx
        .run([
            "install",
            "--from",
            &path,
            "--checksums",
            &sums,
            "--no-service",
            "--json",
        ])
        .success()
        .json();
    assert_eq!(doc["version"], "0.0.2");
    assert_ne!(Fingerprint::of(ctx.home()).launcher, before.launcher);
}

#[test]
fn install_from_url_verifies_and_survives_a_dropped_download() {
    let ctx = TestContext::new();
    let first = install_script_release(&ctx, "0.0.1");
    let before = Fingerprint::of(ctx.home());
    let server = HttpServer::start();
    let build = with_version(&host_build(&ctx), "0.0.3");
    let (name, good) = release_archive(&script_binary(&build), &build);
    let sha = sha256_hex(&good);
    server.route(
        &format!("/cut/{name}"),
        Route::cut(good.clone(), good.len() / 2),
    );
    let out = ctx.run([
        "install",
        "--from",
        &server.url(&format!("/cut/{name}")),
        "--sha256",
        &sha,
        "--no-service",
        "--json",
    ]);
    out.expect_code(2);
    let code = out.json()["error"]["code"].as_str().unwrap().to_owned();
    assert!(
        code == "download_failed" || code == "checksum_mismatch",
        "{}",
        out.stdout
    );
    assert_eq!(Fingerprint::of(ctx.home()), before);

    // Issue 15: a download announcing 100 GB is refused on its headers
    // (it used to be buffered up to the 512 MiB limit first).
    server.route(
        &format!("/huge/{name}"),
        Route::declaring(100 << 30, vec![0u8; 4 << 20]),
    );
    let out = ctx.run([
        "install",
        "--from",
        &server.url(&format!("/huge/{name}")),
        "--sha256",
        &sha,
        "--no-service",
        "--json",
    ]);
    refused(&out, "invalid_archive", "byte limit");
    assert_eq!(Fingerprint::of(ctx.home()), before);

    server.route(&format!("/ok/{name}"), Route::ok("application/gzip", good));
    server.route(
        "/ok/SHA256SUMS",
        Route::ok("text/plain", format!("{sha}  {name}\n")),
    );
    let doc = ctx
        .run([
            "install",
            "--from",
            &server.url(&format!("/ok/{name}")),
            "--checksums",
            &server.url("/ok/SHA256SUMS"),
            "--no-service",
            "--json",
        ])
        .success()
        .json();
    assert_eq!(doc["version"], "0.0.3");
    assert_eq!(doc["previousDigest"], first["digest"]);
}

/// `install --from` killed with SIGKILL at every installer checkpoint it
/// passes: afterwards every snapshot verifies, the launcher is on the old or
/// the new release (complete either way), the config is unchanged, and the
/// next `install --from` succeeds and leaves no staging directory behind.
#[test]
fn install_from_killed_at_every_checkpoint_stays_consistent() {
    use crate::install_support::{leftovers, snapshots, verify_snapshot};
    use std::io::BufRead;

    let mut paused_at = Vec::new();
    for point in lapis_installer::Checkpoint::ALL.iter().map(|c| c.name()) {
        let ctx = TestContext::new();
        let old = install_script_release(&ctx, "0.0.1")["digest"]
            .as_str()
            .unwrap()
            .to_owned();
        let before = Fingerprint::of(ctx.home());
        let build = with_version(&host_build(&ctx), "0.0.4");
        let (name, bytes) = release_archive(&script_binary(&build), &build);
        let path = put(&ctx, &name, &bytes);
        let sha = sha256_hex(&bytes);
        let args = ["install", "--from", &path, "--sha256", &sha, "--no-service"];

        let mut cmd = ctx.command(args);
        cmd.env("LAPIS_INSTALL_FAULT_PAUSE", point)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("spawn install --from");
        let marker = format!("lapis-fault-pause: {point}");
        let paused = std::io::BufReader::new(child.stderr.take().unwrap())
            .lines()
            .map_while(Result::ok)
            .any(|line| line == marker);
        if paused {
            child.kill().unwrap();
            paused_at.push(point);
        }
        let status = child.wait().unwrap();
        assert!(paused || status.success(), "{point}: {status}");

        for digest in snapshots(&ctx) {
            verify_snapshot(&ctx, &digest).unwrap_or_else(|e| panic!("{point}: {e}"));
        }
        let after = Fingerprint::of(ctx.home());
        assert_eq!(after.config, before.config, "{point}: config changed");
        let target = after.launcher.expect("launcher").display().to_string();
        let new =
            lapis_release::archive::manifest_for_binary(&script_binary(&build), build.clone())
                .unwrap()
                .digest();
        assert!(
            target.contains(&old) || target.contains(&new),
            "{point}: launcher on neither release: {target}"
        );

        let doc = ctx
            .run([
                "install",
                "--from",
                &path,
                "--sha256",
                &sha,
                "--no-service",
                "--json",
            ])
            .success()
            .json();
        assert_eq!(doc["digest"], new.as_str(), "{point}");
        assert!(
            leftovers(&ctx, ".staging-").is_empty(),
            "{point}: staging left behind"
        );
    }
}

/// `install` of the bare executable writes the licence files compiled into it,
/// so the snapshot is the one its release archive would install: one binary,
/// one digest, either way.
#[test]
fn install_from_the_executable_and_from_its_archive_share_one_digest() {
    let ctx = TestContext::new();
    let out = ctx.home().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let built =
        lapis_release::build_archive(&TestContext::bin(), host_build(&ctx), &out, 0).unwrap();
    let doc = ctx
        .run(["install", "--no-service", "--json"])
        .success()
        .json();
    assert_eq!(doc["digest"], built.manifest.digest());
    let snapshot = ctx
        .home()
        .join(".local/lib/lapis-ai-controller/releases")
        .join(built.manifest.digest());
    for licence in lapis_release::LICENSE_FILES {
        let path = snapshot.join(licence.path);
        assert_eq!(std::fs::read(&path).unwrap(), licence.bytes);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, lapis_release::SHIPPED_FILE_MODE, "{}", licence.path);
    }
}
