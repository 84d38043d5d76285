//! `install.sh` end to end, under `dash`: a release directory built by
//! `lapis-release` from the binary under test, served over loopback HTTP in
//! the GitHub releases layout (`/download/v<V>/<asset>`,
//! `/latest/download/<asset>`), installed into the context's temp HOME.
//! A tampered archive, a missing checksum line and a machine without a
//! SHA-256 tool all fail closed with nothing installed.

use std::path::{Path, PathBuf};
use std::process::Command;

use lapis_e2e::archives::Fingerprint;
use lapis_e2e::http::{HttpServer, Route};
use lapis_e2e::{Output, TestContext};
use lapis_release::{BuiltArchive, CHECKSUMS_FILE};

use crate::release::host_build;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../install.sh")
}

/// The release directory `lapis-release` builds for the binary under test.
struct Release {
    /// The archive for this machine's target.
    archive: BuiltArchive,
    /// `SHA256SUMS` as written beside it.
    sums: Vec<u8>,
}

fn build_release(ctx: &TestContext) -> Release {
    let out = ctx.home().join("dist");
    std::fs::create_dir_all(&out).unwrap();
    let archive = lapis_release::build_archive(&TestContext::bin(), host_build(ctx), &out, 0)
        .expect("lapis-release builds the archive");
    lapis_release::write_checksums(&out).unwrap();
    let sums = std::fs::read(out.join(CHECKSUMS_FILE)).unwrap();
    Release { archive, sums }
}

/// Serves `archive_bytes` and `sums` as release `v<version>` (also as the
/// latest release).
fn serve(release: &Release, archive_bytes: &[u8], sums: &[u8]) -> HttpServer {
    let server = HttpServer::start();
    let version = &release.archive.manifest.build.version;
    let bin = "application/octet-stream";
    server.route(
        &format!("/download/v{version}/{}", release.archive.name),
        Route::ok(bin, archive_bytes.to_vec()),
    );
    server.route(
        &format!("/download/v{version}/SHA256SUMS"),
        Route::ok("text/plain", sums.to_vec()),
    );
    server.route(
        "/latest/download/SHA256SUMS",
        Route::ok("text/plain", sums.to_vec()),
    );
    server
}

/// `dash install.sh ARGS` in the context's HOME.
fn run_script(ctx: &TestContext, args: &[&str], path: Option<&Path>) -> Output {
    let dash = which("dash").expect("dash must be installed to test install.sh");
    let mut cmd: Command = ctx.command_for(&dash, [script().as_os_str()]);
    cmd.args(args)
        .env_remove("LAPIS_AI_CONTROLLER_INSTALL_URL")
        .env("TMPDIR", ctx.home().join(".cache"));
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    ctx.output(cmd)
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(tool))
        .find(|p| p.is_file())
}

/// A directory of links to the tools install.sh may use, minus `without`.
fn tool_dir(ctx: &TestContext, without: &[&str]) -> PathBuf {
    let dir = ctx.home().join(format!("tools-{}", without.join("-")));
    std::fs::create_dir_all(&dir).unwrap();
    let tools = [
        "awk",
        "cat",
        "curl",
        "cut",
        "getconf",
        "ldd",
        "mkdir",
        "mktemp",
        "rm",
        "sed",
        "sha256sum",
        "shasum",
        "sysctl",
        "tar",
        "tr",
        "uname",
        "wc",
        "wget",
        "gzip",
    ];
    for tool in tools.iter().filter(|t| !without.contains(t)) {
        if let Some(real) = which(tool) {
            std::os::unix::fs::symlink(real, dir.join(tool)).unwrap();
        }
    }
    dir
}

#[track_caller]
fn assert_installed(ctx: &TestContext, release: &Release, out: &Output) {
    out.success();
    let digest = release.archive.manifest.digest();
    let launcher = ctx.home().join(".local/bin/lapis-ai-controller");
    let version = ctx.output(ctx.command_for(&launcher, ["version", "--json"]));
    assert_eq!(version.success().json()["snapshot"], digest.as_str());
    let snapshot = ctx
        .home()
        .join(".local/lib/lapis-ai-controller/releases")
        .join(&digest);
    for licence in lapis_release::LICENSE_FILES {
        assert_eq!(
            std::fs::read(snapshot.join(licence.path)).unwrap(),
            licence.bytes,
            "{} is installed with the release",
            licence.path
        );
    }
    assert!(
        out.stderr
            .contains(&format!("verified {}", release.archive.name)),
        "{}",
        out.stderr
    );
}

