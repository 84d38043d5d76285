//! Workspace snapshots as evidence (issue 31): a turn in a git workspace
//! records its tree at the dispatch boundary and at the outcome, `turns
//! show` prints what changed, and a fence left by a crash shows what the
//! agent changed since its boundary — without ever writing the user's
//! index, HEAD or branches.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::serve_support::Server;
use crate::serve_turns::kill_agents_in;
use lapis_e2e::wait::wait_turn;

fn fixture(args: &[&str]) -> Value {
    json!({ "command": env!("CARGO_BIN_EXE_fixture-agent"), "args": args })
}

/// Runs git in `dir` for the fixture (an identity, no global config).
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A repository with two committed files and a staged change (the
/// user's index differs from HEAD, so a write to it would show).
pub(crate) fn make_repo(dir: &Path) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("keep.txt"), "keep\n").unwrap();
    std::fs::write(dir.join("src/edit.txt"), "edit\n").unwrap();
    std::fs::write(dir.join(".gitignore"), "ignored/\n").unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "init"]);
    std::fs::write(dir.join("keep.txt"), "keep\nstaged\n").unwrap();
    git(dir, &["add", "keep.txt"]);
}

/// The bytes of what the user owns in the repository: index, HEAD, the
/// branch, and whether a stash exists.
fn user_state(dir: &Path) -> (Vec<u8>, Vec<u8>, String, bool) {
    (
        std::fs::read(dir.join(".git/index")).unwrap(),
        std::fs::read(dir.join(".git/HEAD")).unwrap(),
        git(dir, &["rev-parse", "refs/heads/main"]),
        dir.join(".git/refs/stash").exists(),
    )
}

fn paths(diff: &Value) -> Vec<String> {
    diff["files"]
        .as_array()
        .unwrap_or_else(|| panic!("files in {diff}"))
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_crash_mid_turn_leaves_a_fence_that_shows_what_the_agent_touched() {
    let mut server = Server::start_full(
        json!({}),
        json!({ "toucher": fixture(&["--touch", "made.txt,src/edit.txt,ignored/x.txt", "--hang"]) }),
    );
    make_repo(&server.project);
    let before = user_state(&server.project);
    let mut client = server.client("lapis-cli");
    let thread = client
        .threads_create("proj", "toucher", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client
        .turns_submit(&thread.id, "t-1", "touch and hang")
        .unwrap();
    wait_turn(&mut client, &turn.id, |s| {
        s == "dispatched" || s == "running"
    });
    // The agent wrote its files at the prompt, after the boundary.
    let made = server.project.join("made.txt");
    lapis_e2e::wait::until("the agent touched its files", || made.exists());
    drop(client);
    server.kill9();
    kill_agents_in(&server.project);
    server.spawn();

    let shown = server.ctx.run(["turns", "show", &turn.id, "--json"]).json();
    assert_eq!(shown["turn"]["state"], "submission_unknown", "{shown}");
    let evidence = &shown["evidence"];
    assert!(evidence["boundary"]["tree"].is_string(), "{shown}");
    assert!(
        evidence["outcome"].is_null(),
        "no outcome after a crash: {shown}"
    );
    // Exactly the files the agent touched; the ignored one is not there.
    assert_eq!(
        paths(&evidence["sinceBoundary"]),
        ["made.txt", "src/edit.txt"],
        "{shown}"
    );

    let plain = server.ctx.run(["turns", "show", &turn.id]);
    plain.expect_code(0);
    assert!(
        plain.stdout.contains("snapshot  boundary tree "),
        "{}",
        plain.stdout
    );
    assert!(
        plain.stdout.contains("since     boundary, changed 2 files"),
        "{}",
        plain.stdout
    );
    assert!(plain.stdout.contains("+1 -0 made.txt"), "{}", plain.stdout);

    let status = server.ctx.run(["status"]);
    assert!(
        status
            .stdout
            .contains("2 files changed since its boundary: made.txt, src/edit.txt")
            || status
                .stderr
                .contains("2 files changed since its boundary: made.txt, src/edit.txt"),
        "{}\n{}",
        status.stdout,
        status.stderr
    );
    let resolved = server.ctx.run([
        "turns",
        "resolve",
        &turn.id,
        "--as",
        "failed",
        "--confirm-stopped",
    ]);
    resolved.expect_code(0);
    assert!(
        resolved
            .stderr
            .contains("2 files changed since its boundary"),
        "{}",
        resolved.stderr
    );

    // The user's index, HEAD and branch are byte-identical; no stash.
    assert_eq!(user_state(&server.project), before);
    server.finish(&[], &[]);
}

#[test]
fn a_finished_turn_shows_its_diffstat_and_a_plain_directory_says_it_is_not_git() {
    let server = Server::start_full(
        json!({}),
        json!({ "toucher": fixture(&["--touch", "new/one.txt", "--chunks", "1"]) }),
    );
    // Not a repository yet: the boundary says so and no outcome is taken.
    let mut client = server.client("lapis-cli");
    let thread = client
        .threads_create("proj", "toucher", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let first = client.turns_submit(&thread.id, "t-1", "one").unwrap();
    wait_turn(&mut client, &first.id, |s| s == "completed");
    let shown = server
        .ctx
        .run(["turns", "show", &first.id, "--json"])
        .json();
    assert_eq!(
        shown["evidence"]["boundary"]["skipped"], "not_git",
        "{shown}"
    );
    assert!(shown["evidence"]["outcome"].is_null(), "{shown}");
    let plain = server.ctx.run(["turns", "show", &first.id]);
    assert!(
        plain
            .stdout
            .contains("boundary not taken: the workspace is not in a git repository"),
        "{}",
        plain.stdout
    );

    make_repo(&server.project);
    let before = user_state(&server.project);
    let second = client.turns_submit(&thread.id, "t-2", "two").unwrap();
    wait_turn(&mut client, &second.id, |s| s == "completed");
    let shown = server
        .ctx
        .run(["turns", "show", &second.id, "--json"])
        .json();
    let evidence = &shown["evidence"];
    assert_ne!(
        evidence["boundary"]["tree"], evidence["outcome"]["tree"],
        "{shown}"
    );
    assert_eq!(paths(&evidence["changes"]), ["new/one.txt"], "{shown}");
    assert!(evidence["sinceBoundary"].is_null(), "not fenced: {shown}");
    let plain = server.ctx.run(["turns", "show", &second.id]);
    assert!(
        plain.stdout.contains("changed   1 file"),
        "{}",
        plain.stdout
    );
    assert_eq!(user_state(&server.project), before);
    server.finish(&[], &[]);
}
