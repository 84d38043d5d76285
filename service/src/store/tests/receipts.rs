//! Uniform idempotency: receipts keyed by (principal, application, command
//! id) for every mutation, replaying the first answer.

use super::*;
use crate::domain::*;
use crate::store::*;

/// A turn of `th` whose outcome was lost (fenced).
async fn fenced(s: &Store, th: &str, cmd: &str) -> Turn {
    let t = s
        .submit_turn(&owner(), submit(th, cmd, "p"))
        .await
        .unwrap()
        .value;
    s.try_claim().await.unwrap().unwrap();
    s.mark_dispatched(&t.id, super::binding()).await.unwrap();
    s.finish_turn(
        &t.id,
        TurnEnd::Unknown(lapis_protocol::OutcomeCode::AgentExited),
    )
    .await
    .unwrap()
    .turn
}

#[tokio::test]
async fn command_ids_are_scoped_to_the_application() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    let a = s
        .submit_turn(&owner(), submit(&th.id, "same", "p"))
        .await
        .unwrap();
    // The same principal through another application: its own id space
    // (and its own threads: the owner's is not its to submit on).
    let other = Actor::new("owner", "other-app");
    let foreign = s
        .submit_turn(&other, submit(&th.id, "same", "different prompt"))
        .await
        .unwrap_err();
    assert_eq!(foreign.code(), "not_found");
    let ws2 = workspace(s, f.dir.path(), "ws2").await;
    let th2 = super::thread_of(s, &other, &ws2.id, Retention::Full).await;
    let b = s
        .submit_turn(&other, submit(&th2.id, "same", "different prompt"))
        .await
        .unwrap();
    assert!(!b.replayed);
    assert_ne!(a.value.id, b.value.id);
    // turns.get {commandId} finds each application's own turn, nobody else's.
    assert_eq!(
        s.turn_by_command(&owner(), "same").await.unwrap().id,
        a.value.id
    );
    assert_eq!(
        s.turn_by_command(&other, "same").await.unwrap().id,
        b.value.id
    );
    let stranger = Actor::new("bob", "test-app");
    assert_eq!(
        s.turn_by_command(&stranger, "same")
            .await
            .unwrap_err()
            .code(),
        "not_found"
    );
    assert_eq!(
        s.turn_by_command(&owner(), "never")
            .await
            .unwrap_err()
            .code(),
        "not_found"
    );
}

#[tokio::test]
async fn configure_replays_its_first_answer_and_conflicts_on_other_input() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    let patch = ThreadPatch {
        approval: Some(ApprovalPolicy::AllowAll),
        ..Default::default()
    };
    let first = s
        .configure_thread(&owner(), &th.id, 1, patch.clone(), Some("cfg-1"))
        .await
        .unwrap();
    assert!(!first.replayed);
    assert_eq!(first.value.version, 2);
    // The answer was lost; a later change moved the thread on. The retry
    // replays the first answer instead of failing on the stale version.
    let later = ThreadPatch {
        restricted: Some(true),
        ..Default::default()
    };
    s.configure_thread(&owner(), &th.id, 2, later, None)
        .await
        .unwrap();
    let again = s
        .configure_thread(&owner(), &th.id, 1, patch.clone(), Some("cfg-1"))
        .await
        .unwrap();
    assert!(again.replayed);
    assert_eq!(again.value, first.value);
    assert_eq!(s.get_thread(&th.id).await.unwrap().version, 3);
    let other = ThreadPatch {
        approval: Some(ApprovalPolicy::Ask),
        ..Default::default()
    };
    assert_eq!(
        s.configure_thread(&owner(), &th.id, 1, other, Some("cfg-1"))
            .await
            .unwrap_err()
            .code(),
        "conflict"
    );
    // A refused configure leaves no receipt: the id stays usable.
    assert_eq!(
        s.configure_thread(&owner(), &th.id, 1, patch.clone(), Some("cfg-2"))
            .await
            .unwrap_err()
            .code(),
        "conflict"
    );
    let ok = s
        .configure_thread(&owner(), &th.id, 3, patch, Some("cfg-2"))
        .await
        .unwrap();
    assert_eq!((ok.replayed, ok.value.version), (false, 4));
}

