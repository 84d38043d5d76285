//! In-process tests of the store: lifecycle, idempotency, scheduling,
//! fencing, resolution, recovery, journal and sessions.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use serde_json::json;

use super::*;
use crate::domain::*;

pub(crate) fn owner() -> Actor {
    Actor::new("owner", "test-app")
}

pub(crate) fn options(home: &Path) -> StoreOptions {
    let mut o = StoreOptions::new(home);
    let t = Arc::new(AtomicI64::new(1_000));
    o.clock = Arc::new(move || t.fetch_add(1, Ordering::Relaxed));
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
    let input = NewThread {
        command_id: None,
        workspace_id: ws.into(),
        provider: "echo".into(),
        approval: ApprovalPolicy::Ask,
        restricted: false,
        retention,
    };
    store.create_thread(&owner(), input).await.unwrap().value
}

pub(crate) fn submit(thread: &str, cmd: &str, prompt: &str) -> SubmitTurn {
    SubmitTurn {
        command_id: cmd.into(),
        thread_id: thread.into(),
        prompt: prompt.into(),
        continues: None,
    }
}

#[tokio::test]
async fn a_turn_runs_through_its_whole_lifecycle_and_is_journaled_in_order() {
    let f = fixture().await;
    let s = &f.store;
    let mut sub = s.subscribe();
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    let r = s
        .submit_turn(&owner(), submit(&th.id, "c1", "hello"))
        .await
        .unwrap();
    assert!(!r.replayed);
    assert_eq!(r.value.state, TurnState::Queued);
    assert_eq!(s.status().queue_depth, 1);

    let claim = s.try_claim().await.unwrap().expect("runnable");
    assert_eq!(claim.prompt, "hello");
    assert_eq!(claim.turn.state, TurnState::Preparing);
    assert!(
        s.try_claim().await.unwrap().is_none(),
        "one turn per workspace"
    );
    assert_eq!(s.status().running_workspaces, vec!["ws1".to_owned()]);

    let d = s.mark_dispatched(&claim.turn.id).await.unwrap();
    assert_eq!(d.state, TurnState::Dispatched);
    assert!(d.dispatched_at.is_some());
    s.mark_running(&claim.turn.id).await.unwrap();
    let e = s
        .append_activity(
            &claim.turn.id,
            EventKind::MessageChunk,
            Some(json!({"text": "hi"})),
        )
        .await
        .unwrap();
    assert_eq!(e.kind, EventKind::MessageChunk);
    let done = s
        .finish_turn(&claim.turn.id, TurnEnd::Completed("end_turn".into()))
        .await
        .unwrap();
    assert!(done.applied);
    assert_eq!(done.turn.state, TurnState::Completed);
    assert_eq!(done.turn.outcome.as_deref(), Some("end_turn"));
    assert!(s.status().running_workspaces.is_empty());

    // Duplicate completion and late chunks change nothing.
    let dup = s
        .finish_turn(&claim.turn.id, TurnEnd::Failed("late".into()))
        .await
        .unwrap();
    assert!(!dup.applied);
    assert_eq!(dup.turn.state, TurnState::Completed);
    let late = s
        .append_activity(&claim.turn.id, EventKind::MessageChunk, Some(json!("x")))
        .await
        .unwrap();
    assert_eq!(late.kind, EventKind::Observation);
    assert_eq!(
        s.get_turn(&claim.turn.id).await.unwrap().state,
        TurnState::Completed
    );

    let page = s
        .replay(ReplayScope::Thread(th.id.clone()), 0, 0)
        .await
        .unwrap();
    let kinds: Vec<_> = page.events.iter().map(|e| e.kind).collect();
    use EventKind as K;
    assert_eq!(
        kinds,
        [
            K::ThreadCreated,
            K::TurnSubmitted,
            K::TurnState,
            K::TurnState,
            K::TurnState,
            K::MessageChunk,
            K::TurnState,
            K::Observation,
            K::Observation
        ]
    );
    let seqs: Vec<_> = page.events.iter().map(|e| e.thread_seq).collect();
    assert_eq!(seqs, (1..=9).collect::<Vec<_>>());
    for e in &page.events {
        let got = sub.recv().await.unwrap();
        assert_eq!(got.seq, e.seq, "published in commit order");
    }
}
