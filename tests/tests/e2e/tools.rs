//! Application tools through the real binary: an application registers a
//! tool endpoint and serves its callbacks on its own connection, a thread
//! binds it by name, and the fixture agent calls it through the
//! controller's MCP bridge (`mcp-bridge`, an `rmcp` server) with an `rmcp`
//! client — journaled before it runs, at most once, the capture port around
//! the mutating call, the ticket never in the journal, the log or the home.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lapis_protocol::client::{CallbackError, Client, ClientError, ToolHandler};
use lapis_protocol::params::ThreadsCreate;
use lapis_protocol::tools::{CaptureNotice, ToolInvoke, ToolOutput, ToolsRegister};
use lapis_protocol::{EventKind, Payload, ThreadExpect, TurnState};
use serde_json::{Value, json};

use crate::acp::arg;
use crate::policy::{app, settle};
use crate::serve_support::{OWNER, Server};

/// What the application saw, in order.
pub(crate) type Seen = Arc<Mutex<Vec<String>>>;

/// The `crm` endpoint's handler: records what it was asked, in order.
pub(crate) struct Crm(pub(crate) Seen);

impl ToolHandler for Crm {
    fn invoke(&mut self, call: &ToolInvoke) -> Result<ToolOutput, CallbackError> {
        self.0
            .lock()
            .unwrap()
            .push(format!("invoke {} {}", call.tool, call.idempotency_key));
        if call.tool == "broken" {
            return Err(CallbackError("crm is down".into()));
        }
        if call.tool == "huge" {
            // Over MAX_TOOL_RESULT_BYTES: the controller cannot take the
            // answer, though the tool ran (a failed transport of the invoke).
            return Ok(ToolOutput {
                text: "x".repeat(300 * 1024),
                ..Default::default()
            });
        }
        if call.tool == "slow" {
            // Long enough for the test to kill the controller meanwhile.
            std::thread::sleep(Duration::from_secs(3));
        }
        Ok(ToolOutput {
            text: format!("{} ok {}", call.tool, call.arguments),
            ..Default::default()
        })
    }
    fn capture_begin(&mut self, n: &CaptureNotice) -> Result<(), CallbackError> {
        self.0.lock().unwrap().push(format!("begin {}", n.tool));
        Ok(())
    }
    fn capture_finish(&mut self, n: &CaptureNotice) -> Result<(), CallbackError> {
        // `finish`, then what it says of the result: nothing more for a
        // result that is not an error, `isError` for an error, `unknown`
        // when the controller does not know.
        let said = match n.is_error {
            Some(false) => "",
            Some(true) => " isError",
            None => " unknown",
        };
        self.0
            .lock()
            .unwrap()
            .push(format!("finish {}{said}", n.tool));
        Ok(())
    }
}

pub(crate) fn crm() -> ToolsRegister {
    serde_json::from_value(json!({"endpoint": "crm", "capture": true, "tools": [
        {"name": "find", "description": "Find a contact", "inputSchema": {"type": "object"}},
        {"name": "update", "inputSchema": {"type": "object"}, "mutating": true},
        {"name": "broken", "inputSchema": {"type": "object"}, "mutating": true},
        {"name": "slow", "inputSchema": {"type": "object"}, "mutating": true},
        {"name": "huge", "inputSchema": {"type": "object"}, "mutating": true}]}))
    .unwrap()
}

/// Registers `crm` on a new connection of `application` and serves it on a
/// thread until `stop` is set; returns what it saw.
pub(crate) fn serve_crm(
    server: &Server,
    application: &str,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> (Seen, std::thread::JoinHandle<Client>) {
    let mut client = app(server, OWNER, application);
    client.tools_register(crm()).unwrap();
    let seen: Seen = Arc::default();
    let mut handler = Crm(seen.clone());
    let serving = std::thread::spawn(move || {
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            match client.serve_tools(&mut handler, Some(Duration::from_millis(50))) {
                Ok(_) => {}
                Err(_) => break,
            }
        }
        client
    });
    (seen, serving)
}

pub(crate) fn agent(ledger: &Path) -> Value {
    json!({ "command": env!("CARGO_BIN_EXE_fixture-agent"),
        "args": ["--mcp-tools", "--mcp-ledger", arg(ledger)] })
}

