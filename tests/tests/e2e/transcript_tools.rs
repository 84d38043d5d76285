//! Tool results wait for the transcript store (issue 42 item 5): on a
//! thread bound to a store, an application tool's result reaches the agent
//! only once the store acknowledged its `tool_call_finished` note. A store
//! that refuses that note, or lets its deadline pass, gets the agent an
//! error result (`transcript_store_failed`) and fails the turn closed; the
//! fixture agent reports each tool result it gets as a message chunk. A
//! cancel while the store holds the note ends the turn cancelled: the tool
//! ran once and its result never reaches the agent, even once the store
//! acknowledges it after all.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use lapis_protocol::client::{CallbackError, TranscriptHandler};
use lapis_protocol::transcript::store::{TranscriptAppend, TranscriptFetch, TranscriptPayloads};
use lapis_protocol::{EventKind, Retention, TurnState};
use serde_json::json;

use crate::policy::{app, settle};
use crate::serve_support::{OWNER, Server};
use crate::tools::{agent, serve_crm};

#[derive(Clone, Copy, PartialEq)]
enum OnResult {
    Ack,
    Refuse,
    Stall,
    /// Says it arrived, then waits for the release and acknowledges.
    Hold,
}

struct Store {
    kept: Arc<Mutex<Vec<TranscriptAppend>>>,
    on_result: OnResult,
    release: Arc<Mutex<mpsc::Receiver<()>>>,
    arrived: Option<mpsc::Sender<()>>,
}

impl TranscriptHandler for Store {
    fn append(&mut self, call: &TranscriptAppend) -> Result<(), CallbackError> {
        if call.event.kind == EventKind::ToolCallFinished {
            match self.on_result {
                OnResult::Ack => {}
                OnResult::Refuse => return Err(CallbackError("not kept".into())),
                OnResult::Stall => {
                    let _ = self.release.lock().unwrap().recv();
                    return Err(CallbackError("too late".into()));
                }
                OnResult::Hold => {
                    if let Some(arrived) = &self.arrived {
                        let _ = arrived.send(());
                    }
                    let _ = self.release.lock().unwrap().recv();
                }
            }
        }
        self.kept.lock().unwrap().push(call.clone());
        Ok(())
    }

    fn fetch(&mut self, _call: &TranscriptFetch) -> Result<TranscriptPayloads, CallbackError> {
        Ok(TranscriptPayloads::default())
    }
}

fn a_tool_result_waits_for_the_store(on_result: OnResult) {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("mcp");
    let server = Server::start_full(json!({}), json!({ "tooled": agent(&ledger) }));
    let stop = Arc::new(AtomicBool::new(false));
    let (seen, tools) = serve_crm(&server, "lapis-cli", stop.clone());
    let kept = Arc::new(Mutex::new(Vec::new()));
    let (release, release_rx) = mpsc::channel();
    let store = Store {
        kept: kept.clone(),
        on_result,
        release: Arc::new(Mutex::new(release_rx)),
        arrived: None,
    };
    let serving = crate::transcript_gate::serve_vault(&server, store, stop.clone());
    let mut driver = app(&server, OWNER, "lapis-cli");
    let params = lapis_protocol::params::ThreadsCreate::new("proj", "tooled")
        .tools(["crm"])
        .retention(Retention::MetadataOnly)
        .transcript_store("vault");
    let thread = driver.threads_create_with(&params).unwrap().thread;
    let turn = driver
        .turns_submit(&thread.id, "c1", "call crm__find {\"q\":\"ada\"}")
        .unwrap();
    let turn = settle(&mut driver, &turn.id);
    // The tool ran once either way.
    let invoked = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.starts_with("invoke find"))
        .count();
    assert_eq!(invoked, 1);
    let said: String = kept
        .lock()
        .unwrap()
        .iter()
        .filter(|a| a.event.kind == EventKind::MessageChunk)
        .filter_map(|a| a.event.payload.as_ref().map(|p| p.to_string()))
        .collect();
    if on_result == OnResult::Ack {
        assert_eq!(turn.state, TurnState::Completed, "{turn:?}");
        assert!(said.contains("find ok"), "{said}");
    } else {
        assert_eq!(turn.state, TurnState::Failed, "{turn:?}");
        assert_eq!(turn.outcome.as_deref(), Some("transcript_store_failed"));
        assert!(
            !said.contains("find ok"),
            "the agent got the result: {said}"
        );
    }
    stop.store(true, Ordering::SeqCst);
    let _ = release.send(());
    serving.join().unwrap();
    let _ = tools.join();
    server.finish(&[], &[]);
}

