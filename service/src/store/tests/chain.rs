//! The tamper-evident journal and redaction at the durable write.

use lapis_protocol::{Chunk, Payload};
use rusqlite::Connection;
use serde_json::json;

use super::*;
use crate::domain::{EventKind, Retention};
use crate::redact::sample_credentials;
use crate::store::{DB_FILE, verify_journal};

/// A store with one claimed turn that streamed `chunks`; returns the home.
async fn journal_with(
    chunks: &[serde_json::Value],
    retention: Retention,
) -> (tempfile::TempDir, String) {
    let Fixture { dir, store } = fixture().await;
    let s = &store;
    workspace(s, dir.path(), "w").await;
    let th = thread(s, "w", retention).await;
    let t = s
        .submit_turn(&owner(), submit(&th.id, "c1", "p"))
        .await
        .unwrap()
        .value;
    s.try_claim().await.unwrap().unwrap();
    for c in chunks {
        s.append_activity(
            &t.id,
            Payload::from_value(EventKind::MessageChunk, c.clone()),
        )
        .await
        .unwrap();
    }
    store.close().await;
    (dir, t.id)
}

fn db(dir: &tempfile::TempDir) -> std::path::PathBuf {
    dir.path().join("home").join(DB_FILE)
}

#[tokio::test]
async fn an_edited_deleted_or_rehashed_row_fails_verification_naming_its_seq() {
    let chunks: Vec<_> = (0..5)
        .map(|i| json!({ "text": format!("chunk {i}") }))
        .collect();
    let (dir, _) = journal_with(&chunks, Retention::Full).await;
    let report = verify_journal(&db(&dir)).unwrap();
    assert!(report.events >= 7, "{report:?}");
    let conn = Connection::open(db(&dir)).unwrap();
    let seq: i64 = conn
        .query_row(
            "SELECT seq FROM events WHERE payload LIKE '%chunk 2%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    // An edited payload: the digest the chain covers no longer matches.
    conn.execute(
        "UPDATE events SET payload = replace(payload, 'chunk 2', 'chunk X') WHERE seq = ?1",
        [seq],
    )
    .unwrap();
    let err = verify_journal(&db(&dir)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}",
            crate::domain::StoreError::InvalidRow {
                table: "events",
                row: seq.to_string(),
                check: "chain"
            }
        )
    );
    // The edited row rehashed to match: the next row no longer chains.
    let prev: Vec<u8> = conn
        .query_row("SELECT hash FROM events WHERE seq = ?1", [seq - 1], |r| {
            r.get(0)
        })
        .unwrap();
    let rehashed = conn
        .query_row(
            "SELECT thread_id, thread_seq, turn_id, kind, at, payload FROM events WHERE seq = ?1",
            [seq],
            |r| {
                let (thread, tseq, turn, kind, at, payload): (
                    String,
                    i64,
                    Option<String>,
                    String,
                    i64,
                    String,
                ) = (
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                );
                Ok(crate::store::chain::link_hash(
                    &prev.clone().try_into().unwrap(),
                    &crate::store::chain::Link {
                        seq,
                        thread_id: thread.as_bytes(),
                        thread_seq: tseq,
                        turn_id: turn.as_deref().map(str::as_bytes),
                        kind: kind.as_bytes(),
                        at,
                        has_payload: true,
                        stored_payload: Some(payload.as_bytes()),
                        event_hash: None,
                        version: crate::store::chain::CURRENT,
                    },
                ))
            },
        )
        .unwrap();
    conn.execute(
        "UPDATE events SET hash = ?2 WHERE seq = ?1",
        rusqlite::params![seq, &rehashed[..]],
    )
    .unwrap();
    let err = verify_journal(&db(&dir)).unwrap_err();
    assert!(
        err.to_string().contains(&format!("{}", seq + 1)) && err.to_string().contains("chain"),
        "{err}"
    );
    // The open fails closed too, with the same seq.
    let open = Store::open(options(&dir.path().join("home"))).unwrap_err();
    assert_eq!(open.code(), "store_invalid_row");
    assert!(open.to_string().contains(&(seq + 1).to_string()), "{open}");
}

