//! Context ports through the real binary: an application registers a
//! context port and serves `context.prepare` on its own connection, a
//! thread binds it by name, and each turn's agent reads the prepared blocks
//! before the prompt text — in one labelled text block, whether or not it
//! advertises `embeddedContext` — with the budget's cut recorded; a
//! port that is gone, late or another application's fails the turn
//! `context_unavailable` before the dispatch boundary (the agent never
//! sees the prompt).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lapis_protocol::client::{CallbackError, Client, ClientError, ContextHandler};
use lapis_protocol::context::{
    CONTEXT_BUDGET_BYTES, ContextBlock, ContextPrepare, ContextPrepared, ContextRegister,
};
use lapis_protocol::params::ThreadsCreate;
use lapis_protocol::{EventKind, Payload, Retention, ThreadExpect, TurnState};
use serde_json::{Value, json};

use crate::acp::arg;
use crate::policy::{app, settle};
use crate::serve_support::{OWNER, Server};

/// What the application was asked, in order.
pub(crate) type Asked = Arc<Mutex<Vec<ContextPrepare>>>;

/// Answers every turn with a small profile block and a block larger than
/// the whole budget; sleeps first when `slow`.
struct Notes {
    asked: Asked,
    slow: Option<Duration>,
}

impl ContextHandler for Notes {
    fn prepare(&mut self, call: &ContextPrepare) -> Result<ContextPrepared, CallbackError> {
        self.asked.lock().unwrap().push(call.clone());
        if let Some(d) = self.slow {
            std::thread::sleep(d);
        }
        if call.prompt.contains("refuse") {
            return Err(CallbackError("no context for that".into()));
        }
        Ok(ContextPrepared {
            blocks: vec![
                ContextBlock {
                    id: "profile".into(),
                    text: "Ada prefers tea".into(),
                },
                ContextBlock {
                    id: "history".into(),
                    text: "h".repeat(CONTEXT_BUDGET_BYTES + 100),
                },
            ],
        })
    }
}

/// Registers port `notes` on a new connection of `application` and serves
/// it on a thread until `stop` is set.
pub(crate) fn serve_notes(
    server: &Server,
    application: &str,
    deadline_ms: Option<u64>,
    slow: Option<Duration>,
    stop: Arc<AtomicBool>,
) -> (Asked, std::thread::JoinHandle<Client>) {
    let mut client = app(server, OWNER, application);
    let registered = client
        .context_register(ContextRegister {
            port: "notes".into(),
            deadline_ms,
        })
        .unwrap();
    assert!(registered.port.identity.starts_with("context_"));
    let asked: Asked = Arc::default();
    let mut handler = Notes {
        asked: asked.clone(),
        slow,
    };
    let serving = std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            if client
                .serve_context(&mut handler, Some(Duration::from_millis(50)))
                .is_err()
            {
                break;
            }
        }
        client
    });
    (asked, serving)
}

fn agent(ledger: &Path, embedded: bool) -> Value {
    let mut args = vec!["--ledger".to_owned(), arg(ledger)];
    if embedded {
        args.push("--embedded-context".into());
    }
    json!({ "command": env!("CARGO_BIN_EXE_fixture-agent"), "args": args })
}

fn params(provider: &str, context: Option<&str>) -> ThreadsCreate {
    let mut p = ThreadsCreate::new("proj", provider);
    p.ports.context = context.map(str::to_owned);
    p
}

fn create(
    client: &mut Client,
    provider: &str,
    context: Option<&str>,
    retention: Option<Retention>,
) -> Result<String, ClientError> {
    let mut p = params(provider, context);
    p.retention = retention;
    Ok(client.threads_create_with(&p)?.thread.id)
}

