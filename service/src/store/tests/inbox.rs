//! The durable permission inbox (`inbox`): a row per journaled request,
//! settled with its decision in the same write, abandoned with its turn's
//! fate when the turn leaves flight (recovery at open included), and
//! content-free on metadata-only threads.

use lapis_protocol::{
    Answerer, DecidedBy, Payload, PermissionAnswer, PermissionDecided, Settlement,
};
use serde_json::json;

use super::*;

fn requested(id: &str, expires_at: &str) -> Payload {
    Payload::from_value(
        EventKind::PermissionRequested,
        json!({"type": "permission_requested", "requestId": id,
               "invocation": {"id": "call-1", "title": "Run rm -rf build", "kind": "execute"},
               "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                           {"optionId": "no", "name": "Reject", "kind": "reject_once"}],
               "expiresAt": expires_at}),
    )
}

fn decided(id: &str, by: DecidedBy, answered_by: Option<Answerer>) -> Payload {
    Payload::PermissionDecided(PermissionDecided {
        request_id: id.into(),
        answer: PermissionAnswer::Selected {
            option_id: "yes".into(),
        },
        decided_by: Some(by),
        answered_by,
    })
}

/// A claimed, dispatched, running turn of `thread`.
async fn running(s: &Store, thread: &str, cmd: &str) -> Turn {
    let turn = s
        .submit_turn(&owner(), submit(thread, cmd, "p"))
        .await
        .unwrap()
        .value;
    s.try_claim().await.unwrap().expect("runnable");
    s.mark_dispatched(&turn.id, binding()).await.unwrap();
    s.mark_running(&turn.id).await.unwrap();
    turn
}

#[tokio::test]
async fn a_request_is_a_row_from_its_event_and_is_settled_by_its_decision() {
    let f = fixture().await;
    let s = &f.store;
    workspace(s, f.dir.path(), "w1").await;
    let th = thread(s, "w1", Retention::Full).await;
    let turn = running(s, &th.id, "c1").await;
    let event = s
        .append_activity(&turn.id, requested("r-1", "2030-01-01T00:00:00.000Z"))
        .await
        .unwrap();

    let pending = s.pending_permissions().await.unwrap();
    assert_eq!(pending.len(), 1);
    let row = &pending[0];
    assert_eq!(row.settled, None);
    let r = &row.request;
    assert_eq!(
        (r.id.as_str(), r.turn_id.as_str()),
        ("r-1", turn.id.as_str())
    );
    assert_eq!(
        (r.thread_id.as_str(), r.workspace_id.as_str()),
        (th.id.as_str(), "w1")
    );
    assert_eq!(r.application, "test-app");
    assert_eq!(r.tool_call.title.as_deref(), Some("Run rm -rf build"));
    assert_eq!(r.options.len(), 2);
    assert_eq!(
        r.deadline,
        lapis_protocol::time::parse_ms("2030-01-01T00:00:00.000Z").unwrap()
    );
    assert_eq!(r.requested_at, event.at, "stamped with its event");
    let status = s.inbox_status().await.unwrap();
    assert_eq!(status.pending, 1);
    assert_eq!(
        status.oldest,
        Some((turn.id.clone(), "r-1".to_owned(), event.at))
    );

    // Another application of the principal answers.
    let phone = Answerer {
        principal: "owner".into(),
        application: "phone".into(),
    };
    s.append_activity(
        &turn.id,
        decided("r-1", DecidedBy::User, Some(phone.clone())),
    )
    .await
    .unwrap();
    assert!(s.pending_permissions().await.unwrap().is_empty());
    assert_eq!(s.inbox_status().await.unwrap().pending, 0);
    let settled = s
        .permission_request(&turn.id, "r-1")
        .await
        .unwrap()
        .unwrap()
        .settled
        .unwrap();
    assert_eq!(settled.settlement, Settlement::Answered);
    assert_eq!(settled.answered_by, Some(phone));
    assert_eq!(settled.answer.as_deref(), Some("yes"));
    assert!(
        settled
            .describe()
            .starts_with("answered by application `phone` with `yes` at "),
        "{}",
        settled.describe()
    );

    // A second decision for the same request settles nothing again.
    s.append_activity(&turn.id, decided("r-1", DecidedBy::Expired, None))
        .await
        .unwrap();
    let again = s
        .permission_request(&turn.id, "r-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.settled.unwrap().settlement, Settlement::Answered);

    // Expiry is recorded as such.
    s.append_activity(&turn.id, requested("r-2", "2030-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    s.append_activity(&turn.id, decided("r-2", DecidedBy::Expired, None))
        .await
        .unwrap();
    let expired = s
        .permission_request(&turn.id, "r-2")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(expired.settled.unwrap().settlement, Settlement::Expired);

    // A request still pending when its turn ends is abandoned with the
    // turn's fate, in the same write.
    s.append_activity(&turn.id, requested("r-3", "2030-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    s.finish_turn(&turn.id, TurnEnd::Completed("end_turn".into()))
        .await
        .unwrap();
    let left = s
        .permission_request(&turn.id, "r-3")
        .await
        .unwrap()
        .unwrap();
    let left = left.settled.unwrap();
    assert_eq!(left.settlement, Settlement::Abandoned);
    assert_eq!(left.fate.as_deref(), Some("completed: end_turn"));
    assert!(s.pending_permissions().await.unwrap().is_empty());
}

#[tokio::test]
async fn recovery_abandons_the_requests_of_turns_that_did_not_survive() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (turn, metadata_turn) = {
        let s = Store::open(options(&home)).unwrap();
        workspace(&s, dir.path(), "w1").await;
        workspace(&s, dir.path(), "w2").await;
        let th = thread(&s, "w1", Retention::Full).await;
        let quiet = thread(&s, "w2", Retention::MetadataOnly).await;
        let turn = running(&s, &th.id, "c1").await;
        let metadata_turn = running(&s, &quiet.id, "c2").await;
        for t in [&turn, &metadata_turn] {
            s.append_activity(&t.id, requested("r-1", "2030-01-01T00:00:00.000Z"))
                .await
                .unwrap();
        }
        let listed = s.pending_permissions().await.unwrap();
        assert_eq!(listed.len(), 2, "across workspaces");
        // A metadata-only thread's row keeps no content.
        let quiet_row = listed
            .iter()
            .find(|e| e.request.turn_id == metadata_turn.id)
            .unwrap();
        assert_eq!(quiet_row.request.tool_call.title, None);
        assert_eq!(quiet_row.request.tool_call.id, "call-1");
        assert_eq!(quiet_row.request.options.len(), 2, "ids stay answerable");
        s.close().await;
        (turn, metadata_turn)
    };
    // As after a kill: both turns were running.
    let s = Store::open(options(&home)).unwrap();
    assert!(s.pending_permissions().await.unwrap().is_empty());
    assert_eq!(s.inbox_status().await.unwrap().pending, 0);
    for t in [&turn, &metadata_turn] {
        let row = s.permission_request(&t.id, "r-1").await.unwrap().unwrap();
        let settled = row.settled.unwrap();
        assert_eq!(settled.settlement, Settlement::Abandoned);
        assert_eq!(
            settled.fate.as_deref(),
            Some("submission_unknown: outcome_lost")
        );
    }
    s.close().await;
}
