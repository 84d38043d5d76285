//! `turns.continue` of a store-bound prior after a restart: the journal no
//! longer holds the prior's content, so the controller fetches it from the
//! thread's transcript store and lets it authorize the continuation only
//! when every payload hashes to the `event_hash` its chained row records.
//! A tampered payload is refused `transcript_unverified` naming its event
//! (nothing written, the agent never asked); the honest store's content
//! continues the thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use lapis_protocol::client::{Client, ClientError};
use lapis_protocol::params::TurnsContinue;
use lapis_protocol::{EventKind, Retention, Turn, TurnState};
use serde_json::json;

use crate::policy::{app, settle};
use crate::serve_support::{OWNER, Server};
use crate::transcript_store::{Kept, Vault, agent, params, prompts, serve};

fn continue_turn(client: &mut Client, prior: &str, cmd: &str) -> Result<Turn, ClientError> {
    client.turns_continue(&TurnsContinue {
        turn_id: prior.to_owned(),
        command_id: cmd.to_owned(),
        prompt: "go on".into(),
        max_turn_seconds: None,
        expect: None,
    })
}

#[test]
fn a_continuation_after_a_restart_is_authorized_only_by_verified_store_content() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("prompts");
    let mut server = Server::start_full(json!({}), json!({ "agent": agent(&ledger) }));
    let kept: Kept = Arc::default();
    let tamper = Arc::new(Mutex::new(None));
    let vault = || Vault {
        kept: kept.clone(),
        tamper: tamper.clone(),
        hold: None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let serving = serve(&server, None, vault(), stop.clone());
    let mut driver = app(&server, OWNER, "lapis-cli");
    let thread = driver
        .threads_create_with(&params(Retention::MetadataOnly))
        .unwrap()
        .thread;
    let prior = driver
        .turns_submit(&thread.id, "c1", "keep this safe")
        .unwrap();
    let prior = settle(&mut driver, &prior.id);
    assert_eq!(prior.state, TurnState::Completed, "{}", server.log_text());
    let content = driver
        .journal_replay(Some(&thread.id), 0, None)
        .unwrap()
        .events
        .iter()
        .filter(|e| e.kind.is_content() && e.payload.is_some())
        .count();
    lapis_e2e::wait::until("the store has every content event", || {
        kept.lock().unwrap().len() >= content
    });

    // A restart between the turns: the prior's content lives in the store only.
    stop.store(true, Ordering::SeqCst);
    serving.join().unwrap();
    drop(driver);
    server.stop();
    server.spawn();
    let mut driver = app(&server, OWNER, "lapis-cli");
    let err = continue_turn(&mut driver, &prior.id, "n0").unwrap_err();
    assert_eq!(
        err.code(),
        "transcript_unavailable",
        "no store connected: {err}"
    );

    // The store answers one payload altered: refused, naming that event.
    let chunk = kept
        .lock()
        .unwrap()
        .iter()
        .find(|a| a.event.kind == EventKind::MessageChunk)
        .unwrap()
        .event
        .thread_seq;
    *tamper.lock().unwrap() = Some(chunk);
    let stop = Arc::new(AtomicBool::new(false));
    let serving = serve(&server, None, vault(), stop.clone());
    let err = continue_turn(&mut driver, &prior.id, "n1").unwrap_err();
    assert_eq!(err.code(), "transcript_unverified", "{err}");
    let ClientError::Rpc(rpc) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(rpc.data.as_ref().unwrap()["seq"], json!(chunk), "{rpc:?}");
    assert_eq!(
        driver.turns_list(Some(&thread.id)).unwrap().len(),
        1,
        "nothing was written"
    );
    assert_eq!(prompts(&ledger), 1, "the agent was never asked");

    // The honest store's content verifies: the thread continues, and the
    // same command id was never taken by the refusal.
    *tamper.lock().unwrap() = None;
    let next = continue_turn(&mut driver, &prior.id, "n1").unwrap();
    assert_eq!(next.continues.as_deref(), Some(prior.id.as_str()));
    let next = settle(&mut driver, &next.id);
    assert_eq!(
        next.state,
        TurnState::Completed,
        "{next:?}\n{}",
        server.log_text()
    );
    assert_eq!(prompts(&ledger), 2);
    let asked = std::fs::read_to_string(&ledger).unwrap();
    assert!(
        asked.lines().last().unwrap().contains("keep this safe"),
        "the new session got the prior's digest, restored from the store: {asked}"
    );

    stop.store(true, Ordering::SeqCst);
    serving.join().unwrap();
    server.finish(&[], &[]);
}
