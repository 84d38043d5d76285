//! Worktree workspaces (issue 31): a git worktree per workspace id, so two
//! agents work on one repository at once; removal refuses a busy or dirty
//! worktree and deletes one only when asked.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::evidence::{git, make_repo};
use crate::serve_support::Server;
use lapis_e2e::wait::wait_turn;

fn fixture(args: &[&str]) -> Value {
    json!({ "command": env!("CARGO_BIN_EXE_fixture-agent"), "args": args })
}

/// The registered path of workspace `id`.
fn path_of(server: &Server, id: &str) -> PathBuf {
    let list = server.ctx.run(["workspaces", "list", "--json"]).json();
    let ws = list["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == id)
        .unwrap_or_else(|| panic!("{id} in {list}"));
    PathBuf::from(ws["path"].as_str().unwrap())
}

#[test]
fn two_threads_on_two_worktrees_of_one_repository_run_at_once() {
    let server = Server::start_full(json!({}), json!({ "hang": fixture(&["--hang"]) }));
    make_repo(&server.project);
    let project = server.project.to_str().unwrap().to_owned();
    for id in ["wt-a", "wt-b"] {
        server
            .ctx
            .run(["workspaces", "add", id, "--worktree-of", &project])
            .expect_code(0);
    }
    let (a, b) = (path_of(&server, "wt-a"), path_of(&server, "wt-b"));
    // Under the controller home, each its own checkout on its own branch;
    // never an alias of the main checkout.
    assert!(a.ends_with("worktrees/wt-a"), "{}", a.display());
    assert!(a.join("keep.txt").exists() && b.join("src/edit.txt").exists());
    assert_eq!(git(&a, &["branch", "--show-current"]), "lapis/wt-a");
    assert_eq!(git(&b, &["branch", "--show-current"]), "lapis/wt-b");
    assert_ne!(path_of(&server, "proj"), a);

    let mut client = server.client("lapis-cli");
    let mut turns = Vec::new();
    for (n, ws) in ["wt-a", "wt-b"].into_iter().enumerate() {
        let thread = client
            .threads_create(ws, "hang", lapis_protocol::ApprovalPolicy::Ask, None)
            .unwrap();
        turns.push(
            client
                .turns_submit(&thread.id, &format!("c-{n}"), "hang")
                .unwrap(),
        );
    }
    for t in &turns {
        wait_turn(&mut client, &t.id, |s| s == "dispatched" || s == "running");
    }
    let status = server.ctx.run(["status", "--json"]).json();
    let mut running: Vec<&str> = status["runningWorkspaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    running.sort_unstable();
    assert_eq!(running, ["wt-a", "wt-b"], "{status}");

    // Busy: refused, nothing deleted.
    let busy = server.ctx.run([
        "workspaces",
        "remove",
        "wt-a",
        "--delete-worktree",
        "--json",
    ]);
    busy.expect_code(2);
    assert_eq!(
        busy.json()["error"]["code"],
        "workspace_busy",
        "{}",
        busy.stdout
    );
    assert!(a.exists());
    for t in &turns {
        client.turns_cancel(&t.id).unwrap();
        wait_turn(&mut client, &t.id, lapis_e2e::wait::settled);
    }

    // Dirty: refused without --force, the workspace stays registered.
    std::fs::write(a.join("scratch.txt"), "untracked\n").unwrap();
    let dirty = server.ctx.run([
        "workspaces",
        "remove",
        "wt-a",
        "--delete-worktree",
        "--json",
    ]);
    dirty.expect_code(2);
    assert_eq!(
        dirty.json()["error"]["code"],
        "workspace_dirty",
        "{}",
        dirty.stdout
    );
    assert!(a.join("scratch.txt").exists());
    assert_eq!(path_of(&server, "wt-a"), a);
    // Forced: removed and deleted; the branch stays.
    let forced = server.ctx.run([
        "workspaces",
        "remove",
        "wt-a",
        "--delete-worktree",
        "--force",
        "--json",
    ]);
    forced.expect_code(0);
    assert_eq!(forced.json()["worktreeDeleted"], true, "{}", forced.stdout);
    assert!(!a.exists());
    git(
        &server.project,
        &["rev-parse", "--verify", "refs/heads/lapis/wt-a"],
    );

    // Without --delete-worktree the directory stays.
    server
        .ctx
        .run(["workspaces", "remove", "wt-b"])
        .expect_code(0);
    assert!(b.join("keep.txt").exists());
    server.finish(&[], &[]);
}

#[test]
fn threads_create_worktree_gives_the_thread_its_own_worktree() {
    let server = Server::start_full(
        json!({}),
        json!({ "toucher": fixture(&["--touch", "mine.txt"]) }),
    );
    make_repo(&server.project);
    let out = server.ctx.run([
        "threads",
        "create",
        "proj",
        "--provider",
        "toucher",
        "--worktree",
        "--command-id",
        "th-1",
        "--json",
    ]);
    out.expect_code(0);
    let thread = out.json()["thread"].clone();
    let ws = thread["workspaceId"].as_str().unwrap().to_owned();
    assert!(ws.starts_with("proj-wt-"), "{thread}");
    // A retry with the same command id finds the same thread and worktree.
    let again = server.ctx.run([
        "threads",
        "create",
        "proj",
        "--provider",
        "toucher",
        "--worktree",
        "--command-id",
        "th-1",
        "--json",
    ]);
    again.expect_code(0);
    assert_eq!(again.json()["thread"]["id"], thread["id"]);
    let path = path_of(&server, &ws);
    let turn = server.ctx.run([
        "turns",
        "submit",
        thread["id"].as_str().unwrap(),
        "--prompt",
        "touch",
        "--wait",
        "--json",
    ]);
    turn.expect_code(0);
    // The agent ran in the worktree, not in the main checkout.
    assert!(path.join("mine.txt").exists());
    assert!(!server.project.join("mine.txt").exists());
    server.finish(&[], &[]);
}

#[test]
fn setup_and_teardown_hooks_run_in_the_worktree_and_a_failed_setup_leaves_nothing() {
    let server = Server::start_full(json!({}), json!({}));
    make_repo(&server.project);
    let home = server.ctx.home().to_path_buf();
    // The owner configures a root and the hooks, then reloads.
    let mut config: Value =
        serde_json::from_slice(&std::fs::read(&server.config).unwrap()).unwrap();
    config["worktrees"] = json!({
        "root": home.join("wtroot"),
        "setup": { "command": "/bin/sh", "args": ["-c",
            "echo \"$LAPIS_WORKSPACE_ID from $LAPIS_REPOSITORY\" > .setup-marker; echo hello-from-setup; test \"$LAPIS_WORKSPACE_ID\" != wt-bad"],
            "timeoutSeconds": 30 },
        "teardown": { "command": "/bin/sh", "args": ["-c", "echo bye > \"$HOME/teardown-$LAPIS_WORKSPACE_ID\""],
            "envAllowlist": ["HOME"] },
    });
    std::fs::write(&server.config, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    server.ctx.run(["config", "reload"]).expect_code(0);

    let project = server.project.to_str().unwrap().to_owned();
    server
        .ctx
        .run(["workspaces", "add", "wt-ok", "--worktree-of", &project])
        .expect_code(0);
    let path = path_of(&server, "wt-ok");
    assert_eq!(path, home.join("wtroot/wt-ok").canonicalize().unwrap());
    let marker = std::fs::read_to_string(path.join(".setup-marker")).unwrap();
    assert!(marker.starts_with("wt-ok from "), "{marker}");
    lapis_e2e::wait::until("the hook's output in the service log", || {
        server.log_text().contains("hello-from-setup")
    });

    // A failing setup refuses the add and leaves neither worktree nor workspace.
    let bad = server.ctx.run([
        "workspaces",
        "add",
        "wt-bad",
        "--worktree-of",
        &project,
        "--json",
    ]);
    bad.expect_code(2);
    assert!(
        bad.stdout.contains("setup command failed"),
        "{}",
        bad.stdout
    );
    assert!(!home.join("wtroot/wt-bad").exists());
    let list = server.ctx.run(["workspaces", "list", "--json"]).json();
    assert!(!list.to_string().contains("wt-bad"), "{list}");

    // Teardown runs before the worktree is deleted (the marker makes it
    // dirty: --force).
    server
        .ctx
        .run([
            "workspaces",
            "remove",
            "wt-ok",
            "--delete-worktree",
            "--force",
        ])
        .expect_code(0);
    assert!(!path.exists());
    assert_eq!(
        std::fs::read_to_string(home.join("teardown-wt-ok")).unwrap(),
        "bye\n"
    );
    server.finish(&[], &[]);
}

/// `--worktree-of` a directory under the roots whose `.git` points at a
/// repository outside them (here: a linked worktree of an outside
/// repository) is refused `workspace_outside_roots`, and the outside
/// repository gets no branch and no worktree.
#[test]
fn a_worktree_of_a_directory_whose_git_lies_outside_the_roots_is_refused() {
    let server = Server::start();
    let outside = tempfile::tempdir().unwrap();
    assert!(!outside.path().starts_with(server.ctx.home()));
    make_repo(outside.path());
    git(outside.path(), &["commit", "-qm", "staged"]);
    let inside = server.ctx.home().join("inside");
    let inside_arg = inside.to_str().unwrap();
    git(
        outside.path(),
        &["worktree", "add", "-q", "-b", "side", inside_arg],
    );
    let before = git(outside.path(), &["worktree", "list", "--porcelain"]);
    let out = server
        .ctx
        .run(["workspaces", "add", "wt-x", "--worktree-of", inside_arg]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("workspace_outside_roots")
            || out.stderr.contains("outside the workspace roots"),
        "{}",
        out.stderr
    );
    assert_eq!(
        git(outside.path(), &["worktree", "list", "--porcelain"]),
        before
    );
    let branches = git(outside.path(), &["branch", "--list", "lapis/*"]);
    assert!(branches.trim().is_empty(), "{branches}");
    assert!(
        !server
            .ctx
            .home()
            .join(".lapis/ai-controller/worktrees/wt-x")
            .exists()
    );
}
