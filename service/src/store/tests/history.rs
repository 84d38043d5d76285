//! The journal's history checked after open (`store::history`): what open
//! reads does not grow with the journal, and a bad history is still
//! caught, before anything is claimed or anchored.

use lapis_protocol::Payload;
use rusqlite::Connection;
use serde_json::json;

use super::*;
use crate::domain::{EventKind, Retention};
use crate::store::{DB_FILE, HistoryCheck, anchor, counters};

/// A home whose journal holds a claimed, settled turn with `chunks`
/// streamed events and one more turn queued; opened once more (checked
/// at open, recovered) and closed, so the next open finds it settled.
async fn journal(chunks: usize) -> tempfile::TempDir {
    let Fixture { dir, store } = fixture().await;
    let s = &store;
    workspace(s, dir.path(), "w").await;
    let th = thread(s, "w", Retention::Full).await;
    let t = s
        .submit_turn(&owner(), submit(&th.id, "c1", "p"))
        .await
        .unwrap()
        .value;
    s.try_claim().await.unwrap().unwrap();
    let pending: Vec<_> = (0..chunks)
        .map(|i| {
            s.append_activity(
                &t.id,
                Payload::from_value(
                    EventKind::MessageChunk,
                    json!({ "text": format!("chunk {i}") }),
                ),
            )
        })
        .collect();
    for p in pending {
        p.await.unwrap();
    }
    s.submit_turn(&owner(), submit(&th.id, "c2", "queued"))
        .await
        .unwrap();
    store.close().await;
    Store::open(options(&home(&dir))).unwrap().close().await;
    dir
}

fn home(dir: &tempfile::TempDir) -> std::path::PathBuf {
    dir.path().join("home")
}

fn after_open(dir: &tempfile::TempDir) -> StoreOptions {
    let mut o = options(&home(dir));
    o.history = HistoryCheck::AfterOpen;
    o
}

/// Statements and rows `open` ran on this thread, and the store.
fn counted_open(o: StoreOptions) -> (counters::Tally, Store) {
    let before = counters::on_this_thread();
    let store = Store::open(o).unwrap();
    (counters::on_this_thread() - before, store)
}

#[tokio::test]
async fn open_reads_the_same_rows_at_ten_events_as_at_two_thousand() {
    let (small, large) = (journal(10).await, journal(2_000).await);
    let (at_small, s) = counted_open(after_open(&small));
    let small_events = s.history_verified().await.unwrap();
    s.close().await;
    let (at_large, s) = counted_open(after_open(&large));
    let large_events = s.history_verified().await.unwrap();
    s.close().await;
    assert_eq!(
        large_events - small_events,
        1_990,
        "the check read them all"
    );
    assert_eq!(at_small, at_large, "open read more as the journal grew");
    // The counter sees the scan when open runs it: the guard can fail.
    let mut o = options(&home(&large));
    o.history = HistoryCheck::AtOpen;
    let (checked, s) = counted_open(o);
    s.close().await;
    assert!(
        checked.rows >= at_large.rows + 2_000,
        "{checked:?} vs {at_large:?}"
    );
}

#[tokio::test]
async fn an_old_edited_event_fails_after_open_and_nothing_is_claimed_or_anchored() {
    let dir = journal(50).await;
    let db = home(&dir).join(DB_FILE);
    let conn = Connection::open(&db).unwrap();
    let seq: i64 = conn
        .query_row(
            "SELECT seq FROM events WHERE payload LIKE '%chunk 3\"%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    conn.execute(
        "UPDATE events SET payload = replace(payload, 'chunk 3', 'chunk X') WHERE seq = ?1",
        [seq],
    )
    .unwrap();
    drop(conn);
    let anchored = std::fs::read(anchor::path(&db)).unwrap();
    // Open answers; the check then names the edited row.
    let s = Store::open(after_open(&dir)).unwrap();
    let bad = StoreError::InvalidRow {
        table: "events",
        row: seq.to_string(),
        check: "chain",
    }
    .to_string();
    assert_eq!(s.history_verified().await.unwrap_err().to_string(), bad);
    // The queued turn is never claimed, and what is written meanwhile
    // moves no anchor.
    assert_eq!(s.try_claim().await.unwrap_err().to_string(), bad);
    let th = thread_id(&dir);
    s.submit_turn(&owner(), submit(&th, "c3", "later"))
        .await
        .unwrap();
    s.close().await;
    assert_eq!(std::fs::read(anchor::path(&db)).unwrap(), anchored);
    // The next open still finds it, either way.
    let err = Store::open(options(&home(&dir))).unwrap_err();
    assert_eq!(err.to_string(), bad);
}

#[tokio::test]
async fn a_journal_cut_short_is_caught_against_what_open_found() {
    let dir = journal(20).await;
    let db = home(&dir).join(DB_FILE);
    let conn = Connection::open(&db).unwrap();
    conn.execute(
        "DELETE FROM events WHERE seq = (SELECT max(seq) FROM events)",
        [],
    )
    .unwrap();
    drop(conn);
    let s = Store::open(after_open(&dir)).unwrap();
    // Events written after open would reach the anchor's count again:
    // the check reads the snapshot open pinned, before them.
    let th = thread_id(&dir);
    for i in 0..3 {
        s.submit_turn(&owner(), submit(&th, &format!("x{i}"), "p"))
            .await
            .unwrap();
    }
    let err = s.history_verified().await.unwrap_err();
    assert_eq!(err.code(), "store_anchor_mismatch", "{err}");
    s.close().await;
}

#[tokio::test]
async fn a_sound_journal_checked_after_open_claims_as_before() {
    let dir = journal(5).await;
    let s = Store::open(after_open(&dir)).unwrap();
    assert!(s.history_verified().await.unwrap() >= 5);
    let claim = s.try_claim().await.unwrap();
    assert!(claim.is_some(), "the queued turn is claimed once checked");
    s.close().await;
}

/// The one thread of [`journal`]'s home.
fn thread_id(dir: &tempfile::TempDir) -> String {
    let conn = Connection::open(home(dir).join(DB_FILE)).unwrap();
    conn.query_row("SELECT id FROM threads", [], |r| r.get(0))
        .unwrap()
}
