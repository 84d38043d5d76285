//! Scheduling, bounded queue, fencing and resolution, cancel, and recovery
//! at open (configure: `configure.rs`; parked claims: `parking.rs`).

use super::*;
use crate::domain::*;
use crate::store::*;

#[tokio::test]
async fn bounded_queue_refuses_with_queue_full() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(&dir.path().join("home"));
    o.queue_capacity = 2;
    let s = Store::open(o).unwrap();
    let ws = workspace(&s, dir.path(), "ws1").await;
    let th = thread(&s, &ws.id, Retention::Full).await;
    s.submit_turn(&owner(), submit(&th.id, "a", "p"))
        .await
        .unwrap();
    s.submit_turn(&owner(), submit(&th.id, "b", "p"))
        .await
        .unwrap();
    let err = s
        .submit_turn(&owner(), submit(&th.id, "c", "p"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "queue_full");
    // A replay of an accepted command still answers while full.
    assert!(
        s.submit_turn(&owner(), submit(&th.id, "a", "p"))
            .await
            .unwrap()
            .replayed
    );
    s.try_claim().await.unwrap().unwrap();
    s.submit_turn(&owner(), submit(&th.id, "c", "p"))
        .await
        .unwrap();
    assert_eq!(s.status().queue_depth, 2);
    assert_eq!(s.status().queue_capacity, 2);
}

#[tokio::test]
async fn scheduler_is_fifo_inside_and_first_fit_across_workspaces() {
    let f = fixture().await;
    let s = &f.store;
    let a = thread(
        s,
        &workspace(s, f.dir.path(), "a").await.id,
        Retention::Full,
    )
    .await;
    let b = thread(
        s,
        &workspace(s, f.dir.path(), "b").await.id,
        Retention::Full,
    )
    .await;
    let a1 = s
        .submit_turn(&owner(), submit(&a.id, "a1", "p"))
        .await
        .unwrap()
        .value;
    let a2 = s
        .submit_turn(&owner(), submit(&a.id, "a2", "p"))
        .await
        .unwrap()
        .value;
    let b1 = s
        .submit_turn(&owner(), submit(&b.id, "b1", "p"))
        .await
        .unwrap()
        .value;
    let c1 = s.try_claim().await.unwrap().unwrap();
    assert_eq!(c1.turn.id, a1.id);
    let c2 = s.try_claim().await.unwrap().unwrap();
    assert_eq!(c2.turn.id, b1.id, "a is busy, so b goes first");
    assert!(s.try_claim().await.unwrap().is_none());
    // next_runnable wakes when the lease is released.
    let waiter = {
        let s = s.clone();
        tokio::spawn(async move { s.next_runnable().await.unwrap() })
    };
    tokio::task::yield_now().await;
    s.finish_turn(
        &c1.turn.id,
        TurnEnd::Failed(lapis_protocol::OutcomeCode::SpawnFailed),
    )
    .await
    .unwrap();
    let c3 = waiter.await.unwrap();
    assert_eq!(c3.turn.id, a2.id);
}

