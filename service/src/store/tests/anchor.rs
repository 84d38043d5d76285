//! The journal anchor outside the database, and what is dispatched being
//! what was chained (issue 24 item 4).

use rusqlite::Connection;

use super::*;
use crate::domain::{Retention, TurnState};
use crate::store::anchor::{self, Anchor};
use crate::store::{DB_FILE, reanchor_journal, verify_journal};

fn db(dir: &tempfile::TempDir) -> std::path::PathBuf {
    dir.path().join("home").join(DB_FILE)
}

/// A closed store with `turns` completed turns in one thread.
async fn journal_of(turns: usize) -> tempfile::TempDir {
    let Fixture { dir, store } = fixture().await;
    workspace(&store, dir.path(), "w").await;
    let th = thread(&store, "w", Retention::Full).await;
    for i in 0..turns {
        let t = store
            .submit_turn(&owner(), submit(&th.id, &format!("c{i}"), "p"))
            .await
            .unwrap()
            .value;
        store.try_claim().await.unwrap().unwrap();
        store.mark_dispatched(&t.id, binding()).await.unwrap();
        store
            .finish_turn(&t.id, crate::domain::TurnEnd::Completed("end_turn".into()))
            .await
            .unwrap();
    }
    store.close().await;
    dir
}

fn events(conn: &Connection) -> u64 {
    conn.query_row("SELECT count(*) FROM events", [], |r| r.get::<_, i64>(0))
        .unwrap() as u64
}

#[tokio::test]
async fn a_clean_close_anchors_every_committed_event() {
    let dir = journal_of(2).await;
    let a = anchor::read(&db(&dir)).unwrap().unwrap();
    let conn = Connection::open(db(&dir)).unwrap();
    assert_eq!(a, anchor::committed(&conn).unwrap());
    assert_eq!(a.events, events(&conn));
    assert!(a.events > 0);
}

#[tokio::test]
async fn a_deleted_tail_fails_the_open_and_verify_until_reanchored() {
    let dir = journal_of(2).await;
    let home = dir.path().join("home");
    let conn = Connection::open(db(&dir)).unwrap();
    let before = events(&conn);
    // The chain of what is left is whole: only the anchor can tell.
    conn.execute("DELETE FROM events WHERE seq > ?1", [before as i64 - 3])
        .unwrap();
    drop(conn);
    let err = Store::open(options(&home)).unwrap_err();
    assert_eq!(err.code(), "store_anchor_mismatch", "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("names {before} events"))
            && text.contains(&format!("has {}", before - 3))
            && text.contains("journal reanchor"),
        "{text}"
    );
    assert_eq!(
        verify_journal(&db(&dir)).unwrap_err().code(),
        "store_anchor_mismatch"
    );
    // The owner accepts the database as it is (an intended restore).
    let report = reanchor_journal(&home).unwrap();
    assert_eq!(report.events, before - 3);
    Store::open(options(&home)).unwrap().close().await;
}

#[tokio::test]
async fn an_edit_rehashed_to_the_head_fails_the_open() {
    let dir = journal_of(1).await;
    let conn = Connection::open(db(&dir)).unwrap();
    conn.execute_batch(
        "UPDATE events SET at = at + 1 WHERE seq = 2; \
         UPDATE events SET hash = NULL;",
    )
    .unwrap();
    // Re-chain every row from genesis, as a careful attacker would.
    let v2_from = crate::store::chain::v2_from(&conn, crate::store::SCHEMA_VERSION).unwrap();
    crate::store::chain::relink(&conn, v2_from).unwrap();
    drop(conn);
    let err = Store::open(options(&dir.path().join("home"))).unwrap_err();
    assert_eq!(err.code(), "store_anchor_mismatch", "{err}");
    assert!(err.to_string().contains("rewritten"), "{err}");
}

#[tokio::test]
async fn a_missing_or_garbled_anchor_is_refused() {
    let dir = journal_of(1).await;
    let home = dir.path().join("home");
    let path = anchor::path(&db(&dir));
    std::fs::write(&path, "{}").unwrap();
    assert_eq!(
        Store::open(options(&home)).unwrap_err().code(),
        "store_anchor_missing"
    );
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        Store::open(options(&home)).unwrap_err().code(),
        "store_anchor_missing"
    );
    assert_eq!(
        verify_journal(&db(&dir)).unwrap_err().code(),
        "store_anchor_missing"
    );
}

/// A version-7 database (no anchor yet) upgrades in place: the migration
/// anchors it before committing, and drops the raw prompts of turns past
/// the queue. An anchor left by an upgrade that stopped before its commit
/// is rewritten by the next one.
#[tokio::test]
async fn a_version_7_database_is_anchored_by_its_upgrade() {
    let dir = journal_of(1).await;
    let home = dir.path().join("home");
    let conn = Connection::open(db(&dir)).unwrap();
    crate::store::schema::rewind(&conn, 7);
    // What version 7 kept and version 8 drops: the raw prompts.
    conn.execute_batch("UPDATE turns SET prompt = 'secret-prompt';")
        .unwrap();
    drop(conn);
    // As if a first upgrade wrote its anchor and died before committing.
    anchor::write(&db(&dir), &Anchor::EMPTY).unwrap();
    Store::open(options(&home)).unwrap().close().await;
    let conn = Connection::open(db(&dir)).unwrap();
    let a = anchor::read(&db(&dir)).unwrap().unwrap();
    assert_eq!(a.events, events(&conn));
    let prompts: i64 = conn
        .query_row("SELECT count(prompt) FROM turns", [], |r| r.get(0))
        .unwrap();
    assert_eq!(prompts, 0);
}

