//! Context reaching the agent written on the official TypeScript ACP SDK
//! (`tests/agents/ts-agent`), whose SDK validates every `session/prompt`
//! against the ACP schema: a context port's blocks and a continuation's
//! digest of its prior turn arrive before the prompt text, in one labelled
//! `text` block whether the agent advertises
//! `promptCapabilities.embeddedContext` or not (`TS_AGENT_NO_EMBEDDED=1`). The
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
    p.ports.context = context.map(str::to_owned);
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
fn a_context_ports_blocks_reach_the_typescript_agent_first_in_one_labelled_block() {
    let Some(ts) = TsAgent::find(
        "a_context_ports_blocks_reach_the_typescript_agent_first_in_one_labelled_block",
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

    // Whether or not it advertises `embeddedContext`: one labelled text
    // block (the second context block cut to the budget), then the prompt
    // text alone.
    let kept = CONTEXT_BUDGET_BYTES - "Ada prefers tea".len();
    for (provider, id, prompt) in [("rich", "t1", "plan the trip"), ("plain", "t2", "again")] {
        let th = thread(&mut driver, provider, Some("notes"));
        let (_, session) = run(&mut driver, &th, id, prompt);
        let prompts = stored_prompts(&state, &session);
        assert_eq!(prompts.len(), 1, "{prompts:?}");
        let blocks = &prompts[0];
        assert_eq!(blocks.len(), 2, "{provider}: {blocks:?}");
        assert_eq!(blocks[0]["type"], "text", "{provider}: {blocks:?}");
        assert_eq!(
            lapis_e2e::prompt::context_blocks(blocks[0]["text"].as_str().unwrap()),
            [
                (
                    "lapis://context/notes/profile".to_owned(),
                    "Ada prefers tea".to_owned()
                ),
                ("lapis://context/notes/history".to_owned(), "h".repeat(kept)),
            ],
            "{provider}"
        );
        assert_eq!(blocks[1], json!({ "type": "text", "text": prompt }));
    }
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
fn a_continuation_digest_reaches_the_typescript_agent_first_in_one_labelled_block() {
    let Some(ts) = TsAgent::find(
        "a_continuation_digest_reaches_the_typescript_agent_first_in_one_labelled_block",
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
    for provider in ["rich", "plain"] {
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
        assert_eq!(blocks[0]["type"], "text", "{provider}: {blocks:?}");
        let sent = lapis_e2e::prompt::context_blocks(digest);
        assert_eq!(sent.len(), 1, "{provider}: {digest}");
        assert_eq!(sent[0].0, format!("lapis://continuation/{}", first.id));
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
