//! `ask` that follows you: the provider the first `providers add` made the
//! default, `--approve-all`/`--deny-all`, and flags checked before anything
//! is registered.

use serde_json::json;

use crate::cli_permissions::fixture;
use crate::serve_support::Server;

#[test]
fn the_first_provider_added_becomes_what_ask_uses() {
    let server = Server::start_full(json!({}), json!({}));
    let ctx = &server.ctx;
    let bin = env!("CARGO_BIN_EXE_fixture-agent");
    let first = ctx.run([
        "providers",
        "add",
        "fx",
        "--command",
        bin,
        "--arg",
        "--chunks",
        "--arg",
        "1",
        "--arg",
        "--chunk-text",
        "--arg",
        "from-fx",
    ]);
    first.success();
    assert!(
        first
            .stdout
            .contains("`fx` is now the default provider: `ask` uses it without --provider"),
        "{}",
        first.stdout
    );
    let config = || -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(&server.config).unwrap()).unwrap()
    };
    assert_eq!(config()["defaultProvider"], "fx");
    let second = ctx.run(["providers", "add", "other", "--command", bin]);
    second.success();
    assert!(
        !second.stdout.contains("default provider"),
        "{}",
        second.stdout
    );
    assert_eq!(config()["defaultProvider"], "fx");

    let dir = server.project.to_str().unwrap().to_owned();
    let asked = ctx.run(["ask", "hello", "--dir", &dir]);
    asked.success();
    assert!(asked.stderr.contains("(provider fx)"), "{}", asked.stderr);
    assert_eq!(asked.stdout, "from-fx0 \n");
    // An explicit --provider still wins.
    let echo = ctx.run(["ask", "hello", "--dir", &dir, "--provider", "echo"]);
    echo.success();
    assert!(echo.stdout.contains("hello"), "{}", echo.stdout);

    let removed = ctx.run(["providers", "remove", "fx"]);
    removed.success();
    assert!(
        removed.stdout.contains("it was the default provider"),
        "{}",
        removed.stdout
    );
    assert!(config().get("defaultProvider").is_none(), "{}", config());
    ctx.run(["config", "validate"]).success();
}

#[test]
fn a_mistyped_ask_registers_nothing() {
    let server = Server::start_full(json!({}), json!({}));
    let ctx = &server.ctx;
    let fresh = ctx.home().join("fresh");
    std::fs::create_dir_all(&fresh).unwrap();
    let fresh = fresh.to_str().unwrap().to_owned();
    let unknown = ctx.run(["ask", "hi", "--dir", &fresh, "--provider", "ghost"]);
    unknown.expect_code(2);
    assert!(
        unknown
            .stderr
            .contains("provider `ghost` is not configured"),
        "{}",
        unknown.stderr
    );
    let both = ctx.run(["ask", "hi", "--dir", &fresh, "--approve-all", "--deny-all"]);
    both.expect_code(2);
    let listed = ctx.run(["workspaces", "list", "--json"]).json();
    assert!(
        !listed.to_string().contains("fresh"),
        "nothing registered: {listed}"
    );
}

#[test]
fn approve_all_and_deny_all_answer_every_request() {
    let server = Server::start_full(
        json!({}),
        json!({ "asker": fixture(&["--permissions", "2", "--perm-kinds",
            "allow_always,allow_once,reject_once", "--chunks", "1"]) }),
    );
    let ctx = &server.ctx;
    let dir = server.project.to_str().unwrap().to_owned();
    let approved = ctx.run([
        "ask",
        "go",
        "--dir",
        &dir,
        "--provider",
        "asker",
        "--approve-all",
    ]);
    approved.success();
    assert!(
        approved
            .stdout
            .contains("perm-0=opt-allow_onceperm-1=opt-allow_once"),
        "{}",
        approved.stdout
    );
    assert!(
        approved
            .stderr
            .contains("answered with opt-allow_once (allow_once) by --approve-all"),
        "{}",
        approved.stderr
    );
    let denied = ctx.run([
        "ask",
        "go",
        "--dir",
        &dir,
        "--provider",
        "asker",
        "--deny-all",
    ]);
    denied.success();
    assert!(
        denied
            .stdout
            .contains("perm-0=opt-reject_onceperm-1=opt-reject_once"),
        "{}",
        denied.stdout
    );
}