/// The error `open` or `verify` gives for `seq` failing `check`.
fn invalid(seq: i64, check: &'static str) -> String {
    crate::domain::StoreError::InvalidRow {
        table: "events",
        row: seq.to_string(),
        check,
    }
    .to_string()
}

/// A journal longer than one batch of the chain check (2,048 rows) is
/// hashed partly on a helper thread: the answer is still the first bad
/// `seq`, whichever batch or thread found it, and a row failing another
/// check before it wins, as in a one-row-at-a-time walk.
#[tokio::test]
async fn a_journal_of_several_batches_still_fails_at_its_first_bad_seq() {
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
    let pending: Vec<_> = (0..7000)
        .map(|i| s.append_activity(&t.id, Payload::MessageChunk(Chunk::text(format!("c{i}.")))))
        .collect();
    for p in pending {
        p.await.unwrap();
    }
    store.close().await;
    let home = dir.path().join("home");
    let report = verify_journal(&db(&dir)).unwrap();
    assert!(report.events > 7000, "{report:?}");
    Store::open(options(&home)).unwrap().close().await;
    let seq_of = |conn: &Connection, text: &str| -> i64 {
        conn.query_row(
            "SELECT seq FROM events WHERE payload = ?1",
            [format!("{{\"text\":\"{text}\",\"type\":\"message\"}}")],
            |r| r.get(0),
        )
        .unwrap()
    };
    let conn = Connection::open(db(&dir)).unwrap();
    let (early, late) = (seq_of(&conn, "c2500."), seq_of(&conn, "c6500."));
    let edit = |seq: i64| {
        conn.execute(
            "UPDATE events SET payload = replace(payload, '.', '!') WHERE seq = ?1",
            [seq],
        )
        .unwrap()
    };
    edit(late);
    assert_eq!(
        verify_journal(&db(&dir)).unwrap_err().to_string(),
        invalid(late, "chain")
    );
    edit(early);
    assert_eq!(
        verify_journal(&db(&dir)).unwrap_err().to_string(),
        invalid(early, "chain")
    );
    let open = Store::open(options(&home)).unwrap_err().to_string();
    assert_eq!(open, invalid(early, "chain"));
    // Another check failing after the first bad link: the link is first.
    conn.execute(
        "UPDATE events SET kind = 'bogus' WHERE seq = ?1",
        [late + 1],
    )
    .unwrap();
    let open = Store::open(options(&home)).unwrap_err().to_string();
    assert_eq!(open, invalid(early, "chain"));
    // … and before it: that check is first.
    let first = seq_of(&conn, "c10.");
    conn.execute("UPDATE events SET kind = 'bogus' WHERE seq = ?1", [first])
        .unwrap();
    let open = Store::open(options(&home)).unwrap_err().to_string();
    assert_eq!(open, invalid(first, "kind"));
}

#[tokio::test]
async fn a_deleted_event_breaks_the_chain_at_the_next_one() {
    let chunks: Vec<_> = (0..3).map(|i| json!({ "text": format!("c{i}") })).collect();
    let (dir, _) = journal_with(&chunks, Retention::Full).await;
    let conn = Connection::open(db(&dir)).unwrap();
    let last: i64 = conn
        .query_row("SELECT max(seq) FROM events", [], |r| r.get(0))
        .unwrap();
    conn.execute("DELETE FROM events WHERE seq = ?1", [last - 1])
        .unwrap();
    conn.execute(
        "UPDATE events SET seq = ?1 WHERE seq = ?2",
        [last - 1, last],
    )
    .unwrap();
    let err = verify_journal(&db(&dir)).unwrap_err();
    assert!(err.to_string().contains(&(last - 1).to_string()), "{err}");
}

