//! Issue 44 item 5, first slice: a thread exported as a bundle verifies
//! offline, and a bundle edited in any byte is refused naming a range.

use lapis_protocol::Payload;
use serde_json::json;

use super::*;
use crate::domain::{EventKind, Retention};
use crate::store::{DB_FILE, export_thread, verify_bundle};

#[tokio::test]
async fn an_exported_thread_verifies_offline_and_any_edited_byte_is_refused() {
    let Fixture { dir, store } = fixture().await;
    let s = &store;
    workspace(s, dir.path(), "w").await;
    let th = thread(s, "w", Retention::Full).await;
    let other = thread(s, "w", Retention::Full).await;
    let t = s
        .submit_turn(&owner(), submit(&th.id, "c1", "p"))
        .await
        .unwrap()
        .value;
    // Another thread's events between this one's: the bundle skips them.
    s.submit_turn(&owner(), submit(&other.id, "c2", "q"))
        .await
        .unwrap();
    s.try_claim().await.unwrap().unwrap();
    for i in 0..3 {
        s.append_activity(
            &t.id,
            Payload::from_value(
                EventKind::MessageChunk,
                json!({ "text": format!("chunk {i}") }),
            ),
        )
        .await
        .unwrap();
    }
    store.close().await;
    let db = dir.path().join("home").join(DB_FILE);
    let bundle = export_thread(&db, &th.id).unwrap();
    let report = verify_bundle(&bundle).unwrap();
    assert_eq!(report.header.thread, th.id);
    assert_eq!(report.header.retention, "full");
    assert!(report.events >= 5, "{report:?}");
    let text = String::from_utf8(bundle.clone()).unwrap();
    assert!(
        text.contains("chunk 2") && !text.contains(&other.id),
        "{text}"
    );
    assert_eq!(
        export_thread(&db, "thr_nope").unwrap_err().code(),
        "not_found"
    );
    // A unique prefix names the thread; one two threads share is refused.
    let prefix = &th.id[..th.id.len() - 2];
    assert_eq!(export_thread(&db, prefix).unwrap(), bundle);
    assert_eq!(
        export_thread(&db, "thr_").unwrap_err().code(),
        "invalid_request"
    );

    // Every byte edited in turn: refused, naming the line it is in; a
    // header byte may be found at an event (the thread id is in every
    // link) or the trailer (whose digest covers the header's other fields).
    let header_end = text.find('\n').unwrap();
    let trailer = text[..text.len() - 1].rfind('\n').unwrap() + 1;
    for i in 0..bundle.len() {
        let mut edited = bundle.clone();
        edited[i] ^= 0x01;
        let e = verify_bundle(&edited).expect_err(&format!("byte {i} edited was accepted"));
        assert_eq!(e.code(), "bundle_tampered");
        assert!(
            i <= header_end || (e.start <= i && i <= e.end) || e.start >= trailer,
            "byte {i}: {e}"
        );
    }
    // A line removed, or the trailer cut: refused.
    let lines: Vec<&str> = text.lines().collect();
    let without: String = lines
        .iter()
        .enumerate()
        .filter(|(n, _)| *n != 2)
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    assert!(verify_bundle(without.as_bytes()).is_err());
    assert!(verify_bundle(&bundle[..trailer]).is_err());
}

/// A thread whose oldest events were pruned by retention: its tombstones
/// are taken by their stored hashes under their `history_pruned`
/// receipts, so its bundle verifies; an edited tombstone is refused.
#[tokio::test]
async fn a_pruned_thread_exports_and_verifies_and_an_edited_tombstone_is_refused() {
    use crate::domain::TurnEnd;
    use crate::store::retention::{Batch, Limits};
    let Fixture { dir, store } = fixture().await;
    let s = &store;
    workspace(s, dir.path(), "w").await;
    let th = thread(s, "w", Retention::Full).await;
    let limits = Limits {
        max_events: Some(3),
        ..Default::default()
    };
    // Two passes, each with its receipt and tombstones.
    let mut passes = 0;
    for i in 0..4 {
        let t = s
            .submit_turn(&owner(), submit(&th.id, &format!("c{i}"), "p"))
            .await
            .unwrap()
            .value;
        s.try_claim().await.unwrap().unwrap();
        s.mark_dispatched(&t.id, binding()).await.unwrap();
        s.finish_turn(&t.id, TurnEnd::Completed("end_turn".into()))
            .await
            .unwrap();
        if i % 2 == 0 {
            continue;
        }
        let mut c = s
            .history_candidates()
            .await
            .unwrap()
            .into_iter()
            .find(|c| c.thread == th.id)
            .unwrap();
        while let Batch::Pruned { events, bytes, .. } = s.prune_batch(&c, limits, i).await.unwrap()
        {
            c.events -= events;
            c.bytes -= bytes;
            passes += 1;
        }
    }
    assert!(passes >= 2, "{passes}");
    store.close().await;
    let db = dir.path().join("home").join(DB_FILE);
    let bundle = export_thread(&db, &th.id).unwrap();
    let text = String::from_utf8(bundle.clone()).unwrap();
    assert!(text.contains("\"kind\":\"tombstone\""), "{text}");
    verify_bundle(&bundle).unwrap();
    // A tombstone's stored hash edited: its receipt no longer matches (or
    // the next event no longer links); either way refused.
    let at = text.find("\"kind\":\"tombstone\"").unwrap();
    let line_end = at + text[at..].find('\n').unwrap();
    let hash_at = line_end - 3;
    let mut edited = bundle.clone();
    edited[hash_at] = if edited[hash_at] == b'0' { b'1' } else { b'0' };
    let e = verify_bundle(&edited).unwrap_err();
    assert_eq!(e.code(), "bundle_tampered");
    // Also with the digest recomputed: the receipt or the link says so.
    let body_end = text[..text.len() - 1].rfind('\n').unwrap() + 1;
    let mut forged = edited[..body_end].to_vec();
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&forged));
    forged.extend_from_slice(format!("{{\"digest\":\"{digest}\"}}\n").as_bytes());
    let e = verify_bundle(&forged).unwrap_err();
    assert!(
        e.reason.contains("does not link") || e.reason.contains("receipt"),
        "{e}"
    );
    // A tombstone moved out from under its receipt (its `at`, which its
    // hash does not cover), the digest recomputed: no receipt covers it.
    let line_start = text[..at].rfind('\n').unwrap() + 1;
    let line = &text[line_start..line_end];
    let field = line.find("\"at\":").unwrap();
    let digits = line[field + 5..].find(',').unwrap();
    let moved = format!("{}\"at\":0{}", &line[..field], &line[field + 5 + digits..]);
    let body = format!(
        "{}{moved}{}",
        &text[..line_start],
        &text[line_end..body_end]
    );
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(body.as_bytes()));
    let forged = format!("{body}{{\"digest\":\"{digest}\"}}\n");
    let e = verify_bundle(forged.as_bytes()).unwrap_err();
    assert!(e.reason.contains("receipt"), "{e}");
}
