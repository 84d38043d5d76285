//! A journal written before the typed payloads (`lapis_protocol::Payload`)
//! reads, types and verifies unchanged.
//!
//! `tests/fixtures/journal-v1/controller.db` was written by real turns of
//! the fixture agent on the untyped journal (the `generate_fixture` test of
//! commit 6cee501, `git show 6cee501:tests/tests/e2e/journal_compat.rs`),
//! before any payload was typed. Never regenerate it with newer code: its
//! point is that older bytes are what the reader is tested against.
//!
//! What the test pins: the chain verifies (`journal verify`, and the
//! store's own open validates every row); every stored payload reads as its
//! typed [`Payload`], never `Unknown`; and writing that typed value again
//! gives the stored text byte for byte, so what the server writes now is
//! what it wrote then and the hash chain cannot tell them apart.

use std::collections::BTreeSet;
use std::path::Path;

use lapis_e2e::TestContext;
use lapis_protocol::{EventKind, JournalEvent, Observation, Payload};
use lapis_service::{ReplayScope, Store, StoreOptions};

/// Events in the fixture.
const EVENTS: u64 = 101;

fn fixture_db() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/journal-v1/controller.db")
}

/// The fixture's controller home inside a test HOME (the default path).
fn home_with_fixture(ctx: &TestContext) -> std::path::PathBuf {
    let home = ctx.home().join(".lapis/ai-controller");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::copy(fixture_db(), home.join(lapis_service::store::DB_FILE)).unwrap();
    home
}

/// `(seq, stored payload text)` of every event, as the database holds it.
fn stored_texts(db: &Path) -> Vec<(u64, Option<String>)> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let mut stmt = conn
        .prepare("SELECT seq, payload FROM events ORDER BY seq")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A name for what a payload is, to check the fixture covers every shape.
fn shape(p: &Payload) -> String {
    match p {
        Payload::Observation(o) => match o {
            Observation::SessionStarted { .. } => "observation/session_started",
            Observation::Note(n) => return format!("observation/note/{}", n.kind()),
            Observation::Noted { .. } => "observation/noted",
            Observation::CancelSent => "observation/cancel_sent",
            Observation::Stopped { .. } => "observation/stopped",
            Observation::LateUpdate { .. } => "observation/late_update",
            Observation::LateAppend(_) => "observation/late_append",
            Observation::Ignored(_) => "observation/ignored",
        }
        .to_owned(),
        Payload::PermissionDecided(d) if d.decided_by.is_none() => "late_answer".to_owned(),
        other => other.kind().as_str().to_owned(),
    }
}

