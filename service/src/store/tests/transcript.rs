//! Schema 17: the canonical hash the content events of a metadata-only
//! thread that binds a transcript store keep in place of their payload, the thread's transcript store binding,
//! and the flagged replay that lets a store complete what a restart lost.

use lapis_protocol::transcript::event_hash;

use super::*;
use crate::domain::*;
use crate::store::*;

#[tokio::test]
async fn content_kept_in_memory_records_its_event_hash_and_a_restart_flags_it() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let full = thread(s, &ws.id, Retention::Full).await;
    let plain = thread(s, &ws.id, Retention::MetadataOnly).await;
    let meta = bound(s, &ws.id, Retention::MetadataOnly).await.unwrap();
    for (n, th) in [&full, &plain, &meta].into_iter().enumerate() {
        s.submit_turn(&owner(), submit(&th.id, &format!("c{n}"), "hello"))
            .await
            .unwrap();
    }
    let (page, hashes) = s.replay_flagged(&meta.id, 0, 0).await.unwrap();
    let asked = page
        .events
        .iter()
        .find(|e| e.kind == EventKind::UserMessage)
        .unwrap();
    assert!(
        !asked.payload_unavailable,
        "in memory while the store is open"
    );
    assert!(
        hashes.is_empty(),
        "only events whose content is gone are looked up"
    );
    let recorded = s
        .read({
            let id = meta.id.clone();
            move |c, _| super::super::read::event_hashes(c, &id, &[1, 2, 3])
        })
        .await
        .unwrap();
    assert_eq!(
        recorded.get(&asked.thread_seq).map(String::as_str),
        Some(event_hash(asked).unwrap().as_str()),
        "the canonical hash of the event as published"
    );
    assert_eq!(recorded.len(), 1, "metadata events carry none");
    let on_disk = s
        .read({
            let id = full.id.clone();
            move |c, _| super::super::read::event_hashes(c, &id, &[1, 2, 3])
        })
        .await
        .unwrap();
    assert!(
        on_disk.is_empty(),
        "content on disk has the chain hash only"
    );

    // After a restart the content is gone; the flagged page keeps going
    // and names the recorded hash, the strict one fails as before.
    let home = f.dir.path().join("home");
    f.store.clone().close().await;
    let s = Store::open(options(&home)).unwrap();
    let (page, hashes) = s.replay_flagged(&meta.id, 0, 0).await.unwrap();
    let gone = page
        .events
        .iter()
        .find(|e| e.kind == EventKind::UserMessage)
        .unwrap();
    assert!(gone.payload_unavailable && gone.payload.is_none());
    assert_eq!(hashes.get(&gone.thread_seq), recorded.get(&gone.thread_seq));
    let strict = s
        .replay(ReplayScope::Thread(meta.id.clone()), 0, 0)
        .await
        .unwrap_err();
    assert_eq!(strict.code(), "transcript_unavailable");
}

/// A thread of `ws` that binds the transcript store `vault`.
async fn bound(store: &Store, ws: &str, retention: Retention) -> StoreResult<Thread> {
    let input = NewThread {
        command_id: None,
        workspace_id: ws.into(),
        provider: "echo".into(),
        approval: ApprovalPolicy::Ask,
        restricted: false,
        retention,
        mcp_servers: Vec::new(),
        ports: lapis_protocol::ThreadPorts {
            transcript_store: Some("vault".into()),
            ..Default::default()
        },
        thread_id: None,
        permission_timeout_seconds: None,
        budget: None,
    };
    Ok(store.create_thread(&owner(), input).await?.value)
}

#[tokio::test]
async fn a_transcript_store_binds_only_a_metadata_only_thread() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let err = bound(s, &ws.id, Retention::Full).await.unwrap_err();
    assert_eq!(err.code(), "invalid_request");
    let th = bound(s, &ws.id, Retention::MetadataOnly).await.unwrap();
    assert_eq!(th.ports.transcript_store.as_deref(), Some("vault"));
    let full = ThreadPatch {
        retention: Some(Retention::Full),
        ..Default::default()
    };
    let err = s
        .configure_thread(&owner(), &th.id, th.version, full.clone(), None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_request");
    let unbound = ThreadPatch {
        ports: lapis_protocol::PortsPatch {
            transcript_store: Some(None),
            ..Default::default()
        },
        ..full
    };
    let th = s
        .configure_thread(&owner(), &th.id, th.version, unbound, None)
        .await
        .unwrap()
        .value;
    assert_eq!(
        (th.retention, th.ports.transcript_store),
        (Retention::Full, None)
    );
}

