//! `threads.delete`: refused while a turn waits or fences the thread; a
//! deleted thread leaves tombstones and a content-free receipt, a journal
//! that reopens and verifies, no content in the file; tampering across
//! the deleted range is still detected.

use rusqlite::Connection;

use super::*;
use crate::domain::*;
use crate::store::*;

const MARKER: &str = "MARKER-d3l3t3-7f1e9c";

/// A thread with one finished turn whose prompt and reply hold [`MARKER`].
async fn finished_thread(s: &Store, ws: &str, cmd: &str) -> Thread {
    let th = thread(s, ws, Retention::Full).await;
    finished_turn(s, &th.id, cmd, MARKER).await;
    th
}

#[tokio::test]
async fn delete_is_refused_while_a_turn_is_queued_claimed_or_fenced() {
    let f = fixture().await;
    let s = &f.store;
    workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, "ws1", Retention::Full).await;
    let t = s
        .submit_turn(&owner(), submit(&th.id, "c1", "p"))
        .await
        .unwrap()
        .value;
    let err = s.delete_thread(&owner(), None, &th.id).await.unwrap_err();
    assert_eq!(err.code(), "thread_busy");
    s.try_claim().await.unwrap().unwrap();
    let err = s.delete_thread(&owner(), None, &th.id).await.unwrap_err();
    assert_eq!(err.code(), "thread_busy");
    s.mark_dispatched(&t.id, binding()).await.unwrap();
    s.finish_turn(
        &t.id,
        TurnEnd::Unknown(lapis_protocol::OutcomeCode::AgentExited),
    )
    .await
    .unwrap();
    let err = s.delete_thread(&owner(), None, &th.id).await.unwrap_err();
    assert_eq!(err.code(), "thread_fenced");
    s.resolve_turn(&owner(), &t.id, ResolveAs::Failed, true, None)
        .await
        .unwrap();
    let (receipt, _) = s.delete_thread(&owner(), None, &th.id).await.unwrap();
    assert_eq!(receipt.turns, 1);
    assert_eq!(
        s.delete_thread(&owner(), None, "thr_nope")
            .await
            .unwrap_err()
            .code(),
        "not_found"
    );
}

#[tokio::test]
async fn a_deleted_thread_leaves_a_content_free_receipt_and_a_journal_that_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let s = Store::open(options(&home)).unwrap();
    workspace(&s, dir.path(), "ws1").await;
    let gone = finished_thread(&s, "ws1", "c1").await;
    let kept = finished_thread(&s, "ws1", "c2").await;
    let events_before = s
        .replay(ReplayScope::Thread(gone.id.clone()), 0, 100)
        .await
        .unwrap()
        .events;
    let (receipt, seq) = s
        .delete_thread(&owner(), Some("phone".into()), &gone.id)
        .await
        .unwrap();
    assert_eq!(receipt.events, events_before.len() as u64);
    assert_eq!(receipt.turns, 1);
    assert_eq!(receipt.first_seq, events_before[0].seq);
    assert_eq!(receipt.last_seq, events_before.last().unwrap().seq);
    assert_eq!(receipt.by.token.as_deref(), Some("phone"));
    let text = serde_json::to_string(&receipt).unwrap();
    assert!(!text.contains(MARKER), "{text}");
    // Gone from every read; a second delete names why.
    let err = s.get_thread(&gone.id).await.unwrap_err();
    assert_eq!(err.code(), "thread_deleted");
    assert_eq!(
        s.delete_thread(&owner(), None, &gone.id)
            .await
            .unwrap_err()
            .code(),
        "thread_deleted"
    );
    let listed = s.list_threads(read::ThreadFilter::default()).await.unwrap();
    assert_eq!(listed.iter().map(|t| &t.id).collect::<Vec<_>>(), [&kept.id]);
    let owner_scope = ReplayScope::Owner {
        principal: "owner".into(),
        application: None,
    };
    let page = s.replay(owner_scope.clone(), 0, 1000).await.unwrap();
    let of_gone: Vec<_> = page
        .events
        .iter()
        .filter(|e| e.thread_id == gone.id)
        .collect();
    assert_eq!(of_gone.len(), 1, "only the receipt");
    assert_eq!(
        (of_gone[0].kind, of_gone[0].seq),
        (EventKind::ThreadDeleted, seq)
    );
    assert_eq!(
        s.submit_turn(&owner(), submit(&gone.id, "c3", "p"))
            .await
            .unwrap_err()
            .code(),
        "not_found"
    );
    // The journal grows on after the cut, reopens (validation) and verifies.
    s.submit_turn(&owner(), submit(&kept.id, "c4", "p"))
        .await
        .unwrap();
    s.close().await;
    let s = Store::open(options(&home)).unwrap();
    let report = verify_journal(&home.join(DB_FILE)).unwrap();
    assert!(report.events > seq, "{report:?}");
    assert_eq!(
        s.get_thread(&gone.id).await.unwrap_err().code(),
        "thread_deleted"
    );
    s.close().await;
}

