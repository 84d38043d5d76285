//! Identities, not names (issue 43 item 5): a thread records the identity
//! of each port it binds when it is created; once the application
//! registers another port under the same name (another description: here
//! another deadline), `threads.attach` fails `binding_mismatch` naming the
//! member, and a turn's claim fails `binding_mismatch` before the dispatch
//! boundary (the agent never sees the prompt). The same description again
//! is the same port, and the turn runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use lapis_protocol::client::ClientError;
use lapis_protocol::params::ThreadsCreate;
use lapis_protocol::{ThreadExpect, TurnState};
use serde_json::json;

use crate::acp::arg;
use crate::context::serve_notes;
use crate::policy::{app, settle};
use crate::serve_support::{OWNER, Server};

#[test]
fn a_port_registered_again_with_another_identity_is_a_binding_mismatch() {
    let scratch = tempfile::tempdir().unwrap();
    let seen = scratch.path().join("seen");
    let agent = json!({
        "command": env!("CARGO_BIN_EXE_fixture-agent"),
        "args": ["--ledger", arg(&seen)],
    });
    let server = Server::start_full(json!({}), json!({ "rich": agent }));
    let mut driver = app(&server, OWNER, "lapis-cli");
    let stop = Arc::new(AtomicBool::new(false));
    let (_, serving) = serve_notes(&server, "lapis-cli", Some(5_000), None, stop.clone());
    let mut p = ThreadsCreate::new("proj", "rich");
    p.ports.context = Some("notes".into());
    let created = driver.threads_create_with(&p).unwrap().thread;
    let recorded = created.ports.identities.context.clone();
    assert!(
        recorded
            .as_deref()
            .is_some_and(|i| i.starts_with("context_")),
        "{created:?}"
    );
    // The same name, another description.
    stop.store(true, Ordering::SeqCst);
    drop(serving.join().unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let (asked, serving) = serve_notes(&server, "lapis-cli", Some(9_000), None, stop.clone());
    let err = driver
        .threads_attach(&created.id, &ThreadExpect::default())
        .unwrap_err();
    assert!(matches!(err, ClientError::Rpc(_)), "{err}");
    assert_eq!(err.code(), "binding_mismatch", "{err}");
    let turn = driver.turns_submit(&created.id, "c1", "plan").unwrap();
    let turn = settle(&mut driver, &turn.id);
    assert_eq!(turn.state, TurnState::Failed, "{turn:?}");
    assert_eq!(turn.outcome.as_deref(), Some("binding_mismatch"));
    assert!(
        asked.lock().unwrap().is_empty(),
        "the other port was never asked"
    );
    assert!(!seen.exists() || std::fs::read_to_string(&seen).unwrap().is_empty());
    stop.store(true, Ordering::SeqCst);
    drop(serving.join().unwrap());
    // The recorded description again: the same port, the turn runs.
    let stop = Arc::new(AtomicBool::new(false));
    let (asked, serving) = serve_notes(&server, "lapis-cli", Some(5_000), None, stop.clone());
    driver
        .threads_attach(&created.id, &ThreadExpect::default())
        .unwrap();
    let turn = driver.turns_submit(&created.id, "c2", "plan").unwrap();
    let turn = settle(&mut driver, &turn.id);
    assert_eq!(turn.state, TurnState::Completed, "{turn:?}");
    assert_eq!(asked.lock().unwrap().len(), 1);
    stop.store(true, Ordering::SeqCst);
    drop(serving.join().unwrap());
    server.finish(&[], &[]);
}
