//! Context reaching the agent written on the official TypeScript ACP SDK
//! (`tests/agents/ts-agent`), whose SDK validates every `session/prompt`
//! against the ACP schema: a context port's blocks and a continuation's
//! digest of its prior turn arrive before the prompt text, as `resource`
//! blocks when the agent advertises `promptCapabilities.embeddedContext`
//! and as `text` blocks when it does not (`TS_AGENT_NO_EMBEDDED=1`). The
//! agent keeps each prompt's blocks in its history file, which is what
//! these tests read. Without node or the installed SDK they say SKIPPED
//! ([`TsAgent::find`]).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use lapis_e2e::ts_agent::TsAgent;
use lapis_e2e::ts_agent::client::stored_prompts;
use lapis_protocol::client::Client;
use lapis_protocol::context::CONTEXT_BUDGET_BYTES;
use lapis_protocol::params::{ThreadsCreate, TurnsContinue};
use lapis_protocol::{Turn, TurnState};
use serde_json::{Value, json};

use crate::context::serve_notes;
use crate::policy::{app, settle};
use crate::serve_support::{OWNER, Server};

/// The TS agent as a provider; without `embeddedContext` when `plain`,
/// without `session/load` (and kept for no time) when `forgetful`.
fn provider(ts: &TsAgent, state: &Path, plain: bool, forgetful: bool) -> Value {
    let mut p = ts.provider(state);
    if plain {
        p["env"]["TS_AGENT_NO_EMBEDDED"] = json!("1");
    }
    if forgetful {
        p["env"]["TS_AGENT_NO_LOAD"] = json!("1");
        p["idleSeconds"] = json!(0);
    }
    p
}

fn thread(client: &mut Client, provider: &str, context: Option<&str>) -> String {
    let mut p = ThreadsCreate::new("proj", provider);
    p.context = context.map(str::to_owned);
    client.threads_create_with(&p).unwrap().thread.id
}

/// Submits, waits for `completed`, returns the turn's agent session.
fn run(client: &mut Client, thread: &str, cmd: &str, prompt: &str) -> (Turn, String) {
    let turn = client.turns_submit(thread, cmd, prompt).unwrap();
    let turn = settle(client, &turn.id);
    assert_eq!(turn.state, TurnState::Completed, "{turn:?}");
    let session = turn.agent_session_id.clone().expect("a bound session");
    (turn, session)
}