#[tokio::test]
async fn deleted_content_is_not_in_the_database_file_or_its_wal() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let s = Store::open(options(&home)).unwrap();
    workspace(&s, dir.path(), "ws1").await;
    let th = finished_thread(&s, "ws1", "c1").await;
    s.delete_thread(&owner(), None, &th.id).await.unwrap();
    s.close().await;
    let db = home.join(DB_FILE);
    let conn = Connection::open(&db).unwrap();
    let mode: i64 = conn
        .pragma_query_value(None, "auto_vacuum", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, 2, "incremental");
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    drop(conn);
    for file in ["controller.db", "controller.db-wal"] {
        let Ok(bytes) = std::fs::read(home.join(file)) else {
            continue;
        };
        let found = bytes.windows(MARKER.len()).any(|w| w == MARKER.as_bytes());
        assert!(!found, "{file} still holds the deleted content");
    }
}

/// A closed store whose thread `gone` (3 turns' worth of events) was
/// deleted, with another thread's events after the cut.
async fn deleted_journal() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let s = Store::open(options(&home)).unwrap();
    workspace(&s, dir.path(), "ws1").await;
    let gone = finished_thread(&s, "ws1", "c1").await;
    s.delete_thread(&owner(), None, &gone.id).await.unwrap();
    finished_thread(&s, "ws1", "c2").await;
    s.close().await;
    verify_journal(&home.join(DB_FILE)).unwrap();
    (dir, gone.id)
}

fn failed_check(dir: &tempfile::TempDir) -> (String, &'static str) {
    match verify_journal(&dir.path().join("home").join(DB_FILE)) {
        Err(StoreError::InvalidRow { row, check, .. }) => (row, check),
        other => panic!("expected a failed verification, got {other:?}"),
    }
}

fn tombstones(conn: &Connection, thread: &str) -> Vec<i64> {
    let mut stmt = conn
        .prepare("SELECT seq FROM events WHERE thread_id = ?1 AND kind = 'tombstone' ORDER BY seq")
        .unwrap();
    stmt.query_map([thread], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[tokio::test]
async fn an_edited_tombstone_hash_fails_verification() {
    let (dir, gone) = deleted_journal().await;
    let conn = Connection::open(dir.path().join("home").join(DB_FILE)).unwrap();
    let seqs = tombstones(&conn, &gone);
    assert!(seqs.len() >= 5, "{seqs:?}");
    // Between two tombstones: only the receipt's digest sees it.
    conn.execute(
        "UPDATE events SET hash = zeroblob(32) WHERE seq = ?1",
        [seqs[2]],
    )
    .unwrap();
    let (_, check) = failed_check(&dir);
    assert_eq!(check, "tombstone");
}

#[tokio::test]
async fn an_untombstoned_row_fails_verification() {
    let (dir, gone) = deleted_journal().await;
    let conn = Connection::open(dir.path().join("home").join(DB_FILE)).unwrap();
    let seq = tombstones(&conn, &gone)[2];
    conn.execute(
        "UPDATE events SET kind = 'message_chunk', payload = '{\"text\":\"forged\"}', \
         has_payload = 1 WHERE seq = ?1",
        [seq],
    )
    .unwrap();
    assert_eq!(failed_check(&dir), (seq.to_string(), "chain"));
}

#[tokio::test]
async fn a_deleted_tombstone_row_fails_verification() {
    let (dir, gone) = deleted_journal().await;
    let conn = Connection::open(dir.path().join("home").join(DB_FILE)).unwrap();
    let seq = tombstones(&conn, &gone)[2];
    conn.execute("DELETE FROM events WHERE seq = ?1", [seq])
        .unwrap();
    let (_, check) = failed_check(&dir);
    assert_eq!(check, "tombstone");
}

#[tokio::test]
async fn an_altered_receipt_or_an_uncovered_tombstone_fails_verification() {
    let (dir, gone) = deleted_journal().await;
    let conn = Connection::open(dir.path().join("home").join(DB_FILE)).unwrap();
    let receipt: i64 = conn
        .query_row(
            "SELECT seq FROM events WHERE kind = 'thread_deleted'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    conn.execute(
        "UPDATE events SET payload = replace(payload, '\"turns\":1', '\"turns\":0') WHERE seq = ?1",
        [receipt],
    )
    .unwrap();
    assert_eq!(failed_check(&dir), (receipt.to_string(), "chain"));

    // A live row made a tombstone (to hide an edit): no receipt covers it.
    let (dir, gone2) = deleted_journal().await;
    assert_ne!(gone, gone2);
    let conn = Connection::open(dir.path().join("home").join(DB_FILE)).unwrap();
    let last: i64 = conn
        .query_row("SELECT max(seq) FROM events", [], |r| r.get(0))
        .unwrap();
    conn.execute(
        "UPDATE events SET kind = 'tombstone', turn_id = NULL, at = 0, payload = NULL, \
         has_payload = 0, event_hash = NULL WHERE seq = ?1",
        [last],
    )
    .unwrap();
    assert_eq!(failed_check(&dir), (last.to_string(), "tombstone"));
}
