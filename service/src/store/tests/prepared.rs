//! A turn's prepared configuration: made at claim from the thread and the
//! provider's facts, committed with the claim (column and `turn_prepared`
//! event), kept under metadata-only retention, never a sign of progress.

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::domain::*;
use crate::store::*;
use lapis_protocol::config::ProviderSpec;
use lapis_protocol::mcp::McpTransport;
use lapis_protocol::{ApprovalSuppression, McpEndpoint, PreparedConfig};

/// A preparer that knows one provider, `echo`, with a restricted mode, a
/// vcs identity and one MCP server identity.
fn facts(allow_unrestricted: bool) -> Preparer {
    let spec = ProviderSpec::from_json(
        "echo",
        &json!({
            "command": "/bin/true",
            "restrictedMode": "plan",
            "allowUnrestricted": allow_unrestricted,
            "vcsIdentity": {"name": "Lapis Bot", "email": "bot@example.com"},
        }),
    )
    .unwrap();
    Arc::new(move |thread: &Thread| {
        (thread.provider == "echo").then(|| ProviderFacts {
            spec: spec.clone(),
            fingerprint: "f".repeat(64),
            mcp_servers: vec![McpEndpoint {
                name: "files".into(),
                transport: McpTransport::Stdio,
                identity: "a".repeat(64),
            }],
            mcp: Ok(Vec::new()),
        })
    })
}

async fn restricted_thread(store: &Store, ws: &str, retention: Retention) -> Thread {
    let input = NewThread {
        command_id: None,
        workspace_id: ws.into(),
        provider: "echo".into(),
        approval: ApprovalPolicy::AllowAll,
        restricted: true,
        retention,
        mcp_servers: Vec::new(),
        ports: Default::default(),
        thread_id: None,
        permission_timeout_seconds: None,
        budget: None,
    };
    store.create_thread(&owner(), input).await.unwrap().value
}

/// The `turn_prepared` events of a turn, with the claim's state event.
async fn turn_events(store: &Store, thread: &str, turn: &str) -> Vec<JournalEvent> {
    let owner = ReplayScope::Owner {
        principal: "owner".into(),
        application: None,
    };
    let page = store.replay(owner, 0, 0).await.unwrap();
    page.events
        .into_iter()
        .filter(|e| e.thread_id == thread && e.turn_id.as_deref() == Some(turn))
        .collect()
}

#[tokio::test]
async fn the_claim_commits_the_prepared_configuration_and_its_event_together() {
    let f = fixture().await;
    let ws = workspace(&f.store, f.dir.path(), "ws1").await;
    let open = thread(&f.store, &ws.id, Retention::Full).await;
    let t = f
        .store
        .submit_turn(&owner(), submit(&open.id, "c1", "hi"))
        .await
        .unwrap()
        .value;
    assert_eq!(t.prepared, None, "a queued turn is not prepared");
    let claim = f.store.try_claim_with(facts(false)).await.unwrap().unwrap();
    let p = claim.turn.prepared.clone().expect("prepared at claim");
    assert_eq!(
        p,
        PreparedConfig {
            provider: "echo".into(),
            provider_fingerprint: Some("f".repeat(64)),
            approval: lapis_protocol::PreparedApproval {
                requested: ApprovalPolicy::Ask,
                effective: ApprovalPolicy::Ask,
                suppressed: vec![],
            },
            restricted: false,
            restricted_mode: None,
            allow_unrestricted: false,
            retention: Retention::Full,
            vcs_identity: Some("Lapis Bot".into()),
            thread_version: 1,
            mcp_servers: vec![McpEndpoint {
                name: "files".into(),
                transport: McpTransport::Stdio,
                identity: "a".repeat(64),
            }],
        }
    );
    assert_eq!(claim.provider.unwrap().fingerprint, "f".repeat(64));
    // Stored: `turns.get` reads what the claim wrote.
    assert_eq!(
        f.store.get_turn(&t.id).await.unwrap().prepared,
        Some(p.clone())
    );
    // Journaled right after the claim's state change, same value, and the
    // turn is preparing, not running.
    let events = turn_events(&f.store, &open.id, &t.id).await;
    let kinds: Vec<_> = events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            EventKind::TurnSubmitted,
            EventKind::UserMessage,
            EventKind::TurnState,
            EventKind::TurnPrepared
        ]
    );
    assert_eq!(
        events[2].at, events[3].at,
        "one transaction, one clock read"
    );
    assert_eq!(
        events[3].payload.as_ref().unwrap(),
        &serde_json::to_value(&p).unwrap()
    );
    let now = f.store.get_turn(&t.id).await.unwrap();
    assert_eq!((now.state, now.started_at), (TurnState::Preparing, None));
    // Snapshots carry it on their recent turns.
    let snap = f.store.thread_snapshot(&open.id).await.unwrap();
    assert_eq!(snap.recent_turns[0].prepared, Some(p));
}

