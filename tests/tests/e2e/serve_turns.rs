//! Turns through the server with scripted agents: permissions answered over
//! the protocol, and a fenced workspace resolved by its owner after a crash.

use std::time::Duration;

use lapis_protocol::Payload;
use lapis_protocol::client::{Client, Credential};
use lapis_protocol::notifications::JournalNotice;
use serde_json::{Value, json};

use crate::serve_support::{NARROW, Server};
use lapis_e2e::wait::wait_turn;

fn fixture(args: &[&str]) -> Value {
    json!({ "command": env!("CARGO_BIN_EXE_fixture-agent"), "args": args })
}

/// Kills, by pid, the agents whose working directory is `dir` (a SIGKILLed
/// server cannot reap its agents; a hanging one would outlive the test).
pub(crate) fn kill_agents_in(dir: &std::path::Path) {
    let dir = dir.canonicalize().unwrap();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if std::fs::read_link(entry.path().join("cwd")).ok().as_deref() == Some(dir.as_path()) {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

#[test]
fn permission_requests_are_answered_over_the_protocol() {
    let server = Server::start_full(
        json!({}),
        json!({ "asker": fixture(&["--permissions", "1", "--chunks", "1"]) }),
    );
    let mut client = server.client("perm");
    let thread = client
        .threads_create("proj", "asker", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    client.journal_subscribe(Some(&thread.id), Some(0)).unwrap();
    let turn = client
        .turns_submit(&thread.id, "p-1", "please ask")
        .unwrap();
    // Wait for the request event.
    let (request_id, options) = loop {
        let n = client
            .next_notification(Some(Duration::from_secs(30)))
            .unwrap()
            .expect("a permission request");
        if let Some(JournalNotice::Event(e)) = JournalNotice::parse(&n)
            && let Some(Payload::PermissionRequested(r)) = e.event.body()
        {
            let options: Vec<String> = r.options.into_iter().map(|o| o.id).collect();
            break (r.request_id, options);
        }
    };
    // Another application may not answer it without
    // `permissions:respond-any` (see `inbox` for one that may).
    let mut other = crate::policy::app(&server, NARROW, "intruder");
    let err = other
        .permissions_respond(&turn.id, &request_id, &options[0])
        .unwrap_err();
    assert_eq!(err.code(), "not_found");
    // An option that was not offered is refused; an unknown request is not found.
    let err = client
        .permissions_respond(&turn.id, &request_id, "not-offered")
        .unwrap_err();
    assert_eq!(err.code(), "invalid_request");
    let err = client
        .permissions_respond(&turn.id, "no-such-request", &options[0])
        .unwrap_err();
    assert_eq!(err.code(), "not_found");
    client
        .permissions_respond(&turn.id, &request_id, &options[0])
        .unwrap();
    let state = wait_turn(&mut client, &turn.id, |s| {
        s == "completed" || s == "failed" || s == "cancelled"
    });
    assert_eq!(state.state.as_str(), "completed");
    // A late answer changes nothing.
    let err = client
        .permissions_respond(&turn.id, &request_id, &options[0])
        .unwrap_err();
    assert_eq!(err.code(), "conflict");
    assert_eq!(
        client.turns_get(&turn.id).unwrap().state.as_str(),
        "completed"
    );
    server.finish(&[], &[]);
}

#[test]
fn a_crash_mid_turn_fences_the_workspace_until_the_owner_resolves() {
    let mut server = Server::start_full(json!({}), json!({ "hang": fixture(&["--hang"]) }));
    let mut client = server.client("ops");
    let thread = client
        .threads_create("proj", "hang", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client
        .turns_submit(&thread.id, "h-1", "hang forever")
        .unwrap();
    wait_turn(&mut client, &turn.id, |s| {
        s == "dispatched" || s == "running"
    });
    let running = server.ctx.run(["status", "--json"]).json();
    assert_eq!(running["runningWorkspaces"], json!(["proj"]));
    drop(client);
    server.kill9();
    kill_agents_in(&server.project);
    server.spawn();
    // Recovery: the outcome is unknown, the workspace is fenced.
    let status = server.ctx.run(["status", "--json"]).json();
    assert_eq!(status["fencedWorkspaces"], json!(["proj"]), "{status}");
    let mut client = server.client("ops");
    assert_eq!(
        client.turns_get(&turn.id).unwrap().state.as_str(),
        "submission_unknown"
    );
    // Without confirmation: refused, still fenced.
    let out = server
        .ctx
        .run(["turns", "resolve", &turn.id, "--as", "failed", "--json"]);
    out.expect_code(2);
    assert_eq!(out.json()["error"]["code"], "usage");
    // The service refuses it too, whatever the client.
    let refused = client
        .turns_resolve(&turn.id, lapis_protocol::ResolveAs::Failed, false)
        .unwrap_err();
    assert_eq!(refused.code(), "invalid_request");
    // Another application cannot resolve it without `turns:resolve-any`.
    let err = Client::open(
        &server.socket(),
        Credential::Token {
            token: NARROW.to_owned(),
            application: "other".to_owned(),
        },
    )
    .unwrap()
    .turns_resolve(&turn.id, lapis_protocol::ResolveAs::Failed, true)
    .unwrap_err();
    assert_eq!(err.code(), "not_found");
    let resolved = client
        .turns_resolve(&turn.id, lapis_protocol::ResolveAs::Cancelled, true)
        .unwrap();
    assert_eq!(resolved.state.as_str(), "cancelled");
    let status = server.ctx.run(["status", "--json"]).json();
    assert_eq!(status["fencedWorkspaces"], json!([]));
    // Resolving again is a conflict: the turn is no longer fenced.
    let err = client
        .turns_resolve(&turn.id, lapis_protocol::ResolveAs::Failed, true)
        .unwrap_err();
    assert_eq!(err.code(), "conflict");
    server.finish(&[], &[]);
}

#[test]
fn configure_is_optimistic_and_refused_while_a_turn_is_active_and_cancel_stops_it() {
    let server = Server::start_full(json!({}), json!({ "hang": fixture(&["--hang"]) }));
    let mut client = server.client("cfg");
    let thread = client
        .threads_create("proj", "hang", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let configure = |client: &mut Client, version: u64| {
        client.call_value(
            "threads.configure",
            json!({ "threadId": thread.id, "expectedVersion": version, "approval": "allow-all" }),
        )
    };
    let v2 = configure(&mut client, 1).unwrap();
    assert_eq!(v2["thread"]["version"], 2);
    assert_eq!(v2["thread"]["approval"], "allow-all");
    // A stale version is a conflict.
    assert_eq!(configure(&mut client, 1).unwrap_err().code(), "conflict");
    let turn = client
        .turns_submit(&thread.id, "k-1", "wait for cancel")
        .unwrap();
    wait_turn(&mut client, &turn.id, |s| {
        s == "dispatched" || s == "running"
    });
    assert_eq!(configure(&mut client, 2).unwrap_err().code(), "conflict");
    // The CLI is another application: it may not cancel this turn.
    let out = server.ctx.run(["turns", "cancel", &turn.id, "--json"]);
    out.expect_code(2);
    assert_eq!(out.json()["error"]["code"], "not_found");
    let cancelling = client.turns_cancel(&turn.id).unwrap();
    assert!(cancelling.cancel_requested);
    let state = wait_turn(&mut client, &turn.id, |s| {
        s == "cancelled" || s == "interrupted" || s == "completed" || s == "failed"
    });
    assert_eq!(state.state.as_str(), "cancelled");
    // Once the turn is finished, configure works again.
    assert_eq!(configure(&mut client, 2).unwrap()["thread"]["version"], 3);
    server.finish(&[], &[]);
}

#[test]
fn sigterm_settles_a_running_turn_within_the_grace_and_leaves_no_agent() {
    let mut server = Server::start_full(
        json!({ "shutdownGraceSeconds": 1 }),
        json!({ "hang": fixture(&["--hang", "--ignore-cancel"]) }),
    );
    let mut client = server.client("stop");
    let thread = client
        .threads_create("proj", "hang", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client
        .turns_submit(&thread.id, "s-1", "never ends")
        .unwrap();
    wait_turn(&mut client, &turn.id, |s| {
        s == "dispatched" || s == "running"
    });
    drop(client);
    assert_eq!(server.stop(), Some(0), "{}", server.log_text());
    // The agent's process group was reaped with the server.
    let project = server.project.canonicalize().unwrap();
    let survivors: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter(|e| {
            std::fs::read_link(e.path().join("cwd")).ok().as_deref() == Some(project.as_path())
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    kill_agents_in(&server.project);
    assert!(
        survivors.is_empty(),
        "agents outlived the controller: {survivors:?}"
    );
    // Past the dispatch boundary the outcome is unknown: fenced, not retried.
    server.spawn();
    let mut client = server.client("stop");
    let settled = client.turns_get(&turn.id).unwrap();
    assert_eq!(settled.state.as_str(), "submission_unknown", "{settled:?}");
    let status = server.ctx.run(["status", "--json"]).json();
    assert_eq!(status["fencedWorkspaces"], json!(["proj"]));
    server.finish(&[], &[]);
}

#[test]
fn a_whitespace_only_prompt_is_refused_and_nothing_is_queued() {
    let server = Server::start_full(json!({}), json!({ "plain": fixture(&["--chunks", "1"]) }));
    let mut client = server.client("blank");
    let thread = client
        .threads_create("proj", "plain", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    for (i, blank) in ["", " ", "\n\t  \r\n", "\u{3000}\u{a0}"].iter().enumerate() {
        let err = client
            .turns_submit(&thread.id, &format!("blank-{i}"), blank)
            .unwrap_err();
        assert_eq!(err.code(), "invalid_request", "{blank:?}: {err}");
        assert!(err.to_string().contains("whitespace"), "{err}");
    }
    assert!(
        client.turns_list(Some(&thread.id)).unwrap().is_empty(),
        "a refused prompt queues no turn"
    );
    // Text surrounded by whitespace is a prompt.
    let turn = client.turns_submit(&thread.id, "real", "  hi \n").unwrap();
    let state = wait_turn(&mut client, &turn.id, |s| s == "completed" || s == "failed");
    assert_eq!(state.state.as_str(), "completed");
    server.finish(&[], &[]);
}