#[test]
fn a_context_ports_blocks_reach_the_typescript_agent_first_embedded_or_as_text() {
    let Some(ts) = TsAgent::find(
        "a_context_ports_blocks_reach_the_typescript_agent_first_embedded_or_as_text",
    ) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let state = scratch.path().join("state");
    let server = Server::start_full(
        json!({}),
        json!({
            "rich": provider(&ts, &state, false, false),
            "plain": provider(&ts, &state, true, false),
        }),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let (asked, serving) = serve_notes(&server, "lapis-cli", None, None, stop.clone());
    let mut driver = app(&server, OWNER, "lapis-cli");

    // Embedded: two resource blocks (the second cut to the budget), then
    // the prompt text.
    let rich = thread(&mut driver, "rich", Some("notes"));
    let (_, session) = run(&mut driver, &rich, "t1", "plan the trip");
    let prompts = stored_prompts(&state, &session);
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    let blocks = &prompts[0];
    assert_eq!(blocks.len(), 3, "{blocks:?}");
    assert_eq!(
        blocks[0],
        json!({ "type": "resource", "uri": "lapis://context/notes/profile",
                "mimeType": "text/plain", "text": "Ada prefers tea" })
    );
    assert_eq!(blocks[1]["type"], "resource");
    assert_eq!(blocks[1]["uri"], "lapis://context/notes/history");
    let kept = CONTEXT_BUDGET_BYTES - "Ada prefers tea".len();
    assert_eq!(blocks[1]["text"].as_str().unwrap().len(), kept);
    assert_eq!(
        blocks[2],
        json!({ "type": "text", "text": "plan the trip" })
    );

    // Without `embeddedContext`: the same context as text blocks, still
    // before the prompt text.
    let plain = thread(&mut driver, "plain", Some("notes"));
    let (_, session) = run(&mut driver, &plain, "t2", "again");
    let prompts = stored_prompts(&state, &session);
    let blocks = &prompts[0];
    let forms: Vec<&str> = blocks.iter().filter_map(|b| b["type"].as_str()).collect();
    assert_eq!(forms, ["text", "text", "text"], "{blocks:?}");
    assert_eq!(blocks[0]["text"], "Ada prefers tea");
    assert_eq!(blocks[1]["text"].as_str().unwrap().len(), kept);
    assert_eq!(blocks[2]["text"], "again");
    assert_eq!(asked.lock().unwrap().len(), 2, "asked once per turn");

    // A thread without a port: the prompt text alone.
    let bare = thread(&mut driver, "rich", None);
    let (_, session) = run(&mut driver, &bare, "t3", "alone");
    assert_eq!(
        stored_prompts(&state, &session),
        [vec![json!({ "type": "text", "text": "alone" })]]
    );
    stop.store(true, Ordering::SeqCst);
    drop(serving.join().unwrap());
    server.finish(&[], &[]);
}

#[test]
fn a_continuation_digest_reaches_the_typescript_agent_first_embedded_or_as_text() {
    let Some(ts) = TsAgent::find(
        "a_continuation_digest_reaches_the_typescript_agent_first_embedded_or_as_text",
    ) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let state = scratch.path().join("state");
    // Neither agent can load a session and neither is kept: a continuation
    // always starts a new session, so it carries the digest.
    let server = Server::start_full(
        json!({}),
        json!({
            "rich": provider(&ts, &state, false, true),
            "plain": provider(&ts, &state, true, true),
        }),
    );
    let mut client = server.client("lapis-cli");
    for (provider, embedded) in [("rich", true), ("plain", false)] {
        let th = thread(&mut client, provider, None);
        let (first, first_session) = run(&mut client, &th, &format!("{provider}-1"), "fix the bug");
        let next = client
            .turns_continue(&TurnsContinue {
                turn_id: first.id.clone(),
                command_id: format!("{provider}-2"),
                prompt: "now add a test".into(),
                max_turn_seconds: None,
                expect: None,
            })
            .unwrap();
        let next = settle(&mut client, &next.id);
        assert_eq!(next.state, TurnState::Completed, "{next:?}");
        let session = next.agent_session_id.clone().unwrap();
        assert_ne!(session, first_session, "{provider}: not a new session");
        let prompts = stored_prompts(&state, &session);
        assert_eq!(prompts.len(), 1, "{provider}: {prompts:?}");
        let blocks = &prompts[0];
        assert_eq!(blocks.len(), 2, "{provider}: {blocks:?}");
        let digest = blocks[0]["text"].as_str().unwrap_or_default();
        assert!(
            digest.contains("Asked: fix the bug"),
            "{provider}: {digest}"
        );
        assert!(
            digest.contains(&format!("Replied: turn 1 of session {first_session}")),
            "{provider}: {digest}"
        );
        if embedded {
            assert_eq!(blocks[0]["type"], "resource", "{blocks:?}");
            assert_eq!(
                blocks[0]["uri"],
                format!("lapis://continuation/{}", first.id)
            );
            assert_eq!(blocks[0]["mimeType"], "text/plain");
        } else {
            assert_eq!(blocks[0]["type"], "text", "{blocks:?}");
            assert!(blocks[0].get("uri").is_none(), "{blocks:?}");
        }
        assert_eq!(
            blocks[1],
            json!({ "type": "text", "text": "now add a test" }),
            "{provider}: the user's text comes last"
        );
        // The first turn had no context at all.
        assert_eq!(
            stored_prompts(&state, &first_session),
            [vec![json!({ "type": "text", "text": "fix the bug" })]]
        );
    }
    server.finish(&[], &[]);
}