/// `event_hash` of `thread`'s `user_message` rows, with their `seq`.
fn hashed_rows(db: &std::path::Path) -> Vec<(i64, String)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT seq, event_hash FROM events WHERE event_hash IS NOT NULL ORDER BY seq")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Sets the `event_hash` of row `seq` at rest, as someone editing the file.
fn edit_event_hash(db: &std::path::Path, seq: i64, to: &str) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute(
        "UPDATE events SET event_hash = ?2 WHERE seq = ?1",
        rusqlite::params![seq, to],
    )
    .unwrap();
}

fn chain_error(seq: i64) -> String {
    StoreError::InvalidRow {
        table: "events",
        row: seq.to_string(),
        check: "chain",
    }
    .to_string()
}

/// Chain version 2: an `event_hash` edited at rest (so that a forged
/// payload would verify against it) breaks the chain at its row, for
/// `journal verify` and for the open.
#[tokio::test]
async fn an_event_hash_edited_at_rest_fails_the_chain_at_its_row() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let meta = bound(s, &ws.id, Retention::MetadataOnly).await.unwrap();
    s.submit_turn(&owner(), submit(&meta.id, "c1", "hello"))
        .await
        .unwrap();
    let home = f.dir.path().join("home");
    f.store.clone().close().await;
    let db = home.join(DB_FILE);
    verify_journal(&db).unwrap();
    let rows = hashed_rows(&db);
    assert_eq!(rows.len(), 1, "the prompt's content is kept in memory");
    let (seq, recorded) = rows[0].clone();
    let forged = "0".repeat(64);
    assert_ne!(recorded, forged);
    edit_event_hash(&db, seq, &forged);
    let err = verify_journal(&db).unwrap_err();
    assert_eq!(err.to_string(), chain_error(seq));
    let open = Store::open(options(&home)).unwrap_err();
    assert_eq!(open.to_string(), chain_error(seq));
    // Put back, it verifies again: the check is the hash, nothing else.
    edit_event_hash(&db, seq, &recorded);
    verify_journal(&db).unwrap();
}

/// A journal written at schema 17 (chain version 1, `event_hash` recorded
/// on a store-bound thread; `tests/fixtures/journal-v17`, written by
/// commit f7fb9d6's `generate_v17_fixture`) verifies before and after its
/// upgrade, its rows keep their hashes, and rows written after the upgrade
/// are linked with version 2.
#[tokio::test]
async fn a_schema_17_journal_verifies_as_before_and_new_rows_cover_their_event_hash() {
    let fixture_dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/journal-v17");
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    for name in [DB_FILE, "controller.db-anchor"] {
        std::fs::copy(fixture_dir.join(name), home.join(name)).unwrap();
    }
    let db = home.join(DB_FILE);
    let before = verify_journal(&db).unwrap();
    assert_eq!(before.events, 20);
    let old = hashed_rows(&db);
    assert_eq!(old.len(), 4, "the fixture's store-bound content");

    // The open upgrades to schema 18 and validates every row as before.
    let s = Store::open(options(&home)).unwrap();
    let meta = s
        .read(|c, _| {
            Ok(c.query_row(
                "SELECT id FROM threads WHERE transcript_store IS NOT NULL",
                [],
                |r| r.get::<_, String>(0),
            )?)
        })
        .await
        .unwrap();
    s.submit_turn(&owner(), submit(&meta, "after-upgrade", "again"))
        .await
        .unwrap();
    s.close().await;
    let after = verify_journal(&db).unwrap();
    assert!(after.events > before.events);
    let from: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT from_seq FROM chain_versions WHERE version = 2",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(from, 21, "version 2 starts after the rows already written");
    let rows = hashed_rows(&db);
    assert_eq!(&rows[..4], &old[..], "old rows unchanged");
    let (new_seq, _) = rows[4].clone();
    assert!(new_seq >= from);

    // The new row's event_hash is covered ...
    edit_event_hash(&db, new_seq, &"0".repeat(64));
    assert_eq!(
        verify_journal(&db).unwrap_err().to_string(),
        chain_error(new_seq)
    );
    edit_event_hash(&db, new_seq, &rows[4].1);
    // ... an old row's is not (verified as before: chain version 1), so
    // content restored against it never authorizes anything.
    edit_event_hash(&db, old[0].0, &"0".repeat(64));
    verify_journal(&db).unwrap();
    // Moving the version boundary makes rows hash with the other tag.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("UPDATE chain_versions SET from_seq = 1", [])
        .unwrap();
    assert_eq!(verify_journal(&db).unwrap_err().to_string(), chain_error(1));
}

