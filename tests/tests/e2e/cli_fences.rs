//! No dead end at a fence (issue 41): every CLI path that meets one names
//! the turn, its application, since when, where its evidence is and the
//! exact resolve command; that command, run as printed by the owner's CLI,
//! reads and resolves another application's fence (`turns:resolve-any`),
//! while an application without that scope still gets `not_found`.

use std::process::Stdio;

use lapis_protocol::TurnState;
use serde_json::json;

use crate::acp::arg;
use crate::policy::{app, fixture, settle};
use crate::serve_support::{NARROW, OWNER, Server};
use lapis_e2e::wait::{eventually, wait_turn};

/// The command between the backquotes after `resolve it with `, split
/// into words; its first word is the program.
fn printed_resolve(text: &str) -> Vec<String> {
    let printed = text
        .split("resolve it with `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no resolve command in:\n{text}"));
    printed.split_whitespace().map(str::to_owned).collect()
}

/// Submits a turn on `thread` whose agent dies after streaming: fenced.
fn fenced_turn(
    client: &mut lapis_protocol::client::Client,
    thread: &str,
    command: &str,
) -> lapis_protocol::Turn {
    let turn = client.turns_submit(thread, command, "run once").unwrap();
    let t = settle(client, &turn.id);
    assert_eq!(t.state, TurnState::SubmissionUnknown, "{t:?}");
    t
}

/// The resolve command `status` prints for another application's fence,
/// run exactly as printed by the owner's CLI: `turns show` reads the turn
/// and `turns resolve` settles it; an application without
/// `turns:resolve-any` still gets `not_found`.
#[test]
fn the_resolve_command_status_prints_for_another_applications_fence_runs_as_printed() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("ledger");
    let server = Server::start_full(
        json!({}),
        json!({ "dies": fixture(&["--ledger", &arg(&ledger), "--chunks", "1", "--exit-after-stream"]) }),
    );
    // The editor has a token of its own (`tokens add`): the owner's CLI,
    // above the applications, still reads and resolves its fence.
    let secret = crate::tokens::add_token(&server, "my-editor", "my-editor", &[]);
    let mut editor = app(&server, &secret, "my-editor");
    let thread = editor
        .threads_create("proj", "dies", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let lost = fenced_turn(&mut editor, &thread.id, "e-1");

    let status = server.ctx.run(["status"]).success().stdout.clone();
    assert!(
        status.contains(&format!(
            "workspace proj is fenced by turn {} of application my-editor (submission_unknown since ",
            lost.id
        )),
        "{status}"
    );
    assert!(
        status.contains(&format!("`lapis-ai-controller turns show {}`", lost.id)),
        "{status}"
    );
    let words = printed_resolve(&status);
    assert_eq!(words[0], "lapis-ai-controller", "{words:?}");
    assert!(words.contains(&lost.id), "{words:?}");

    // The owner's CLI reads the foreign fenced turn, by its id and by a
    // prefix of it; an application without `turns:resolve-any` does not.
    let shown = server
        .ctx
        .run(["turns", "show", &lost.id])
        .success()
        .stdout
        .clone();
    assert!(shown.contains("state     submission_unknown"), "{shown}");
    let prefix = &lost.id[..lost.id.len() - 20];
    let by_prefix = server
        .ctx
        .run(["turns", "show", prefix, "--json"])
        .success()
        .json();
    assert_eq!(by_prefix["turn"]["id"], lost.id.as_str());
    let mut narrow = app(&server, NARROW, "bot");
    assert_eq!(narrow.turns_get(&lost.id).unwrap_err().code(), "not_found");

    // The printed command, verbatim.
    let out = server.ctx.run(&words[1..]);
    out.success();
    assert!(out.stdout.contains("state     failed"), "{}", out.stdout);
    assert_eq!(editor.turns_get(&lost.id).unwrap().state, TurnState::Failed);
    let after = server.ctx.run(["status", "--json"]).success().json();
    assert_eq!(after["fences"], json!([]), "{after}");
    // Settled, the owner's CLI still reads it (it sees every application
    // of its principal); the other application does not.
    server.ctx.run(["turns", "show", &lost.id]).success();
    assert_eq!(narrow.turns_get(&lost.id).unwrap_err().code(), "not_found");
    server.finish(&[], &[]);
}