async fn replay_all(store: &Store) -> Vec<JournalEvent> {
    let scope = ReplayScope::Owner {
        principal: "owner".into(),
        application: None,
    };
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let page = store.replay(scope.clone(), after, 0).await.unwrap();
        out.extend(page.events);
        after = page.next_after;
        if !page.more {
            return out;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_written_before_typed_payloads_reads_typed_and_verifies_unchanged() {
    let ctx = TestContext::new();
    crate::serve_support::write_config(&ctx, serde_json::json!({}), serde_json::json!({}));
    let home = home_with_fixture(&ctx);
    let db = home.join(lapis_service::store::DB_FILE);
    let before = stored_texts(&db);
    assert_eq!(before.len() as u64, EVENTS);

    let verified = ctx.run(["journal", "verify", "--json"]).success().json();
    assert_eq!(verified["verified"], true, "{verified}");
    assert_eq!(verified["events"], EVENTS);

    // Open validates every retained row (and recovers nothing: the
    // fixture's one in-flight turn was recovered when it was written).
    let store = Store::open(StoreOptions::new(home.clone())).unwrap();
    let events = replay_all(&store).await;
    store.close().await;
    assert_eq!(events.len() as u64, EVENTS);
    // Opening upgraded the copy in place to this build's schema, and the
    // upgrade anchored the journal as it was (issue 24 item 4).
    let version: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, lapis_service::store::SCHEMA_VERSION);
    let anchor: serde_json::Value =
        serde_json::from_slice(&std::fs::read(home.join("controller.db-anchor")).unwrap()).unwrap();
    assert_eq!(anchor["events"], EVENTS);
    assert_eq!(anchor["head"], verified["head"]);

    let mut shapes = BTreeSet::new();
    let mut kinds = BTreeSet::new();
    for (e, (seq, text)) in events.iter().zip(&before) {
        assert_eq!(e.seq, *seq);
        kinds.insert(e.kind.as_str());
        let Some(body) = e.body() else {
            // Content of the metadata-only thread, gone since its restart.
            assert!(e.payload_unavailable && text.is_none(), "seq {seq}");
            continue;
        };
        assert!(
            !matches!(body, Payload::Unknown { .. }),
            "seq {seq} ({}) did not type: {text:?}",
            e.kind.as_str()
        );
        assert_eq!(body.kind(), e.kind);
        // Written again, the typed payload is the stored text, byte for byte.
        let again = serde_json::to_string(&body.to_value()).unwrap();
        assert_eq!(Some(&again), text.as_ref(), "seq {seq}");
        // What a late append wrapped types too.
        if let Payload::Observation(Observation::LateAppend(late)) = &body {
            let inner = Payload::from_value(late.late, late.data.clone());
            assert!(!matches!(inner, Payload::Unknown { .. }), "seq {seq}");
            shapes.insert(format!("late/{}", shape(&inner)));
        }
        shapes.insert(shape(&body));
    }
    // Every kind there was when the fixture was written; kinds added since
    // (application tool calls, issue 25; prepared context, issue 26;
    // workspace snapshots, issue 31; deletion, retention and import receipts,
    // issue 44)
    // cannot be in it, and their stored form is pinned by lapis-protocol's
    // payload tests instead.
    let added_since = [
        EventKind::ToolCallRequested,
        EventKind::ToolCallFinished,
        EventKind::ContextPrepared,
        EventKind::MemoryRecalled,
        EventKind::WorkspaceSnapshot,
        EventKind::ThreadDeleted,
        EventKind::HistoryPruned,
        EventKind::ThreadImported,
    ];
    let every_kind: BTreeSet<&str> = EventKind::ALL
        .iter()
        .filter(|k| !added_since.contains(k))
        .map(|k| k.as_str())
        .collect();
    assert_eq!(
        kinds, every_kind,
        "the fixture holds every kind of its time"
    );
    for expected in [
        "observation/session_started",
        "observation/noted",
        "observation/cancel_sent",
        "observation/stopped",
        "observation/late_append",
        "observation/ignored",
        "late/observation/late_update",
        "late/late_answer",
        "late/message_chunk",
    ] {
        assert!(shapes.contains(expected), "no {expected} in {shapes:?}");
    }

    // Reading changed nothing: same rows, and the chain still verifies.
    assert_eq!(stored_texts(&db), before);
    let again = ctx.run(["journal", "verify", "--json"]).success().json();
    assert_eq!(again["head"], verified["head"]);
}

/// A journal written at schema 17 (chain version 1, with `event_hash`
/// recorded for a store-bound thread's content: `tests/fixtures/journal-v17`,
/// written by commit f7fb9d6's `generate_v17_fixture`; never regenerate it)
/// verifies before and after its upgrade to chain version 2, with the same
/// head; a row written after it covers its `event_hash`; and the boundary
/// where version 2 starts is itself covered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_17_journal_verifies_unchanged_across_the_chain_version_upgrade() {
    let ctx = TestContext::new();
    crate::serve_support::write_config(&ctx, serde_json::json!({}), serde_json::json!({}));
    let home = ctx.home().join(".lapis/ai-controller");
    std::fs::create_dir_all(&home).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/journal-v17");
    for name in [lapis_service::store::DB_FILE, "controller.db-anchor"] {
        std::fs::copy(fixture.join(name), home.join(name)).unwrap();
    }
    let db = home.join(lapis_service::store::DB_FILE);
    let before = stored_texts(&db);
    let verified = ctx.run(["journal", "verify", "--json"]).success().json();
    assert_eq!(verified["events"], 20, "{verified}");
    Store::open(StoreOptions::new(home.clone()))
        .unwrap()
        .close()
        .await;
    let again = ctx.run(["journal", "verify", "--json"]).success().json();
    assert_eq!(
        again["head"], verified["head"],
        "old rows keep their hashes"
    );
    assert_eq!(stored_texts(&db), before);
    // A row written after the upgrade (a prompt of the store-bound thread,
    // its content in memory, its event_hash recorded) has its event_hash
    // in the chain: edited at rest, `journal verify` names its row.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let bound: String = conn
        .query_row(
            "SELECT id FROM threads WHERE transcript_store IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    drop(conn);
    let store = Store::open(StoreOptions::new(home.clone())).unwrap();
    let submit = lapis_service::SubmitTurn {
        command_id: "after-upgrade".into(),
        thread_id: bound,
        prompt: "again".into(),
        continues: None,
        max_turn_seconds: None,
    };
    store
        .submit_turn(&lapis_service::Actor::new("owner", "test-app"), submit)
        .await
        .unwrap();
    store.close().await;
    ctx.run(["journal", "verify"]).success();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (seq, recorded): (i64, String) = conn
        .query_row(
            "SELECT seq, event_hash FROM events WHERE event_hash IS NOT NULL \
             ORDER BY seq DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(seq > 20, "a new row: {seq}");
    let forged = "0".repeat(64);
    conn.execute(
        "UPDATE events SET event_hash = ?2 WHERE seq = ?1",
        rusqlite::params![seq, forged],
    )
    .unwrap();
    let out = ctx.run(["journal", "verify", "--json"]);
    out.expect_code(2);
    let err = out.json();
    assert_eq!(err["error"]["details"]["seq"], seq, "{err}");
    assert_eq!(err["error"]["details"]["check"], "chain", "{err}");
    conn.execute(
        "UPDATE events SET event_hash = ?2 WHERE seq = ?1",
        rusqlite::params![seq, recorded],
    )
    .unwrap();
    drop(conn);
    ctx.run(["journal", "verify"]).success();
    // Version 2 starts after the old rows; claiming it started at row 1
    // makes row 1 hash with the other tag.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("UPDATE chain_versions SET from_seq = 1", [])
        .unwrap();
    let out = ctx.run(["journal", "verify", "--json"]);
    out.expect_code(2);
    let err = out.json();
    assert_eq!(err["error"]["code"], "journal_tampered", "{err}");
    assert_eq!(err["error"]["details"]["seq"], 1, "{err}");
    assert_eq!(err["error"]["details"]["check"], "chain", "{err}");
}
