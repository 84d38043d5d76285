//! Consumer transcript stores through the real binary: an application
//! registers a store (`transcript.register`) and serves
//! `transcript.append` / `transcript.fetch`; a metadata-only thread binds
//! it by name. The prompt is appended (and acknowledged) before the agent
//! sees it and the agent's output as it is journaled, each with its
//! canonical hash; after a restart a replay fetches the content back and
//! shows only what hashes to the recorded value. A late append stops the
//! turn before dispatch, and so does a cancel while the store answers; a
//! disconnected store leaves the content unavailable and the next turn
//! failed before dispatch.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lapis_protocol::client::{CallbackError, Client, TranscriptHandler};
use lapis_protocol::params::ThreadsCreate;
use lapis_protocol::transcript::store::{
    TranscriptAppend, TranscriptFetch, TranscriptPayloads, TranscriptRegister, TranscriptStored,
};
use lapis_protocol::transcript::{assert_transcript, event_hash};
use lapis_protocol::{EventKind, JournalEvent, Retention, ThreadExpect, TurnState};
use serde_json::{Value, json};

use crate::acp::arg;
use crate::policy::{app, settle};
use crate::serve_support::{OWNER, Server};

/// What the store was given, in order.
pub(crate) type Kept = Arc<Mutex<Vec<TranscriptAppend>>>;

/// A store in memory. `tamper`: the `thread_seq` whose payload `fetch`
/// answers altered. `hold`: an append says it arrived on the sender, then
/// waits for the receiver (a store that does not answer in time).
pub(crate) struct Vault {
    pub(crate) kept: Kept,
    pub(crate) tamper: Arc<Mutex<Option<u64>>>,
    pub(crate) hold: Option<(mpsc::Sender<()>, mpsc::Receiver<()>)>,
}

impl TranscriptHandler for Vault {
    fn append(&mut self, call: &TranscriptAppend) -> Result<(), CallbackError> {
        if let Some((arrived, hold)) = &self.hold {
            let _ = arrived.send(());
            let _ = hold.recv();
            return Err(CallbackError("too late".into()));
        }
        self.kept.lock().unwrap().push(call.clone());
        Ok(())
    }

    fn fetch(&mut self, call: &TranscriptFetch) -> Result<TranscriptPayloads, CallbackError> {
        let kept = self.kept.lock().unwrap();
        let tamper = *self.tamper.lock().unwrap();
        let payloads = call
            .thread_seqs
            .iter()
            .filter_map(|n| {
                let found = kept.iter().find(|a| a.event.thread_seq == *n)?;
                let mut payload = found.event.payload.clone()?;
                if tamper == Some(*n) {
                    payload = json!({"text": "not what was said"});
                }
                Some(TranscriptStored {
                    thread_seq: *n,
                    payload,
                })
            })
            .collect();
        Ok(TranscriptPayloads { payloads })
    }
}

/// Serves a store named `vault` on its own connection until `stop`.
pub(crate) fn serve(
    server: &Server,
    deadline_ms: Option<u64>,
    vault: Vault,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let mut client = app(server, OWNER, "lapis-cli");
    let port = client
        .transcript_register(TranscriptRegister {
            port: "vault".into(),
            deadline_ms,
        })
        .unwrap();
    assert!(port.port.identity.starts_with("transcript_"));
    let mut vault = vault;
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            if client
                .serve_transcript(&mut vault, Some(Duration::from_millis(50)))
                .is_err()
            {
                break;
            }
        }
    })
}

pub(crate) fn agent(ledger: &Path) -> Value {
    json!({ "command": env!("CARGO_BIN_EXE_fixture-agent"),
        "args": ["--ledger", arg(ledger), "--chunks", "3", "--thoughts", "1"] })
}

pub(crate) fn params(retention: Retention) -> ThreadsCreate {
    ThreadsCreate::new("proj", "agent")
        .approval(lapis_protocol::ApprovalPolicy::AllowAll)
        .retention(retention)
        .transcript_store("vault")
}

pub(crate) fn prompts(ledger: &Path) -> usize {
    std::fs::read_to_string(ledger).map_or(0, |t| t.lines().count())
}

