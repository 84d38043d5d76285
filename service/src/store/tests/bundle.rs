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