pub(crate) fn create(
    client: &mut Client,
    restricted: bool,
    tools: &[&str],
) -> Result<String, ClientError> {
    let p = ThreadsCreate::new("proj", "tooled")
        .restricted(restricted)
        .tools(tools.iter().copied());
    Ok(client.threads_create_with(&p)?.thread.id)
}

pub(crate) fn reply(client: &mut Client, thread: &str) -> String {
    let page = client.journal_replay(Some(thread), 0, None).unwrap();
    page.events
        .iter()
        .filter_map(lapis_e2e::journal::reply_text)
        .collect()
}

/// The bridge's ticket as the agent was given it (the ledger records
/// `mcpServers` with values).
pub(crate) fn tickets(ledger: &Path) -> Vec<String> {
    std::fs::read_to_string(ledger)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let v: Value = serde_json::from_str(l).ok()?;
            let bridge = v["mcpServers"]
                .as_array()?
                .iter()
                .find(|s| s["name"] == "lapis-tools")?
                .clone();
            bridge["env"][0]["value"].as_str().map(str::to_owned)
        })
        .collect()
}

fn code(e: ClientError) -> String {
    assert!(matches!(e, ClientError::Rpc(_)), "not an RPC error: {e}");
    e.code().to_owned()
}

#[test]
fn an_agent_calls_application_tools_through_the_bridge_at_most_once_with_capture() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("mcp");
    let server = Server::start_full(json!({}), json!({ "tooled": agent(&ledger) }));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // As the CLI's application, so `threads show` sees the thread.
    let (seen, serving) = serve_crm(&server, "lapis-cli", stop.clone());
    let mut driver = app(&server, OWNER, "lapis-cli");
    let thread = create(&mut driver, false, &["crm"]).unwrap();
    let prompt =
        "list\ncall crm__find {\"q\":\"ada\"}\ncall crm__update {\"id\":1}\ncall crm__broken {}";
    let turn = driver.turns_submit(&thread, "c1", prompt).unwrap();
    let turn = settle(&mut driver, &turn.id);
    assert_eq!(turn.state, TurnState::Completed, "{turn:?}");
    let text = reply(&mut driver, &thread);
    assert!(
        text.contains("tools: crm__find, crm__update, crm__broken, crm__slow, crm__huge"),
        "{text}"
    );
    assert!(
        text.contains("tool crm__find: find ok {\"q\":\"ada\"}"),
        "{text}"
    );
    assert!(
        text.contains("tool crm__update: update ok {\"id\":1}"),
        "{text}"
    );
    assert!(
        text.contains("tool crm__broken error:") && text.contains("[tool_call_failed]"),
        "{text}"
    );
    // The journal: each call requested before it ran, then finished; the
    // application saw each key once, capture around the mutating calls.
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
    assert_eq!(requested.len(), 3, "{requested:?}");
    assert_eq!(finished.len(), 3, "{finished:?}");
    for r in &requested {
        assert_eq!(r.idempotency_key, format!("{}:{}", turn.id, r.call_id));
        assert!(r.endpoint_identity.starts_with("tools_"));
    }
    let kinds: Vec<EventKind> = page
        .events
        .iter()
        .map(|e| e.kind)
        .filter(|k| {
            matches!(
                k,
                EventKind::ToolCallRequested | EventKind::ToolCallFinished
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            EventKind::ToolCallRequested,
            EventKind::ToolCallFinished,
            EventKind::ToolCallRequested,
            EventKind::ToolCallFinished,
            EventKind::ToolCallRequested,
            EventKind::ToolCallFinished
        ]
    );
    let key = |tool: &str| {
        requested
            .iter()
            .find(|r| r.tool == tool)
            .unwrap()
            .idempotency_key
            .clone()
    };
    assert_eq!(
        *seen.lock().unwrap(),
        [
            format!("invoke find {}", key("find")),
            "begin update".to_string(),
            format!("invoke update {}", key("update")),
            "finish update".to_string(),
            "begin broken".to_string(),
            format!("invoke broken {}", key("broken")),
            // The handler's error answer is a result too: its capture ends.
            "finish broken isError".to_string(),
        ]
    );
    // `threads show` names the binding; attach compares it.
    let shown = server.ctx.run(["threads", "show", &thread, "--json"]);
    assert_eq!(shown.code, Some(0), "{shown:?}");
    assert!(shown.stdout.contains("\"tools\""), "{}", shown.stdout);
    let expect = ThreadExpect {
        ports: lapis_protocol::PortsExpect {
            tools: Some(vec!["other".into()]),
            ..Default::default()
        },
        ..Default::default()
    };
    let err = driver.threads_attach(&thread, &expect).unwrap_err();
    assert_eq!(code(err), "binding_mismatch");
    let expect = ThreadExpect {
        ports: lapis_protocol::PortsExpect {
            tools: Some(vec!["crm".into()]),
            ..Default::default()
        },
        ..Default::default()
    };
    driver.threads_attach(&thread, &expect).unwrap();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    drop(serving.join().unwrap());
    // The ticket: in the agent's environment only.
    let tickets = tickets(&ledger);
    assert_eq!(tickets.len(), 1, "one agent session");
    assert!(tickets[0].starts_with("lapis_tkt_"));
    assert!(!server.log_text().contains(&tickets[0]));
    server.finish(&[], &tickets);
}

