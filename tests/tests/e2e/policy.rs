//! The controller's policy layer through the real binary: operator
//! recovery of fenced turns (cancel as resolution, `turns:resolve-any`,
//! fences named by `status` and `workspaces list`), optimistic `threads
//! configure`, and the controller's cancel never marking a turn running.

use std::time::{Duration, Instant};

use lapis_protocol::client::{Client, Credential};
use lapis_protocol::{EventKind, Observation, Payload, ResolvedVia, TurnState};
use serde_json::{Value, json};

use crate::acp::arg;
use crate::serve_support::{GUEST, NARROW, OWNER, Server};
pub(crate) use lapis_e2e::wait::settle;

pub(crate) fn fixture(args: &[&str]) -> Value {
    json!({ "command": env!("CARGO_BIN_EXE_fixture-agent"), "args": args })
}

pub(crate) fn app(server: &Server, token: &str, application: &str) -> Client {
    Client::open(
        &server.socket(),
        Credential::Token {
            token: token.to_owned(),
            application: application.to_owned(),
        },
    )
    .unwrap()
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
    let thread = editor
        .threads_create("proj", "dies", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let lost = fenced_turn(&mut editor, &thread.id, "e-1");

    // status and workspaces list name the fence: turn, thread, application, since.
    let status = server.ctx.run(["status", "--json"]).success().json();
    let fence = &status["fences"][0];
    assert_eq!(fence["turn"], lost.id.as_str());
    assert_eq!(fence["thread"], thread.id.as_str());
    assert_eq!(fence["workspace"], "proj");
    assert_eq!(fence["application"], "my-editor");
    assert_eq!(
        fence["since"],
        lapis_protocol::time::format_ms(lost.finished_at.unwrap()).as_str()
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
            "\tturn {} (thread {}, application my-editor), ",
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
        "not_found"
    );
    assert_eq!(
        guest
            .turns_resolve(&lost.id, lapis_protocol::ResolveAs::Failed, true)
            .unwrap_err()
            .code(),
        "not_found"
    );
    let mut narrow = app(&server, NARROW, "bot");
    assert_eq!(
        narrow.turns_cancel(&lost.id).unwrap_err().code(),
        "not_found"
    );
    assert_eq!(
        narrow
            .turns_resolve(&lost.id, lapis_protocol::ResolveAs::Failed, true)
            .unwrap_err()
            .code(),
        "not_found"
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
    let Some(Payload::TurnResolved(resolution)) = resolved[0].body() else {
        panic!("not a resolution: {:?}", resolved[0]);
    };
    assert_eq!(resolution.via, ResolvedVia::Cancel);
    assert_eq!(resolution.as_state, TurnState::Cancelled);
    assert_eq!(resolution.application, "lapis-cli");
    // Once settled the turn is no longer the operator's to touch; its own
    // application's cancel changes nothing.
    let err = server.ctx.run(["turns", "cancel", &lost.id]);
    assert_eq!(err.code, Some(2), "{}", err.stderr);
    let settled = editor.turns_get(&lost.id).unwrap();
    assert!(settled.resolved_at.is_some());
    let again = editor.turns_cancel(&lost.id).unwrap();
    // `turns.get` adds what the turn asked; other results carry the record only.
    let settled = lapis_protocol::Turn {
        user_message: None,
        usage: None,
        ..settled
    };
    assert_eq!(again, settled);

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
    editor
        .turns_resolve(&third.id, lapis_protocol::ResolveAs::Cancelled, true)
        .unwrap();
    let err = server.ctx.run(["turns", "cancel", &third.id]);
    assert_eq!(err.code, Some(2), "{}", err.stderr);
    assert!(err.stderr.contains("not_found"), "{}", err.stderr);
    server.finish(&[], &[]);
}

#[test]
fn threads_configure_is_optimistic_refused_while_a_turn_waits_and_applies_to_later_turns() {
    let server = Server::start_full(
        json!({}),
        json!({ "asks": fixture(&["--permissions", "1"]) }),
    );
    let created = server
        .ctx
        .run([
            "threads",
            "create",
            "proj",
            "--provider",
            "asks",
            "--restricted",
            "--retention",
            "metadata-only",
            "--json",
        ])
        .success()
        .json();
    let thread = created["thread"]["id"].as_str().unwrap().to_owned();
    assert_eq!(created["thread"]["restricted"], true);
    assert_eq!(created["thread"]["retention"], "metadata-only");
    assert_eq!(created["thread"]["version"], 1);

    // A stale version: conflict, exit 2, nothing changed.
    let out = server.ctx.run([
        "threads",
        "configure",
        &thread,
        "--expected-version",
        "7",
        "--approval",
        "allow-all",
        "--json",
    ]);
    out.expect_code(2);
    assert_eq!(out.json()["error"]["code"], "conflict");

    let out = server
        .ctx
        .run([
            "threads",
            "configure",
            &thread,
            "--expected-version",
            "1",
            "--restricted",
            "false",
            "--retention",
            "full",
        ])
        .success()
        .stdout
        .clone();
    assert_eq!(out.trim(), format!("{thread}\tversion 2"));

    // A turn that waits for a permission answer blocks configuration.
    let mut cli = app(&server, OWNER, "lapis-cli");
    let first = cli.turns_submit(&thread, "k-1", "ask me").unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let request = loop {
        if let Some(r) = cli.permissions_list(None, Some(&first.id)).unwrap().pop() {
            break r;
        }
        assert!(Instant::now() < deadline, "no permission request");
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = server.ctx.run([
        "threads",
        "configure",
        &thread,
        "--expected-version",
        "2",
        "--approval",
        "allow-all",
        "--json",
    ]);
    out.expect_code(2);
    assert_eq!(out.json()["error"]["code"], "conflict");
    cli.permissions_respond(&first.id, &request.id, "opt-reject_once")
        .unwrap();
    assert_eq!(settle(&mut cli, &first.id).state, TurnState::Completed);

    // Idle again: the change lands and the next turn runs under it (allow-all
    // answers the agent's request automatically).
    let shown = server
        .ctx
        .run([
            "threads",
            "configure",
            &thread,
            "--expected-version",
            "2",
            "--approval",
            "allow-all",
            "--json",
        ])
        .success()
        .json();
    assert_eq!(shown["thread"]["version"], 3);
    assert_eq!(shown["thread"]["approval"], "allow-all");
    let plain = server
        .ctx
        .run(["threads", "show", &thread])
        .success()
        .stdout
        .clone();
    assert!(
        plain.contains("approval           allow-all\nrestricted         no\nretention          full\nversion            3"),
        "{plain}"
    );
    let second = cli.turns_submit(&thread, "k-2", "ask me again").unwrap();
    assert_eq!(settle(&mut cli, &second.id).state, TurnState::Completed);
    let page = cli.journal_replay(Some(&thread), 0, None).unwrap();
    let decided: Vec<(Option<String>, String)> = page
        .events
        .iter()
        .filter_map(|e| match e.body() {
            Some(Payload::PermissionDecided(d)) => Some((
                e.turn_id.clone(),
                d.decided_by.map_or("?", |by| by.as_str()).to_owned(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        decided,
        vec![
            (Some(first.id.clone()), "user".to_owned()),
            (Some(second.id.clone()), "automatic".to_owned()),
        ],
        "the earlier turn kept the earlier policy"
    );
    server.finish(&[], &[]);
}

#[test]
fn the_controllers_own_cancel_never_marks_a_turn_running() {
    // `--hang` says nothing until cancelled, then answers `cancelled`.
    let server = Server::start_full(json!({}), json!({ "hang": fixture(&["--hang"]) }));
    let mut client = app(&server, OWNER, "canceller");
    let thread = client
        .threads_create("proj", "hang", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client.turns_submit(&thread.id, "h-1", "wait").unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while client.turns_get(&turn.id).unwrap().state != TurnState::Dispatched {
        assert!(Instant::now() < deadline, "never dispatched");
        std::thread::sleep(Duration::from_millis(10));
    }
    let flagged = client.turns_cancel(&turn.id).unwrap();
    assert!(flagged.cancel_requested);
    let done = settle(&mut client, &turn.id);
    assert_eq!(done.state, TurnState::Cancelled);
    assert_eq!(
        done.started_at, None,
        "the agent never acknowledged the prompt"
    );
    let page = client.journal_replay(Some(&thread.id), 0, None).unwrap();
    let states: Vec<String> = page
        .events
        .iter()
        .filter_map(lapis_e2e::journal::moved_to)
        .map(|s| s.as_str().to_owned())
        .collect();
    assert_eq!(states, ["preparing", "dispatched", "cancelled"]);
    // The controller's cancel is journaled as an observation of the turn.
    assert!(page.events.iter().any(|e| matches!(
        lapis_e2e::journal::observation(e),
        Some(Observation::CancelSent)
    )));
    server.finish(&[], &[]);
}
