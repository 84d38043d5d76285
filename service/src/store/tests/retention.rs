//! History retention on the store: a batch tombstones a thread's oldest
//! events under a `history_pruned` receipt, leaves busy and fenced
//! threads alone, deletes an empty idle thread, and the journal verifies
//! across the cut (and fails on tampering there).

use rusqlite::Connection;

use super::*;
use crate::domain::*;
use crate::store::retention::{Batch, Candidate, Limits};
use crate::store::*;

const MARKER: &str = "MARKER-r3t41n-2b9d";

async fn finished_turn(s: &Store, thread: &str, cmd: &str) {
    super::finished_turn(s, thread, cmd, MARKER).await;
}

/// Runs batches over `thread` until one is not `Pruned`.
async fn prune(s: &Store, thread: &str, limits: Limits) -> (u64, Batch) {
    let mut c = candidate(s, thread).await;
    let mut pruned = 0;
    loop {
        match s.prune_batch(&c, limits, 1).await.unwrap() {
            Batch::Pruned { events, bytes, .. } => {
                pruned += events;
                c.events -= events;
                c.bytes -= bytes;
            }
            other => return (pruned, other),
        }
    }
}

#[tokio::test]
async fn a_count_limit_prunes_the_oldest_events_under_a_receipt_that_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let s = Store::open(options(&home)).unwrap();
    workspace(&s, dir.path(), "ws1").await;
    let th = thread(&s, "ws1", Retention::Full).await;
    let other = thread(&s, "ws1", Retention::Full).await;
    for i in 0..3 {
        finished_turn(&s, &th.id, &format!("c{i}")).await;
    }
    finished_turn(&s, &other.id, "o1").await;
    let before = candidate(&s, &th.id).await;
    let other_before = candidate(&s, &other.id).await;
    let limits = Limits {
        max_events: Some(5),
        ..Default::default()
    };
    let (pruned, end) = prune(&s, &th.id, limits).await;
    assert_eq!((pruned, end), (before.events - 5, Batch::Nothing));
    let page = s
        .replay(ReplayScope::Thread(th.id.clone()), 0, 1000)
        .await
        .unwrap();
    let kinds: Vec<_> = page.events.iter().map(|e| e.kind).collect();
    assert_eq!(kinds.len(), 6, "five kept and the receipt: {kinds:?}");
    let last = page.events.last().unwrap();
    assert_eq!(last.kind, EventKind::HistoryPruned);
    let receipt: lapis_protocol::HistoryPruned =
        serde_json::from_value(last.payload.clone().unwrap()).unwrap();
    assert_eq!(receipt.events, pruned);
    assert_eq!(receipt.limits, ["maxEventsPerThread"]);
    assert!(!serde_json::to_string(&receipt).unwrap().contains(MARKER));
    // The other thread is untouched; a second pass finds nothing.
    // (The summary's `through` moved on past the receipts.)
    let other_after = candidate(&s, &other.id).await;
    assert_eq!(
        Candidate {
            through: 0,
            ..other_after
        },
        Candidate {
            through: 0,
            ..other_before
        }
    );
    assert_eq!(prune(&s, &th.id, limits).await, (0, Batch::Nothing));
    // The journal grows on, reopens (validation) and verifies.
    finished_turn(&s, &th.id, "c9").await;
    s.close().await;
    let s = Store::open(options(&home)).unwrap();
    s.close().await;
    verify_journal(&home.join(DB_FILE)).unwrap();
    // Tampering across the cut: a tombstone's hash edited.
    let conn = Connection::open(home.join(DB_FILE)).unwrap();
    let seq: i64 = conn
        .query_row(
            "SELECT seq FROM events WHERE kind = 'tombstone' ORDER BY seq LIMIT 1 OFFSET 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    conn.execute(
        "UPDATE events SET hash = zeroblob(32) WHERE seq = ?1",
        [seq],
    )
    .unwrap();
    drop(conn);
    match verify_journal(&home.join(DB_FILE)) {
        Err(StoreError::InvalidRow { check, .. }) => assert_eq!(check, "tombstone"),
        other => panic!("tampering not detected: {other:?}"),
    }
}

#[tokio::test]
async fn a_pruned_thread_deletes_and_an_idle_one_goes_whole_by_age() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let s = Store::open(options(&home)).unwrap();
    workspace(&s, dir.path(), "ws1").await;
    let th = thread(&s, "ws1", Retention::Full).await;
    let kept = thread(&s, "ws1", Retention::Full).await;
    finished_turn(&s, &th.id, "c1").await;
    finished_turn(&s, &th.id, "c2").await;
    finished_turn(&s, &kept.id, "k1").await;
    // Count first, then deleted by hand: the deletion skips the pruned.
    let few = Limits {
        max_events: Some(3),
        ..Default::default()
    };
    prune(&s, &kept.id, few).await;
    let (receipt, _) = s.delete_thread(&owner(), None, &kept.id).await.unwrap();
    assert_eq!(receipt.events, 3);
    // Every event older than the cutoff: all go, then the thread.
    let aged = Limits {
        cutoff: Some(i64::MAX),
        ..Default::default()
    };
    let (pruned, end) = prune(&s, &th.id, aged).await;
    assert!(pruned > 0);
    assert_eq!(end, Batch::Deleted);
    assert_eq!(
        s.get_thread(&th.id).await.unwrap_err().code(),
        "thread_deleted"
    );
    s.close().await;
    let s = Store::open(options(&home)).unwrap();
    s.close().await;
    verify_journal(&home.join(DB_FILE)).unwrap();
    let conn = Connection::open(home.join(DB_FILE)).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    drop(conn);
    let bytes = std::fs::read(home.join(DB_FILE)).unwrap();
    assert!(!bytes.windows(MARKER.len()).any(|w| w == MARKER.as_bytes()));
}

#[tokio::test]
async fn a_queued_claimed_or_fenced_thread_is_left_alone() {
    let f = fixture().await;
    let s = &f.store;
    workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, "ws1", Retention::Full).await;
    finished_turn(s, &th.id, "c0").await;
    let all = Limits {
        cutoff: Some(i64::MAX),
        ..Default::default()
    };
    let t = s
        .submit_turn(&owner(), submit(&th.id, "c1", "p"))
        .await
        .unwrap()
        .value;
    assert_eq!(prune(s, &th.id, all).await, (0, Batch::Busy));
    s.try_claim().await.unwrap().unwrap();
    assert_eq!(prune(s, &th.id, all).await, (0, Batch::Busy));
    s.mark_dispatched(&t.id, binding()).await.unwrap();
    s.finish_turn(
        &t.id,
        TurnEnd::Unknown(lapis_protocol::OutcomeCode::AgentExited),
    )
    .await
    .unwrap();
    assert_eq!(prune(s, &th.id, all).await, (0, Batch::Busy));
    // Metadata-only threads are never candidates.
    let meta = thread(s, "ws1", Retention::MetadataOnly).await;
    let listed = s.history_candidates().await.unwrap();
    assert!(listed.iter().all(|c| c.thread != meta.id));
}