/// A `--follow` queued behind another application's turn that then fences
/// the workspace says it waits on that fence (not nothing), a new submit
/// is refused naming the fence, and the resolve command the follow printed,
/// run as printed, lets the queued turn run to its end.
#[test]
fn a_follow_queued_behind_a_fence_says_so_and_runs_once_it_is_resolved() {
    let server = Server::start_full(
        json!({}),
        json!({ "gate": fixture(&["--permissions", "1", "--chunks", "1", "--exit-after-stream"]) }),
    );
    let mut editor = app(&server, OWNER, "my-editor");
    let gated = editor
        .threads_create("proj", "gate", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let first = editor.turns_submit(&gated.id, "g-1", "run once").unwrap();
    let request = eventually("the gate's permission request", || {
        editor
            .permissions_list(None, Some(&first.id))
            .ok()?
            .into_iter()
            .next()
    });

    // The CLI's turn on the same workspace queues behind it, followed.
    let thread = server.cli_thread("echo");
    let stderr_path = server.ctx.home().join("follow.stderr");
    let mut cmd = server.ctx.command([
        "turns",
        "submit",
        &thread,
        "--prompt",
        "after the fence",
        "--follow",
    ]);
    cmd.stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).unwrap());
    let mut follow = cmd.spawn().unwrap();
    let mut cli = server.client("lapis-cli");
    let queued = eventually("the followed turn to be queued", || {
        if let Some(status) = follow.try_wait().unwrap() {
            panic!(
                "the follow ended ({status}) before its turn was queued:\n{}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        }
        cli.turns_list(Some(&thread)).ok()?.into_iter().next()
    });
    assert_eq!(queued.state, TurnState::Queued);

    // The gate's agent dies after the answer: the workspace is fenced.
    editor
        .permissions_respond(&first.id, &request.id, "opt-allow_once")
        .unwrap();
    let lost = settle(&mut editor, &first.id);
    assert_eq!(lost.state, TurnState::SubmissionUnknown, "{lost:?}");

    let said = eventually("the follow to say it waits on the fence", || {
        let text = std::fs::read_to_string(&stderr_path).ok()?;
        text.contains("queued behind a fence").then_some(text)
    });
    assert!(
        said.contains(&format!(
            "turn {} is queued behind a fence and runs once it is resolved: workspace proj is fenced by turn {} of application my-editor",
            queued.id, lost.id
        )),
        "{said}"
    );

    // A new turn there is refused, naming the fence and the command.
    let refused = server
        .ctx
        .run(["turns", "submit", &thread, "--prompt", "one more"]);
    refused.expect_code(2);
    assert!(
        refused.stderr.contains(&format!(
            "workspace proj is fenced by turn {} of application my-editor",
            lost.id
        )),
        "{}",
        refused.stderr
    );
    assert_eq!(printed_resolve(&refused.stderr), printed_resolve(&said));

    // The command the follow printed, verbatim: the queued turn runs.
    let words = printed_resolve(&said);
    server.ctx.run(&words[1..]).success();
    let out = follow.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("after the fence"),
        "{out:?}"
    );
    let done = wait_turn(&mut cli, &queued.id, |s| s == "completed");
    assert_eq!(done.state, TurnState::Completed);
    server.finish(&[], &[]);
}

/// `ask` on a fenced workspace (item 2): without a terminal it is refused
/// with the sentence and asks nothing; on a terminal (tmux) it offers to
/// resolve the fence, and typing `failed` resolves it and runs the ask.
#[test]
fn ask_on_a_fenced_workspace_offers_to_resolve_it_on_a_terminal() {
    use std::path::Path;
    use std::process::Command;
    if !Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        lapis_e2e::skip::skip("tmux is not installed");
        return;
    }
    let server = Server::start_full(
        json!({}),
        json!({ "dies": fixture(&["--chunks", "1", "--exit-after-stream"]) }),
    );
    let ctx = &server.ctx;
    let dir = server.project.to_str().unwrap().to_owned();
    ctx.run(["ask", "first", "--dir", &dir, "--provider", "dies"])
        .expect_code(1);
    let fenced = ctx.run(["turns", "list", "--json"]).success().json();
    let lost = fenced["turns"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        fenced["turns"][0]["state"], "submission_unknown",
        "{fenced}"
    );

    // A script: the refusal, the command to run, no question.
    let piped = ctx.run(["ask", "again", "--dir", &dir, "--new"]);
    piped.expect_code(2);
    assert!(
        piped.stderr.contains(&format!("is fenced by turn {lost}"))
            && !piped.stderr.contains("now? Type"),
        "{}",
        piped.stderr
    );

    // A person: asked, answers `failed`, the ask runs.
    let socket = ctx.home().join("tmux.sock");
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args(args)
            .output()
            .unwrap()
    };
    let line = format!(
        "{} ask again --dir {dir} --new; echo EXIT=$?; read",
        lapis_e2e::TestContext::bin().display()
    );
    let mut start = ctx.command_for(Path::new("tmux"), ["-S", socket.to_str().unwrap()]);
    start
        .args([
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            "160",
            "-y",
            "40",
        ])
        .args(["-s", "t", "bash", "-c", &line]);
    assert!(start.output().unwrap().status.success());
    let screen = |want: &str| {
        let mut last = String::new();
        let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            eventually(&format!("the terminal to show {want:?}"), || {
                last =
                    String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-J", "-t", "t"]).stdout)
                        .into_owned();
                last.contains(want).then(|| last.clone())
            })
        }));
        found.unwrap_or_else(|_| panic!("never showed {want:?}:\n{last}"))
    };
    let asked = screen("now? Type `failed` or `cancelled`");
    assert!(
        asked.contains(&format!("resolve turn {lost} now?")),
        "{asked}"
    );
    tmux(&["send-keys", "-t", "t", "-l", "failed"]);
    tmux(&["send-keys", "-t", "t", "Enter"]);
    let done = screen("EXIT=");
    let _ = tmux(&["kill-server"]);
    assert!(
        done.contains(&format!("resolved turn {lost} as failed; submitting again"))
            && done.contains("completed (end_turn)")
            && done.contains("EXIT=0"),
        "{done}"
    );
    let after = ctx.run(["turns", "show", &lost, "--json"]).success().json();
    assert_eq!(after["turn"]["state"], "failed", "{after}");
    server.finish(&[], &[]);
}
