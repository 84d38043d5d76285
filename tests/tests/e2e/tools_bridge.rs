//! The MCP bridge's connection under `server.maxConnections`: a ticket
//! `hello` authenticates the connection for the thread's principal, so an
//! idle bridge is never shed for a newcomer, and one principal's bridges
//! are held to a non-owner token's share of the cap (half).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lapis_protocol::TurnState;
use lapis_protocol::client::Client;
use serde_json::json;

use crate::policy::{app, settle};
use crate::serve_support::{OWNER, Server, code};
use crate::tools::{agent, create, crm, serve_crm, tickets};

fn list(bridge: &mut Client) -> usize {
    bridge
        .request::<lapis_protocol::call::ToolsList>(&lapis_protocol::params::NoParams {})
        .unwrap()
        .tools
        .len()
}

#[test]
fn an_idle_bridge_is_authenticated_under_the_connection_cap_and_held_to_half_of_it() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("mcp");
    let server = Server::start_full(
        json!({ "maxConnections": 4 }),
        json!({ "tooled": agent(&ledger) }),
    );
    let stop = Arc::new(AtomicBool::new(false));
    // Two owner connections: the application serving `crm`, the driver.
    let (_seen, serving) = serve_crm(&server, "editor", stop.clone());
    let mut driver = app(&server, OWNER, "editor");
    let thread = create(&mut driver, false, &["crm"]).unwrap();
    // The agent's own bridge connects for `list` and stays (third slot).
    let turn = driver.turns_submit(&thread, "c1", "list").unwrap();
    assert_eq!(settle(&mut driver, &turn.id).state, TurnState::Completed);
    let ticket = tickets(&ledger).pop().expect("a ticket");
    // A second bridge of the session takes the fourth: the cap is full.
    let mut bridge = Client::connect(&server.socket()).unwrap();
    bridge.hello_ticket(&ticket).unwrap();
    assert_eq!(list(&mut bridge), crm().tools.len());
    // Newcomers past the shed grace find no unauthenticated connection to
    // shed: they are refused, and both bridges keep their slots.
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..2 {
        let mut raw = server.raw();
        let frame = raw.recv().expect("a refusal frame");
        assert_eq!(code(&frame), "limit_reached", "{frame}");
        assert_eq!(frame["error"]["data"]["limit"], "maxConnections", "{frame}");
    }
    assert_eq!(
        list(&mut bridge),
        crm().tools.len(),
        "the idle bridge was not shed"
    );
    let again = driver.turns_submit(&thread, "c2", "list").unwrap();
    assert_eq!(settle(&mut driver, &again.id).state, TurnState::Completed);
    assert!(
        crate::tools::reply(&mut driver, &thread)
            .matches("tools: crm__find")
            .count()
            == 2,
        "the agent's own bridge still works"
    );
    // With a slot free, a third bridge of the principal is over its share
    // (half of 4).
    // The driver's slot comes back when the server has read its end: a
    // refusal at the cap itself is that race, tried again.
    drop(driver);
    let refused = lapis_e2e::wait::eventually("a free slot", || {
        let mut raw = server.raw();
        let hello = json!({ "jsonrpc": "2.0", "id": 1, "method": "hello",
            "params": { "protocol": "lapis-ai-controller/1", "ticket": ticket } });
        raw.send_bytes(format!("{hello}\n").as_bytes());
        let r = raw.recv().expect("an answer");
        (r["error"]["data"]["limit"] != "maxConnections").then_some(r)
    });
    assert_eq!(code(&refused), "limit_reached", "{refused}");
    assert_eq!(
        refused["error"]["data"]["limit"], "connectionsPerToken",
        "{refused}"
    );
    stop.store(true, Ordering::SeqCst);
    drop(serving.join());
    drop(bridge);
    server.finish(&[], &[ticket]);
}
