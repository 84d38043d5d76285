//! `update`: against a 127.0.0.1 server speaking GitHub's releases API shape.
//! Releases carry stand-in script binaries so other versions can be published
//! without compiling anything; the installer's smoke test accepts them
//! because they answer `version --json` with their manifest's identity.

use lapis_e2e::TestContext;
use lapis_e2e::archives::{
    Fingerprint, github_release, release_archive, script_binary, sha256_hex, with_version,
};
use lapis_e2e::http::{HttpServer, Route};
use lapis_release::BuildIdentity;

use crate::release::{host_build, refused};

const RELEASES: &str = "/repos/lapis-ai/lapis-ai-controller/releases";

/// A server publishing the given releases; each `(version, archive bytes,
/// SHA256SUMS text)` is served under `/assets/v<version>/`.
fn publish(server: &HttpServer, releases: &[(&str, Vec<u8>, String, String)]) {
    let mut list = Vec::new();
    for (version, bytes, name, sums) in releases {
        let tag = format!("v{version}");
        list.push(github_release(server.base(), &tag, &[name, "SHA256SUMS"]));
        server.route(
            &format!("/assets/{tag}/{name}"),
            Route::ok("application/octet-stream", bytes.clone()),
        );
        server.route(
            &format!("/assets/{tag}/SHA256SUMS"),
            Route::ok("application/octet-stream", sums.clone()),
        );
    }
    server.route(
        RELEASES,
        Route::ok("application/json", serde_json::to_vec(&list).unwrap()),
    );
}

/// `(version, bytes, name, SHA256SUMS)` of a script release for `build`.
fn script_release(build: &BuildIdentity) -> (String, Vec<u8>, String, String) {
    let (name, bytes) = release_archive(&script_binary(build), build);
    let sums = format!("{}  {name}\n", sha256_hex(&bytes));
    (build.version.clone(), bytes, name, sums)
}

fn context(server: &HttpServer) -> TestContext {
    let mut ctx = TestContext::new();
    ctx.set_env("LAPIS_AI_CONTROLLER_UPDATE_API", server.base());
    ctx.set_env("NO_PROXY", "127.0.0.1");
    ctx
}

fn borrow(r: &(String, Vec<u8>, String, String)) -> (&str, Vec<u8>, String, String) {
    (r.0.as_str(), r.1.clone(), r.2.clone(), r.3.clone())
}

#[test]
fn check_reports_then_update_installs_sending_the_token_only_as_a_header() {
    let server = HttpServer::start();
    let mut ctx = context(&server);
    let secret = "ghp_e2eTokenThatMustNeverBePrinted";
    ctx.set_env("GITHUB_TOKEN", secret);
    let host = host_build(&ctx);
    let newer = script_release(&with_version(&host, "0.2.0"));
    let older = script_release(&with_version(&host, "0.0.9"));
    publish(&server, &[borrow(&newer), borrow(&older)]);

    let doc = ctx.run(["update", "--check", "--json"]).success().json();
    assert_eq!(doc["current"], host.version.as_str());
    assert_eq!(doc["latest"], "0.2.0");
    assert_eq!(doc["updateAvailable"], true);
    assert_eq!(doc["downgrade"], false);
    assert_eq!(doc["installed"], false);
    assert_eq!(
        Fingerprint::of(ctx.home()).launcher,
        None,
        "--check installs nothing"
    );
    let seen = server.seen();
    assert!(
        seen.iter().all(|s| !s.path.starts_with("/assets/")),
        "{seen:?}"
    );
    assert!(
        seen.iter().any(|s| s.path == RELEASES && s.authorized),
        "{seen:?}"
    );
    let plain = ctx.run(["update", "--check"]).success().stdout.clone();
    assert!(plain.contains("0.2.0 is available"), "{plain}");

    // A real update (plain output, stderr not a terminal): the assets under
    // the API base get the token too, and no progress bar is drawn.
    let out = ctx.run(["update", "--no-service"]);
    out.success();
    assert!(out.stdout.contains("updated"), "{}", out.stdout);
    assert_eq!(out.stderr.trim(), "", "no progress bar without a terminal");
    let seen = server.seen();
    assert!(
        seen.iter()
            .any(|s| s.path.starts_with("/assets/v0.2.0/lapis-ai-controller-") && s.authorized),
        "{seen:?}"
    );
    ctx.assert_no_secret(secret, &[]);
}

#[test]
fn update_installs_a_new_snapshot_and_rollback_returns() {
    let server = HttpServer::start();
    let ctx = context(&server);
    ctx.run(["install", "--no-service", "--json"]).success();
    let before = Fingerprint::of(ctx.home());
    let old_target = before.launcher.clone().expect("launcher");
    let host = host_build(&ctx);
    publish(
        &server,
        &[borrow(&script_release(&with_version(&host, "0.2.0")))],
    );

    let doc = ctx
        .run(["update", "--no-service", "--json"])
        .success()
        .json();
    assert_eq!(doc["version"], "0.2.0");
    assert_eq!(doc["snapshot"], "new");
    let previous = doc["previousDigest"].as_str().expect("previous digest");
    assert!(old_target.to_str().unwrap().contains(previous));
    assert!(
        old_target.exists(),
        "the running release is never overwritten"
    );
    let launcher = ctx.home().join(".local/bin/lapis-ai-controller");
    let version = ctx.output(ctx.command_for(&launcher, ["version", "--json"]));
    assert_eq!(version.success().json()["version"], "0.2.0");
    assert_eq!(
        Fingerprint::of(ctx.home()).config,
        before.config,
        "config untouched"
    );

    ctx.run(["rollback", "--json"]).success();
    assert_eq!(Fingerprint::of(ctx.home()).launcher, Some(old_target));
}

