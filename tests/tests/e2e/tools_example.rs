//! The SDK's runnable tool application (`service/protocol/examples/
//! tools_app.rs`, compiled here as a module) against a real `serve`: it
//! registers `notes` and creates a thread binding it, and the fixture agent
//! calls its read and mutating tools through the MCP bridge — the example
//! the protocol docs point to works as documented.

#[allow(dead_code, clippy::print_stderr, clippy::print_stdout)]
#[path = "../../../service/protocol/examples/tools_app.rs"]
mod tools_app;

use lapis_protocol::TurnState;
use serde_json::json;

use crate::serve_support::{OWNER, Server};
use crate::tools::{agent, tickets};

#[test]
fn the_sdk_tool_example_serves_an_agent_through_the_bridge_until_its_turn_ends() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("mcp");
    let server = Server::start_full(json!({}), json!({ "tooled": agent(&ledger) }));
    let target = tools_app::Target {
        workspace: "proj".into(),
        provider: "tooled".into(),
    };
    let prompt = "list\ncall notes__add {\"text\":\"buy milk\"}\n\
                  call notes__add {\"text\":\"call ada\"}\ncall notes__list {}";
    // Returns once the turn has settled: the example submits the turn and
    // serves its tool calls on one connection until then.
    let (turn, text) = tools_app::run(&server.socket(), OWNER.to_owned(), target, prompt).unwrap();
    assert_eq!(turn.state, TurnState::Completed, "{turn:?}");
    assert!(text.contains("tools: notes__list, notes__add\n"), "{text}");
    assert!(text.contains("tool notes__add: added note 1\n"), "{text}");
    assert!(text.contains("tool notes__add: added note 2\n"), "{text}");
    assert!(
        text.contains("tool notes__list: buy milk\ncall ada\n"),
        "{text}"
    );
    let tickets = tickets(&ledger);
    server.finish(&[], &tickets);
}
