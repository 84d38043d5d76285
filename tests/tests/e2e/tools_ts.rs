//! The TypeScript SDK agent (`tests/agents/ts-agent`) calls application
//! tools through the controller's MCP bridge with the official TypeScript
//! MCP SDK (`@modelcontextprotocol/sdk`, its stdio client), so the bridge
//! is exercised by an MCP client we did not write. Without node or the
//! installed SDKs the test says SKIPPED; under `CI=true` it fails instead
//! ([`TsAgent::find`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use lapis_e2e::ts_agent::TsAgent;
use lapis_protocol::{Payload, ToolCallOutcome, TurnState};
use serde_json::json;

use crate::policy::{app, settle};
use crate::serve_support::{OWNER, Server};
use crate::tools::{create, reply, serve_crm};

#[test]
fn the_typescript_agent_calls_a_read_and_a_mutating_tool_through_the_bridge() {
    let Some(ts) =
        TsAgent::find("the_typescript_agent_calls_a_read_and_a_mutating_tool_through_the_bridge")
    else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let state = scratch.path().join("state");
    let server = Server::start_full(json!({}), json!({ "tooled": ts.provider(&state) }));
    let stop = Arc::new(AtomicBool::new(false));
    let (seen, serving) = serve_crm(&server, "lapis-cli", stop.clone());
    let mut driver = app(&server, OWNER, "lapis-cli");
    let thread = create(&mut driver, false, &["crm"]).unwrap();
    let prompt = "list\ncall crm__find {\"q\":\"ada\"}\ncall crm__update {\"id\":1}";
    let turn = driver.turns_submit(&thread, "ts-tools", prompt).unwrap();
    let turn = settle(&mut driver, &turn.id);
    assert_eq!(turn.state, TurnState::Completed, "{turn:?}");

    // The results reached the agent: it replies with them.
    let text = reply(&mut driver, &thread);
    assert!(
        text.contains("tools: crm__find, crm__update, crm__broken, crm__slow, crm__huge\n"),
        "{text}"
    );
    assert!(
        text.contains("tool crm__find: find ok {\"q\":\"ada\"}\n"),
        "{text}"
    );
    assert!(
        text.contains("tool crm__update: update ok {\"id\":1}\n"),
        "{text}"
    );

    // And the journal: each call requested, then finished with its output.
    let page = driver.journal_replay(Some(&thread), 0, None).unwrap();
    let mut requested = Vec::new();
    let mut finished = Vec::new();
    for e in &page.events {
        match e.body() {
            Some(Payload::ToolCallRequested(r)) => requested.push(r),
            Some(Payload::ToolCallFinished(f)) => finished.push(f),
            _ => {}
        }
    }
    let tools: Vec<(&str, bool)> = requested
        .iter()
        .map(|r| (r.tool.as_str(), r.mutating))
        .collect();
    assert_eq!(tools, [("find", false), ("update", true)]);
    assert_eq!(finished.len(), 2, "{finished:?}");
    for (r, f) in requested.iter().zip(&finished) {
        assert_eq!(f.call_id, r.call_id);
        assert_eq!(f.outcome, ToolCallOutcome::Ok);
        let out = f.output.as_ref().expect("a full-retention thread keeps it");
        assert!(out.text.starts_with(&format!("{} ok ", r.tool)), "{out:?}");
    }
    stop.store(true, Ordering::SeqCst);
    drop(serving.join());
    let seen: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.split(' ').take(2).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        seen,
        [
            "invoke find",
            "begin update",
            "invoke update",
            "finish update"
        ]
    );
    server.finish(&[], &[]);
}
