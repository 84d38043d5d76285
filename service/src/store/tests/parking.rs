//! The engine's claims parked on the writer (`writer::ParkedClaim`).

use super::*;
use crate::domain::*;
use crate::store::*;

/// A claim parked on the writer is made inside the batch of the submit that
/// makes a turn runnable, and that batch waits for the claim's dispatch
/// boundary: acceptance, claim and boundary cost one commit, and the
/// submit is answered only once all three are durable. A turn queued
/// behind it is claimed in the batch of the outcome that frees its
/// workspace, and that batch too waits for the new claim's boundary.
#[tokio::test]
async fn a_parked_claim_shares_the_commit_of_the_submit_and_the_boundary() {
    // The batch waits up to `deferred_linger` for the boundary; the default
    // (5 ms) is shorter than a loaded machine takes to schedule the engine
    // task, so the boundary would land in a commit of its own. The boundary
    // ends the wait when it arrives, so a long linger costs nothing here.
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(&dir.path().join("home"));
    o.deferred_linger = std::time::Duration::from_secs(60);
    let f = Fixture {
        dir,
        store: Store::open(o).unwrap(),
    };
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    // The engine's part: wait for a claim, then persist its boundary.
    let engine = |s: Store| async move {
        let claim = s.next_runnable().await.unwrap();
        s.mark_dispatched(&claim.turn.id, super::binding())
            .await
            .unwrap();
        claim.turn.id
    };
    let first = tokio::spawn(engine(s.clone()));
    // Let the claim park before the submit arrives.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let before = s.commit_count();
    let t1 = s
        .submit_turn(&owner(), submit(&th.id, "c1", "p"))
        .await
        .unwrap()
        .value;
    // Answered after the commit that holds the claim and the boundary too.
    assert_eq!(
        s.get_turn(&t1.id).await.unwrap().state,
        TurnState::Dispatched
    );
    assert_eq!(first.await.unwrap(), t1.id);
    assert_eq!(s.commit_count() - before, 1, "submit + claim + boundary");

    let t2 = s
        .submit_turn(&owner(), submit(&th.id, "c2", "p"))
        .await
        .unwrap()
        .value;
    let second = tokio::spawn(engine(s.clone()));
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let before = s.commit_count();
    s.finish_turn(&t1.id, TurnEnd::Completed("end_turn".into()))
        .await
        .unwrap();
    assert_eq!(
        s.get_turn(&t2.id).await.unwrap().state,
        TurnState::Dispatched
    );
    assert_eq!(second.await.unwrap(), t2.id);
    assert_eq!(
        s.commit_count() - before,
        1,
        "outcome + next claim + boundary"
    );
}