#[test]
fn downgrades_need_an_explicit_version() {
    let server = HttpServer::start();
    let ctx = context(&server);
    let host = host_build(&ctx);
    publish(
        &server,
        &[borrow(&script_release(&with_version(&host, "0.0.9")))],
    );

    let doc = ctx
        .run(["update", "--no-service", "--json"])
        .success()
        .json();
    assert_eq!(doc["updateAvailable"], false);
    assert_eq!(doc["installed"], false);
    assert_eq!(Fingerprint::of(ctx.home()).launcher, None);

    let out = ctx.run(["update", "--version", "0.0.8", "--no-service", "--json"]);
    refused(&out, "not_found", "0.0.8");

    let doc = ctx
        .run(["update", "--version", "0.0.9", "--no-service", "--json"])
        .success()
        .json();
    assert_eq!(doc["version"], "0.0.9");
}

#[test]
fn bad_releases_are_refused_and_change_nothing() {
    let server = HttpServer::start();
    let ctx = context(&server);
    ctx.run(["install", "--no-service", "--json"]).success();
    let before = Fingerprint::of(ctx.home());
    let host = host_build(&ctx);
    let build = with_version(&host, "0.3.0");
    let (version, bytes, name, sums) = script_release(&build);
    let tag = format!("/assets/v{version}");

    // SHA256SUMS without the archive's entry.
    publish(
        &server,
        &[(&version, bytes.clone(), name.clone(), String::new())],
    );
    refused(
        &ctx.run(["update", "--no-service", "--json"]),
        "checksum_missing",
        "no entry for",
    );
    assert_eq!(Fingerprint::of(ctx.home()), before);

    // SHA256SUMS listing other bytes.
    let wrong = format!("{}  {name}\n", sha256_hex(b"other"));
    publish(&server, &[(&version, bytes.clone(), name.clone(), wrong)]);
    refused(
        &ctx.run(["update", "--no-service", "--json"]),
        "checksum_mismatch",
        "mismatch",
    );
    assert_eq!(Fingerprint::of(ctx.home()), before);

    // The connection drops halfway through the archive.
    publish(
        &server,
        &[(&version, bytes.clone(), name.clone(), sums.clone())],
    );
    server.route(
        &format!("{tag}/{name}"),
        Route::cut(bytes.clone(), bytes.len() / 2),
    );
    let out = ctx.run(["update", "--no-service", "--json"]);
    out.expect_code(2);
    let code = out.json()["error"]["code"].as_str().unwrap().to_owned();
    assert!(
        code == "download_failed" || code == "checksum_mismatch",
        "{}",
        out.stdout
    );
    assert_eq!(Fingerprint::of(ctx.home()), before);

    // An archive named for this target whose manifest names another.
    let other = BuildIdentity {
        target: "riscv64gc-unknown-linux-gnu".into(),
        ..build.clone()
    };
    let (_, other_bytes) = release_archive(&script_binary(&other), &other);
    let other_sums = format!("{}  {name}\n", sha256_hex(&other_bytes));
    publish(
        &server,
        &[(&version, other_bytes, name.clone(), other_sums)],
    );
    refused(
        &ctx.run(["update", "--no-service", "--json"]),
        "wrong_target",
        "riscv64gc",
    );
    assert_eq!(Fingerprint::of(ctx.home()), before);

    // Only another target's asset is published: nothing to update to.
    let (other_name, other_bytes) = release_archive(&script_binary(&other), &other);
    let other_sums = format!("{}  {other_name}\n", sha256_hex(&other_bytes));
    publish(&server, &[(&version, other_bytes, other_name, other_sums)]);
    refused(
        &ctx.run(["update", "--no-service", "--json"]),
        "not_found",
        &host.target,
    );
    assert_eq!(Fingerprint::of(ctx.home()), before);
}

#[test]
fn offline_updates_exit_3_and_insecure_update_sources_are_clear_failures() {
    let ctx = {
        // A port that was just free: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut ctx = TestContext::new();
        ctx.set_env(
            "LAPIS_AI_CONTROLLER_UPDATE_API",
            format!("http://127.0.0.1:{port}"),
        );
        ctx
    };
    // Offline (nothing answers): the unavailable class, exit 3, for
    // `--check` and for an update alike.
    for args in [
        &["update", "--check", "--json"][..],
        &["update", "--json"][..],
    ] {
        let out = ctx.run(args);
        out.expect_code(3);
        let doc = out.json();
        assert_eq!(doc["error"]["code"], "update_source_unavailable", "{doc}");
        assert!(format!("{doc}").contains("cannot list releases"), "{doc}");
    }
    let mut ctx = TestContext::new();
    ctx.set_env("LAPIS_AI_CONTROLLER_UPDATE_API", "http://example.com/api");
    refused(
        &ctx.run(["update", "--check", "--json"]),
        "insecure_url",
        "only https://",
    );
    let mut ctx = TestContext::new();
    ctx.set_env("LAPIS_AI_CONTROLLER_UPDATE_REPO", "no-slash");
    refused(
        &ctx.run(["update", "--check", "--json"]),
        "invalid_request",
        "owner/name",
    );
    assert_eq!(Fingerprint::of(ctx.home()).launcher, None);
}
