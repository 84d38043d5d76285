//! An agent's own ACP tool calls: each `tool_call` and its
//! `tool_call_update`s merge into one invocation envelope journaled as a
//! durable pair — the start, and the merged envelope when the call settles
//! (or, unsettled, when the prompt ends) — with the command, kind and
//! locations on the envelope. Updates in between (patches, output,
//! commands) are never rows of their own.

use lapis_protocol::{Invocation, Observation, Payload, TurnState};
use serde_json::json;

use crate::acp::{completed, run_fixture};
use crate::serve_support::Server;

fn calls(events: &[Payload], id: &str) -> Vec<Invocation> {
    events
        .iter()
        .filter_map(|e| match e {
            Payload::ToolCall(i) if i.id == id => Some(i.clone()),
            _ => None,
        })
        .collect()
}

/// Whether an event other than a tool call's envelope carries `needle`.
fn elsewhere(events: &[Payload], needle: &str) -> bool {
    events
        .iter()
        .filter(|e| !matches!(e, Payload::ToolCall(_)))
        .any(|e| e.to_value().to_string().contains(needle))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_and_several_updates_are_one_envelope_in_a_durable_pair() {
    let (outcome, hooks, _dir) =
        run_fixture(&["--tool-calls", "2", "--tool-updates", "4", "--chunks", "1"]).await;
    assert_eq!(outcome, completed());
    let events = hooks.events();
    for (i, id) in ["tool-0", "tool-1"].iter().enumerate() {
        // start, in_progress + 4 updates, completed: two rows.
        let pair = calls(&events, id);
        assert_eq!(pair.len(), 2, "{id}: {pair:?}");
        assert_eq!(pair[0].status.as_deref(), Some("pending"));
        assert_eq!(pair[0].command, None);
        let done = &pair[1];
        assert_eq!(done.status.as_deref(), Some("completed"));
        assert_eq!(
            done.title.as_deref(),
            Some(format!("Edit file {i}").as_str())
        );
        assert_eq!(done.kind.as_deref(), Some("edit"));
        assert_eq!(done.command.as_deref(), Some("cargo test --step=3"));
        assert_eq!(done.locations.len(), 1);
        assert_eq!(done.locations[0].path, format!("/w/f{i}.rs"));
        // The latest body wins, on the envelope.
        let content = done.content.as_ref().expect("content").to_string();
        assert!(
            content.contains("patch 3") && content.contains("output 3"),
            "{content}"
        );
        assert!(!content.contains("patch 2"), "{content}");
    }
    assert_eq!(
        hooks.count(|e| matches!(e, Payload::ToolCall(_))),
        4,
        "two calls, two rows each"
    );
    // No body was journaled as an event of its own.
    for needle in ["patch ", "output ", "--step="] {
        assert!(!elsewhere(&events, needle), "{needle} outside an envelope");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsettled_call_is_journaled_with_its_last_state_before_the_outcome() {
    let (outcome, hooks, _dir) = run_fixture(&[
        "--tool-calls",
        "1",
        "--tool-updates",
        "2",
        "--tool-final",
        "in_progress",
    ])
    .await;
    assert_eq!(outcome, completed());
    let events = hooks.events();
    let pair = calls(&events, "tool-0");
    assert_eq!(pair.len(), 2, "{pair:?}");
    let last = &pair[1];
    assert_eq!(last.status.as_deref(), Some("in_progress"));
    assert_eq!(last.command.as_deref(), Some("cargo test --step=1"));
    // Before the prompt's answer is recorded.
    let at = |f: &dyn Fn(&Payload) -> bool| events.iter().position(f).unwrap();
    let flushed = at(&|e| matches!(e, Payload::ToolCall(i) if i.command.is_some()));
    let stopped = at(&|e| matches!(e, Payload::Observation(Observation::Stopped { .. })));
    assert!(flushed < stopped, "{events:?}");
}

#[test]
fn through_serve_the_journal_holds_two_tool_call_rows_per_call() {
    let agent = json!({"command": env!("CARGO_BIN_EXE_fixture-agent"),
        "args": ["--tool-calls", "3", "--tool-updates", "5"]});
    let server = Server::start_full(json!({}), json!({ "busy": agent }));
    let mut client = server.client("acp-tools");
    let thread = client
        .threads_create("proj", "busy", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client.turns_submit(&thread.id, "t-1", "work").unwrap();
    let done = lapis_e2e::wait::settles_as(&mut client, &turn.id, "completed", Some("end_turn"));
    assert_eq!(done.state, TurnState::Completed);
    let page = client.journal_replay(Some(&thread.id), 0, None).unwrap();
    let rows: Vec<Invocation> = page
        .events
        .iter()
        .filter_map(|e| match e.body()? {
            Payload::ToolCall(i) => Some(i),
            _ => None,
        })
        .collect();
    // 3 calls × (start + 1 in_progress + 5 updates + completed) frames.
    assert_eq!(rows.len(), 6, "{rows:?}");
    for id in ["tool-0", "tool-1", "tool-2"] {
        let pair: Vec<&Invocation> = rows.iter().filter(|i| i.id == id).collect();
        assert_eq!(pair.len(), 2, "{id}");
        assert_eq!(pair[1].status.as_deref(), Some("completed"));
        assert_eq!(pair[1].command.as_deref(), Some("cargo test --step=4"));
    }
    server.finish(&[], &[]);
}
