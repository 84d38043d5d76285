//! Issue 44 item 5's import: a bundle journaled again as a new thread of
//! another store — new ids, settled turns, content as exported, the
//! chain and every row verifying on reopen; refusals write nothing.

use lapis_protocol::{ErrorCode, Payload};

use super::*;
use crate::domain::ReplayScope;
use crate::domain::{EventKind, Retention, StoreError, TurnState};
use crate::store::{DB_FILE, TurnFilter, export_thread, plan_import, verify_journal};

/// The bundle of a thread of `retention` with two finished turns (marker
/// `m`), from a store of its own (closed).
async fn bundle_of(retention: Retention, m: &str) -> Vec<u8> {
    let Fixture { dir, store } = fixture().await;
    workspace(&store, dir.path(), "w").await;
    let th = thread(&store, "w", retention).await;
    finished_turn(&store, &th.id, "c1", m).await;
    finished_turn(&store, &th.id, "c2", m).await;
    store.close().await;
    export_thread(&dir.path().join("home").join(DB_FILE), &th.id).unwrap()
}

fn code(e: StoreError) -> ErrorCode {
    match e {
        StoreError::ImportRefused { code, .. } => code,
        other => panic!("not a refusal: {other}"),
    }
}

async fn events_of(s: &Store, thread: &str) -> Vec<crate::domain::JournalEvent> {
    s.replay(ReplayScope::Thread(thread.to_owned()), 0, 1000)
        .await
        .unwrap()
        .events
}