/// What a continuation may restore, and a replay show, from a transcript
/// store: a row linked with chain version 1 (the schema-17 fixture's
/// store-bound content) offers no hash, so its content can never authorize
/// a continuation nor be shown as the journal's; a row written since
/// offers the one its link covers.
#[tokio::test]
async fn only_rows_whose_link_covers_their_event_hash_offer_it_for_restoring() {
    let fixture_dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/journal-v17");
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    for name in [DB_FILE, "controller.db-anchor"] {
        std::fs::copy(fixture_dir.join(name), home.join(name)).unwrap();
    }
    let s = Store::open(options(&home)).unwrap();
    let (thread, old_turn) = s
        .read(|c, _| {
            Ok(c.query_row(
                "SELECT t.id, e.turn_id FROM threads t JOIN events e ON e.thread_id = t.id \
                 WHERE t.transcript_store IS NOT NULL AND e.event_hash IS NOT NULL LIMIT 1",
                [],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
            )?)
        })
        .await
        .unwrap();
    let old = s.gone_payloads(&thread, &old_turn).await.unwrap();
    assert!(!old.is_empty(), "the fixture's content is gone after open");
    assert!(old.iter().all(|(_, h)| h.is_none()), "{old:?}");
    // `journal.replay`'s page offers none for them either (so their
    // content is never shown), though each row does record one.
    let recorded = s
        .read({
            let (id, seqs) = (
                thread.clone(),
                old.iter().map(|(e, _)| e.thread_seq).collect::<Vec<_>>(),
            );
            move |c, _| super::super::read::event_hashes(c, &id, &seqs)
        })
        .await
        .unwrap();
    assert_eq!(recorded.len(), old.len(), "schema 17 recorded each one");
    let (page, hashes) = s.replay_flagged(&thread, 0, 0).await.unwrap();
    assert!(
        old.iter().all(|(e, _)| page
            .events
            .iter()
            .any(|p| p.thread_seq == e.thread_seq && p.payload_unavailable)),
        "{page:?}"
    );
    assert!(hashes.is_empty(), "{hashes:?}");
    let new_turn = s
        .submit_turn(&owner(), submit(&thread, "after-upgrade", "again"))
        .await
        .unwrap()
        .value
        .id;
    s.close().await;
    let s = Store::open(options(&home)).unwrap();
    let new = s.gone_payloads(&thread, &new_turn).await.unwrap();
    assert_eq!(new.len(), 1, "its prompt: {new:?}");
    let (event, hash) = &new[0];
    assert!(event.payload_unavailable);
    assert_eq!(hash.as_deref().map(str::len), Some(64));
    let (_, hashes) = s.replay_flagged(&thread, 0, 0).await.unwrap();
    assert_eq!(
        hashes.into_iter().collect::<Vec<_>>(),
        vec![(event.thread_seq, hash.clone().unwrap())],
        "replay offers the covered row's hash only"
    );
    // Restored with the payload that hashes to it, the content is back
    // for the continuation's check; nothing was written.
    let commits = s.commit_count();
    let mut done = event.clone();
    done.payload = Some(serde_json::json!({"type": "user_message", "text": "x"}));
    done.payload_unavailable = false;
    s.restore_payloads(vec![done.clone()]);
    assert!(
        s.gone_payloads(&thread, &new_turn)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(s.commit_count(), commits);
}
