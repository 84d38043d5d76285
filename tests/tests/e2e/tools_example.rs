//! The SDK's runnable tool application (`service/protocol/examples/
//! tools_app.rs`, compiled here as a module) against a real `serve`: it
//! registers `notes` and creates a thread binding it, and the fixture agent
//! calls its read and mutating tools through the MCP bridge — the example
//! the protocol docs point to works as documented.

#[allow(dead_code, clippy::print_stderr, clippy::print_stdout)]
#[path = "../../../service/protocol/examples/tools_app.rs"]
mod tools_app;

use std::sync::mpsc;

use lapis_protocol::TurnState;
use serde_json::json;

use crate::policy::{app, settle};
use crate::serve_support::{OWNER, Server};
use crate::tools::{agent, reply, tickets};

#[test]
fn the_sdk_tool_example_serves_an_agent_through_the_bridge() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("mcp");
    let server = Server::start_full(json!({}), json!({ "tooled": agent(&ledger) }));
    let (tx, rx) = mpsc::channel();
    let socket = server.socket();
    let example = std::thread::spawn(move || {
        let target = tools_app::Target {
            workspace: "proj".into(),
            provider: "tooled".into(),
        };
        // Ends with an error when serve closes the connection.
        let _ = tools_app::run(&socket, OWNER.to_owned(), target, |id| {
            tx.send(id.to_owned()).unwrap()
        });
    });
    let thread = rx.recv().expect("the example created its thread");
    // The thread is the example application's: drive it as that application.
    let mut driver = app(&server, OWNER, "tools-example");
    let prompt = "list\ncall notes__add {\"text\":\"buy milk\"}\n\
                  call notes__add {\"text\":\"call ada\"}\ncall notes__list {}";
    let turn = driver.turns_submit(&thread, "ex-1", prompt).unwrap();
    assert_eq!(settle(&mut driver, &turn.id).state, TurnState::Completed);
    let text = reply(&mut driver, &thread);
    assert!(text.contains("tools: notes__list, notes__add\n"), "{text}");
    assert!(text.contains("tool notes__add: added note 1\n"), "{text}");
    assert!(text.contains("tool notes__add: added note 2\n"), "{text}");
    assert!(
        text.contains("tool notes__list: buy milk\ncall ada\n"),
        "{text}"
    );
    let tickets = tickets(&ledger);
    server.finish(&[], &tickets);
    example.join().unwrap();
}
