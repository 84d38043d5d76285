//! A turn that fails (setting up, with `agent_error`) or is lost after
//! dispatch carries the agent's last stderr lines to its owner (`turns show`, the watched turn's error),
//! redacted, bounded and terminal-safe, and never on a metadata-only thread.

use serde_json::json;

use crate::cli_permissions::fixture;
use crate::serve_support::Server;

fn thread(server: &Server, provider: &str, extra: &[&str]) -> String {
    let mut args = vec!["threads", "create", "proj", "--provider", provider];
    args.extend(extra);
    server.ctx.run(args).success().stdout.trim().to_owned()
}

#[test]
fn a_failed_turn_says_why_in_the_agents_own_words() {
    let server = Server::start_full(
        json!({}),
        json!({
            "dies": fixture(&["--stderr", "3", "--hostile", "--exit-at", "initialize"]),
            "errs": fixture(&["--stderr", "2", "--prompt-error"]),
        }),
    );
    let ctx = &server.ctx;
    let t = thread(&server, "dies", &[]);
    let wait = ctx.run([
        "turns",
        "submit",
        &t,
        "--prompt",
        "hi",
        "--wait",
        "--command-id",
        "die-1",
    ]);
    wait.expect_code(1);
    crate::cli_terminal::assert_harmless("--wait stderr", &wait.stderr);
    assert!(wait.stderr.contains("ended failed"), "{}", wait.stderr);
    assert!(
        wait.stderr
            .contains("the agent's last stderr lines:\n    fixture stderr line 0␛[2K"),
        "{}",
        wait.stderr
    );
    let show = ctx.run(["turns", "show", "--command-id", "die-1"]);
    show.success();
    crate::cli_terminal::assert_harmless("turns show", &show.stdout);
    assert!(
        show.stdout.contains("stderr    fixture stderr line 0"),
        "{}",
        show.stdout
    );
    let doc = ctx
        .run(["turns", "show", "--command-id", "die-1", "--json"])
        .json();
    assert_eq!(doc["agentStderr"].as_array().unwrap().len(), 3, "{doc}");

    // agent_error: the follow shows the lines as they are journaled.
    let e = thread(&server, "errs", &[]);
    let follow = ctx.run(["turns", "submit", &e, "--prompt", "hi", "--follow"]);
    follow.expect_code(1);
    assert!(follow.stderr.contains("(agent_error)"), "{}", follow.stderr);
    // On stderr: stdout carries only the reply.
    assert!(
        follow
            .stderr
            .contains("agent stderr: fixture stderr line 1"),
        "{}",
        follow.stderr
    );
    assert!(!follow.stdout.contains("agent stderr"), "{}", follow.stdout);

    // A metadata-only thread keeps nothing of it.
    let m = thread(&server, "dies", &["--retention", "metadata-only"]);
    let quiet = ctx.run([
        "turns",
        "submit",
        &m,
        "--prompt",
        "hi",
        "--wait",
        "--command-id",
        "die-2",
    ]);
    quiet.expect_code(1);
    assert!(!quiet.stderr.contains("fixture stderr"), "{}", quiet.stderr);
    let shown = ctx
        .run(["turns", "show", "--command-id", "die-2", "--json"])
        .json();
    assert!(shown.get("agentStderr").is_none(), "{shown}");
    let tail = ctx.run(["journal", "tail", &m, "-n", "100", "--json"]);
    assert!(!tail.stdout.contains("fixture stderr"), "{}", tail.stdout);
}

/// A turn whose agent dies after the prompt was sent (its outcome unknown,
/// `agent_exited`) keeps the agent's last stderr lines too, at most 4 KiB
/// together (the newest that fit): `turns show` and `ask` print them.
#[test]
fn a_turn_lost_after_dispatch_keeps_the_agents_last_stderr_within_4_kib() {
    let server = Server::start_full(
        json!({}),
        json!({
            "exits": fixture(&["--stderr", "3", "--stderr-bytes", "3000", "--exit-after-stream"]),
        }),
    );
    let ctx = &server.ctx;
    let dir = server.project.to_str().unwrap().to_owned();
    let asked = ctx.run(["ask", "hi", "--dir", &dir, "--provider", "exits"]);
    asked.expect_code(1);
    assert!(
        asked
            .stderr
            .contains("the agent's last stderr lines:\n    fixture stderr line 2..."),
        "{}",
        asked.stderr
    );
    assert!(
        !asked.stderr.contains("fixture stderr line 1"),
        "{}",
        asked.stderr
    );
    let listed = ctx.run(["turns", "list", "--json"]).json();
    let turn = listed["turns"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        listed["turns"][0]["state"], "submission_unknown",
        "{listed}"
    );
    let doc = ctx.run(["turns", "show", &turn, "--json"]).json();
    let lines = doc["agentStderr"].as_array().expect("agentStderr");
    let bytes: usize = lines.iter().map(|l| l.as_str().unwrap().len()).sum();
    assert_eq!(lines.len(), 1, "{doc}");
    assert!(bytes <= 4096, "{bytes}");
    assert!(
        lines[0]
            .as_str()
            .unwrap()
            .starts_with("fixture stderr line 2"),
        "{doc}"
    );
    let show = ctx.run(["turns", "show", &turn]);
    show.success();
    assert!(
        show.stdout.contains("stderr    fixture stderr line 2"),
        "{}",
        show.stdout
    );
}