/// A begun capture is finished even when the invoke's transport fails
/// after the application ran the tool: here its answer is over the
/// result bound, so the controller cannot take it, and the call's effect
/// is unknown.
#[test]
fn a_begun_capture_is_finished_after_a_failed_invoke_transport() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("mcp");
    let server = Server::start_full(json!({}), json!({ "tooled": agent(&ledger) }));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (seen, serving) = serve_crm(&server, "lapis-cli", stop.clone());
    let mut driver = app(&server, OWNER, "lapis-cli");
    let thread = create(&mut driver, false, &["crm"]).unwrap();
    let turn = driver
        .turns_submit(&thread, "c1", "call crm__huge {}")
        .unwrap();
    let turn = settle(&mut driver, &turn.id);
    assert_eq!(turn.state, TurnState::Completed, "{turn:?}");
    let text = reply(&mut driver, &thread);
    assert!(
        text.contains("tool crm__huge error:") && text.contains("[tool_effect_unknown]"),
        "{text}"
    );
    let seen: Vec<String> = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(seen[0], "begin huge");
    assert!(seen[1].starts_with("invoke huge "), "{seen:?}");
    assert_eq!(seen[2], "finish huge unknown");
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    drop(serving.join().unwrap());
    server.finish(&[], &tickets(&ledger));
}

