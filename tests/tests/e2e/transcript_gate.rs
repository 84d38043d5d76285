//! Authorizing events wait for the transcript store (issue 42 item 5): a
//! permission answer reaches the agent only once the thread's store
//! acknowledged its append. A store that refuses that append, or lets its
//! deadline pass, fails the turn closed (`transcript_store_failed`) and the
//! agent never receives the answer: the fixture agent reports every answer
//! it gets as a message chunk, and none is journaled or stored.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lapis_protocol::client::{CallbackError, TranscriptHandler};
use lapis_protocol::transcript::store::{
    TranscriptAppend, TranscriptFetch, TranscriptPayloads, TranscriptRegister,
};
use lapis_protocol::{EventKind, Retention, TurnState};
use serde_json::json;

use crate::acp::arg;
use crate::policy::{app, settle};
use crate::serve_support::{OWNER, Server};

/// How the store answers the append of a `permission_decided` event.
#[derive(Clone, Copy)]
enum OnDecision {
    /// With an error.
    Refuse,
    /// Not before its deadline: it waits until the test ends.
    Stall,
}

/// A store that keeps everything but permission decisions.
struct Picky {
    kept: Arc<Mutex<Vec<TranscriptAppend>>>,
    on_decision: OnDecision,
    /// Told when a decision's append arrived; the stall waits on `release`.
    arrived: mpsc::Sender<()>,
    release: Arc<Mutex<mpsc::Receiver<()>>>,
}

impl TranscriptHandler for Picky {
    fn append(&mut self, call: &TranscriptAppend) -> Result<(), CallbackError> {
        if call.event.kind == EventKind::PermissionDecided {
            let _ = self.arrived.send(());
            if let OnDecision::Stall = self.on_decision {
                let _ = self.release.lock().unwrap().recv();
            }
            return Err(CallbackError("not kept".into()));
        }
        self.kept.lock().unwrap().push(call.clone());
        Ok(())
    }

    fn fetch(&mut self, _call: &TranscriptFetch) -> Result<TranscriptPayloads, CallbackError> {
        Ok(TranscriptPayloads::default())
    }
}

fn the_answer_never_reaches_the_agent(on_decision: OnDecision) {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("prompts");
    let agent = json!({ "command": env!("CARGO_BIN_EXE_fixture-agent"),
        "args": ["--ledger", arg(&ledger), "--permissions", "1"] });
    let server = Server::start_full(json!({}), json!({ "agent": agent }));
    let kept = Arc::new(Mutex::new(Vec::new()));
    let (arrived_tx, arrived) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let store = Picky {
        kept: kept.clone(),
        on_decision,
        arrived: arrived_tx,
        release: Arc::new(Mutex::new(release_rx)),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let serving = serve_vault(&server, store, stop.clone());
    let mut driver = app(&server, OWNER, "lapis-cli");
    let params = lapis_protocol::params::ThreadsCreate::new("proj", "agent")
        .approval(lapis_protocol::ApprovalPolicy::AllowAll)
        .retention(Retention::MetadataOnly)
        .transcript_store("vault");
    let thread = driver.threads_create_with(&params).unwrap().thread;
    let turn = driver.turns_submit(&thread.id, "c1", "ask first").unwrap();
    let turn = settle(&mut driver, &turn.id);
    assert_eq!(turn.state, TurnState::Failed, "{turn:?}");
    assert_eq!(turn.outcome.as_deref(), Some("transcript_store_failed"));
    assert!(turn.dispatched_at.is_some(), "it failed after the boundary");
    arrived.recv().unwrap();
    // The decision is journaled (before it was offered to the store) ...
    let events = driver
        .journal_replay(Some(&thread.id), 0, None)
        .unwrap()
        .events;
    assert!(
        events
            .iter()
            .any(|e| e.kind == EventKind::PermissionDecided),
        "{events:?}"
    );
    // ... but the agent never got it: it reports each answer it receives.
    let reported = |text: &str| text.contains("perm-0=");
    for e in &events {
        let text = e
            .payload
            .as_ref()
            .map(|p| p.to_string())
            .unwrap_or_default();
        assert!(!reported(&text), "the agent got the answer: {e:?}");
    }
    for a in kept.lock().unwrap().iter() {
        let text = a.event.payload.as_ref().map(|p| p.to_string());
        assert!(!reported(&text.unwrap_or_default()), "{a:?}");
        assert_ne!(a.event.kind, EventKind::PermissionDecided);
    }
    stop.store(true, Ordering::SeqCst);
    let _ = release.send(());
    serving.join().unwrap();
    server.finish(&[], &[]);
}

#[test]
fn a_refused_permission_decision_never_reaches_the_agent() {
    the_answer_never_reaches_the_agent(OnDecision::Refuse);
}

#[test]
fn a_permission_decision_past_the_store_deadline_never_reaches_the_agent() {
    the_answer_never_reaches_the_agent(OnDecision::Stall);
}

/// Registers the store `vault` (a 300 ms deadline, which a stall outlives;
/// nothing waits for it to pass) on its own connection and serves `store`
/// there until `stop`.
pub(crate) fn serve_vault(
    server: &Server,
    store: impl TranscriptHandler + Send + 'static,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    serve_vault_within(server, store, stop, 300)
}

/// [`serve_vault`] with the store's deadline `deadline_ms`.
pub(crate) fn serve_vault_within(
    server: &Server,
    mut store: impl TranscriptHandler + Send + 'static,
    stop: Arc<AtomicBool>,
    deadline_ms: u64,
) -> std::thread::JoinHandle<()> {
    let mut client = app(server, OWNER, "lapis-cli");
    client
        .transcript_register(TranscriptRegister {
            port: "vault".into(),
            deadline_ms: Some(deadline_ms),
        })
        .unwrap();
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            if client
                .serve_transcript(&mut store, Some(Duration::from_millis(50)))
                .is_err()
            {
                break;
            }
        }
    })
}