#[tokio::test]
async fn a_full_thread_imports_with_new_ids_settled_turns_and_its_content() {
    let bundle = bundle_of(Retention::Full, "MARK-full").await;
    let exported = crate::store::verify_bundle(&bundle).unwrap();
    let Fixture { dir, store } = fixture().await;
    workspace(&store, dir.path(), "other").await;
    let plan = plan_import(&bundle).unwrap();
    let (receipt, th, seq) = store.import_thread(&owner(), "other", plan).await.unwrap();
    assert_ne!(th.id, exported.header.thread);
    assert_eq!(th.workspace_id, "other");
    assert_eq!(receipt.source_thread_id, exported.header.thread);
    assert_eq!(receipt.events, exported.events);
    assert_eq!((receipt.turns, receipt.pruned), (2, 0));
    let events = events_of(&store, &th.id).await;
    assert_eq!(events.len() as u64, exported.events + 1);
    let last = events.last().unwrap();
    assert_eq!((last.seq, last.kind), (seq, EventKind::ThreadImported));
    assert!(matches!(last.body(), Some(Payload::ThreadImported(r)) if r == receipt));
    let text = serde_json::to_string(&events[..events.len() - 1]).unwrap();
    assert!(text.contains("MARK-full"));
    assert!(
        !text.contains(&exported.header.thread),
        "source ids replaced"
    );
    let turns = store
        .list_turns(TurnFilter {
            thread_id: Some(th.id.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(turns.len(), 2);
    assert!(turns.iter().all(|t| t.state == TurnState::Completed));
    // A new turn runs on it.
    store
        .submit_turn(&owner(), submit(&th.id, "c3", "again"))
        .await
        .unwrap();
    assert!(store.try_claim().await.unwrap().is_some());
    store.close().await;
    // Every row validates on reopen; the chain verifies; its export too.
    let db = dir.path().join("home").join(DB_FILE);
    verify_journal(&db).unwrap();
    let again = export_thread(&db, &th.id).unwrap();
    crate::store::verify_bundle(&again).unwrap();
    let store = Store::open(options(&dir.path().join("home"))).unwrap();
    store.close().await;
}

#[tokio::test]
async fn a_metadata_only_thread_imports_without_content() {
    let bundle = bundle_of(Retention::MetadataOnly, "MARK-meta").await;
    assert!(!String::from_utf8_lossy(&bundle).contains("MARK-meta"));
    let Fixture { dir, store } = fixture().await;
    workspace(&store, dir.path(), "w").await;
    let (_, th, _) = store
        .import_thread(&owner(), "w", plan_import(&bundle).unwrap())
        .await
        .unwrap();
    assert_eq!(th.retention, Retention::MetadataOnly);
    store.close().await;
    let db = dir.path().join("home").join(DB_FILE);
    // The reply chunks: had a payload, none stored.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let chunks: Vec<(bool, Option<String>)> = conn
        .prepare("SELECT has_payload, payload FROM events WHERE thread_id = ?1 AND kind = 'message_chunk'")
        .unwrap()
        .query_map([&th.id], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    drop(conn);
    assert_eq!(chunks.len(), 6);
    assert!(
        chunks.iter().all(|(had, p)| *had && p.is_none()),
        "{chunks:?}"
    );
    verify_journal(&db).unwrap();
    let raw = std::fs::read(&db).unwrap();
    assert!(!String::from_utf8_lossy(&raw).contains("MARK-meta"));
    Store::open(options(&dir.path().join("home")))
        .unwrap()
        .close()
        .await;
}

#[tokio::test]
async fn refused_bundles_write_nothing() {
    let bundle = bundle_of(Retention::Full, "MARK-r").await;
    let Fixture { dir, store } = fixture().await;
    workspace(&store, dir.path(), "w").await;
    // Tampered, with the byte range.
    let text = String::from_utf8(bundle.clone()).unwrap();
    let at = text.find("MARK-r").unwrap();
    let mut edited = bundle.clone();
    edited[at] ^= 1;
    match plan_import(&edited).unwrap_err() {
        StoreError::ImportRefused { code, data, .. } => {
            assert_eq!(code, ErrorCode::BundleTampered);
            let (s, e) = (
                data["start"].as_u64().unwrap(),
                data["end"].as_u64().unwrap(),
            );
            assert!(s as usize <= at && at < e as usize);
        }
        other => panic!("{other}"),
    }
    // Another format version.
    // Another format version (sealed by its own digest); the same edit
    // without the digest recomputed is tampering.
    let other = text.replacen("lapis-thread-bundle/1", "lapis-thread-bundle/9", 1);
    assert_eq!(
        code(plan_import(other.as_bytes()).unwrap_err()),
        ErrorCode::BundleTampered
    );
    let body_end = other[..other.len() - 1].rfind('\n').unwrap() + 1;
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
        &other.as_bytes()[..body_end],
    ));
    let sealed = format!("{}{{\"digest\":\"{digest}\"}}\n", &other[..body_end]);
    assert_eq!(
        code(plan_import(sealed.as_bytes()).unwrap_err()),
        ErrorCode::BundleUnsupported
    );
    // Too large.
    let big = vec![b' '; lapis_protocol::MAX_IMPORT_BUNDLE_BYTES + 1];
    assert_eq!(
        code(plan_import(&big).unwrap_err()),
        ErrorCode::BundleTooLarge
    );
    // An unknown workspace.
    let e = store
        .import_thread(&owner(), "nope", plan_import(&bundle).unwrap())
        .await
        .unwrap_err();
    assert_eq!(e.code(), "not_found");
    let threads = store.list_threads(Default::default()).await.unwrap();
    assert!(threads.is_empty(), "nothing written");
    store.close().await;
}

#[tokio::test]
async fn a_bundle_with_an_unsettled_turn_is_refused() {
    let Fixture { dir, store } = fixture().await;
    workspace(&store, dir.path(), "w").await;
    let th = thread(&store, "w", Retention::Full).await;
    store
        .submit_turn(&owner(), submit(&th.id, "c1", "p"))
        .await
        .unwrap();
    store.close().await;
    let bundle = export_thread(&dir.path().join("home").join(DB_FILE), &th.id).unwrap();
    assert_eq!(
        code(plan_import(&bundle).unwrap_err()),
        ErrorCode::BundleUnsettled
    );
}

/// A thread retention pruned: its tombstones and receipts are left out
/// (counted), the rest imports and verifies.
#[tokio::test]
async fn a_pruned_thread_imports_without_its_pruned_events() {
    use crate::store::retention::{Batch, Limits};
    let Fixture { dir, store } = fixture().await;
    let s = &store;
    workspace(s, dir.path(), "w").await;
    let th = thread(s, "w", Retention::Full).await;
    for i in 0..3 {
        finished_turn(s, &th.id, &format!("c{i}"), "MARK-p").await;
    }
    let limits = Limits {
        max_events: Some(8),
        ..Default::default()
    };
    let mut c = s
        .history_candidates()
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.thread == th.id)
        .unwrap();
    while let Batch::Pruned { events, bytes, .. } = s.prune_batch(&c, limits, 1).await.unwrap() {
        c.events -= events;
        c.bytes -= bytes;
    }
    store.close().await;
    let bundle = export_thread(&dir.path().join("home").join(DB_FILE), &th.id).unwrap();
    let Fixture { dir, store } = fixture().await;
    workspace(&store, dir.path(), "w").await;
    // Its `thread_created` was pruned: the provider must be named.
    let mut plan = plan_import(&bundle).unwrap();
    assert_eq!(plan.provider(), None);
    plan.set_provider("echo".into()).unwrap();
    let (receipt, th, _) = store.import_thread(&owner(), "w", plan).await.unwrap();
    assert!(receipt.pruned > 0, "{receipt:?}");
    assert_eq!(
        events_of(&store, &th.id).await.len() as u64,
        receipt.events + 1
    );
    store.close().await;
    verify_journal(&dir.path().join("home").join(DB_FILE)).unwrap();
    Store::open(options(&dir.path().join("home")))
        .unwrap()
        .close()
        .await;
}