#[tokio::test]
async fn a_queued_prompt_edited_at_rest_is_failed_before_dispatch() {
    let Fixture { dir, store } = fixture().await;
    workspace(&store, dir.path(), "w").await;
    let th = thread(&store, "w", Retention::Full).await;
    let edited = store
        .submit_turn(&owner(), submit(&th.id, "c1", "as typed"))
        .await
        .unwrap()
        .value;
    let next = store
        .submit_turn(&owner(), submit(&th.id, "c2", "second"))
        .await
        .unwrap()
        .value;
    store.close().await;
    let conn = Connection::open(db(&dir)).unwrap();
    conn.execute(
        "UPDATE turns SET prompt = 'rm -rf ~' WHERE id = ?1",
        [&edited.id],
    )
    .unwrap();
    drop(conn);
    let store = Store::open(options(&dir.path().join("home"))).unwrap();
    // The edited turn is never handed out (that claim settles it and
    // hands out nothing); the workspace moves on.
    assert!(store.try_claim().await.unwrap().is_none());
    let claim = store.try_claim().await.unwrap().unwrap();
    assert_eq!(claim.turn.id, next.id);
    assert_eq!(claim.prompt, "second");
    let t = store.get_turn(&edited.id).await.unwrap();
    assert_eq!(t.state, TurnState::Failed);
    assert_eq!(t.outcome.as_deref(), Some("prompt_mismatch"));
    store.close().await;
}

#[tokio::test]
async fn a_raw_prompt_is_dropped_when_its_turn_leaves_the_queue() {
    let Fixture { dir, store } = fixture().await;
    workspace(&store, dir.path(), "w").await;
    let th = thread(&store, "w", Retention::Full).await;
    let claimed = store
        .submit_turn(&owner(), submit(&th.id, "c1", "one"))
        .await
        .unwrap()
        .value;
    let cancelled = store
        .submit_turn(&owner(), submit(&th.id, "c2", "two"))
        .await
        .unwrap()
        .value;
    let queued = store
        .submit_turn(&owner(), submit(&th.id, "c3", "three"))
        .await
        .unwrap()
        .value;
    let claim = store.try_claim().await.unwrap().unwrap();
    assert_eq!(
        (claim.turn.id.as_str(), claim.prompt.as_str()),
        (claimed.id.as_str(), "one")
    );
    store.request_cancel(&owner(), &cancelled.id).await.unwrap();
    store.close().await;
    let conn = Connection::open(db(&dir)).unwrap();
    let prompt = |id: &str| -> Option<String> {
        conn.query_row("SELECT prompt FROM turns WHERE id = ?1", [id], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(prompt(&claimed.id), None);
    assert_eq!(prompt(&cancelled.id), None);
    assert_eq!(prompt(&queued.id).as_deref(), Some("three"));
}

/// A database deleted (or emptied) beside its anchor is not a fresh start:
/// the upgrade of the empty file finds an anchor naming events it lacks.
#[tokio::test]
async fn a_deleted_database_beside_its_anchor_is_refused() {
    let dir = journal_of(1).await;
    let home = dir.path().join("home");
    std::fs::remove_file(db(&dir)).unwrap();
    let err = Store::open(options(&home)).unwrap_err();
    assert_eq!(err.code(), "store_anchor_mismatch", "{err}");
    // Removing the anchor too is a deliberate fresh start.
    std::fs::remove_file(anchor::path(&db(&dir))).unwrap();
    std::fs::remove_file(db(&dir)).unwrap();
    Store::open(options(&home)).unwrap().close().await;
}

/// The anchor's read is bounded: a FIFO in its place (which a plain read
/// waits on forever), a link (to `/dev/zero`, which a plain read never
/// finishes) and an oversized file are refused as `store_anchor_missing`,
/// by `journal verify` and by the open.
#[tokio::test]
async fn a_fifo_a_link_or_a_huge_file_in_place_of_the_anchor_is_refused_without_reading_it() {
    let dir = journal_of(1).await;
    let db = db(&dir);
    let anchor_path = anchor::path(&db);
    type Plant<'a> = &'a dyn Fn(&std::path::Path);
    let cases: [(&str, Plant); 3] = [
        ("fifo", &|p| {
            nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap()
        }),
        ("link", &|p| {
            std::os::unix::fs::symlink("/dev/zero", p).unwrap()
        }),
        ("huge", &|p| std::fs::write(p, vec![b' '; 1 << 20]).unwrap()),
    ];
    for (what, plant) in cases {
        std::fs::remove_file(&anchor_path).unwrap();
        plant(&anchor_path);
        let verified = {
            let db = db.clone();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = tx.send(verify_journal(&db).map(|_| ()));
            });
            // A hang guard, not a timing assertion: the old read never returned.
            rx.recv_timeout(std::time::Duration::from_secs(60))
        };
        let Ok(verified) = verified else {
            // Release the reader stuck on the FIFO before failing.
            let _ = std::fs::OpenOptions::new().write(true).open(&anchor_path);
            panic!("{what}: journal verify hung on the anchor");
        };
        let err = verified.unwrap_err();
        assert_eq!(err.code(), "store_anchor_missing", "{what}: {err}");
        let Err(err) = Store::open(options(&dir.path().join("home"))) else {
            panic!("{what}: the open is refused");
        };
        assert_eq!(err.code(), "store_anchor_missing", "{what}: {err}");
    }
}
