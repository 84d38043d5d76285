//! Turn lifecycle, idempotency and workspace aliases.

use lapis_protocol::Payload;
use serde_json::json;

use super::*;
use crate::domain::*;
use crate::store::*;

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

    let d = s
        .mark_dispatched(&claim.turn.id, super::binding())
        .await
        .unwrap();
    assert_eq!(d.state, TurnState::Dispatched);
    assert!(d.dispatched_at.is_some());
    s.mark_running(&claim.turn.id).await.unwrap();
    let e = s
        .append_activity(
            &claim.turn.id,
            Payload::from_value(EventKind::MessageChunk, json!({"text": "hi"})),
        )
        .on_turn()
        .await
        .unwrap();
    assert!(matches!(e, crate::store::Recorded::OnTurn), "{e:?}");
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
        .finish_turn(
            &claim.turn.id,
            TurnEnd::Failed(lapis_protocol::OutcomeCode::AgentError),
        )
        .await
        .unwrap();
    assert!(!dup.applied);
    assert_eq!(dup.turn.state, TurnState::Completed);
    let late = s
        .append_activity(
            &claim.turn.id,
            Payload::from_value(EventKind::MessageChunk, json!("x")),
        )
        .on_turn()
        .await
        .unwrap();
    // Kept as a late observation (in the replay below), and told apart by
    // name, not by its kind.
    assert!(
        matches!(late, crate::store::Recorded::TurnEnded),
        "{late:?}"
    );
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
            K::UserMessage,
            K::TurnState,
            K::TurnPrepared,
            K::TurnState,
            K::TurnState,
            K::MessageChunk,
            K::TurnState,
            K::Observation,
            K::Observation
        ]
    );
    let seqs: Vec<_> = page.events.iter().map(|e| e.thread_seq).collect();
    assert_eq!(seqs, (1..=11).collect::<Vec<_>>());
    for e in &page.events {
        let got = sub.recv().await.unwrap();
        assert_eq!(got.seq, e.seq, "published in commit order");
    }
}

#[tokio::test]
async fn command_ids_are_idempotent_per_principal_with_input_digest() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    let a = s
        .submit_turn(&owner(), submit(&th.id, "c1", "p"))
        .await
        .unwrap();
    let b = s
        .submit_turn(&owner(), submit(&th.id, "c1", "p"))
        .await
        .unwrap();
    assert!(b.replayed);
    assert_eq!(a.value.id, b.value.id);
    let err = s
        .submit_turn(&owner(), submit(&th.id, "c1", "other"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "conflict");
    // Another principal has its own command-id space (and threads).
    let other = Actor::new("bob", "app");
    let th_bob = super::thread_of(s, &other, &ws.id, Retention::Full).await;
    let c = s
        .submit_turn(&other, submit(&th_bob.id, "c1", "p"))
        .await
        .unwrap();
    assert!(!c.replayed);
    assert_ne!(c.value.id, a.value.id);
    assert_eq!(s.list_turns(TurnFilter::default()).await.unwrap().len(), 2);

    // Thread creation with a command id replays too.
    let input = NewThread {
        command_id: Some("t1".into()),
        workspace_id: ws.id.clone(),
        provider: "echo".into(),
        approval: ApprovalPolicy::AllowAll,
        restricted: true,
        retention: Retention::Full,
        mcp_servers: Vec::new(),
        ports: Default::default(),
        thread_id: None,
        permission_timeout_seconds: None,
        budget: None,
    };
    let t1 = s.create_thread(&owner(), input.clone()).await.unwrap();
    let t2 = s.create_thread(&owner(), input.clone()).await.unwrap();
    assert!(t2.replayed);
    assert_eq!(t1.value, t2.value);
    let changed = NewThread {
        provider: "other".into(),
        ..input
    };
    assert_eq!(
        s.create_thread(&owner(), changed).await.unwrap_err().code(),
        "conflict"
    );
}

#[tokio::test]
async fn workspaces_are_canonical_and_aliases_are_refused() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    std::os::unix::fs::symlink(f.dir.path().join("ws1"), f.dir.path().join("link")).unwrap();
    let err = s
        .add_workspace("ws2", &f.dir.path().join("link"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "workspace_alias");
    let again = s
        .add_workspace("ws1", &f.dir.path().join("link"))
        .await
        .unwrap();
    assert!(again.replayed);
    assert_eq!(again.value, ws);
    std::fs::create_dir(f.dir.path().join("other")).unwrap();
    let err = s
        .add_workspace("ws1", &f.dir.path().join("other"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "conflict");
    assert_eq!(
        s.add_workspace("bad id", f.dir.path())
            .await
            .unwrap_err()
            .code(),
        "invalid_request"
    );
    assert_eq!(
        s.add_workspace("ws3", &f.dir.path().join("missing"))
            .await
            .unwrap_err()
            .code(),
        "invalid_request"
    );
    assert_eq!(s.list_workspaces().await.unwrap(), vec![ws]);
    let th = NewThread {
        command_id: None,
        workspace_id: "nope".into(),
        provider: "echo".into(),
        approval: ApprovalPolicy::Ask,
        restricted: false,
        retention: Retention::Full,
        mcp_servers: Vec::new(),
        ports: Default::default(),
        thread_id: None,
        permission_timeout_seconds: None,
        budget: None,
    };
    assert_eq!(
        s.create_thread(&owner(), th).await.unwrap_err().code(),
        "not_found"
    );
}

/// Transitions return the row as the store now holds it, built without
/// reading it back: every step's answer equals a fresh read.
#[tokio::test]
async fn every_transition_returns_the_row_as_stored() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    let queued = s
        .submit_turn(&owner(), submit(&th.id, "c1", "hello"))
        .await
        .unwrap()
        .value;
    let stored = |t: &Turn| {
        let mut t = t.clone();
        t.user_message = None;
        t
    };
    let fresh = |id: String| async move {
        let mut t = s.get_turn(&id).await.unwrap();
        t.user_message = None;
        t
    };
    assert_eq!(stored(&queued), fresh(queued.id.clone()).await);
    let claim = s.try_claim().await.unwrap().expect("runnable");
    assert!(claim.turn.prepared.is_some());
    assert_eq!(stored(&claim.turn), fresh(queued.id.clone()).await);
    let d = s
        .mark_dispatched(&queued.id, super::binding())
        .await
        .unwrap();
    assert_eq!(d.agent_session_id.as_deref(), Some("sess-1"));
    assert_eq!(stored(&d), fresh(queued.id.clone()).await);
    let r = s.mark_running(&queued.id).await.unwrap();
    assert_eq!(stored(&r.turn), fresh(queued.id.clone()).await);
    let done = s
        .finish_turn(&queued.id, TurnEnd::Completed("end_turn".into()))
        .await
        .unwrap();
    assert_eq!(done.turn.state, TurnState::Completed);
    assert_eq!(stored(&done.turn), fresh(queued.id.clone()).await);
}

/// A configure without a budget serializes (and so digests) as it did
/// before budgets existed; clearing one is an explicit `null`.
#[test]
fn a_patch_without_a_budget_keeps_its_receipt_digest_input() {
    let plain = serde_json::to_string(&crate::domain::ThreadPatch::default()).unwrap();
    assert!(!plain.contains("budget"), "{plain}");
    let cleared = crate::domain::ThreadPatch {
        budget: Some(None),
        ..Default::default()
    };
    let cleared = serde_json::to_string(&cleared).unwrap();
    assert!(cleared.contains("\"budget\":null"), "{cleared}");
}