#[test]
fn install_sh_installs_a_pinned_release_verified_from_stdin() {
    let ctx = TestContext::new();
    let release = build_release(&ctx);
    let bytes = std::fs::read(&release.archive.path).unwrap();
    let server = serve(&release, &bytes, &release.sums);
    let version = release.archive.manifest.build.version.clone();
    // As documented: the script on stdin (`curl … | sh -s -- ARGS`).
    let dash = which("dash").expect("dash must be installed to test install.sh");
    let mut cmd = ctx.command_for(&dash, ["-s", "--"]);
    cmd.args([
        "--version",
        &version,
        "--base-url",
        server.base(),
        "--no-service",
    ])
    .env_remove("LAPIS_AI_CONTROLLER_INSTALL_URL")
    .env("TMPDIR", ctx.home().join(".cache"))
    .stdin(std::fs::File::open(script()).unwrap());
    let out = ctx.output(cmd);
    assert_installed(&ctx, &release, &out);
    let paths: Vec<String> = server.seen().into_iter().map(|s| s.path).collect();
    assert!(
        !paths.iter().any(|p| p.starts_with("/latest/")),
        "a pinned version never asks for the latest: {paths:?}"
    );
}

#[test]
fn install_sh_finds_the_latest_release_with_wget_and_the_env_base_url() {
    let mut ctx = TestContext::new();
    let release = build_release(&ctx);
    let bytes = std::fs::read(&release.archive.path).unwrap();
    let server = serve(&release, &bytes, &release.sums);
    ctx.set_env("LAPIS_AI_CONTROLLER_INSTALL_URL", server.base());
    let tools = tool_dir(&ctx, &["curl"]);
    assert!(tools.join("wget").exists(), "wget is needed for this test");
    let dash = which("dash").unwrap();
    let mut cmd = ctx.command_for(&dash, [script().as_os_str()]);
    cmd.arg("--no-service")
        .env("PATH", &tools)
        .env("TMPDIR", ctx.home().join(".cache"));
    let out = ctx.output(cmd);
    assert_installed(&ctx, &release, &out);
    let paths: Vec<String> = server.seen().into_iter().map(|s| s.path).collect();
    assert_eq!(paths[0], "/latest/download/SHA256SUMS", "{paths:?}");
}

#[test]
fn install_sh_refuses_a_tampered_archive_and_a_missing_checksum_line() {
    let ctx = TestContext::new();
    let release = build_release(&ctx);
    let good = std::fs::read(&release.archive.path).unwrap();
    let version = release.archive.manifest.build.version.clone();
    let before = Fingerprint::of(ctx.home());
    let args = |server: &HttpServer| {
        vec![
            "--version".to_owned(),
            version.clone(),
            "--base-url".to_owned(),
            server.base().to_owned(),
            "--no-service".to_owned(),
        ]
    };
    let run = |server: &HttpServer, path: Option<&Path>| {
        let args = args(server);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_script(&ctx, &args, path)
    };

    // One flipped byte in the middle of the archive.
    let mut tampered = good.clone();
    let mid = tampered.len() / 2;
    tampered[mid] ^= 0x01;
    let server = serve(&release, &tampered, &release.sums);
    let out = run(&server, None);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("checksum mismatch"), "{}", out.stderr);
    assert_eq!(Fingerprint::of(ctx.home()), before, "nothing installed");

    // SHA256SUMS without the line for this archive.
    let sums = String::from_utf8(release.sums.clone()).unwrap();
    let without: String = sums
        .lines()
        .filter(|l| !l.ends_with(&release.archive.name))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(without, sums);
    let server = serve(&release, &good, without.as_bytes());
    let out = run(&server, None);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("SHA256SUMS has no (single) line"),
        "{}",
        out.stderr
    );
    // The latest release without a line for this target: no version to pick.
    let out = run_script(&ctx, &["--base-url", server.base(), "--no-service"], None);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("no single archive"), "{}", out.stderr);
    assert_eq!(Fingerprint::of(ctx.home()), before, "nothing installed");

    // No sha256sum and no shasum: refuse before downloading anything.
    let server = serve(&release, &good, &release.sums);
    let tools = tool_dir(&ctx, &["sha256sum", "shasum"]);
    let out = run(&server, Some(&tools));
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("sha256sum or shasum is required"),
        "{}",
        out.stderr
    );
    assert!(server.seen().is_empty(), "nothing downloaded");

    // Plain http to anything but loopback is refused.
    let out = run_script(
        &ctx,
        &["--version", &version, "--base-url", "http://example.com/r"],
        None,
    );
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("only https://"), "{}", out.stderr);
    assert_eq!(Fingerprint::of(ctx.home()), before, "nothing installed");
}