#[test]
fn a_controller_killed_inside_a_mutating_call_records_an_unknown_effect_and_never_calls_again() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("mcp");
    let mut server = Server::start_full(json!({}), json!({ "tooled": agent(&ledger) }));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (seen, serving) = serve_crm(&server, "lapis-cli", stop.clone());
    let mut driver = app(&server, OWNER, "lapis-cli");
    let thread = create(&mut driver, false, &["crm"]).unwrap();
    let turn = driver
        .turns_submit(&thread, "c1", "call crm__slow {\"id\":7}")
        .unwrap();
    // Wait until the application is inside the call (capture begun,
    // invoked), then kill -9 the controller.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !seen
        .lock()
        .unwrap()
        .iter()
        .any(|s| s.starts_with("invoke slow"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the call never arrived"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    server.kill9();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    drop(serving.join());
    server.spawn();
    // The application is back; nothing calls it again.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (again, serving) = serve_crm(&server, "lapis-cli", stop.clone());
    let mut driver = app(&server, OWNER, "lapis-cli");
    let got = driver.turns_get(&turn.id).unwrap();
    assert_eq!(got.state, TurnState::SubmissionUnknown, "{got:?}");
    let shown = server.ctx.run(["turns", "show", &turn.id, "--json"]).json();
    let unknown = &shown["unknownToolEffects"];
    assert_eq!(unknown.as_array().map(Vec::len), Some(1), "{shown}");
    assert_eq!(unknown[0]["tool"], "slow");
    assert_eq!(unknown[0]["endpoint"], "crm");
    let status = server.ctx.run(["status", "--json"]).json();
    assert_eq!(
        status["unknownToolEffects"][0]["callId"], unknown[0]["callId"],
        "{status}"
    );
    // Resolved by its owner, the turn is still never continued.
    driver
        .turns_resolve(&turn.id, lapis_protocol::ResolveAs::Failed, true)
        .unwrap();
    let err = driver
        .turns_continue(&lapis_protocol::params::TurnsContinue {
            turn_id: turn.id.clone(),
            prompt: "go on".into(),
            command_id: "c2".into(),
            max_turn_seconds: None,
            expect: None,
        })
        .unwrap_err();
    assert_eq!(code(err), "tool_effect_unknown");
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    drop(serving.join());
    let invoked: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .chain(again.lock().unwrap().iter())
        .filter(|s| s.starts_with("invoke"))
        .cloned()
        .collect();
    assert_eq!(
        invoked.len(),
        1,
        "the handler ran at most once: {invoked:?}"
    );
    let tickets = tickets(&ledger);
    server.finish(&[], &tickets);
}

#[test]
fn refusals_have_their_codes_and_a_ticket_reaches_only_its_own_session() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("mcp");
    let server = Server::start_full(json!({}), json!({ "tooled": agent(&ledger) }));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (_seen, serving) = serve_crm(&server, "editor", stop.clone());
    let mut editor = app(&server, OWNER, "editor");
    // Schema limits and shapes, at registration.
    let mut big = crm();
    big.endpoint = "big".into();
    big.tools[0].input_schema = json!({"type": "object", "description": "x".repeat(20_000)});
    assert_eq!(
        code(editor.tools_register(big).unwrap_err()),
        "tool_limit_exceeded"
    );
    let mut bad = crm();
    bad.endpoint = "bad.name".into();
    assert_eq!(
        code(editor.tools_register(bad).unwrap_err()),
        "tool_invalid"
    );
    // A restricted thread binds none; another application sees none.
    assert_eq!(
        code(create(&mut editor, true, &["crm"]).unwrap_err()),
        "tools_restricted"
    );
    let mut other = app(&server, OWNER, "other-app");
    assert_eq!(
        code(create(&mut other, false, &["crm"]).unwrap_err()),
        "tool_endpoint_unavailable"
    );
    // A turn of the thread gets a ticket; it calls that thread's tools only,
    // from a bridge connection only, and expires with the agent session.
    let thread = create(&mut editor, false, &["crm"]).unwrap();
    let turn = editor.turns_submit(&thread, "c1", "list").unwrap();
    assert_eq!(settle(&mut editor, &turn.id).state, TurnState::Completed);
    let ticket = tickets(&ledger).pop().expect("a ticket");
    let mut bridge = Client::connect(&server.socket()).unwrap();
    bridge.hello_ticket(&ticket).unwrap();
    let listed = bridge
        .request::<lapis_protocol::call::ToolsList>(&lapis_protocol::params::NoParams {})
        .unwrap();
    assert_eq!(listed.tools.len(), 5);
    // No turn runs on that session now: a call is refused, nothing runs.
    let call = lapis_protocol::tools::ToolsCall {
        name: "crm__update".into(),
        arguments: json!({}),
        mcp_request_id: None,
    };
    let err = bridge
        .request::<lapis_protocol::call::ToolsCall>(&call)
        .unwrap_err();
    assert_eq!(code(err), "tool_call_failed");
    // A ticket is no session: application methods are refused.
    let err = bridge.threads_get(&thread).unwrap_err();
    assert_eq!(code(err), "unauthenticated");
    // Nor is a session a bridge.
    let err = editor
        .request::<lapis_protocol::call::ToolsList>(&lapis_protocol::params::NoParams {})
        .unwrap_err();
    assert_eq!(code(err), "unauthenticated");
    // Revoked: the endpoint's connection unregisters it; a new thread
    // cannot bind it.
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut serving_client = serving.join().unwrap();
    assert!(serving_client.tools_unregister("crm").unwrap());
    assert_eq!(
        code(create(&mut editor, false, &["crm"]).unwrap_err()),
        "tool_endpoint_unavailable"
    );
    // The agent session ends with the controller: after a restart the
    // ticket authenticates nothing (replayed from anywhere).
    drop(bridge);
    let mut server = server;
    server.stop();
    server.spawn();
    let mut replay = Client::connect(&server.socket()).unwrap();
    assert_eq!(
        code(replay.hello_ticket(&ticket).unwrap_err()),
        "unauthenticated"
    );
    server.finish(&[], &[ticket]);
}