#[test]
fn an_acknowledged_tool_result_reaches_the_agent() {
    a_tool_result_waits_for_the_store(OnResult::Ack);
}

#[test]
fn a_refused_tool_result_never_reaches_the_agent() {
    a_tool_result_waits_for_the_store(OnResult::Refuse);
}

#[test]
fn a_tool_result_past_the_store_deadline_never_reaches_the_agent() {
    a_tool_result_waits_for_the_store(OnResult::Stall);
}

#[test]
fn a_cancel_while_a_tool_result_waits_for_the_store_ends_the_turn_cancelled() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("mcp");
    let mut tooled = agent(&ledger);
    // After its calls the agent waits for the cancel, then answers it.
    tooled["args"].as_array_mut().unwrap().push("--hang".into());
    let server = Server::start_full(json!({}), json!({ "tooled": tooled }));
    let stop = Arc::new(AtomicBool::new(false));
    let (seen, tools) = serve_crm(&server, "lapis-cli", stop.clone());
    let kept = Arc::new(Mutex::new(Vec::new()));
    let (release, release_rx) = mpsc::channel();
    let (arrived_tx, arrived) = mpsc::channel();
    let store = Store {
        kept: kept.clone(),
        on_result: OnResult::Hold,
        release: Arc::new(Mutex::new(release_rx)),
        arrived: Some(arrived_tx),
    };
    // A deadline the hold never reaches: only the cancel ends the wait.
    let serving = crate::transcript_gate::serve_vault_within(&server, store, stop.clone(), 120_000);
    let mut driver = app(&server, OWNER, "lapis-cli");
    let params = lapis_protocol::params::ThreadsCreate::new("proj", "tooled")
        .tools(["crm"])
        .retention(Retention::MetadataOnly)
        .transcript_store("vault");
    let thread = driver.threads_create_with(&params).unwrap().thread;
    let turn = driver
        .turns_submit(&thread.id, "c1", "call crm__find {\"q\":\"ada\"}")
        .unwrap();
    // The store holds the result's note: the cancel lands while it waits.
    arrived.recv().unwrap();
    driver.turns_cancel(&turn.id).unwrap();
    let turn = settle(&mut driver, &turn.id);
    assert_eq!(
        turn.state,
        TurnState::Cancelled,
        "{turn:?}\n{}",
        server.log_text()
    );
    // The store acknowledges after all: nothing reaches the agent.
    release.send(()).unwrap();
    lapis_e2e::wait::until("the store kept the note", || {
        kept.lock()
            .unwrap()
            .iter()
            .any(|a| a.event.kind == EventKind::ToolCallFinished)
    });
    let invoked = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.starts_with("invoke find"))
        .count();
    assert_eq!(invoked, 1, "the tool ran once");
    let said = crate::tools::reply(&mut driver, &thread.id);
    assert!(said.contains("tool crm__find error"), "{said}");
    assert!(
        !said.contains("find ok"),
        "the agent got the result: {said}"
    );
    let again = driver.turns_get(&turn.id).unwrap();
    assert_eq!(again.state, TurnState::Cancelled);
    stop.store(true, Ordering::SeqCst);
    serving.join().unwrap();
    let _ = tools.join();
    server.finish(&[], &[]);
}
