//! Retention's per-thread summary (`store::retention::summary`): after
//! prunes and new events it equals a recount of the journal, a refresh
//! reads only the events appended since the last one, and a pass prunes
//! only what the summary counted.

use rusqlite::Connection;

use super::*;
use crate::domain::*;
use crate::store::retention::{Batch, Candidate, Limits};
use crate::store::*;

/// `(events, bytes, oldest_at)` of `thread`'s live events, recounted.
fn recount(home: &std::path::Path, thread: &str) -> (u64, u64, i64) {
    let conn = Connection::open(home.join(DB_FILE)).unwrap();
    conn.query_row(
        "SELECT count(*), coalesce(sum(length(payload)), 0), coalesce(min(at), 0) FROM events \
         WHERE thread_id = ?1 AND kind NOT IN ('tombstone', 'history_pruned', 'thread_deleted')",
        [thread],
        |r| {
            Ok((
                r.get::<_, i64>(0)? as u64,
                r.get::<_, i64>(1)? as u64,
                r.get(2)?,
            ))
        },
    )
    .unwrap()
}

async fn summary(s: &Store, thread: &str) -> Candidate {
    s.history_candidates()
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.thread == thread)
        .unwrap()
}

#[tokio::test]
async fn the_summary_equals_a_recount_and_a_refresh_reads_only_new_events() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let s = Store::open(options(&home)).unwrap();
    workspace(&s, dir.path(), "ws1").await;
    let th = thread(&s, "ws1", Retention::Full).await;
    for i in 0..4 {
        finished_turn(&s, &th.id, &format!("c{i}"), "text").await;
    }
    let c = summary(&s, &th.id).await;
    assert_eq!((c.events, c.bytes, c.oldest_at), recount(&home, &th.id));
    // Nothing new: a refresh reads nothing.
    assert_eq!(s.history_refresh().await.unwrap(), 0);
    let limits = Limits {
        max_events: Some(16),
        ..Default::default()
    };
    let mut c = c;
    while let Batch::Pruned { live_from, .. } = s.prune_batch(&c, limits, 1).await.unwrap() {
        c = summary(&s, &th.id).await;
        assert_eq!(c.live_from, live_from);
    }
    let pruned = summary(&s, &th.id).await;
    assert_eq!(pruned.events, 16);
    assert_eq!(
        (pruned.events, pruned.bytes, pruned.oldest_at),
        recount(&home, &th.id)
    );
    // New events: the refresh reads them (and the receipts), no more.
    let before: i64 = {
        let conn = Connection::open(home.join(DB_FILE)).unwrap();
        conn.query_row("SELECT max(seq) FROM events", [], |r| r.get(0))
            .unwrap()
    };
    finished_turn(&s, &th.id, "c9", "text").await;
    let after: i64 = {
        let conn = Connection::open(home.join(DB_FILE)).unwrap();
        conn.query_row("SELECT max(seq) FROM events", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(s.history_refresh().await.unwrap(), (after - before) as u64);
    let c = summary(&s, &th.id).await;
    assert_eq!((c.events, c.bytes, c.oldest_at), recount(&home, &th.id));
    // It survives a restart.
    s.close().await;
    let s = Store::open(options(&home)).unwrap();
    assert_eq!(s.history_refresh().await.unwrap(), 0);
    assert_eq!(summary(&s, &th.id).await, c);
    s.close().await;
}

#[tokio::test]
async fn a_batch_prunes_only_what_the_summary_counted_and_the_last_pass_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let s = Store::open(options(&home)).unwrap();
    workspace(&s, dir.path(), "ws1").await;
    let th = thread(&s, "ws1", Retention::Full).await;
    finished_turn(&s, &th.id, "c1", "text").await;
    let c = summary(&s, &th.id).await;
    let counted = c.events;
    // Appended after the summary's refresh: not this pass's to prune,
    // however old the policy says it is.
    finished_turn(&s, &th.id, "c2", "text").await;
    let all = Limits {
        cutoff: Some(i64::MAX),
        ..Default::default()
    };
    let mut pruned = 0;
    let mut c = c;
    while let Batch::Pruned {
        events, live_from, ..
    } = s.prune_batch(&c, all, 1).await.unwrap()
    {
        pruned += events;
        c.events -= events;
        c.live_from = live_from;
    }
    assert_eq!(pruned, counted);
    s.get_thread(&th.id)
        .await
        .expect("not deleted: it has events");
    let left = recount(&home, &th.id);
    assert!(left.0 > 0, "the second turn's events stay: {left:?}");
    assert_eq!(summary(&s, &th.id).await.events, left.0);
    assert_eq!(s.history_last_pass().await.unwrap(), None);
    let pass = lapis_protocol::HistoryPass {
        started_at: 5,
        finished_at: 7,
        events: pruned,
        ..Default::default()
    };
    s.history_save_pass(&pass).await.unwrap();
    s.close().await;
    let s = Store::open(options(&home)).unwrap();
    assert_eq!(s.history_last_pass().await.unwrap(), Some(pass));
    s.close().await;
}
