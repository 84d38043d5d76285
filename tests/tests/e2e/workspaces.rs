//! `workspaces remove` with the real binary: refused while a turn is in
//! flight (naming it) and for a configured workspace; after removal the
//! controller restarts cleanly, the journal verifies and the workspace's
//! threads stay readable but take no new turns.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::cli_permissions::fixture;
use crate::serve_support::Server;

#[test]
fn remove_refuses_while_a_turn_waits_then_survives_a_restart() {
    let mut server = Server::start_full(
        json!({}),
        json!({ "asker": fixture(&["--permissions", "1", "--chunks", "1"]) }),
    );
    let scratch = server.ctx.home().join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let ctx = &server.ctx;
    ctx.run(["workspaces", "add", "scratch", scratch.to_str().unwrap()])
        .success();
    let thread = ctx
        .run(["threads", "create", "scratch", "--provider", "asker"])
        .success()
        .stdout
        .trim()
        .to_owned();
    let submitted = ctx.run(["turns", "submit", &thread, "--prompt", "hi", "--json"]);
    let turn = submitted.success().json()["turn"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The agent now waits for a permission answer: the turn is claimed.
    let deadline = Instant::now() + Duration::from_secs(60);
    while ctx.run(["permissions", "list", "--json"]).success().json()["requests"]
        .as_array()
        .is_none_or(|a| a.is_empty())
    {
        assert!(Instant::now() < deadline, "no permission request");
        std::thread::sleep(Duration::from_millis(50));
    }
    let busy = ctx.run(["workspaces", "remove", "scratch", "--json"]);
    busy.expect_code(2);
    assert!(busy.stderr.contains("workspace_busy"), "{}", busy.stderr);
    assert!(
        busy.stderr.contains(&turn),
        "names the turn: {}",
        busy.stderr
    );
    assert!(busy.stderr.contains("turns cancel"), "{}", busy.stderr);

    // A configured workspace is refused with the way to do it.
    let configured = ctx.run(["workspaces", "remove", "proj"]);
    configured.expect_code(2);
    assert!(
        configured.stderr.contains("declared in the configuration"),
        "{}",
        configured.stderr
    );

    ctx.run(["turns", "cancel", &turn]).success();
    let deadline = Instant::now() + Duration::from_secs(60);
    let removed = loop {
        let r = ctx.run(["workspaces", "remove", "scratch", "--json"]);
        if r.code == Some(0) {
            break r.json();
        }
        assert!(r.stderr.contains("workspace_busy"), "{}", r.stderr);
        assert!(
            Instant::now() < deadline,
            "the cancelled turn never settled"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(removed["workspace"]["id"], "scratch");
    assert_eq!(removed["threads"], 1);
    assert_eq!(removed["replayed"], false);

    // Restart: the store reopens with the removed workspace's thread in it.
    server.stop();
    server.spawn();
    let ctx = &server.ctx;
    let list = ctx.run(["workspaces", "list"]).success().stdout.clone();
    assert!(list.contains("proj") && !list.contains("scratch"), "{list}");
    ctx.run(["journal", "verify"]).success();
    let show = ctx
        .run(["threads", "show", &thread, "--json"])
        .success()
        .json();
    assert_eq!(show["thread"]["workspaceId"], "scratch");
    let refused = ctx.run(["turns", "submit", &thread, "--prompt", "again"]);
    refused.expect_code(2);
    assert!(refused.stderr.contains("was removed"), "{}", refused.stderr);
    // Again is a retry; the same id and directory bring it back.
    let again = ctx
        .run(["workspaces", "remove", "scratch"])
        .success()
        .stdout
        .clone();
    assert!(again.contains("already removed"), "{again}");
    ctx.run(["workspaces", "add", "scratch", scratch.to_str().unwrap()])
        .success();
    ctx.run(["turns", "submit", &thread, "--prompt", "again"])
        .success();
}

/// One tree has one workspace (issue 43 item 5), through the socket and
/// the CLI: a directory inside the configured `proj`, or one containing
/// it, is refused `workspace_overlaps` naming `proj`; a sibling is not.
#[test]
fn a_directory_inside_or_around_a_workspace_is_refused_as_overlapping() {
    let server = Server::start();
    let inner = server.project.join("sub");
    std::fs::create_dir_all(&inner).unwrap();
    let (mut raw, _) = server.hello(crate::serve_support::OWNER, "ws-app");
    for (id, path) in [
        ("inner", inner.clone()),
        ("outer", server.ctx.home().to_owned()),
    ] {
        let r = raw.call(
            "workspaces.add",
            json!({ "id": id, "path": path, "commandId": format!("add-{id}") }),
        );
        assert_eq!(crate::serve_support::code(&r), "workspace_overlaps", "{r}");
        assert_eq!(r["error"]["data"]["existing"], "proj", "{r}");
        assert_eq!(r["error"]["code"], -32024, "{r}");
    }
    let out = server
        .ctx
        .run(["workspaces", "add", "inner", inner.to_str().unwrap()]);
    out.expect_code(2);
    assert!(out.stderr.contains("workspace_overlaps"), "{}", out.stderr);
    let sibling = server.ctx.home().join("project-2");
    std::fs::create_dir_all(&sibling).unwrap();
    server
        .ctx
        .run(["workspaces", "add", "sibling", sibling.to_str().unwrap()])
        .success();
    server.finish(&[&raw], &[]);
}
