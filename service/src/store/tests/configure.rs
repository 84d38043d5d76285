//! Thread configuration: optimistic versions, waiting for idle threads.

use super::*;
use crate::domain::*;

#[tokio::test]
async fn configure_uses_optimistic_versions_and_waits_for_idle_threads() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    assert_eq!(th.version, 1);
    let patch = ThreadPatch {
        approval: Some(ApprovalPolicy::AllowAll),
        ..Default::default()
    };
    let t2 = s
        .configure_thread(&owner(), &th.id, 1, patch.clone(), None)
        .await
        .map(|r| r.value)
        .unwrap();
    assert_eq!((t2.version, t2.approval), (2, ApprovalPolicy::AllowAll));
    assert_eq!(
        s.configure_thread(&owner(), &th.id, 1, patch.clone(), None)
            .await
            .map(|r| r.value)
            .unwrap_err()
            .code(),
        "conflict"
    );
    let t = s
        .submit_turn(&owner(), submit(&th.id, "c1", "p"))
        .await
        .unwrap()
        .value;
    assert_eq!(
        s.configure_thread(&owner(), &th.id, 2, patch.clone(), None)
            .await
            .map(|r| r.value)
            .unwrap_err()
            .code(),
        "conflict"
    );
    s.request_cancel(&owner(), &t.id).await.unwrap();
    let t3 = s
        .configure_thread(
            &owner(),
            &th.id,
            2,
            ThreadPatch {
                restricted: Some(true),
                ..Default::default()
            },
            None,
        )
        .await
        .map(|r| r.value)
        .unwrap();
    assert_eq!(t3.version, 3);
    assert!(t3.restricted);
    assert_eq!(s.get_thread(&th.id).await.unwrap(), t3);

    // Refused while a turn is in flight; a fenced turn does not block it,
    // and the next turn is claimed with the new configuration.
    let t = s
        .submit_turn(&owner(), submit(&th.id, "c2", "p"))
        .await
        .unwrap()
        .value;
    s.try_claim().await.unwrap().unwrap();
    s.mark_dispatched(&t.id, super::binding()).await.unwrap();
    assert_eq!(
        s.configure_thread(&owner(), &th.id, 3, patch.clone(), None)
            .await
            .map(|r| r.value)
            .unwrap_err()
            .code(),
        "conflict"
    );
    s.finish_turn(
        &t.id,
        TurnEnd::Unknown(lapis_protocol::OutcomeCode::AgentExited),
    )
    .await
    .unwrap();
    let t4 = s
        .configure_thread(&owner(), &th.id, 3, patch.clone(), None)
        .await
        .map(|r| r.value)
        .unwrap();
    assert_eq!((t4.version, t4.approval), (4, ApprovalPolicy::AllowAll));
    s.resolve_turn(&owner(), &t.id, ResolveAs::Failed, true, None)
        .await
        .map(|r| r.value)
        .unwrap();
    s.submit_turn(&owner(), submit(&th.id, "c3", "p"))
        .await
        .unwrap();
    let claim = s.try_claim().await.unwrap().unwrap();
    assert_eq!(claim.thread, t4, "later turns run under the new version");
}