/// A value-taking option without its value, or an unknown argument, stops
/// the script before anything is fetched (exit 1, naming it).
#[test]
fn install_sh_refuses_a_missing_value_and_an_unknown_argument() {
    let ctx = TestContext::new();
    for (args, says) in [
        (&["--no-service", "--target"][..], "--target needs a value"),
        (&["--instance"][..], "--instance needs a value"),
        (&["--frob"][..], "unknown argument: --frob"),
        (&["--quiet=1"][..], "unknown argument: --quiet=1"),
    ] {
        let out = run_script(&ctx, args, None);
        assert_eq!(out.code, Some(1), "{args:?}: {out:?}");
        assert!(
            out.stderr.contains(&format!("install.sh: error: {says}")),
            "{args:?}: {}",
            out.stderr
        );
    }
}

#[test]
fn install_sh_passes_exit_3_through_when_no_service_manager_answers() {
    let ctx = TestContext::new();
    let release = build_release(&ctx);
    let bytes = std::fs::read(&release.archive.path).unwrap();
    let server = serve(&release, &bytes, &release.sums);
    // The script's tools, and no systemctl: the install succeeds, the
    // service step cannot.
    let tools = tool_dir(&ctx, &[]);
    assert!(!tools.join("systemctl").exists());
    let out = run_script(&ctx, &["--base-url", server.base()], Some(&tools));
    assert_eq!(out.code, Some(3), "{out:?}");
    assert!(
        out.stderr.contains("no service manager answered")
            && out.stderr.contains("serve --background"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("install failed"), "{}", out.stderr);
    assert!(ctx.home().join(".local/bin/lapis-ai-controller").exists());
}

/// Also the `--option=VALUE` spellings (the other tests give values as
/// the next argument), `--target` among them.
#[test]
fn install_sh_passes_instance_and_install_path_through_and_is_quiet_when_asked() {
    let ctx = TestContext::new();
    let release = build_release(&ctx);
    let bytes = std::fs::read(&release.archive.path).unwrap();
    let server = serve(&release, &bytes, &release.sums);
    let launcher = ctx.home().join("bin/lapis");
    let target = format!("--target={}", release.archive.manifest.build.target);
    let out = run_script(
        &ctx,
        &[
            "--quiet",
            &format!("--base-url={}", server.base()),
            "--no-service",
            "--instance=w1",
            &format!("--install-path={}", launcher.display()),
            &target,
        ],
        None,
    );
    out.success();
    // Quiet: neither the script's progress nor the installer's report.
    assert_eq!(
        (out.stdout.as_str(), out.stderr.as_str()),
        ("", ""),
        "{out:?}"
    );
    assert!(
        launcher.exists(),
        "the launcher is where it was asked to be"
    );
    assert!(!ctx.home().join(".local/bin/lapis-ai-controller").exists());
    let config = ctx
        .home()
        .join(".config/lapis-ai-controller/instances/w1/config.json");
    assert!(config.is_file(), "the instance has its own config");
    let version = ctx.output(ctx.command_for(&launcher, ["version", "--json"]));
    let digest = release.archive.manifest.digest();
    assert_eq!(version.success().json()["snapshot"], digest.as_str());
}
