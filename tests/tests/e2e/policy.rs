//! The controller's policy layer through the real binary: operator
//! recovery of fenced turns (cancel as resolution, `turns:resolve-any`,
//! fences named by `status` and `workspaces list`).

use std::time::{Duration, Instant};

use lapis_protocol::client::{Client, Credential};
use lapis_protocol::{EventKind, TurnState};
use serde_json::{Value, json};

use crate::acp::arg;
use crate::serve_support::{GUEST, NARROW, OWNER, Server};

fn fixture(args: &[&str]) -> Value {
    json!({ "command": env!("CARGO_BIN_EXE_fixture-agent"), "args": args })
}

fn app(server: &Server, token: &str, application: &str) -> Client {
    Client::open(
        &server.socket(),
        Credential::Token {
            token: token.to_owned(),
            application: application.to_owned(),
        },
    )
    .unwrap()
}

/// Polls `turns.get` until the turn is neither queued nor in flight.
fn settle(client: &mut Client, turn: &str) -> lapis_protocol::Turn {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let t = client.turns_get(turn).unwrap();
        if !t.state.is_active() || t.state.is_fenced() {
            return t;
        }
        assert!(Instant::now() < deadline, "turn stuck in {}", t.state);
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Submits a turn on `thread` whose agent dies after streaming: fenced.
fn fenced_turn(client: &mut Client, thread: &str, command: &str) -> lapis_protocol::Turn {
    let turn = client.turns_submit(thread, command, "run once").unwrap();
    let t = settle(client, &turn.id);
    assert_eq!(t.state, TurnState::SubmissionUnknown, "{t:?}");
    t
}

#[test]
fn the_operator_settles_another_applications_fence_and_cancel_resolves_it_without_retrying() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("ledger");
    let server = Server::start_full(
        json!({}),
        json!({ "dies": fixture(&["--ledger", &arg(&ledger), "--chunks", "1", "--exit-after-stream"]) }),
    );
    let mut editor = app(&server, OWNER, "my-editor");
    let thread = editor.threads_create("proj", "dies", "ask", None).unwrap();
    let lost = fenced_turn(&mut editor, &thread.id, "e-1");

    // status and workspaces list name the fence: turn, thread, application, since.
    let status = server.ctx.run(["status", "--json"]).success().json();
    let fence = &status["fences"][0];
    assert_eq!(fence["turn"], lost.id.as_str());
    assert_eq!(fence["thread"], thread.id.as_str());
    assert_eq!(fence["workspace"], "proj");
    assert_eq!(fence["application"], "my-editor");
    assert_eq!(
        fence["since"].as_i64().unwrap(),
        lost.finished_at.unwrap() / 1000
    );
    let listed = server
        .ctx
        .run(["workspaces", "list", "--json"])
        .success()
        .json();
    assert_eq!(listed["workspaces"][0]["id"], "proj");
    assert_eq!(listed["fences"], json!([fence.clone()]), "{listed:#}");
    let plain = server
        .ctx
        .run(["workspaces", "list"])
        .success()
        .stdout
        .clone();
    assert!(
        plain.contains(&format!(
            "fenced by turn {} (thread {}, application my-editor)",
            lost.id, thread.id
        )),
        "{plain}"
    );
    let plain = server.ctx.run(["status"]).success().stdout.clone();
    assert!(
        plain.contains(&format!(
            "fenced    proj: turn {} (thread {}, application my-editor)",
            lost.id, thread.id
        )),
        "{plain}"
    );

    // Another principal never settles it, even holding every scope; an
    // application of the same principal without `turns:resolve-any` neither.
    let mut guest = app(&server, GUEST, "guest-app");
    assert_eq!(
        guest.turns_cancel(&lost.id).unwrap_err().code(),
        "forbidden"
    );
    assert_eq!(
        guest
            .turns_resolve(&lost.id, "failed", true)
            .unwrap_err()
            .code(),
        "forbidden"
    );
    let mut narrow = app(&server, NARROW, "bot");
    assert_eq!(
        narrow.turns_cancel(&lost.id).unwrap_err().code(),
        "forbidden"
    );
    assert_eq!(
        narrow
            .turns_resolve(&lost.id, "failed", true)
            .unwrap_err()
            .code(),
        "forbidden"
    );
    assert_eq!(
        editor.turns_get(&lost.id).unwrap().state,
        TurnState::SubmissionUnknown
    );

    // The owner's CLI (`lapis-cli`, resolve-any by default): cancel resolves it.
    let out = server
        .ctx
        .run(["turns", "cancel", &lost.id, "--json"])
        .success()
        .json();
    assert_eq!(out["turn"]["state"], "cancelled");
    assert_eq!(out["turn"]["outcome"], "resolved_by_owner");
    let status = server.ctx.run(["status", "--json"]).success().json();
    assert_eq!(status["fences"], json!([]));
    let events = editor.journal_replay(Some(&thread.id), 0, None).unwrap();
    let resolved: Vec<_> = events
        .events
        .iter()
        .filter(|e| e.kind == EventKind::TurnResolved)
        .collect();
    assert_eq!(resolved.len(), 1);
    let payload = resolved[0].payload.as_ref().unwrap();
    assert_eq!(payload["via"], "cancel");
    assert_eq!(payload["as"], "cancelled");
    assert_eq!(payload["application"], "lapis-cli");
    // Once settled the turn is no longer the operator's to touch; its own
    // application's cancel changes nothing.
    let err = server.ctx.run(["turns", "cancel", &lost.id]);
    assert_eq!(err.code, Some(2), "{}", err.stderr);
    let again = editor.turns_cancel(&lost.id).unwrap();
    assert_eq!(again.state, TurnState::Cancelled);
    assert_eq!(
        Some(json!(again.resolved_at)),
        out["turn"].get("resolvedAt").cloned()
    );

    // The workspace runs again; the lost prompt was never re-sent. The
    // second fence is resolved as failed through `turns resolve`.
    let second = fenced_turn(&mut editor, &thread.id, "e-2");
    let out = server
        .ctx
        .run([
            "turns",
            "resolve",
            &second.id,
            "--as",
            "failed",
            "--confirm-stopped",
            "--json",
        ])
        .success()
        .json();
    assert_eq!(out["turn"]["state"], "failed");
    let prompts = std::fs::read_to_string(&ledger).unwrap();
    assert_eq!(
        prompts.lines().count(),
        2,
        "a prompt was re-sent: {prompts}"
    );
    // A turn that is not fenced stays the thread application's own.
    let third = editor.turns_submit(&thread.id, "e-3", "again").unwrap();
    let third = settle(&mut editor, &third.id);
    assert_eq!(third.state, TurnState::SubmissionUnknown);
    editor.turns_resolve(&third.id, "cancelled", true).unwrap();
    let err = server.ctx.run(["turns", "cancel", &third.id]);
    assert_eq!(err.code, Some(2), "{}", err.stderr);
    assert!(err.stderr.contains("forbidden"), "{}", err.stderr);
    server.finish(&[], &[]);
}