#[tokio::test]
async fn restricted_turns_record_suppressed_approval_and_the_requested_mode() {
    let f = fixture().await;
    let ws = workspace(&f.store, f.dir.path(), "ws1").await;
    let th = restricted_thread(&f.store, &ws.id, Retention::Full).await;
    f.store
        .submit_turn(&owner(), submit(&th.id, "c1", "hi"))
        .await
        .unwrap();
    let p = f
        .store
        .try_claim_with(facts(true))
        .await
        .unwrap()
        .unwrap()
        .turn
        .prepared
        .unwrap();
    assert!(p.restricted);
    assert_eq!(p.approval.requested, ApprovalPolicy::AllowAll);
    assert_eq!(p.approval.effective, ApprovalPolicy::Ask);
    assert_eq!(p.approval.suppressed, [ApprovalSuppression::Restricted]);
    assert_eq!(p.restricted_mode.as_deref(), Some("plan"));
    assert!(p.allow_unrestricted);
}

#[tokio::test]
async fn an_unknown_provider_is_recorded_without_facts() {
    let f = fixture().await;
    let ws = workspace(&f.store, f.dir.path(), "ws1").await;
    let th = thread(&f.store, &ws.id, Retention::Full).await;
    f.store
        .submit_turn(&owner(), submit(&th.id, "c1", "hi"))
        .await
        .unwrap();
    let claim = f.store.try_claim().await.unwrap().unwrap();
    assert!(claim.provider.is_none());
    let p = claim.turn.prepared.unwrap();
    assert_eq!(p.provider, "echo");
    assert_eq!(
        (p.provider_fingerprint, p.vcs_identity, p.mcp_servers),
        (None, None, vec![])
    );
}

#[tokio::test]
async fn the_record_survives_metadata_only_retention_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (th, turn, prepared);
    {
        let s = Store::open(options(&home)).unwrap();
        let ws = workspace(&s, dir.path(), "ws1").await;
        th = restricted_thread(&s, &ws.id, Retention::MetadataOnly).await;
        turn = s
            .submit_turn(&owner(), submit(&th.id, "c1", "private prompt"))
            .await
            .unwrap()
            .value;
        prepared = s
            .try_claim_with(facts(false))
            .await
            .unwrap()
            .unwrap()
            .turn
            .prepared
            .unwrap();
        s.mark_dispatched(&turn.id, super::binding()).await.unwrap();
        s.finish_turn(&turn.id, TurnEnd::Completed("end_turn".into()))
            .await
            .unwrap();
        s.close().await;
    }
    let s = Store::open(options(&home)).unwrap();
    assert_eq!(
        s.get_turn(&turn.id).await.unwrap().prepared,
        Some(prepared.clone())
    );
    let events = turn_events(&s, &th.id, &turn.id).await;
    let asked = events
        .iter()
        .find(|e| e.kind == EventKind::UserMessage)
        .unwrap();
    assert!(asked.payload_unavailable, "content is gone after a restart");
    let kept = events
        .iter()
        .find(|e| e.kind == EventKind::TurnPrepared)
        .unwrap();
    assert!(!kept.payload_unavailable);
    assert_eq!(
        kept.payload.as_ref().unwrap(),
        &serde_json::to_value(&prepared).unwrap()
    );
}