fn ledger(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn code(e: ClientError) -> String {
    assert!(matches!(e, ClientError::Rpc(_)), "not an RPC error: {e}");
    e.code().to_owned()
}

#[test]
fn prepared_context_reaches_the_agent_first_cut_to_the_budget_and_recorded() {
    let scratch = tempfile::tempdir().unwrap();
    let (embedded, plain) = (scratch.path().join("e"), scratch.path().join("p"));
    let server = Server::start_full(
        json!({}),
        json!({ "rich": agent(&embedded, true), "plain": agent(&plain, false) }),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let (asked, serving) = serve_notes(&server, "lapis-cli", None, None, stop.clone());
    let mut driver = app(&server, OWNER, "lapis-cli");
    let thread = create(&mut driver, "rich", Some("notes"), None).unwrap();
    let turn = driver.turns_submit(&thread, "c1", "plan the trip").unwrap();
    let turn = settle(&mut driver, &turn.id);
    assert_eq!(turn.state, TurnState::Completed, "{turn:?}");
    // The application was asked once, with the turn, thread and budget.
    {
        let asked = asked.lock().unwrap();
        assert_eq!(asked.len(), 1);
        assert_eq!(
            (asked[0].turn_id.as_str(), asked[0].thread_id.as_str()),
            (turn.id.as_str(), thread.as_str())
        );
        assert_eq!(asked[0].prompt, "plan the trip");
        assert_eq!(asked[0].budget_bytes, CONTEXT_BUDGET_BYTES);
        assert_eq!(asked[0].workspace_id, "proj");
    }
    // Context first, in one labelled text block even for an agent that
    // takes embedded resources (agents reorder those), the prompt text last
    // and alone; the big block cut so the two fit the budget.
    let lines = ledger(&embedded);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let blocks: Vec<&str> = lines[0].split(" || ").collect();
    assert_eq!(blocks.len(), 2, "{:?}", &lines[0][..200]);
    let kept = CONTEXT_BUDGET_BYTES - "Ada prefers tea".len();
    assert_eq!(
        lapis_e2e::prompt::context_blocks(blocks[0]),
        [
            (
                "lapis://context/notes/profile".to_owned(),
                "Ada prefers tea".to_owned()
            ),
            ("lapis://context/notes/history".to_owned(), "h".repeat(kept)),
        ]
    );
    assert!(!blocks[0].contains("[lapis://"), "no embedded resource");
    assert_eq!(blocks[1], "plan the trip");
    // The journal: the record before the dispatch boundary, with the cut.
    let page = driver.journal_replay(Some(&thread), 0, None).unwrap();
    let kinds: Vec<EventKind> = page.events.iter().map(|e| e.kind).collect();
    let at = |k| kinds.iter().position(|x| *x == k).unwrap();
    let dispatched = page
        .events
        .iter()
        .position(
            |e| matches!(e.body(), Some(Payload::TurnState(s)) if s.to == TurnState::Dispatched),
        )
        .expect("a dispatch boundary");
    assert!(at(EventKind::TurnPrepared) < at(EventKind::ContextPrepared));
    assert!(at(EventKind::ContextPrepared) < dispatched, "{kinds:?}");
    let record = page
        .events
        .iter()
        .find_map(|e| match e.body() {
            Some(Payload::ContextPrepared(r)) => Some(r),
            _ => None,
        })
        .unwrap();
    assert_eq!(record.port, "notes");
    assert!(record.port_identity.starts_with("context_"));
    assert_eq!(
        (record.budget_bytes, record.used_bytes),
        (CONTEXT_BUDGET_BYTES, CONTEXT_BUDGET_BYTES)
    );
    assert_eq!((record.cut_blocks, record.cut_bytes), (1, 100 + 15));
    assert_eq!(record.blocks.len(), 2);
    assert!(!record.blocks[0].cut && record.blocks[1].cut);
    assert_eq!(record.blocks[1].bytes, kept);
    assert_eq!(record.blocks[0].text.as_deref(), Some("Ada prefers tea"));
    assert_eq!(record.blocks[0].sha256.len(), 64);

    // An agent without `embeddedContext` gets the same block, still first;
    // a metadata-only thread's record keeps identities and digests, no text.
    let quiet = create(
        &mut driver,
        "plain",
        Some("notes"),
        Some(Retention::MetadataOnly),
    )
    .unwrap();
    let turn = driver.turns_submit(&quiet, "c2", "again").unwrap();
    assert_eq!(settle(&mut driver, &turn.id).state, TurnState::Completed);
    let lines = ledger(&plain);
    let blocks: Vec<&str> = lines[0].split(" || ").collect();
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    let sent = lapis_e2e::prompt::context_blocks(blocks[0]);
    assert_eq!(sent[0].1, "Ada prefers tea", "{sent:?}");
    assert_eq!(blocks[1], "again");
    let page = driver.journal_replay(Some(&quiet), 0, None).unwrap();
    let record = page
        .events
        .iter()
        .find_map(|e| match e.body() {
            Some(Payload::ContextPrepared(r)) => Some(r),
            _ => None,
        })
        .expect("kept on a metadata-only thread");
    assert!(record.blocks.iter().all(|b| b.text.is_none()), "{record:?}");
    assert_eq!(record.blocks[0].sha256, record_digest("Ada prefers tea"));

    // Reattachment states the binding: another port is `binding_mismatch`.
    let expect = ThreadExpect {
        ports: lapis_protocol::PortsExpect {
            context: Some("other".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let err = driver.threads_attach(&thread, &expect).unwrap_err();
    assert_eq!(code(err), "binding_mismatch");
    let expect = ThreadExpect {
        ports: lapis_protocol::PortsExpect {
            context: Some("notes".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    driver.threads_attach(&thread, &expect).unwrap();
    stop.store(true, Ordering::SeqCst);
    drop(serving.join().unwrap());
    server.finish(&[], &[]);
}

/// The digest the record carries: the SHA-256 of the text passed on.
fn record_digest(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

#[test]
fn a_gone_late_refusing_or_foreign_port_fails_the_turn_before_the_boundary() {
    let scratch = tempfile::tempdir().unwrap();
    let seen = scratch.path().join("seen");
    let server = Server::start_full(json!({}), json!({ "rich": agent(&seen, true) }));
    let mut driver = app(&server, OWNER, "lapis-cli");
    // Not registered: refused at creation.
    let err = create(&mut driver, "rich", Some("notes"), None).unwrap_err();
    assert_eq!(code(err), "context_unavailable");

    // A late port (deadline 200 ms, answering after 2 s).
    let stop = Arc::new(AtomicBool::new(false));
    let (asked, serving) = serve_notes(
        &server,
        "lapis-cli",
        Some(200),
        Some(Duration::from_secs(2)),
        stop.clone(),
    );
    let thread = create(&mut driver, "rich", Some("notes"), None).unwrap();
    let turn = driver.turns_submit(&thread, "c1", "plan").unwrap();
    let turn = settle(&mut driver, &turn.id);
    assert_eq!(turn.state, TurnState::Failed, "{turn:?}");
    assert_eq!(turn.outcome.as_deref(), Some("context_unavailable"));
    assert_eq!(asked.lock().unwrap().len(), 1, "asked once, never again");
    stop.store(true, Ordering::SeqCst);
    drop(serving.join().unwrap());

    // A refusing port, then one whose connection closed (disposal). The
    // same description as the thread bound (its deadline), so the same
    // identity: another one would be `binding_mismatch` (`port_identities`).
    let stop = Arc::new(AtomicBool::new(false));
    let (_, serving) = serve_notes(&server, "lapis-cli", Some(200), None, stop.clone());
    let turn = driver.turns_submit(&thread, "c2", "refuse it").unwrap();
    let turn = settle(&mut driver, &turn.id);
    assert_eq!(turn.outcome.as_deref(), Some("context_unavailable"));
    stop.store(true, Ordering::SeqCst);
    drop(serving.join().unwrap()); // the connection closes: revoked at once
    let turn = driver.turns_submit(&thread, "c3", "plan").unwrap();
    let turn = settle(&mut driver, &turn.id);
    assert_eq!(turn.state, TurnState::Failed);
    assert_eq!(turn.outcome.as_deref(), Some("context_unavailable"));

    // Another application's port is never reached: its own registration
    // does not serve this application's thread, and this application's
    // thread creation does not see it.
    let stop = Arc::new(AtomicBool::new(false));
    let (foreign, serving) = serve_notes(&server, "other-app", None, None, stop.clone());
    let err = create(&mut driver, "rich", Some("notes"), None).unwrap_err();
    assert_eq!(code(err), "context_unavailable");
    let turn = driver.turns_submit(&thread, "c4", "plan").unwrap();
    let turn = settle(&mut driver, &turn.id);
    assert_eq!(turn.outcome.as_deref(), Some("context_unavailable"));
    assert!(foreign.lock().unwrap().is_empty(), "never asked");
    stop.store(true, Ordering::SeqCst);
    drop(serving.join().unwrap());

    // None of those turns reached the agent: no prompt was ever sent, and
    // none passed the boundary.
    assert!(ledger(&seen).is_empty(), "{:?}", ledger(&seen));
    let page = driver.journal_replay(Some(&thread), 0, None).unwrap();
    assert!(
        !page.events.iter().any(
            |e| matches!(e.body(), Some(Payload::TurnState(s)) if s.to == TurnState::Dispatched)
        ),
        "no turn was dispatched"
    );
    server.finish(&[], &[]);
}

#[test]
fn a_reserved_thread_id_lets_a_reconnecting_application_serve_the_same_thread_again() {
    let scratch = tempfile::tempdir().unwrap();
    let seen = scratch.path().join("seen");
    let server = Server::start_full(json!({}), json!({ "rich": agent(&seen, true) }));
    let mut driver = app(&server, OWNER, "lapis-cli");
    // Reserved before anything exists; the same command id, the same id.
    let reserved = driver.threads_reserve("reserve-1").unwrap();
    assert!(reserved.thread_id.starts_with("thr_") && !reserved.replayed);
    let again = driver.threads_reserve("reserve-1").unwrap();
    assert_eq!(
        (again.thread_id.as_str(), again.replayed),
        (reserved.thread_id.as_str(), true)
    );
    assert_ne!(
        driver.threads_reserve("reserve-2").unwrap().thread_id,
        reserved.thread_id
    );
    // Another application can neither use it nor get it by the command id.
    let mut other = app(&server, OWNER, "other-app");
    let foreign = params("rich", None).thread_id(&reserved.thread_id);
    assert_eq!(
        code(other.threads_create_with(&foreign).unwrap_err()),
        "not_found"
    );
    assert_ne!(
        other.threads_reserve("reserve-1").unwrap().thread_id,
        reserved.thread_id
    );
    // The port is set up first, then the thread takes the reserved id.
    let stop = Arc::new(AtomicBool::new(false));
    let (asked, serving) = serve_notes(&server, "lapis-cli", None, None, stop.clone());
    let create = params("rich", Some("notes")).thread_id(&reserved.thread_id);
    let thread = driver.threads_create_with(&create).unwrap().thread;
    assert_eq!(thread.id, reserved.thread_id);
    assert_eq!(thread.ports.context.as_deref(), Some("notes"));
    assert_eq!(
        code(driver.threads_create_with(&create).unwrap_err()),
        "conflict"
    );
    let turn = driver.turns_submit(&thread.id, "c1", "one").unwrap();
    assert_eq!(settle(&mut driver, &turn.id).state, TurnState::Completed);
    // The application goes away (its port with it) and comes back: it asks
    // for its reservation again, gets the same thread, serves it again.
    stop.store(true, Ordering::SeqCst);
    drop(serving.join().unwrap());
    let turn = driver.turns_submit(&thread.id, "c2", "two").unwrap();
    assert_eq!(
        settle(&mut driver, &turn.id).outcome.as_deref(),
        Some("context_unavailable")
    );
    let mut back = app(&server, OWNER, "lapis-cli");
    assert_eq!(
        back.threads_reserve("reserve-1").unwrap().thread_id,
        thread.id
    );
    let stop = Arc::new(AtomicBool::new(false));
    let (asked_again, serving) = serve_notes(&server, "lapis-cli", None, None, stop.clone());
    let turn = driver.turns_submit(&thread.id, "c3", "three").unwrap();
    assert_eq!(settle(&mut driver, &turn.id).state, TurnState::Completed);
    assert_eq!(asked.lock().unwrap().len(), 1);
    assert_eq!(asked_again.lock().unwrap()[0].thread_id, thread.id);
    assert_eq!(
        ledger(&seen).len(),
        2,
        "the refused turn never reached the agent"
    );
    stop.store(true, Ordering::SeqCst);
    drop(serving.join().unwrap());
    server.finish(&[], &[]);
}
