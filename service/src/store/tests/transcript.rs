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
