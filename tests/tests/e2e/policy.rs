//! The controller's policy layer through the real binary: operator
//! recovery of fenced turns (cancel as resolution, `turns:resolve-any`,
//! fences named by `status` and `workspaces list`).

use std::time::{Duration, Instant};

use lapis_protocol::client::{Client, ClientError, Credential};
use lapis_protocol::params::ThreadsConfigure;
use lapis_protocol::{EventKind, ThreadExpect, TurnState};
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
    let settled = editor.turns_get(&lost.id).unwrap();
    assert!(settled.resolved_at.is_some());
    let again = editor.turns_cancel(&lost.id).unwrap();
    assert_eq!(
        (again.state, again.resolved_at, again.updated_at),
        (settled.state, settled.resolved_at, settled.updated_at)
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
        plain.contains("approval   allow-all\nrestricted no\nretention  full\nversion    3"),
        "{plain}"
    );
    let second = cli.turns_submit(&thread, "k-2", "ask me again").unwrap();
    assert_eq!(settle(&mut cli, &second.id).state, TurnState::Completed);
    let page = cli.journal_replay(Some(&thread), 0, None).unwrap();
    let decided: Vec<(Option<String>, String)> = page
        .events
        .iter()
        .filter(|e| e.kind == EventKind::PermissionDecided)
        .map(|e| {
            let p = e.payload.as_ref().unwrap();
            (
                e.turn_id.clone(),
                p["decidedBy"].as_str().unwrap_or("?").to_owned(),
            )
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
    let thread = client.threads_create("proj", "hang", "ask", None).unwrap();
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
        .filter(|e| e.kind == EventKind::TurnState)
        .map(|e| {
            e.payload.as_ref().unwrap()["to"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(states, ["preparing", "dispatched", "cancelled"]);
    // The controller's cancel is journaled as an observation of the turn.
    assert!(page.events.iter().any(|e| e.kind == EventKind::Observation
        && e.payload.as_ref().unwrap()["type"] == "cancel_requested"));
    server.finish(&[], &[]);
}

/// Calls `method` twice with the same params (a lost answer asked for
/// again): the second answer is the first one, marked `replayed` (for
/// `turns.submit`: the same turn, as it is now).
fn twice(client: &mut Client, method: &str, params: Value) -> Value {
    let first = client.call_value(method, params.clone()).unwrap();
    assert_eq!(first["replayed"], false, "{method}: {first}");
    let second = client.call_value(method, params).unwrap();
    assert_eq!(second["replayed"], true, "{method}: {second}");
    if method == "turns.submit" {
        // A submit replays the turn as it is now (it may have moved on).
        assert_eq!(first["turn"]["id"], second["turn"]["id"]);
        return first;
    }
    let strip = |mut v: Value| {
        v.as_object_mut().unwrap().remove("replayed");
        v
    };
    assert_eq!(strip(first.clone()), strip(second), "{method}");
    first
}

fn conflict(client: &mut Client, method: &str, params: Value) {
    let err = client.call_value(method, params).unwrap_err();
    assert_eq!(err.code(), "conflict", "{method}");
}

#[test]
fn every_mutation_replays_its_first_answer_under_the_same_command_id() {
    let server = Server::start_full(
        json!({}),
        json!({
            "hang": fixture(&["--hang"]),
            "dies": fixture(&["--chunks", "1", "--exit-after-stream"]),
            "asks": fixture(&["--permissions", "1"]),
        }),
    );
    let mut c = app(&server, OWNER, "replayer");
    let extra = server.ctx.home().join("extra");
    std::fs::create_dir_all(&extra).unwrap();
    let path = extra.to_str().unwrap();

    // workspaces.add
    let ws = json!({ "id": "extra", "path": path, "commandId": "w-1" });
    twice(&mut c, "workspaces.add", ws);
    conflict(
        &mut c,
        "workspaces.add",
        json!({ "id": "extra2", "path": path, "commandId": "w-1" }),
    );

    // threads.create and threads.configure
    let create = json!({ "workspaceId": "extra", "provider": "dies", "commandId": "t-1" });
    let thread = twice(&mut c, "threads.create", create)["thread"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let configure = json!({ "threadId": thread, "expectedVersion": 1, "approval": "allow-all", "commandId": "c-1" });
    let configured = twice(&mut c, "threads.configure", configure);
    assert_eq!(configured["thread"]["version"], 2);
    conflict(
        &mut c,
        "threads.configure",
        json!({ "threadId": thread, "expectedVersion": 1, "approval": "ask", "commandId": "c-1" }),
    );

    // turns.submit, and turns.get {commandId} for a lost submit answer.
    let submit = json!({ "threadId": thread, "commandId": "s-1", "prompt": "run once" });
    let lost = twice(&mut c, "turns.submit", submit)["turn"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(c.turns_get_by_command("s-1").unwrap().id, lost);
    let both = c
        .call_value("turns.get", json!({ "turnId": lost, "commandId": "s-1" }))
        .unwrap_err();
    assert_eq!(both.code(), "invalid_request");
    assert_eq!(
        app(&server, OWNER, "another-app")
            .turns_get_by_command("s-1")
            .unwrap_err()
            .code(),
        "not_found"
    );

    // turns.resolve of the fenced turn.
    assert_eq!(settle(&mut c, &lost).state, TurnState::SubmissionUnknown);
    let resolve =
        json!({ "turnId": lost, "as": "failed", "confirmStopped": true, "commandId": "r-1" });
    let resolved = twice(&mut c, "turns.resolve", resolve);
    assert_eq!(resolved["turn"]["state"], "failed");
    conflict(
        &mut c,
        "turns.resolve",
        json!({ "turnId": lost, "as": "cancelled", "confirmStopped": true, "commandId": "r-1" }),
    );

    // turns.cancel of a turn in flight.
    let hang = c.threads_create("proj", "hang", "ask", None).unwrap();
    let running = c.turns_submit(&hang.id, "s-2", "wait").unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.turns_get(&running.id).unwrap().state != TurnState::Dispatched {
        assert!(Instant::now() < deadline, "never dispatched");
        std::thread::sleep(Duration::from_millis(10));
    }
    let cancelled = twice(
        &mut c,
        "turns.cancel",
        json!({ "turnId": running.id, "commandId": "k-1" }),
    );
    assert_eq!(cancelled["turn"]["cancelRequested"], true);
    assert_eq!(settle(&mut c, &running.id).state, TurnState::Cancelled);

    // permissions.respond: the retry replays instead of `not_found`.
    let asks = c.threads_create("proj", "asks", "ask", None).unwrap();
    let asking = c.turns_submit(&asks.id, "s-3", "ask").unwrap();
    let request = loop {
        if let Some(r) = c.permissions_list(None, Some(&asking.id)).unwrap().pop() {
            break r;
        }
        assert!(Instant::now() < deadline, "no permission request");
        std::thread::sleep(Duration::from_millis(10));
    };
    let respond = json!({ "turnId": asking.id, "requestId": request.id, "optionId": "opt-allow_once", "commandId": "p-1" });
    twice(&mut c, "permissions.respond", respond);
    conflict(
        &mut c,
        "permissions.respond",
        json!({ "turnId": asking.id, "requestId": request.id, "optionId": "opt-reject_once", "commandId": "p-1" }),
    );
    assert_eq!(settle(&mut c, &asking.id).state, TurnState::Completed);
    server.finish(&[], &[]);
}

#[test]
fn the_cli_announces_generated_command_ids_and_replays_given_ones() {
    let server = Server::start_full(json!({}), json!({ "hang": fixture(&["--hang"]) }));
    let ctx = &server.ctx;
    let created = ctx.run(["threads", "create", "proj", "--provider", "hang"]);
    let generated = created.success().stderr.trim().to_owned();
    assert!(generated.starts_with("command id cmd_"), "{generated}");
    let thread = created.stdout.trim().to_owned();

    // A submit whose answer is lost: its command id finds the turn.
    let submitted = ctx.run(["turns", "submit", &thread, "--prompt", "wait", "--json"]);
    let command = submitted
        .success()
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("command id "))
        .expect("the generated id is printed")
        .to_owned();
    let turn = submitted.json()["turn"]["id"].as_str().unwrap().to_owned();
    let shown = ctx
        .run(["turns", "show", "--command-id", &command, "--json"])
        .success()
        .json();
    assert_eq!(shown["turn"]["id"], turn.as_str());
    // Repeating the submit with that id runs nothing new.
    let again = ctx
        .run([
            "turns",
            "submit",
            &thread,
            "--prompt",
            "wait",
            "--command-id",
            &command,
            "--json",
        ])
        .success()
        .json();
    assert_eq!(again["turn"]["id"], turn.as_str());

    // A given command id is not announced, and repeats replay.
    for _ in 0..2 {
        let out = ctx.run([
            "turns",
            "cancel",
            &turn,
            "--command-id",
            "cli-cancel",
            "--json",
        ]);
        assert_eq!(out.success().stderr, "");
        assert_eq!(out.json()["turn"]["cancelRequested"], true);
    }
    let mut sdk = app(&server, OWNER, "lapis-cli");
    assert_eq!(settle(&mut sdk, &turn).state, TurnState::Cancelled);
    let other = ctx.run([
        "threads",
        "configure",
        &thread,
        "--expected-version",
        "1",
        "--approval",
        "allow-all",
        "--command-id",
        "cli-cancel",
    ]);
    other.expect_code(2);
    assert!(other.stderr.contains("conflict"), "{}", other.stderr);
    server.finish(&[], &[]);
}

#[test]
fn attach_and_submit_state_the_binding_and_a_mismatch_names_the_fields() {
    let server = Server::start_full(json!({}), json!({ "hang": fixture(&["--hang"]) }));
    let mut c = app(&server, OWNER, "attacher");
    let thread = c.threads_create("proj", "echo", "ask", None).unwrap();
    let held = ThreadExpect::of(&thread);
    let snap = c.threads_attach(&thread.id, &held).unwrap();
    assert_eq!(snap.thread, thread);

    // Each field, alone, is named (never its value).
    let cases: [(&str, ThreadExpect); 6] = [
        (
            "application",
            ThreadExpect {
                application: Some("other".into()),
                ..Default::default()
            },
        ),
        (
            "provider",
            ThreadExpect {
                provider: Some("hang".into()),
                ..Default::default()
            },
        ),
        (
            "approval",
            ThreadExpect {
                approval: Some("allow-all".into()),
                ..Default::default()
            },
        ),
        (
            "restricted",
            ThreadExpect {
                restricted: Some(true),
                ..Default::default()
            },
        ),
        (
            "retention",
            ThreadExpect {
                retention: Some("metadata-only".into()),
                ..Default::default()
            },
        ),
        (
            "version",
            ThreadExpect {
                version: Some(7),
                ..Default::default()
            },
        ),
    ];
    for (field, expect) in &cases {
        let err = c
            .call_value(
                "threads.attach",
                json!({ "threadId": thread.id, "expect": expect }),
            )
            .unwrap_err();
        assert_eq!(err.code(), "binding_mismatch", "{field}");
        let ClientError::Rpc(rpc) = &err else {
            panic!("{err:?}")
        };
        let data = rpc.data.as_ref().unwrap();
        assert_eq!(data["fields"], json!([field]), "{field}");
        let text = serde_json::to_string(rpc).unwrap();
        for value in ["other", "\"hang\"", "metadata-only"] {
            assert!(!text.contains(value), "{field}: a value leaked: {text}");
        }
        // A submit stating the same expectation queues nothing.
        let err = c
            .call_value(
                "turns.submit",
                json!({ "threadId": thread.id, "commandId": format!("x-{field}"), "prompt": "p", "expect": expect }),
            )
            .unwrap_err();
        assert_eq!(err.code(), "binding_mismatch", "{field}");
    }
    assert!(c.turns_list(Some(&thread.id)).unwrap().is_empty());
    // Unknown expectation fields are refused, not ignored.
    let err = c
        .call_value(
            "threads.attach",
            json!({ "threadId": thread.id, "expect": { "model": "x" } }),
        )
        .unwrap_err();
    assert_eq!(err.code(), "invalid_request");
    // A foreign thread stays forbidden, whatever is expected.
    let err = app(&server, OWNER, "someone-else")
        .threads_attach(&thread.id, &ThreadExpect::default())
        .unwrap_err();
    assert_eq!(err.code(), "forbidden");

    // A matching submit runs.
    let ok = c
        .call_value(
            "turns.submit",
            json!({ "threadId": thread.id, "commandId": "ok-1", "prompt": "p", "expect": held }),
        )
        .unwrap();
    assert_eq!(
        settle(&mut c, ok["turn"]["id"].as_str().unwrap()).state,
        TurnState::Completed
    );

    // The SDK attaches again after a reconnect, with a fresh snapshot.
    let loose = ThreadExpect {
        provider: Some("echo".into()),
        ..Default::default()
    };
    c.threads_attach(&thread.id, &loose).unwrap();
    let mut other = app(&server, OWNER, "attacher");
    other
        .threads_configure(&ThreadsConfigure {
            thread_id: thread.id.clone(),
            expected_version: 1,
            provider: None,
            approval: Some("allow-all".into()),
            restricted: None,
            retention: None,
            command_id: None,
        })
        .unwrap();
    c.reconnect().unwrap();
    let fresh = c.attached_snapshot(&thread.id).unwrap();
    assert_eq!(fresh.thread.version, 2);
    assert_eq!(fresh.thread.approval.as_str(), "allow-all");
    // A binding that no longer holds fails the reconnect's re-attach.
    c.threads_attach(&thread.id, &ThreadExpect::of(&fresh.thread.clone()))
        .unwrap();
    other
        .threads_configure(&ThreadsConfigure {
            thread_id: thread.id.clone(),
            expected_version: 2,
            provider: Some("hang".into()),
            approval: None,
            restricted: None,
            retention: None,
            command_id: None,
        })
        .unwrap();
    let err = c.reconnect().unwrap_err();
    assert_eq!(err.code(), "binding_mismatch");
    server.finish(&[], &[]);
}

/// The `restricted_mode` observation of a turn.
fn mode_observation(client: &mut Client, thread: &str, turn: &str) -> Option<Value> {
    let page = client.journal_replay(Some(thread), 0, None).unwrap();
    page.events
        .into_iter()
        .filter(|e| e.turn_id.as_deref() == Some(turn) && e.kind == EventKind::Observation)
        .filter_map(|e| e.payload)
        .find(|p| p["kind"] == "restricted_mode")
        .map(|p| p["payload"].clone())
}

#[test]
fn restricted_threads_request_the_providers_mode_and_record_what_the_agent_did() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("modes");
    let with = |args: &[&str], extra: Value| {
        let mut p = fixture(args);
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    };
    let l = arg(&ledger);
    let server = Server::start_full(
        json!({}),
        json!({
            "plan": with(&["--advertise", "--mode-ledger", &l], json!({"restrictedMode": "plan"})),
            "absent": with(&["--advertise", "--mode-ledger", &l], json!({"restrictedMode": "read-only"})),
            "refuses": with(&["--advertise", "--reject-mode", "--mode-ledger", &l], json!({"restrictedMode": "plan"})),
            "unimplemented": with(&["--advertise", "--no-set-mode"], json!({"restrictedMode": "plan"})),
            "silent": with(&["--mode-ledger", &l], json!({"restrictedMode": "plan"})),
            "lenient": with(&["--mode-ledger", &l], json!({"restrictedMode": "plan", "allowUnrestricted": true})),
            "nomode": with(&["--advertise"], json!({})),
        }),
    );
    let mut c = app(&server, OWNER, "restricter");
    let mut run = |provider: &str, restricted: bool| {
        let t = c
            .call_value(
                "threads.create",
                json!({ "workspaceId": "proj", "provider": provider, "restricted": restricted }),
            )
            .unwrap();
        let thread = t["thread"]["id"].as_str().unwrap().to_owned();
        let turn = c
            .turns_submit(&thread, &format!("{provider}-{restricted}"), "go")
            .unwrap();
        let done = settle(&mut c, &turn.id);
        let seen = mode_observation(&mut c, &thread, &turn.id);
        (done, seen)
    };
    let (done, seen) = run("plan", true);
    assert_eq!(done.state, TurnState::Completed);
    let seen = seen.unwrap();
    assert_eq!(
        (seen["mode"].clone(), seen["result"].clone()),
        (json!("plan"), json!("applied"))
    );
    for (provider, result) in [
        ("absent", "unsupported"),
        ("refuses", "rejected"),
        ("unimplemented", "unsupported"),
        ("silent", "unreported"),
        ("nomode", "unsupported"),
    ] {
        let (done, seen) = run(provider, true);
        assert_eq!(done.state, TurnState::Failed, "{provider}");
        assert_eq!(
            done.outcome.as_deref(),
            Some("restricted_mode_unavailable"),
            "{provider}"
        );
        assert_eq!(
            done.dispatched_at, None,
            "{provider}: failed before the boundary"
        );
        assert_eq!(seen.unwrap()["result"], result, "{provider}");
    }
    // Allowed to run without the mode: recorded as such, still completes.
    let (done, seen) = run("lenient", true);
    assert_eq!(done.state, TurnState::Completed);
    let seen = seen.unwrap();
    assert_eq!(seen["result"], "unreported");
    assert_eq!(seen["runsUnrestricted"], true);
    // An unrestricted thread never asks for a mode.
    let (done, seen) = run("refuses", false);
    assert_eq!(done.state, TurnState::Completed);
    assert!(seen.is_none());
    // Only applied/rejected requests reached the agents: the mode was never
    // asked of an agent that does not offer it or reports no modes.
    let asked = std::fs::read_to_string(&ledger).unwrap();
    assert_eq!(asked.lines().collect::<Vec<_>>(), ["plan", "plan"]);
    server.finish(&[], &[]);
}
