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

/// `serve_tools_until_settled` gives up at its timeout with the turn still
/// active, and returns the turn once it settles (here: cancelled from
/// another connection), leaving no subscription behind on the connection.
#[test]
fn serving_until_a_turn_settles_stops_at_the_timeout_or_the_end() {
    use std::time::Duration;

    use lapis_protocol::ApprovalPolicy;

    use crate::policy::{app, fixture};

    struct NoTools;
    impl lapis_protocol::client::ToolHandler for NoTools {
        fn invoke(
            &mut self,
            _: &lapis_protocol::tools::ToolInvoke,
        ) -> Result<lapis_protocol::tools::ToolOutput, lapis_protocol::client::CallbackError>
        {
            Err(lapis_protocol::client::CallbackError("no tools".into()))
        }
    }

    let server = Server::start_full(json!({}), json!({ "slow": fixture(&["--hang"]) }));
    let mut client = app(&server, OWNER, "serving-app");
    let thread = client
        .threads_create("proj", "slow", ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client.turns_submit(&thread.id, "c1", "go").unwrap();
    let open = client
        .serve_tools_until_settled(&mut NoTools, &turn.id, Some(Duration::from_millis(700)))
        .unwrap();
    assert!(open.state.is_active(), "{open:?}");
    let canceller = std::thread::spawn({
        let mut other = app(&server, OWNER, "serving-app");
        let id = turn.id.clone();
        move || {
            std::thread::sleep(Duration::from_millis(300));
            other.turns_cancel(&id).unwrap();
        }
    });
    let settled = client
        .serve_tools_until_settled(&mut NoTools, &turn.id, Some(Duration::from_secs(60)))
        .unwrap();
    canceller.join().unwrap();
    assert_eq!(settled.state, TurnState::Cancelled, "{settled:?}");
    // The subscription it made is gone with its events: nothing waits.
    assert!(
        client
            .next_notification(Some(Duration::from_millis(300)))
            .unwrap()
            .is_none()
    );
    server.finish(&[], &[]);
}