fn replay(
    client: &mut Client,
    thread: &str,
) -> Result<Vec<JournalEvent>, lapis_protocol::client::ClientError> {
    Ok(client.journal_replay(Some(thread), 0, None)?.events)
}

#[test]
fn a_store_keeps_the_content_and_a_replay_after_a_restart_shows_only_what_it_can_prove() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("prompts");
    let mut server = Server::start_full(json!({}), json!({ "agent": agent(&ledger) }));
    let kept: Kept = Arc::default();
    let tamper = Arc::new(Mutex::new(None));
    let stop = Arc::new(AtomicBool::new(false));
    let vault = || Vault {
        kept: kept.clone(),
        tamper: tamper.clone(),
        hold: None,
    };
    let serving = serve(&server, None, vault(), stop.clone());
    let mut driver = app(&server, OWNER, "lapis-cli");
    // Only a metadata-only thread binds a store.
    let err = driver
        .threads_create_with(&params(Retention::Full))
        .unwrap_err();
    assert_eq!(err.code(), "invalid_request", "{err}");
    let thread = driver
        .threads_create_with(&params(Retention::MetadataOnly))
        .unwrap()
        .thread;
    assert_eq!(thread.ports.transcript_store.as_deref(), Some("vault"));
    let expect = ThreadExpect {
        ports: lapis_protocol::PortsExpect {
            transcript_store: Some("other".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    assert_eq!(
        driver
            .threads_attach(&thread.id, &expect)
            .unwrap_err()
            .code(),
        "binding_mismatch"
    );
    let turn = driver
        .turns_submit(&thread.id, "c1", "keep this safe")
        .unwrap();
    let turn = settle(&mut driver, &turn.id);
    assert_eq!(
        turn.state,
        TurnState::Completed,
        "{turn:?}\n{}",
        server.log_text()
    );
    assert_eq!(prompts(&ledger), 1);
    let live = replay(&mut driver, &thread.id).unwrap();

    // The store got the prompt first, then the agent's output, each the
    // journal's event with its canonical hash.
    let stored: Vec<TranscriptAppend> = {
        // The output feed runs beside the turn: wait for the last chunk.
        let content = live
            .iter()
            .filter(|e| e.kind.is_content() && e.payload.is_some())
            .count();
        lapis_e2e::wait::until("the store has every content event", || {
            kept.lock().unwrap().len() >= content
        });
        kept.lock().unwrap().clone()
    };
    assert_eq!(stored[0].event.kind, EventKind::UserMessage);
    for kind in [EventKind::MessageChunk, EventKind::ThoughtChunk] {
        assert!(stored.iter().any(|a| a.event.kind == kind), "{kind:?}");
    }
    for a in &stored {
        let journaled = live
            .iter()
            .find(|e| e.thread_seq == a.event.thread_seq)
            .unwrap();
        assert_eq!(&a.event, journaled);
        assert_eq!(a.hash, event_hash(journaled).unwrap().as_str());
        assert_eq!(a.envelope.thread_id, thread.id);
        assert_eq!(a.envelope.application, "lapis-cli");
    }
    let seqs: Vec<u64> = stored.iter().map(|a| a.event.thread_seq).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "in journal order: {seqs:?}"
    );

    // A restart: the journal no longer has the content, the store has.
    stop.store(true, Ordering::SeqCst);
    serving.join().unwrap();
    drop(driver);
    server.stop();
    server.spawn();
    let mut driver = app(&server, OWNER, "lapis-cli");
    let err = replay(&mut driver, &thread.id).unwrap_err();
    assert_eq!(
        err.code(),
        "transcript_unavailable",
        "no store connected: {err}"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let serving = serve(&server, None, vault(), stop.clone());
    let after = replay(&mut driver, &thread.id).unwrap();
    assert_eq!(after, live, "every payload fetched back and verified");
    // What the store kept, with the journal's metadata, is the journal.
    let merged: Vec<JournalEvent> = after
        .iter()
        .map(|e| {
            stored
                .iter()
                .find(|a| a.event.thread_seq == e.thread_seq)
                .map_or_else(|| e.clone(), |a| a.event.clone())
        })
        .collect();
    let check = assert_transcript(&after, &merged).unwrap();
    assert_eq!(check.verified, after.len());

    // A payload altered in the store is refused: that event only.
    let chunk = stored
        .iter()
        .find(|a| a.event.kind == EventKind::MessageChunk)
        .unwrap()
        .event
        .thread_seq;
    *tamper.lock().unwrap() = Some(chunk);
    let refused = replay(&mut driver, &thread.id).unwrap();
    for e in &refused {
        if e.thread_seq == chunk {
            assert!(e.payload_unavailable && e.payload.is_none(), "{e:?}");
        } else {
            assert_eq!(Some(e), live.iter().find(|l| l.thread_seq == e.thread_seq));
        }
    }

    // The store disconnects: replay is unavailable, and the next turn fails
    // before its agent sees the prompt.
    stop.store(true, Ordering::SeqCst);
    serving.join().unwrap();
    let err = replay(&mut driver, &thread.id).unwrap_err();
    assert_eq!(err.code(), "transcript_unavailable");
    let turn = driver.turns_submit(&thread.id, "c2", "and this").unwrap();
    let turn = settle(&mut driver, &turn.id);
    assert_eq!(turn.state, TurnState::Failed);
    assert_eq!(turn.outcome.as_deref(), Some("transcript_store_failed"));
    assert_eq!(prompts(&ledger), 1, "the agent never got the second prompt");
    server.finish(&[], &[]);
}

/// A server and a store that holds its answers until `release`.
struct Holding {
    scratch: tempfile::TempDir,
    server: Server,
    /// One message per append the store got.
    arrived: mpsc::Receiver<()>,
    release: mpsc::Sender<()>,
    kept: Kept,
    stop: Arc<AtomicBool>,
    serving: std::thread::JoinHandle<()>,
}

fn holding(deadline_ms: Option<u64>) -> Holding {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("prompts");
    let server = Server::start_full(json!({}), json!({ "agent": agent(&ledger) }));
    let (release, hold) = mpsc::channel();
    let (arrived_tx, arrived) = mpsc::channel();
    let kept: Kept = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let vault = Vault {
        kept: kept.clone(),
        tamper: Arc::default(),
        hold: Some((arrived_tx, hold)),
    };
    let serving = serve(&server, deadline_ms, vault, stop.clone());
    Holding {
        scratch,
        server,
        arrived,
        release,
        kept,
        stop,
        serving,
    }
}

impl Holding {
    fn end(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.release.send(()).unwrap();
        self.serving.join().unwrap();
        self.server.finish(&[], &[]);
    }
}

#[test]
fn an_append_past_its_deadline_fails_the_turn_before_dispatch() {
    let h = holding(Some(300));
    let ledger = h.scratch.path().join("prompts");
    let mut driver = app(&h.server, OWNER, "lapis-cli");
    let thread = driver
        .threads_create_with(&params(Retention::MetadataOnly))
        .unwrap()
        .thread;
    let turn = driver.turns_submit(&thread.id, "c1", "never run").unwrap();
    let turn = settle(&mut driver, &turn.id);
    assert_eq!(turn.state, TurnState::Failed, "{turn:?}");
    assert_eq!(turn.outcome.as_deref(), Some("transcript_store_failed"));
    assert!(turn.dispatched_at.is_none(), "{turn:?}");
    h.arrived.recv().unwrap();
    assert_eq!(prompts(&ledger), 0, "the agent never got the prompt");
    assert!(h.kept.lock().unwrap().is_empty());
    h.end();
}

#[test]
fn a_cancel_while_the_store_answers_abandons_the_append_and_the_turn() {
    let h = holding(None);
    let ledger = h.scratch.path().join("prompts");
    let mut driver = app(&h.server, OWNER, "lapis-cli");
    let thread = driver
        .threads_create_with(&params(Retention::MetadataOnly))
        .unwrap()
        .thread;
    let turn = driver.turns_submit(&thread.id, "c1", "never run").unwrap();
    // The store has the append and does not answer (its deadline is 120 s).
    h.arrived.recv().unwrap();
    driver.turns_cancel(&turn.id).unwrap();
    let turn = settle(&mut driver, &turn.id);
    assert_eq!(turn.state, TurnState::Cancelled, "{turn:?}");
    assert_eq!(turn.outcome.as_deref(), Some("cancelled_before_dispatch"));
    assert!(turn.dispatched_at.is_none(), "{turn:?}");
    assert_eq!(prompts(&ledger), 0, "the agent never got the prompt");
    h.end();
}

/// A feed that falls behind the journal's broadcast (a one-event buffer
/// here, and a store answering each append in turn) reads what it skipped
/// back from the journal: the store still gets every content event of the
/// turn, once each, in journal order.
#[test]
fn a_feed_that_falls_behind_reads_back_what_it_skipped() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("prompts");
    let mut chatty = agent(&ledger);
    chatty["args"] = json!(["--ledger", arg(&ledger), "--chunks", "60"]);
    let server = Server::start_full(json!({ "subscriberBuffer": 1 }), json!({ "agent": chatty }));
    let kept: Kept = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let vault = Vault {
        kept: kept.clone(),
        tamper: Arc::default(),
        hold: None,
    };
    let serving = serve(&server, None, vault, stop.clone());
    let mut driver = app(&server, OWNER, "lapis-cli");
    let thread = driver
        .threads_create_with(&params(Retention::MetadataOnly))
        .unwrap()
        .thread;
    let turn = driver.turns_submit(&thread.id, "c1", "talk a lot").unwrap();
    assert_eq!(settle(&mut driver, &turn.id).state, TurnState::Completed);
    let live = replay(&mut driver, &thread.id).unwrap();
    let want: Vec<u64> = live
        .iter()
        .filter(|e| e.kind.is_content() && e.payload.is_some())
        .map(|e| e.thread_seq)
        .collect();
    assert!(want.len() > 60, "{}", want.len());
    lapis_e2e::wait::until("the store has every content event", || {
        kept.lock().unwrap().len() >= want.len()
    });
    let got: Vec<u64> = kept
        .lock()
        .unwrap()
        .iter()
        .map(|a| a.event.thread_seq)
        .collect();
    assert_eq!(got, want, "every content event once, in journal order");
    assert!(
        server.log_text().contains("read back what it skipped"),
        "the feed did fall behind"
    );
    stop.store(true, Ordering::SeqCst);
    serving.join().unwrap();
    server.finish(&[], &[]);
}

/// A store bound by `threads.configure` records its registration identity
/// as one bound at creation does (the controller's: the call has no member
/// for it, an unknown one is refused), so a store registered again with another description is
/// `binding_mismatch` at the next attach.
#[test]
fn a_store_rebound_by_configure_records_its_identity() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("prompts");
    let server = Server::start_full(json!({}), json!({ "agent": agent(&ledger) }));
    let mut driver = app(&server, OWNER, "lapis-cli");
    let thread = driver
        .threads_create_with(
            &ThreadsCreate::new("proj", "agent").retention(Retention::MetadataOnly),
        )
        .unwrap()
        .thread;
    assert!(thread.ports.identities.transcript_store.is_none());
    let mut port = app(&server, OWNER, "lapis-cli");
    let registered = port
        .transcript_register(TranscriptRegister {
            port: "vault".into(),
            deadline_ms: None,
        })
        .unwrap();
    let configured = driver
        .call_value(
            "threads.configure",
            json!({ "threadId": thread.id, "expectedVersion": thread.version,
                "transcriptStore": "vault" }),
        )
        .unwrap();
    assert_eq!(
        configured["thread"]["portIdentities"]["transcriptStore"],
        registered.port.identity.as_str(),
        "{configured}"
    );
    let shown = driver.threads_get(&thread.id).unwrap().thread;
    assert_eq!(
        shown.ports.identities.transcript_store.as_deref(),
        Some(registered.port.identity.as_str())
    );
    driver
        .threads_attach(&thread.id, &ThreadExpect::of(&shown))
        .unwrap();
    // The same name registered again with another description.
    drop(port);
    let mut port = app(&server, OWNER, "lapis-cli");
    port.transcript_register(TranscriptRegister {
        port: "vault".into(),
        deadline_ms: Some(1234),
    })
    .unwrap();
    let err = driver
        .threads_attach(&thread.id, &ThreadExpect::of(&shown))
        .unwrap_err();
    assert_eq!(err.code(), "binding_mismatch", "{err}");
    drop(port);
    server.finish(&[], &[]);
}
