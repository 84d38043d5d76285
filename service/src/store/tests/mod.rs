//! In-process tests of the store: fixtures here; lifecycle, idempotency,
//! scheduling, fencing, resolution and recovery in `lifecycle`; journal,
//! retention, sessions and the instance lock in `journal`.

mod anchor;
mod backup;
mod bundle;
mod chain;
mod configure;
mod continuation;
mod continuation_tools;
mod delete;
mod history;
mod import;
mod inbox;
mod journal;
mod lifecycle;
mod named_ports;
mod owner_page;
mod parking;
mod prepared;
mod receipts;
mod retention;
mod retention_steps;
mod retention_summary;
mod scheduling;
mod sessions;
mod storage;
mod threads_page;
mod transcript;
mod workspaces;

use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::domain::*;

/// Parks the writer thread inside an operation until the returned sender
/// fires, so requests sent meanwhile wait in its channel and are picked up
/// together; await the handle after releasing.
pub(crate) async fn hold_writer(
    store: &Store,
) -> (
    std::sync::mpsc::Sender<()>,
    tokio::task::JoinHandle<StoreResult<Option<()>>>,
) {
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let (started, running) = tokio::sync::oneshot::channel::<()>();
    let s = store.clone();
    let held = tokio::spawn(async move {
        s.op(move |_| {
            let _ = started.send(());
            Ok(gate.recv().ok())
        })
        .await
    });
    running.await.unwrap();
    (release, held)
}

pub(crate) fn owner() -> Actor {
    Actor::new("owner", "test-app")
}

pub(crate) fn options(home: &Path) -> StoreOptions {
    let mut o = StoreOptions::new(home);
    o.clock = Arc::new(ManualClock::ticking(1_000, 1));
    o
}

pub(crate) struct Fixture {
    pub dir: tempfile::TempDir,
    pub store: Store,
}

pub(crate) async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(options(&dir.path().join("home"))).unwrap();
    Fixture { dir, store }
}

pub(crate) async fn workspace(store: &Store, root: &Path, id: &str) -> Workspace {
    let p = root.join(id);
    std::fs::create_dir_all(&p).unwrap();
    store.add_workspace(id, &p).await.unwrap().value
}

pub(crate) async fn thread(store: &Store, ws: &str, retention: Retention) -> Thread {
    thread_of(store, &owner(), ws, retention).await
}

/// A thread owned by `actor`.
pub(crate) async fn thread_of(
    store: &Store,
    actor: &Actor,
    ws: &str,
    retention: Retention,
) -> Thread {
    let input = NewThread {
        command_id: None,
        workspace_id: ws.into(),
        provider: "echo".into(),
        approval: ApprovalPolicy::Ask,
        restricted: false,
        retention,
        mcp_servers: Vec::new(),
        ports: Default::default(),
        thread_id: None,
        permission_timeout_seconds: None,
        budget: None,
    };
    store.create_thread(actor, input).await.unwrap().value
}

pub(crate) fn submit(thread: &str, cmd: &str, prompt: &str) -> SubmitTurn {
    SubmitTurn {
        command_id: cmd.into(),
        thread_id: thread.into(),
        prompt: prompt.into(),
        continues: None,
        max_turn_seconds: None,
    }
}

/// Runs one turn of `thread` to `completed`: its prompt and three reply
/// chunks hold `marker` (so a test can look for content in the file).
pub(crate) async fn finished_turn(s: &Store, thread: &str, cmd: &str, marker: &str) {
    let t = s
        .submit_turn(&owner(), submit(thread, cmd, &format!("say {marker}")))
        .await
        .unwrap()
        .value;
    s.try_claim().await.unwrap().unwrap();
    s.mark_dispatched(&t.id, binding()).await.unwrap();
    for i in 0..3 {
        let text = format!("reply {i} {marker}");
        let chunk = lapis_protocol::Payload::from_value(
            EventKind::MessageChunk,
            serde_json::json!({ "text": text }),
        );
        s.append_activity(&t.id, chunk).await.unwrap();
    }
    s.finish_turn(&t.id, TurnEnd::Completed("end_turn".into()))
        .await
        .unwrap();
}

/// A finished turn of `thread` with `n` message chunks (journaled
/// without waiting for each: only the last append is awaited).
pub(crate) async fn long_turn(s: &Store, thread: &str, cmd: &str, n: usize) {
    let t = s
        .submit_turn(&owner(), submit(thread, cmd, "say"))
        .await
        .unwrap()
        .value;
    s.try_claim().await.unwrap().unwrap();
    s.mark_dispatched(&t.id, binding()).await.unwrap();
    let mut last = None;
    for i in 0..n {
        let chunk = lapis_protocol::Payload::from_value(
            EventKind::MessageChunk,
            serde_json::json!({ "text": format!("chunk {i}") }),
        );
        last = Some(s.append_activity(&t.id, chunk));
    }
    last.unwrap().await.unwrap();
    s.finish_turn(&t.id, TurnEnd::Completed("end_turn".into()))
        .await
        .unwrap();
}

/// A session binding as the engine passes it at the dispatch boundary.
pub(crate) fn binding() -> crate::domain::SessionBinding {
    crate::domain::SessionBinding {
        session_id: "sess-1".into(),
        fingerprint: "0".repeat(64),
        thread_version: 1,
    }
}

/// `thread` as the retention pass sees it.
pub(crate) async fn candidate(s: &Store, thread: &str) -> crate::store::retention::Candidate {
    s.history_candidates()
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.thread == thread)
        .unwrap()
}
