//! The policy layer's command ids and bindings through the real binary:
//! every mutation replays its first answer under the same command id, the
//! CLI announces the ids it generates, and `threads.attach` / `expect` name
//! the fields of a binding that differs.

use lapis_protocol::client::{Client, ClientError};
use lapis_protocol::params::ThreadsConfigure;
use lapis_protocol::{ThreadExpect, TurnState};
use serde_json::{Value, json};

use crate::policy::{app, fixture, settle};
use crate::serve_support::{OWNER, Server};

/// Calls `method` twice with the same params (a lost answer asked for
/// again): the second answer is the first one, marked `replayed` (for
/// `turns.submit`: the same turn, as it is now).
fn twice(client: &mut Client, method: &str, params: Value) -> Value {
    let first = client.call_value(method, params.clone()).unwrap();
    assert_eq!(first["replayed"], false, "{method}: {first}");
    let second = client.call_value(method, params).unwrap();
    assert_eq!(second["replayed"], true, "{method}: {second}");
    if method == "turns.submit" || method == "turns.continue" {
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

    // turns.continue of the resolved turn: a lost answer replays the same
    // linked turn; other instructions under the id are a conflict.
    let cont = json!({ "turnId": lost, "commandId": "n-1", "prompt": "again" });
    let linked = twice(&mut c, "turns.continue", cont);
    assert_eq!(linked["turn"]["continues"], lost.as_str());
    conflict(
        &mut c,
        "turns.continue",
        json!({ "turnId": lost, "commandId": "n-1", "prompt": "something else" }),
    );

    // turns.cancel of a turn in flight.
    let hang = c
        .threads_create("proj", "hang", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let running = c.turns_submit(&hang.id, "s-2", "wait").unwrap();
    lapis_e2e::wait::wait_turn(&mut c, &running.id, |s| s == "dispatched");
    let cancelled = twice(
        &mut c,
        "turns.cancel",
        json!({ "turnId": running.id, "commandId": "k-1" }),
    );
    assert_eq!(cancelled["turn"]["cancelRequested"], true);
    assert_eq!(settle(&mut c, &running.id).state, TurnState::Cancelled);

    // permissions.respond: the retry replays instead of `not_found`.
    let asks = c
        .threads_create("proj", "asks", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let asking = c.turns_submit(&asks.id, "s-3", "ask").unwrap();
    let request = lapis_e2e::wait::eventually("a permission request", || {
        c.permissions_list(None, Some(&asking.id)).unwrap().pop()
    });
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
    let thread = c
        .threads_create("proj", "echo", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
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
                approval: Some(lapis_protocol::ApprovalPolicy::AllowAll),
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
                retention: Some(lapis_protocol::Retention::MetadataOnly),
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
    // A foreign thread is not found, whatever is expected.
    let err = app(&server, OWNER, "someone-else")
        .threads_attach(&thread.id, &ThreadExpect::default())
        .unwrap_err();
    assert_eq!(err.code(), "not_found");

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

    // `turns.continue` takes the same `expect`: a difference queues nothing,
    // a match makes the linked turn.
    let prior = ok["turn"]["id"].as_str().unwrap();
    let err = c
        .call_value(
            "turns.continue",
            json!({ "turnId": prior, "commandId": "cx-1", "prompt": "more",
                    "expect": { "approval": "allow-all" } }),
        )
        .unwrap_err();
    assert_eq!(err.code(), "binding_mismatch");
    let ClientError::Rpc(rpc) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(rpc.data.as_ref().unwrap()["fields"], json!(["approval"]));
    assert_eq!(c.turns_list(Some(&thread.id)).unwrap().len(), 1);
    let linked = c
        .call_value(
            "turns.continue",
            json!({ "turnId": prior, "commandId": "cx-2", "prompt": "more", "expect": held }),
        )
        .unwrap();
    assert_eq!(linked["turn"]["continues"], prior);
    assert_eq!(
        settle(&mut c, linked["turn"]["id"].as_str().unwrap()).state,
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
        .threads_configure(
            &ThreadsConfigure::new(&thread.id, 1)
                .approval(lapis_protocol::ApprovalPolicy::AllowAll),
        )
        .unwrap();
    c.reconnect().unwrap();
    let fresh = c.attached_snapshot(&thread.id).unwrap();
    assert_eq!(fresh.thread.version, 2);
    assert_eq!(fresh.thread.approval.as_str(), "allow-all");
    // A binding that no longer holds fails the reconnect's re-attach.
    c.threads_attach(&thread.id, &ThreadExpect::of(&fresh.thread.clone()))
        .unwrap();
    other
        .threads_configure(&ThreadsConfigure::new(&thread.id, 2).provider("hang"))
        .unwrap();
    let err = c.reconnect().unwrap_err();
    assert_eq!(err.code(), "binding_mismatch");
    server.finish(&[], &[]);
}
