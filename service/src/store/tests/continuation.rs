//! The prompt as a `user_message` event, and continuations: every refusal,
//! replay and conflict, the claim's recheck and the prior turn's digest.

use lapis_protocol::Payload;
use serde_json::json;

use super::*;
use crate::domain::*;
use crate::store::*;

/// Runs one turn of `thread` to `end`, with `activity` journaled on the way.
pub(super) async fn run(
    s: &Store,
    thread: &str,
    cmd: &str,
    prompt: &str,
    activity: &[(EventKind, serde_json::Value)],
    end: TurnEnd,
) -> Turn {
    let turn = s
        .submit_turn(&owner(), submit(thread, cmd, prompt))
        .await
        .unwrap()
        .value;
    let claim = s.try_claim().await.unwrap().expect("runnable");
    assert_eq!(claim.turn.id, turn.id);
    s.mark_dispatched(&turn.id, binding()).await.unwrap();
    s.mark_running(&turn.id).await.unwrap();
    for (kind, payload) in activity {
        s.append_activity(&turn.id, Payload::from_value(*kind, payload.clone()))
            .await
            .unwrap();
    }
    s.finish_turn(&turn.id, end).await.unwrap().turn
}

pub(super) fn continues(thread: &str, prior: &str, cmd: &str, prompt: &str) -> SubmitTurn {
    SubmitTurn {
        continues: Some(prior.into()),
        ..submit(thread, cmd, prompt)
    }
}

pub(super) fn completed() -> TurnEnd {
    TurnEnd::Completed("end_turn".into())
}

#[tokio::test]
async fn the_prompt_is_a_user_message_of_its_thread_and_follows_retention() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let store = Store::open(options(&home)).unwrap();
    let s = &store;
    let ws = workspace(s, dir.path(), "ws1").await;
    let full = thread(s, &ws.id, Retention::Full).await;
    let t = s
        .submit_turn(&owner(), submit(&full.id, "c1", "what is 6 x 7?"))
        .await
        .unwrap()
        .value;
    let page = s
        .replay(ReplayScope::Thread(full.id.clone()), 0, 0)
        .await
        .unwrap();
    let kinds: Vec<_> = page.events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            EventKind::ThreadCreated,
            EventKind::TurnSubmitted,
            EventKind::UserMessage
        ]
    );
    assert_eq!(page.events[2].turn_id.as_deref(), Some(t.id.as_str()));
    assert_eq!(
        page.events[2].payload,
        Some(json!({ "text": "what is 6 x 7?" }))
    );
    let shown = s.get_turn_asked(&t.id).await.unwrap();
    let asked = shown.user_message.expect("user message");
    assert_eq!(asked.text.as_deref(), Some("what is 6 x 7?"));
    assert!(!asked.payload_unavailable);
    // Lists and receipts carry no prompt.
    assert!(s.get_turn(&t.id).await.unwrap().user_message.is_none());

    // Metadata-only: the payload lives in memory only, gone after a restart.
    let ws2 = workspace(s, dir.path(), "ws2").await;
    let meta = thread(s, &ws2.id, Retention::MetadataOnly).await;
    let m = s
        .submit_turn(&owner(), submit(&meta.id, "c2", "a secret question"))
        .await
        .unwrap()
        .value;
    let asked = s.get_turn_asked(&m.id).await.unwrap().user_message.unwrap();
    assert_eq!(asked.text.as_deref(), Some("a secret question"));
    store.close().await;
    let db = rusqlite::Connection::open(home.join(DB_FILE)).unwrap();
    let (on_disk, has): (Option<String>, bool) = db
        .query_row(
            "SELECT payload, has_payload FROM events WHERE turn_id = ?1 AND kind = 'user_message'",
            [&m.id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        (on_disk, has),
        (None, true),
        "a metadata-only prompt was stored"
    );
    drop(db);
    let s = Store::open(options(&home)).unwrap();
    let asked = s.get_turn_asked(&m.id).await.unwrap().user_message.unwrap();
    assert_eq!(asked.text, None);
    assert!(asked.payload_unavailable);
    let asked = s.get_turn_asked(&t.id).await.unwrap().user_message.unwrap();
    assert_eq!(asked.text.as_deref(), Some("what is 6 x 7?"));
}