#[tokio::test]
async fn each_turn_records_the_thread_version_it_was_claimed_under() {
    let f = fixture().await;
    let ws = workspace(&f.store, f.dir.path(), "ws1").await;
    let th = thread(&f.store, &ws.id, Retention::Full).await;
    let first = f
        .store
        .submit_turn(&owner(), submit(&th.id, "c1", "one"))
        .await
        .unwrap()
        .value;
    // A configure while the turn waits is refused: the turn runs under v1.
    let patch = ThreadPatch {
        approval: Some(ApprovalPolicy::AllowAll),
        ..Default::default()
    };
    let err = f
        .store
        .configure_thread(&owner(), &th.id, 1, patch.clone(), None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "conflict");
    f.store.try_claim_with(facts(false)).await.unwrap().unwrap();
    f.store
        .mark_dispatched(&first.id, super::binding())
        .await
        .unwrap();
    f.store
        .finish_turn(&first.id, TurnEnd::Completed("end_turn".into()))
        .await
        .unwrap();
    f.store
        .configure_thread(&owner(), &th.id, 1, patch, None)
        .await
        .unwrap();
    let second = f
        .store
        .submit_turn(&owner(), submit(&th.id, "c2", "two"))
        .await
        .unwrap()
        .value;
    f.store.try_claim_with(facts(false)).await.unwrap().unwrap();
    let one = f.store.get_turn(&first.id).await.unwrap().prepared.unwrap();
    let two = f
        .store
        .get_turn(&second.id)
        .await
        .unwrap()
        .prepared
        .unwrap();
    assert_eq!(
        (one.thread_version, one.approval.requested),
        (1, ApprovalPolicy::Ask)
    );
    assert_eq!(
        (
            two.thread_version,
            two.approval.effective,
            two.approval.suppressed
        ),
        (
            2,
            ApprovalPolicy::AllowAll,
            vec![ApprovalSuppression::StructuredInput]
        )
    );
}

#[tokio::test]
async fn a_malformed_prepared_record_fails_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let turn;
    {
        let s = Store::open(options(&home)).unwrap();
        let ws = workspace(&s, dir.path(), "ws1").await;
        let th = thread(&s, &ws.id, Retention::Full).await;
        turn = s
            .submit_turn(&owner(), submit(&th.id, "c1", "hi"))
            .await
            .unwrap()
            .value;
        s.try_claim_with(facts(false)).await.unwrap().unwrap();
        s.close().await;
    }
    let conn = rusqlite::Connection::open(home.join(DB_FILE)).unwrap();
    conn.execute(
        "UPDATE turns SET prepared = '{\"provider\": 7}' WHERE id = ?1",
        [&turn.id],
    )
    .unwrap();
    drop(conn);
    let err = Store::open(options(&home)).unwrap_err();
    assert_eq!(err.code(), "store_invalid_row");
    assert!(err.to_string().contains("prepared"), "{err}");
}

/// A configure race: two callers that saw the same version change the
/// thread at once; exactly one wins, the other gets `conflict`, and the
/// next turn is prepared under the winner's version.
#[tokio::test]
async fn of_two_configures_racing_on_one_version_exactly_one_wins() {
    let f = fixture().await;
    let ws = workspace(&f.store, f.dir.path(), "ws1").await;
    let th = thread(&f.store, &ws.id, Retention::Full).await;
    let patch = |approval| ThreadPatch {
        approval: Some(approval),
        ..Default::default()
    };
    let me = owner();
    let (a, b) = tokio::join!(
        f.store
            .configure_thread(&me, &th.id, 1, patch(ApprovalPolicy::AllowAll), None),
        f.store
            .configure_thread(&me, &th.id, 1, patch(ApprovalPolicy::Ask), None),
    );
    let (won, lost) = match (a, b) {
        (Ok(w), Err(l)) | (Err(l), Ok(w)) => (w.value, l),
        other => panic!("exactly one must win: {other:?}"),
    };
    assert_eq!(lost.code(), "conflict");
    assert_eq!(won.version, 2);
    f.store
        .submit_turn(&owner(), submit(&th.id, "c1", "hi"))
        .await
        .unwrap();
    let p = f
        .store
        .try_claim_with(facts(false))
        .await
        .unwrap()
        .unwrap()
        .turn
        .prepared
        .unwrap();
    assert_eq!((p.thread_version, p.approval.requested), (2, won.approval));
}