#[tokio::test]
async fn cancel_and_resolve_replay_instead_of_conflicting() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    let lost = fenced(s, &th.id, "t1").await;
    let r1 = s
        .resolve_turn(&owner(), &lost.id, ResolveAs::Failed, true, Some("res-1"))
        .await
        .unwrap();
    assert_eq!((r1.replayed, r1.value.state), (false, TurnState::Failed));
    let r2 = s
        .resolve_turn(&owner(), &lost.id, ResolveAs::Failed, true, Some("res-1"))
        .await
        .unwrap();
    assert!(r2.replayed);
    assert_eq!(r2.value, r1.value);
    assert_eq!(
        s.resolve_turn(
            &owner(),
            &lost.id,
            ResolveAs::Cancelled,
            true,
            Some("res-1")
        )
        .await
        .unwrap_err()
        .code(),
        "conflict"
    );
    // Without a command id a second resolution is a conflict as before.
    assert_eq!(
        s.resolve_turn(&owner(), &lost.id, ResolveAs::Failed, true, None)
            .await
            .unwrap_err()
            .code(),
        "conflict"
    );

    let lost = fenced(s, &th.id, "t2").await;
    let c1 = s
        .cancel_turn(&owner(), &lost.id, Some("can-1"))
        .await
        .unwrap();
    assert_eq!(c1.value.state, TurnState::Cancelled);
    let c2 = s
        .cancel_turn(&owner(), &lost.id, Some("can-1"))
        .await
        .unwrap();
    assert!(c2.replayed);
    assert_eq!(c2.value, c1.value);
    // The command id of a cancel is not a resolve's.
    assert_eq!(
        s.resolve_turn(
            &owner(),
            &lost.id,
            ResolveAs::Cancelled,
            true,
            Some("can-1")
        )
        .await
        .unwrap_err()
        .code(),
        "conflict"
    );
    // One audit row per resolution, none for the replays.
    let audits: i64 = rusqlite::Connection::open(f.dir.path().join("home").join(DB_FILE))
        .unwrap()
        .query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
        .unwrap();
    assert_eq!(audits, 2);
}

#[tokio::test]
async fn workspace_registration_and_external_commands_have_receipts() {
    let f = fixture().await;
    let s = &f.store;
    let dir = f.dir.path().join("proj");
    std::fs::create_dir_all(&dir).unwrap();
    let app = owner();
    let a = s
        .add_workspace_as("proj", canonical(&dir), Some((&app, "ws-1")))
        .await
        .unwrap();
    assert!(!a.replayed);
    let b = s
        .add_workspace_as("proj", canonical(&dir), Some((&app, "ws-1")))
        .await
        .unwrap();
    assert!(b.replayed);
    assert_eq!(a.value, b.value);
    let other = f.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    assert_eq!(
        s.add_workspace_as("other", canonical(&other), Some((&app, "ws-1")))
            .await
            .unwrap_err()
            .code(),
        "conflict"
    );

    // A command the store does not run (a permission answer) is recorded
    // after it took effect and replayed from then on.
    let th = thread(s, "proj", Retention::Full).await;
    let t = s
        .submit_turn(&app, submit(&th.id, "c1", "p"))
        .await
        .unwrap()
        .value;
    let parts = |o: &str| {
        vec![
            "permission.respond".to_owned(),
            t.id.clone(),
            "r1".into(),
            o.into(),
        ]
    };
    let kind = CommandKind::PermissionRespond;
    assert_eq!(
        s.replay_command(&app, "perm-1", kind, parts("allow"))
            .await
            .unwrap(),
        None
    );
    let answer = serde_json::json!({ "accepted": true });
    s.record_command(&app, "perm-1", kind, parts("allow"), &t.id, answer.clone())
        .await
        .unwrap();
    assert_eq!(
        s.replay_command(&app, "perm-1", kind, parts("allow"))
            .await
            .unwrap(),
        Some(answer)
    );
    assert_eq!(
        s.replay_command(&app, "perm-1", kind, parts("reject"))
            .await
            .unwrap_err()
            .code(),
        "conflict"
    );
    // Every receipt survives a reopen's validation.
    let home = f.dir.path().join("home");
    drop(f.store);
    let s = Store::open(options(&home)).unwrap();
    assert_eq!(s.open_report().validated.turns, 1);
}

fn canonical(dir: &std::path::Path) -> String {
    crate::store::canonical_workspace_dir(dir).unwrap()
}
