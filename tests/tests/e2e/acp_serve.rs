//! Providers through the real binary: `serve` with scripted agents in its
//! config, driven over the real socket by the client SDK.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::acp::{alive, arg, read_pid};
use crate::serve_support::Server;
use lapis_e2e::wait::{settled, wait_turn};

pub(crate) fn fixture(args: &[&str]) -> Value {
    json!({ "command": env!("CARGO_BIN_EXE_fixture-agent"), "args": args })
}

#[test]
fn agents_orphaned_by_a_killed_controller_die_at_restart_and_the_prompt_is_never_resent() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("ledger");
    let pidfile = scratch.path().join("grandchild.pid");
    let hang = fixture(&[
        "--ledger",
        &arg(&ledger),
        "--hang",
        "--grandchild",
        &arg(&pidfile),
    ]);
    let mut server = Server::start_full(json!({}), json!({ "hang": hang }));
    let mut client = server.client("acp-e2e");
    let thread = client
        .threads_create("proj", "hang", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client.turns_submit(&thread.id, "o-1", "run once").unwrap();
    wait_turn(&mut client, &turn.id, |s| {
        s == "dispatched" || s == "running"
    });
    let grandchild = read_pid(&pidfile);
    drop(client);
    server.kill9();
    // Nobody tore the agent down: it and its grandchild are orphans now.
    assert!(alive(grandchild));
    server.spawn();
    // The new controller kills the orphaned group before running anything.
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(grandchild) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!alive(grandchild), "orphaned agent survived the restart");
    let mut client = server.client("acp-e2e");
    let t = client.turns_get(&turn.id).unwrap();
    assert_eq!(t.state.as_str(), "submission_unknown");
    let lines = std::fs::read_to_string(&ledger).unwrap();
    assert_eq!(
        lines.lines().collect::<Vec<_>>(),
        ["run once"],
        "prompt re-sent"
    );
    server.finish(&[], &[]);
}

#[test]
fn outcomes_and_journal_through_serve() {
    let server = Server::start_full(
        json!({}),
        json!({
            "rich": fixture(&["--chunks", "3", "--thoughts", "1", "--tool-calls", "1", "--plan"]),
            "dies": fixture(&["--chunks", "2", "--exit-after-stream"]),
            "hang": fixture(&["--chunks", "1", "--hang"]),
        }),
    );
    let mut client = server.client("acp-e2e");
    // A streamed turn: every kind of activity journaled, in order.
    let rich = client
        .threads_create("proj", "rich", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client.turns_submit(&rich.id, "r-1", "do it").unwrap();
    lapis_e2e::wait::settles_as(&mut client, &turn.id, "completed", Some("end_turn"));
    let page = client.journal_replay(Some(&rich.id), 0, None).unwrap();
    let kinds: Vec<String> = page
        .events
        .iter()
        .map(|e| e.kind.as_str().to_owned())
        .collect();
    for k in ["message_chunk", "thought_chunk", "tool_call", "observation"] {
        assert!(kinds.iter().any(|x| x == k), "{k} missing from {kinds:?}");
    }
    let reply: String = page
        .events
        .iter()
        .filter_map(lapis_e2e::journal::reply_text)
        .collect();
    assert_eq!(reply, "chunk0 chunk1 chunk2 ");
    let last_tool = lapis_e2e::journal::last_tool_call(&page.events).unwrap();
    assert_eq!(last_tool.status.as_deref(), Some("completed"));
    assert_eq!(last_tool.locations[0].path, "/w/f0.rs");
    // Cancel reaches the agent and the turn ends cancelled, unfenced.
    let hang = client
        .threads_create("proj", "hang", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client.turns_submit(&hang.id, "h-1", "wait").unwrap();
    wait_turn(&mut client, &turn.id, |s| s == "running");
    client.turns_cancel(&turn.id).unwrap();
    let (state, _) = {
        let t = wait_turn(&mut client, &turn.id, settled);
        (t.state.as_str().to_owned(), t.outcome)
    };
    assert_eq!(state, "cancelled");
    // An agent that dies after streaming: output kept, outcome unknown, fenced.
    let dies = client
        .threads_create("proj", "dies", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client.turns_submit(&dies.id, "d-1", "die").unwrap();
    lapis_e2e::wait::settles_as(
        &mut client,
        &turn.id,
        "submission_unknown",
        Some("agent_exited"),
    );
    let status = server.ctx.run(["status", "--json"]).json();
    assert_eq!(status["fencedWorkspaces"], json!(["proj"]), "{status}");
    let page = client.journal_replay(Some(&dies.id), 0, None).unwrap();
    let chunks = page
        .events
        .iter()
        .filter(|e| e.kind.as_str() == "message_chunk")
        .count();
    assert_eq!(chunks, 2);
    server.finish(&[], &[]);
}