#[tokio::test]
async fn a_removed_payload_breaks_the_chain_a_never_written_one_does_not() {
    let (dir, _) = journal_with(&[json!({ "text": "hello" })], Retention::Full).await;
    let conn = Connection::open(db(&dir)).unwrap();
    let seq: i64 = conn
        .query_row(
            "SELECT seq FROM events WHERE kind = 'message_chunk'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    conn.execute("UPDATE events SET payload = NULL WHERE seq = ?1", [seq])
        .unwrap();
    let err = verify_journal(&db(&dir)).unwrap_err();
    assert!(err.to_string().contains(&seq.to_string()), "{err}");
    // A metadata-only thread never wrote its content: it verifies.
    let (dir, _) = journal_with(&[json!({ "text": "hello" })], Retention::MetadataOnly).await;
    verify_journal(&db(&dir)).unwrap();
}

#[tokio::test]
async fn an_unchained_database_is_chained_once_by_the_migration() {
    let (dir, _) = journal_with(&[json!({ "text": "old" })], Retention::Full).await;
    let conn = Connection::open(db(&dir)).unwrap();
    // Back to the shape before the chain (version 3): no hashes, no count,
    // nor what later versions added.
    crate::store::schema::rewind(&conn, 3);
    drop(conn);
    let s = Store::open(options(&dir.path().join("home"))).unwrap();
    s.close().await;
    let report = verify_journal(&db(&dir)).unwrap();
    assert!(report.events >= 3);
    assert_ne!(report.head, hex::encode(crate::store::GENESIS));
}

#[tokio::test]
async fn credentials_are_redacted_before_the_write_secret_ids_omitted_and_counted() {
    let samples = sample_credentials();
    let chunks: Vec<_> = samples
        .iter()
        .map(|s| json!({ "type": "message", "text": s.text, "messageId": "msg-1" }))
        .collect();
    let secret_id = samples[14].text.clone();
    let mut chunks = chunks;
    chunks.push(json!({ "type": "invocation", "id": secret_id, "title": "t" }));
    let (dir, turn) = journal_with(&chunks, Retention::Full).await;
    let s = Store::open(options(&dir.path().join("home"))).unwrap();
    let t = s.get_turn(&turn).await.unwrap();
    assert!(t.redactions >= samples.len() as u64, "{}", t.redactions);
    s.close().await;
    let conn = Connection::open(db(&dir)).unwrap();
    let mut stmt = conn
        .prepare("SELECT payload FROM events WHERE payload IS NOT NULL")
        .unwrap();
    let all: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let all = all.join("\n");
    // Ids are structure: a plain one is kept verbatim, one carrying a
    // credential is omitted whole.
    assert!(all.contains("\"messageId\":\"msg-1\""));
    assert!(all.contains(&format!("\"id\":\"{}\"", crate::redact::OMITTED_ID)));
    for s in &samples {
        assert!(!all.contains(&s.secret), "{} survived", s.detector);
        assert!(all.contains(&format!("[REDACTED:{}]", s.detector)));
    }
}

/// One batch holding long runs (inserted by multi-row statements) and
/// short ones (row by row) of two turns on two threads, one of them
/// metadata-only: every event is stored as if appended alone (contiguous
/// thread sequences, the payload on disk only for the full thread, the
/// chain intact across the runs) and published in order.
#[tokio::test]
async fn interleaved_runs_of_one_batch_are_stored_and_chained_like_single_appends() {
    let Fixture { dir, store } = fixture().await;
    let s = &store;
    workspace(s, dir.path(), "w1").await;
    workspace(s, dir.path(), "w2").await;
    let full = thread(s, "w1", Retention::Full).await;
    let meta = thread(s, "w2", Retention::MetadataOnly).await;
    let mut turns = vec![];
    for (th, cmd) in [(&full, "c1"), (&meta, "c2")] {
        let t = s
            .submit_turn(&owner(), submit(&th.id, cmd, "p"))
            .await
            .unwrap()
            .value;
        s.try_claim().await.unwrap().unwrap();
        turns.push(t);
    }
    let mut sub = s.subscribe();
    let (release, held) = hold_writer(s).await;
    let before = s.commit_count();
    // Runs: 600 full, 1 meta, 1 full, 300 meta, 5 full, 257 meta.
    let mut sent = vec![];
    for (who, n) in [(0, 600), (1, 1), (0, 1), (1, 300), (0, 5), (1, 257)] {
        for _ in 0..n {
            let i = sent.len();
            let payload = Payload::MessageChunk(Chunk::text(format!("e{i}.")));
            sent.push((
                who,
                payload.to_value(),
                s.append_activity(&turns[who].id, payload),
            ));
        }
    }
    release.send(()).unwrap();
    held.await.unwrap().unwrap();
    let mut last_thread_seq = [0u64; 2];
    let mut last_seq = 0;
    for (who, payload, pending) in sent {
        let e = pending.await.unwrap();
        assert!(e.seq > last_seq);
        last_seq = e.seq;
        assert!(
            last_thread_seq[who] == 0 || e.thread_seq == last_thread_seq[who] + 1,
            "thread_seq {} after {}",
            e.thread_seq,
            last_thread_seq[who]
        );
        last_thread_seq[who] = e.thread_seq;
        assert_eq!(e.payload.as_ref(), Some(&payload));
        let published = sub.recv().await.unwrap();
        assert_eq!(published.seq, e.seq);
    }
    assert_eq!(s.commit_count() - before, 1, "one batch, one commit");
    store.close().await;
    verify_journal(&db(&dir)).unwrap();
    let conn = Connection::open(db(&dir)).unwrap();
    let rows = |thread: &str, stored: bool| -> i64 {
        conn.query_row(
            &format!(
                "SELECT count(*) FROM events WHERE thread_id = ?1 AND kind = 'message_chunk' \
                 AND has_payload = 1 AND payload IS {} NULL",
                if stored { "NOT" } else { "" }
            ),
            [thread],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!((rows(&full.id, true), rows(&full.id, false)), (606, 0));
    assert_eq!((rows(&meta.id, true), rows(&meta.id, false)), (0, 558));
    // The open validates the chain and the thread sequences again.
    Store::open(options(&dir.path().join("home")))
        .unwrap()
        .close()
        .await;
}

/// The encoding is pinned: one known link and its hash, computed from
/// the module docs' description alone (a change here is a change of
/// format, which needs a new tag and a migration).
#[test]
fn a_known_link_hashes_to_its_pinned_value() {
    let link = crate::store::chain::Link {
        seq: 3,
        thread_id: b"thr_1",
        thread_seq: 2,
        turn_id: Some(b"turn_1"),
        kind: b"message_chunk",
        at: 1_700_000_000_000,
        has_payload: true,
        stored_payload: Some(br#"{"text":"hello"}"#),
        event_hash: Some(b"ab"),
        version: crate::store::chain::Version::V1,
    };
    assert_eq!(
        hex::encode(crate::store::chain::link_hash(
            &crate::store::GENESIS,
            &link
        )),
        "be7a5a0b05527a6b284fcafedb439f066b53acdd240d58a27be0675f8b1b7e15",
        "version 1 ignores event_hash"
    );
    let v2 = crate::store::chain::Link {
        version: crate::store::chain::Version::V2,
        ..link
    };
    let mut e = b"lapis-journal-chain/2\0".to_vec();
    e.extend_from_slice(&crate::store::GENESIS);
    e.extend_from_slice(&3i64.to_be_bytes());
    e.extend_from_slice(&5u64.to_be_bytes());
    e.extend_from_slice(b"thr_1");
    e.extend_from_slice(&2i64.to_be_bytes());
    for t in [&b"turn_1"[..], b"message_chunk"] {
        e.extend_from_slice(&(t.len() as u64).to_be_bytes());
        e.extend_from_slice(t);
    }
    e.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
    e.push(1);
    for t in [&br#"{"text":"hello"}"#[..], b"ab"] {
        e.extend_from_slice(&(t.len() as u64).to_be_bytes());
        e.extend_from_slice(t);
    }
    let expected: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(&e).into();
    assert_eq!(
        crate::store::chain::link_hash(&crate::store::GENESIS, &v2),
        expected
    );
    let absent = crate::store::chain::Link {
        event_hash: None,
        ..v2
    };
    assert_ne!(
        crate::store::chain::link_hash(&crate::store::GENESIS, &absent),
        expected
    );
}
