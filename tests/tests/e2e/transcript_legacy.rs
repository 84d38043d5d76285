//! `journal.replay` of a store-bound thread whose content was journaled
//! before chain version 2 (the schema-17 fixture, `tests/fixtures/
//! journal-v17`): such a row's `event_hash` is outside the hash chain, so
//! one edited at rest still verifies. Its content is never shown, even
//! when the transcript store answers a payload that hashes to the edited
//! value — the rule `turns.continue` already applies
//! (`transcript_unverified`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lapis_e2e::TestContext;
use lapis_protocol::client::{CallbackError, TranscriptHandler};
use lapis_protocol::transcript::event_hash;
use lapis_protocol::transcript::store::{
    TranscriptAppend, TranscriptFetch, TranscriptPayloads, TranscriptRegister, TranscriptStored,
};
use lapis_protocol::{EventKind, JournalEvent};
use serde_json::{Value, json};

use crate::policy::app;
use crate::serve_support::{OWNER, Server};

/// A store that answers `payload` for event `thread_seq` (nothing else).
struct Forger {
    thread_seq: u64,
    payload: Value,
}

impl TranscriptHandler for Forger {
    fn append(&mut self, _: &TranscriptAppend) -> Result<(), CallbackError> {
        Ok(())
    }

    fn fetch(&mut self, call: &TranscriptFetch) -> Result<TranscriptPayloads, CallbackError> {
        let payloads = call
            .thread_seqs
            .iter()
            .filter(|n| **n == self.thread_seq)
            .map(|n| TranscriptStored {
                thread_seq: *n,
                payload: self.payload.clone(),
            })
            .collect();
        Ok(TranscriptPayloads { payloads })
    }
}

#[test]
fn a_replay_never_shows_store_content_for_a_row_from_before_chain_version_2() {
    let ctx = TestContext::new();
    let home = ctx.home().join(".lapis/ai-controller");
    std::fs::create_dir_all(&home).unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/journal-v17");
    for name in [lapis_service::store::DB_FILE, "controller.db-anchor"] {
        std::fs::copy(fixture.join(name), home.join(name)).unwrap();
    }
    let db = home.join(lapis_service::store::DB_FILE);
    let thread: String = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT id FROM threads WHERE transcript_store = 'vault'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let mut server = Server::start_in(ctx, json!({}), json!({}));
    // A store that has nothing: the prompt stays unavailable.
    let (stop, serving) = serve(&server, 0, Value::Null);
    let mut reader = app(&server, OWNER, "test-app");
    let page = reader.journal_replay(Some(&thread), 0, None).unwrap();
    let prompt: JournalEvent = page
        .events
        .iter()
        .find(|e| e.kind == EventKind::UserMessage)
        .unwrap()
        .clone();
    assert!(prompt.payload_unavailable, "{prompt:?}");
    stop.store(true, Ordering::SeqCst);
    serving.join().unwrap();

    // At rest, the prompt's row gets the hash of a forged payload: a
    // version-1 row's event_hash is outside the chain, so the journal
    // still verifies.
    drop(reader);
    server.stop();
    let forged = json!({"text": "never said"});
    let mut done = prompt.clone();
    done.payload = Some(forged.clone());
    done.payload_unavailable = false;
    let hash = event_hash(&done).unwrap();
    let edited = rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE events SET event_hash = ?1 WHERE seq = ?2",
            rusqlite::params![hash.as_str(), prompt.seq as i64],
        )
        .unwrap();
    assert_eq!(edited, 1);
    server.spawn();

    // The store answers the forged payload, which hashes to the row's
    // value: the event stays unavailable, the page goes on.
    let (stop, serving) = serve(&server, prompt.thread_seq, forged);
    let mut reader = app(&server, OWNER, "test-app");
    let page = reader.journal_replay(Some(&thread), 0, None).unwrap();
    let shown = page
        .events
        .iter()
        .find(|e| e.thread_seq == prompt.thread_seq)
        .unwrap();
    assert!(
        shown.payload_unavailable && shown.payload.is_none(),
        "a pre-v2 row's content is never shown: {shown:?}\n{}",
        server.log_text()
    );
    assert_eq!(page.events.len(), 10, "the page went on: {:?}", page.events);
    assert!(
        server
            .log_text()
            .contains("predates the chain's event hashes"),
        "{}",
        server.log_text()
    );

    stop.store(true, Ordering::SeqCst);
    serving.join().unwrap();
    drop(reader);
    server.stop();
}

/// Serves a store named `vault` for the fixture's application until the
/// returned flag is set, answering `payload` for `thread_seq`.
fn serve(
    server: &Server,
    thread_seq: u64,
    payload: Value,
) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let mut store = app(server, OWNER, "test-app");
    store
        .transcript_register(TranscriptRegister {
            port: "vault".into(),
            deadline_ms: None,
        })
        .unwrap();
    let mut forger = Forger {
        thread_seq,
        payload,
    };
    let flag = stop.clone();
    let serving = std::thread::spawn(move || {
        while !flag.load(Ordering::SeqCst) {
            if store
                .serve_transcript(&mut forger, Some(Duration::from_millis(50)))
                .is_err()
            {
                break;
            }
        }
    });
    (stop, serving)
}