#[tokio::test]
async fn a_continuation_is_linked_idempotent_and_refused_unless_the_prior_is_settled_and_whole() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    let prior = run(
        s,
        &th.id,
        "p1",
        "first",
        &[(
            EventKind::MessageChunk,
            json!({"type": "message", "text": "one"}),
        )],
        completed(),
    )
    .await;

    // Accepted, linked, idempotent; other input under the same id conflicts.
    let next = s
        .submit_turn(&owner(), continues(&th.id, &prior.id, "n1", "go on"))
        .await
        .unwrap();
    assert!(!next.replayed);
    assert_eq!(next.value.continues.as_deref(), Some(prior.id.as_str()));
    let again = s
        .submit_turn(&owner(), continues(&th.id, &prior.id, "n1", "go on"))
        .await
        .unwrap();
    assert!(again.replayed);
    assert_eq!(again.value.id, next.value.id);
    let other = s
        .submit_turn(&owner(), continues(&th.id, &prior.id, "n1", "go further"))
        .await
        .unwrap_err();
    assert_eq!(other.code(), "conflict");

    // A queued prior (the continuation itself) and a preparing one.
    let queued = s
        .submit_turn(&owner(), continues(&th.id, &next.value.id, "q1", "x"))
        .await
        .unwrap_err();
    assert_eq!(queued.code(), "conflict", "{queued}");
    let claim = s.try_claim().await.unwrap().unwrap();
    assert_eq!(claim.turn.id, next.value.id);
    assert!(claim.context.unwrap().contains("Replied: one"));
    let preparing = s
        .submit_turn(&owner(), continues(&th.id, &claim.turn.id, "q2", "x"))
        .await
        .unwrap_err();
    assert_eq!(preparing.code(), "conflict");
    s.mark_dispatched(&claim.turn.id, binding()).await.unwrap();
    let dispatched = s
        .submit_turn(&owner(), continues(&th.id, &claim.turn.id, "q3", "x"))
        .await
        .unwrap_err();
    assert_eq!(dispatched.code(), "conflict");
    s.mark_running(&claim.turn.id).await.unwrap();
    let running = s
        .submit_turn(&owner(), continues(&th.id, &claim.turn.id, "q4", "x"))
        .await
        .unwrap_err();
    assert_eq!(running.code(), "conflict");

    // submission_unknown: refused, and the fence stays.
    let unknown = s
        .finish_turn(
            &claim.turn.id,
            TurnEnd::Unknown(lapis_protocol::OutcomeCode::AgentExited),
        )
        .await
        .unwrap()
        .turn;
    assert_eq!(unknown.state, TurnState::SubmissionUnknown);
    let refused = s
        .submit_turn(&owner(), continues(&th.id, &unknown.id, "q5", "x"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "conflict");
    assert_eq!(s.status().fenced_workspaces, vec!["ws1".to_owned()]);
    // Resolved by its owner it is settled (failed) and may be continued.
    s.resolve_turn(&owner(), &unknown.id, ResolveAs::Failed, true, None)
        .await
        .map(|r| r.value)
        .unwrap();
    s.submit_turn(&owner(), continues(&th.id, &unknown.id, "q6", "retry"))
        .await
        .unwrap();
    let c = s.try_claim().await.unwrap().unwrap();
    s.finish_turn(
        &c.turn.id,
        TurnEnd::Failed(lapis_protocol::OutcomeCode::BoundaryNotPersisted),
    )
    .await
    .unwrap();

    // interrupted: refused like submission_unknown.
    let t = s
        .submit_turn(&owner(), submit(&th.id, "i1", "slow"))
        .await
        .unwrap()
        .value;
    s.try_claim().await.unwrap().unwrap();
    s.mark_dispatched(&t.id, binding()).await.unwrap();
    s.request_cancel(&owner(), &t.id).await.unwrap();
    let interrupted = s
        .finish_turn(
            &t.id,
            TurnEnd::Interrupted(lapis_protocol::OutcomeCode::CancelDeadline),
        )
        .await
        .unwrap()
        .turn;
    assert_eq!(interrupted.state, TurnState::Interrupted);
    let refused = s
        .submit_turn(&owner(), continues(&th.id, &t.id, "i2", "x"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "conflict");
    s.resolve_turn(&owner(), &t.id, ResolveAs::Cancelled, true, None)
        .await
        .map(|r| r.value)
        .unwrap();

    // A completed prior with an unanswered permission request, or a tool
    // call without a terminal status.
    let asked = run(
        s,
        &th.id,
        "a1",
        "ask",
        &[(
            EventKind::PermissionRequested,
            json!({"type": "permission_requested", "requestId": "7",
                   "invocation": {"id": "t1", "title": "Write", "status": "completed"}, "options": []}),
        )],
        completed(),
    )
    .await;
    let refused = s
        .submit_turn(&owner(), continues(&th.id, &asked.id, "a2", "x"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "conflict");
    assert!(refused.to_string().contains("permission"), "{refused}");
    let tool = run(
        s,
        &th.id,
        "b1",
        "tool",
        &[
            (
                EventKind::ToolCall,
                json!({"type": "invocation", "id": "t2", "title": "Edit", "status": "pending"}),
            ),
            (
                EventKind::ToolCall,
                json!({"type": "invocation", "id": "t2", "title": "Edit", "status": "in_progress"}),
            ),
        ],
        completed(),
    )
    .await;
    let refused = s
        .submit_turn(&owner(), continues(&th.id, &tool.id, "b2", "x"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "conflict");
    assert!(refused.to_string().contains("tool call `t2`"), "{refused}");
    // Answered and finished ones are fine.
    let whole = run(
        s,
        &th.id,
        "w1",
        "whole",
        &[
            (
                EventKind::PermissionRequested,
                json!({"type": "permission_requested", "requestId": "8",
                       "invocation": {"id": "t3", "title": "Write"}, "options": []}),
            ),
            (
                EventKind::PermissionDecided,
                json!({"type": "permission_resolved", "requestId": "8",
                       "answer": {"outcome": "cancelled"}, "decidedBy": "user"}),
            ),
            (
                EventKind::ToolCall,
                json!({"type": "invocation", "id": "t3", "title": "Write", "status": "failed"}),
            ),
        ],
        completed(),
    )
    .await;
    s.submit_turn(&owner(), continues(&th.id, &whole.id, "w2", "x"))
        .await
        .unwrap();

    // A prior of another thread is refused.
    let other = thread(s, &ws.id, Retention::Full).await;
    let e = s
        .submit_turn(&owner(), continues(&other.id, &whole.id, "o1", "x"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "invalid_request");
}

#[tokio::test]
async fn a_metadata_only_prior_whose_payloads_are_gone_is_transcript_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let store = Store::open(options(&home)).unwrap();
    let (thread_id, prior) = {
        let s = &store;
        let ws = workspace(s, dir.path(), "ws1").await;
        let th = thread(s, &ws.id, Retention::MetadataOnly).await;
        let prior = run(
            s,
            &th.id,
            "p1",
            "private",
            &[(
                EventKind::MessageChunk,
                json!({"type": "message", "text": "hidden"}),
            )],
            completed(),
        )
        .await;
        // Before a restart the payloads are still in memory.
        s.submit_turn(&owner(), continues(&th.id, &prior.id, "n0", "fine"))
            .await
            .unwrap();
        let c = s.try_claim().await.unwrap().unwrap();
        assert!(c.context.unwrap().contains("Asked: private"));
        s.finish_turn(
            &c.turn.id,
            TurnEnd::Failed(lapis_protocol::OutcomeCode::AgentError),
        )
        .await
        .unwrap();
        (th.id, prior.id)
    };
    store.close().await;
    let s = Store::open(options(&home)).unwrap();
    let e = s
        .submit_turn(&owner(), continues(&thread_id, &prior, "n1", "more"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "transcript_unavailable");
}

#[tokio::test]
async fn the_claim_rechecks_the_prior_and_the_digest_is_bounded() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    let long = "y".repeat(10_000);
    let prior = run(
        s,
        &th.id,
        "p1",
        &long,
        &[
            (EventKind::MessageChunk, json!({"type": "message", "text": long})),
            (
                EventKind::ToolCall,
                json!({"type": "invocation", "id": "t1", "title": "Run tests", "status": "completed"}),
            ),
        ],
        completed(),
    )
    .await;
    let next = s
        .submit_turn(&owner(), continues(&th.id, &prior.id, "n1", "again"))
        .await
        .unwrap()
        .value;
    let claim = s.try_claim().await.unwrap().unwrap();
    let context = claim.context.unwrap();
    assert!(context.len() <= 4096, "{}", context.len());
    assert!(context.contains(&prior.id));
    assert!(context.contains("- Run tests (completed)"), "{context}");
    assert_eq!(claim.prompt, "again", "the prior prompt is never resent");
    s.mark_dispatched(&next.id, binding()).await.unwrap();
    s.finish_turn(&next.id, completed()).await.unwrap();

    // The prior no longer qualifies when the continuation is claimed (its
    // row was changed behind the store's back): the attempt fails before
    // dispatch and nothing runs.
    let queued = s
        .submit_turn(&owner(), continues(&th.id, &prior.id, "n2", "third"))
        .await
        .unwrap()
        .value;
    let db = rusqlite::Connection::open(f.dir.path().join("home").join(DB_FILE)).unwrap();
    db.execute(
        "UPDATE turns SET state = 'running' WHERE id = ?1",
        [&prior.id],
    )
    .unwrap();
    assert!(s.try_claim().await.unwrap().is_none());
    let failed = s.get_turn(&queued.id).await.unwrap();
    assert_eq!(failed.state, TurnState::Failed);
    assert_eq!(
        failed.outcome_code(),
        Some(lapis_protocol::OutcomeCode::ContinuationRefused)
    );
    assert!(failed.dispatched_at.is_none());
}