#[tokio::test]
async fn lost_outcome_fences_until_confirmed_resolution_which_never_redispatches() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    let t1 = s
        .submit_turn(&owner(), submit(&th.id, "c1", "p"))
        .await
        .unwrap()
        .value;
    let t2 = s
        .submit_turn(&owner(), submit(&th.id, "c2", "p"))
        .await
        .unwrap()
        .value;
    let c = s.try_claim().await.unwrap().unwrap();
    s.mark_dispatched(&c.turn.id, super::binding())
        .await
        .unwrap();
    let lost = s
        .finish_turn(
            &t1.id,
            TurnEnd::Unknown(lapis_protocol::OutcomeCode::AgentExited),
        )
        .await
        .unwrap();
    assert_eq!(lost.turn.state, TurnState::SubmissionUnknown);
    assert_eq!(s.status().fenced_workspaces, vec!["ws1".to_owned()]);
    assert!(
        s.try_claim().await.unwrap().is_none(),
        "fenced queue does not move"
    );
    let err = s
        .submit_turn(&owner(), submit(&th.id, "c3", "p"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "workspace_fenced");

    let err = s
        .resolve_turn(&owner(), &t1.id, ResolveAs::Failed, false, None)
        .await
        .map(|r| r.value)
        .unwrap_err();
    assert_eq!(err.code(), "invalid_request");
    let err = s
        .resolve_turn(&owner(), &t2.id, ResolveAs::Failed, true, None)
        .await
        .map(|r| r.value)
        .unwrap_err();
    assert_eq!(err.code(), "conflict", "queued turn is not fenced");
    let r = s
        .resolve_turn(&owner(), &t1.id, ResolveAs::Cancelled, true, None)
        .await
        .map(|r| r.value)
        .unwrap();
    assert_eq!(r.state, TurnState::Cancelled);
    assert!(r.resolved_at.is_some());
    assert!(s.status().fenced_workspaces.is_empty());
    let err = s
        .resolve_turn(&owner(), &t1.id, ResolveAs::Failed, true, None)
        .await
        .map(|r| r.value)
        .unwrap_err();
    assert_eq!(err.code(), "conflict", "resolution happens once");
    let next = s.try_claim().await.unwrap().unwrap();
    assert_eq!(
        next.turn.id, t2.id,
        "the queue moves on; t1 is never re-dispatched"
    );
    let audit: i64 = rusqlite::Connection::open(f.dir.path().join("home").join(DB_FILE))
        .unwrap()
        .query_row(
            "SELECT count(*) FROM audit WHERE turn_id = ?1",
            [&t1.id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(audit, 1);
    let page = s
        .replay(ReplayScope::Thread(th.id.clone()), 0, 0)
        .await
        .unwrap();
    assert!(
        page.events
            .iter()
            .any(|e| e.kind == EventKind::TurnResolved)
    );
}

#[tokio::test]
async fn cancel_before_start_during_preparing_and_in_flight() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    let t1 = s
        .submit_turn(&owner(), submit(&th.id, "c1", "p"))
        .await
        .unwrap()
        .value;
    let t2 = s
        .submit_turn(&owner(), submit(&th.id, "c2", "p"))
        .await
        .unwrap()
        .value;
    let t3 = s
        .submit_turn(&owner(), submit(&th.id, "c3", "p"))
        .await
        .unwrap()
        .value;
    let queued = s.request_cancel(&owner(), &t2.id).await.unwrap();
    assert_eq!(queued.state, TurnState::Cancelled);
    assert_eq!(
        queued.outcome_code(),
        Some(lapis_protocol::OutcomeCode::CancelledBeforeStart)
    );

    // Cancel while preparing: the dispatch boundary is refused.
    let mut c1 = s.try_claim().await.unwrap().unwrap();
    assert_eq!(c1.turn.id, t1.id);
    assert!(!*c1.cancel.borrow());
    let flagged = s.request_cancel(&owner(), &t1.id).await.unwrap();
    assert!(flagged.cancel_requested);
    c1.cancel.changed().await.unwrap();
    assert!(*c1.cancel.borrow());
    assert_eq!(
        s.mark_dispatched(&t1.id, super::binding())
            .await
            .unwrap_err()
            .code(),
        "conflict"
    );
    s.finish_turn(
        &t1.id,
        TurnEnd::Cancelled(lapis_protocol::OutcomeCode::Cancelled),
    )
    .await
    .unwrap();

    // Cancel in flight, then the outcome is lost: interrupted, fenced.
    let c3 = s.try_claim().await.unwrap().unwrap();
    assert_eq!(c3.turn.id, t3.id);
    s.mark_dispatched(&t3.id, super::binding()).await.unwrap();
    s.request_cancel(&owner(), &t3.id).await.unwrap();
    let out = s
        .finish_turn(
            &t3.id,
            TurnEnd::Unknown(lapis_protocol::OutcomeCode::CancelDeadline),
        )
        .await
        .unwrap();
    assert_eq!(out.turn.state, TurnState::Interrupted);
    assert_eq!(s.status().fenced_workspaces, vec!["ws1".to_owned()]);
    // The controller's own cancel never settles a fence or a finished turn.
    assert_eq!(
        s.request_cancel(&owner(), &t3.id).await.unwrap().state,
        TurnState::Interrupted
    );
    assert_eq!(
        s.request_cancel(&owner(), &t2.id).await.unwrap().state,
        TurnState::Cancelled
    );
    assert_eq!(s.status().fenced_workspaces, vec!["ws1".to_owned()]);
}

#[tokio::test]
async fn the_owners_cancel_of_a_fenced_turn_resolves_it_cancelled_without_retrying() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    let lost = s
        .submit_turn(&owner(), submit(&th.id, "c1", "p"))
        .await
        .unwrap()
        .value;
    let next = s
        .submit_turn(&owner(), submit(&th.id, "c2", "p"))
        .await
        .unwrap()
        .value;
    s.try_claim().await.unwrap().unwrap();
    s.mark_dispatched(&lost.id, super::binding()).await.unwrap();
    s.finish_turn(
        &lost.id,
        TurnEnd::Unknown(lapis_protocol::OutcomeCode::AgentExited),
    )
    .await
    .unwrap();
    assert_eq!(s.status().fenced_workspaces, vec!["ws1".to_owned()]);
    assert!(s.try_claim().await.unwrap().is_none());

    let operator = Actor::new("owner", "lapis-cli");
    let t = s
        .cancel_turn(&operator, &lost.id, None)
        .await
        .map(|r| r.value)
        .unwrap();
    assert_eq!(t.state, TurnState::Cancelled);
    assert_eq!(
        t.outcome_code(),
        Some(lapis_protocol::OutcomeCode::ResolvedByOwner)
    );
    assert!(t.resolved_at.is_some());
    assert!(s.status().fenced_workspaces.is_empty());
    // Once settled, cancelling again changes nothing and resolving conflicts.
    assert_eq!(
        s.cancel_turn(&operator, &lost.id, None)
            .await
            .map(|r| r.value)
            .unwrap()
            .state,
        TurnState::Cancelled
    );
    assert_eq!(
        s.resolve_turn(&operator, &lost.id, ResolveAs::Failed, true, None)
            .await
            .map(|r| r.value)
            .unwrap_err()
            .code(),
        "conflict"
    );
    // The queue moves on to the next turn; the lost one is never claimed again.
    let c = s.try_claim().await.unwrap().unwrap();
    assert_eq!(c.turn.id, next.id);
    assert!(s.try_claim().await.unwrap().is_none());

    // One audit row naming who resolved it, how, and the thread's application.
    let conn = rusqlite::Connection::open(f.dir.path().join("home").join(DB_FILE)).unwrap();
    let (principal, detail): (String, String) = conn
        .query_row(
            "SELECT principal, detail FROM audit WHERE turn_id = ?1",
            [&lost.id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let detail: serde_json::Value = serde_json::from_str(&detail).unwrap();
    assert_eq!(principal, "owner");
    assert_eq!(detail["via"], "cancel");
    assert_eq!(detail["as"], "cancelled");
    assert_eq!(detail["from"], "submission_unknown");
    assert_eq!(detail["application"], "lapis-cli");
    assert_eq!(detail["threadApplication"], owner().application);
    let page = s
        .replay(ReplayScope::Thread(th.id.clone()), 0, 0)
        .await
        .unwrap();
    let resolved: Vec<_> = page
        .events
        .iter()
        .filter(|e| e.kind == EventKind::TurnResolved)
        .collect();
    assert_eq!(resolved.len(), 1);
    let payload = resolved[0].payload.as_ref().unwrap();
    assert_eq!(payload["via"], "cancel");
    assert_eq!(payload["application"], "lapis-cli");
}

#[tokio::test]
async fn recovery_at_open_settles_every_in_flight_turn_and_keeps_queued_ones() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (t_prep, t_disp, t_run, t_cancel, t_queued);
    {
        let s = Store::open(options(&home)).unwrap();
        let mut ths = vec![];
        for ws in ["a", "b", "c", "d"] {
            let w = workspace(&s, dir.path(), ws).await;
            ths.push(thread(&s, &w.id, Retention::Full).await);
        }
        let mut ids = vec![];
        for (i, th) in ths.iter().enumerate() {
            ids.push(
                s.submit_turn(&owner(), submit(&th.id, &format!("c{i}"), "p"))
                    .await
                    .unwrap()
                    .value
                    .id,
            );
        }
        t_queued = s
            .submit_turn(&owner(), submit(&ths[0].id, "q", "p"))
            .await
            .unwrap()
            .value
            .id;
        for _ in 0..4 {
            s.try_claim().await.unwrap().unwrap();
        }
        t_prep = ids[0].clone();
        t_disp = ids[1].clone();
        t_run = ids[2].clone();
        t_cancel = ids[3].clone();
        s.mark_dispatched(&t_disp, super::binding()).await.unwrap();
        s.mark_dispatched(&t_run, super::binding()).await.unwrap();
        s.mark_running(&t_run).await.unwrap();
        s.mark_dispatched(&t_cancel, super::binding())
            .await
            .unwrap();
        s.request_cancel(&owner(), &t_cancel).await.unwrap();
        // "Crash": drop the store with everything in flight.
    }
    let s = Store::open(options(&home)).unwrap();
    let rec = &s.open_report().recovered;
    assert_eq!(rec.len(), 4);
    let state = |id: &str| {
        let s = s.clone();
        let id = id.to_owned();
        async move { s.get_turn(&id).await.unwrap() }
    };
    let p = state(&t_prep).await;
    assert_eq!(
        (p.state, p.outcome.as_deref()),
        (
            TurnState::Failed,
            Some(lapis_protocol::OutcomeCode::SetupInterrupted.as_str())
        )
    );
    assert_eq!(state(&t_disp).await.state, TurnState::SubmissionUnknown);
    assert_eq!(state(&t_run).await.state, TurnState::SubmissionUnknown);
    assert_eq!(state(&t_cancel).await.state, TurnState::Interrupted);
    assert_eq!(state(&t_queued).await.state, TurnState::Queued);
    assert_eq!(
        s.status().fenced_workspaces,
        vec!["b".to_owned(), "c".to_owned(), "d".to_owned()]
    );
    // Workspace a was not fenced (failed before dispatch): its queued turn runs.
    let c = s.try_claim().await.unwrap().unwrap();
    assert_eq!(c.turn.id, t_queued);
    assert!(s.try_claim().await.unwrap().is_none());
    drop(s);
    // A second open recovers nothing more and keeps the fences.
    let s = Store::open(options(&home)).unwrap();
    assert_eq!(
        s.open_report().recovered.len(),
        1,
        "only the claimed queued turn"
    );
    assert_eq!(s.status().fenced_workspaces.len(), 3);
}

#[tokio::test]
async fn a_lost_outcome_before_the_dispatch_boundary_is_a_plain_failure() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    let t = s
        .submit_turn(&owner(), submit(&th.id, "c1", "p"))
        .await
        .unwrap()
        .value;
    s.try_claim().await.unwrap().unwrap();
    // Not dispatched yet: starting is refused and changes nothing.
    let start = s.mark_running(&t.id).await.unwrap();
    assert!(!start.applied);
    assert_eq!(start.turn.state, TurnState::Preparing);
    let out = s
        .finish_turn(
            &t.id,
            TurnEnd::Unknown(lapis_protocol::OutcomeCode::AgentExited),
        )
        .await
        .unwrap();
    assert!(out.applied);
    assert_eq!(out.turn.state, TurnState::Failed);
    assert_eq!(out.turn.outcome.as_deref(), Some("agent_exited"));
    assert!(s.status().fenced_workspaces.is_empty());
    assert!(s.status().running_workspaces.is_empty());
    // Bad outcome codes are refused before anything changes.
    let t2 = s
        .submit_turn(&owner(), submit(&th.id, "c2", "p"))
        .await
        .unwrap()
        .value;
    s.try_claim().await.unwrap().unwrap();
    let err = s
        .finish_turn(&t2.id, TurnEnd::Completed("has space".into()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_request");
    assert_eq!(
        s.get_turn(&t2.id).await.unwrap().state,
        TurnState::Preparing
    );
    assert_eq!(
        s.get_turn("turn_missing").await.unwrap_err().code(),
        "not_found"
    );
}
