//! Journal, retention, replay, snapshots, group commit, sessions, instance lock.

use lapis_protocol::{Chunk, Payload};
use serde_json::json;

use super::*;
use crate::domain::*;
use crate::store::*;
use lapis_protocol::Scope;

#[tokio::test]
async fn metadata_only_payloads_live_in_memory_and_are_unavailable_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let th_id;
    {
        let s = Store::open(options(&home)).unwrap();
        let ws = workspace(&s, dir.path(), "ws1").await;
        let th = thread(&s, &ws.id, Retention::MetadataOnly).await;
        th_id = th.id.clone();
        let t = s
            .submit_turn(&owner(), submit(&th.id, "c1", "secret prompt"))
            .await
            .unwrap()
            .value;
        let c = s.try_claim().await.unwrap().unwrap();
        assert_eq!(c.prompt, "secret prompt");
        s.mark_dispatched(&t.id, super::binding()).await.unwrap();
        s.append_activity(&t.id, Payload::MessageChunk(Chunk::text("private")))
            .await
            .unwrap();
        s.finish_turn(&t.id, TurnEnd::Completed("end_turn".into()))
            .await
            .unwrap();
        let page = s
            .replay(ReplayScope::Thread(th.id.clone()), 0, 0)
            .await
            .unwrap();
        let chunk = page
            .events
            .iter()
            .find(|e| e.kind == EventKind::MessageChunk)
            .unwrap();
        assert_eq!(
            chunk.body(),
            Some(Payload::MessageChunk(Chunk::text("private")))
        );
    }
    let raw = std::fs::read(home.join(DB_FILE)).unwrap();
    let wal = std::fs::read(home.join("controller.db-wal")).unwrap_or_default();
    for (name, bytes) in [("db", &raw), ("wal", &wal)] {
        let hay = String::from_utf8_lossy(bytes);
        assert!(!hay.contains("private"), "payload reached the {name}");
        assert!(
            !hay.contains("secret prompt"),
            "prompt kept in the {name} after claim"
        );
    }
    let s = Store::open(options(&home)).unwrap();
    let err = s
        .replay(ReplayScope::Thread(th_id.clone()), 0, 0)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "transcript_unavailable");
    // Metadata is still there: the page before the first missing payload
    // (the prompt's `user_message`) replays.
    let page = s
        .replay(ReplayScope::Thread(th_id.clone()), 0, 2)
        .await
        .unwrap();
    assert_eq!(page.events.len(), 2);
    let owner_page = s
        .replay(
            ReplayScope::Owner {
                principal: "owner".into(),
                application: None,
            },
            0,
            0,
        )
        .await
        .unwrap();
    assert!(
        owner_page
            .events
            .iter()
            .any(|e| e.payload_unavailable && e.payload.is_none())
    );
}

#[tokio::test]
async fn replay_pages_are_bounded_and_snapshots_say_when_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(&dir.path().join("home"));
    o.snapshot_tail = 5;
    o.page_max = 7;
    let s = Store::open(o).unwrap();
    let ws = workspace(&s, dir.path(), "ws1").await;
    let th = thread(&s, &ws.id, Retention::Full).await;
    let other = thread(&s, &ws.id, Retention::Full).await;
    let t = s
        .submit_turn(&owner(), submit(&th.id, "c1", "p"))
        .await
        .unwrap()
        .value;
    s.try_claim().await.unwrap().unwrap();
    let mut last = None;
    for i in 0..20 {
        last = Some(s.append_activity(
            &t.id,
            Payload::from_value(EventKind::MessageChunk, json!(i)),
        ));
    }
    last.unwrap().await.unwrap();
    let mut after = 0;
    let mut all = vec![];
    loop {
        let page = s
            .replay(ReplayScope::Thread(th.id.clone()), after, 100)
            .await
            .unwrap();
        assert!(page.events.len() <= 7);
        all.extend(page.events.iter().map(|e| e.thread_seq));
        after = page.next_after;
        if !page.more {
            break;
        }
    }
    assert_eq!(all, (1..=all.len() as u64).collect::<Vec<_>>());
    // thread created, turn submitted, user message, claim, prepared, 20 chunks.
    assert_eq!(all.len(), 1 + 1 + 1 + 1 + 1 + 20);
    let snap = s.thread_snapshot(&th.id).await.unwrap();
    assert!(snap.truncated);
    assert_eq!(snap.tail.len(), 5);
    assert_eq!(snap.last_thread_seq, all.len() as u64);
    assert_eq!(snap.tail.last().unwrap().payload, Some(json!(19)));
    assert_eq!(snap.recent_turns[0].id, t.id);
    let small = s.thread_snapshot(&other.id).await.unwrap();
    assert!(!small.truncated);
    assert_eq!(small.tail.len(), 1);
    // Owner-wide replay covers both threads in global order.
    let scope = ReplayScope::Owner {
        principal: "owner".into(),
        application: Some("test-app".into()),
    };
    let page = s.replay(scope, 0, 3).await.unwrap();
    assert_eq!(
        page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert!(page.more);
    let none = ReplayScope::Owner {
        principal: "owner".into(),
        application: Some("x".into()),
    };
    assert!(s.replay(none, 0, 0).await.unwrap().events.is_empty());
}

#[tokio::test]
async fn auth_sessions_persist_and_revoke() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let hash = "ab".repeat(32);
    let id;
    {
        let s = Store::open(options(&home)).unwrap();
        let new = NewAuthSession {
            credential: "owner".into(),
            principal: "owner".into(),
            application: "cli".into(),
            scopes: vec![Scope::ThreadsRead],
            bearer_sha256: hash.clone(),
            expires_at: Some(99_999),
        };
        let bad = NewAuthSession {
            bearer_sha256: "not-hex".into(),
            ..new.clone()
        };
        assert_eq!(
            s.issue_session(bad, 16).await.unwrap_err().code(),
            "invalid_request"
        );
        id = s.issue_session(new, 16).await.unwrap().session.id;
    }
    let s = Store::open(options(&home)).unwrap();
    let found = s
        .find_session_by_credential("owner")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.id, id);
    assert_eq!(found.scopes, vec![Scope::ThreadsRead]);
    assert_eq!(
        s.find_session_by_bearer_hash(&hash)
            .await
            .unwrap()
            .unwrap()
            .id,
        id
    );
    let revoked = s.revoke_session(&id).await.unwrap();
    assert!(revoked.revoked_at.is_some());
    assert!(
        s.find_session_by_credential("owner")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        s.find_session_by_bearer_hash(&hash)
            .await
            .unwrap()
            .unwrap()
            .revoked_at
            .is_some()
    );
    assert_eq!(
        s.revoke_session("ses_nope").await.unwrap_err().code(),
        "not_found"
    );
}

#[tokio::test]
async fn a_second_open_fails_with_instance_locked() {
    let f = fixture().await;
    let err = Store::open(options(&f.dir.path().join("home"))).unwrap_err();
    assert_eq!(err.code(), "instance_locked");
    assert!(err.to_string().contains(&std::process::id().to_string()));
    f.store.close().await;
    Store::open(options(&f.dir.path().join("home"))).unwrap();
}

#[tokio::test]
async fn queued_streamed_appends_share_one_commit_and_publish_in_order() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    let t = s
        .submit_turn(&owner(), submit(&th.id, "c1", "p"))
        .await
        .unwrap()
        .value;
    s.try_claim().await.unwrap().unwrap();
    let mut sub = s.subscribe();
    // Hold the writer so every append below is waiting in its channel.
    let (release, held) = hold_writer(s).await;
    let before = s.commit_count();
    let pending: Vec<_> = (0..500)
        .map(|i| {
            s.append_activity(
                &t.id,
                Payload::from_value(EventKind::MessageChunk, json!(i)),
            )
        })
        .collect();
    release.send(()).unwrap();
    held.await.unwrap().unwrap();
    let mut seqs = vec![];
    for p in pending {
        seqs.push(p.await.unwrap().seq);
    }
    assert_eq!(
        s.commit_count() - before,
        1,
        "one transaction, one fsync for the batch"
    );
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1));
    for (i, seq) in seqs.iter().enumerate() {
        let e = sub.recv().await.unwrap();
        assert_eq!((e.seq, e.payload.clone()), (*seq, Some(json!(i))));
    }
}

/// While the publisher thread still delivers a large batch, a later small
/// batch is not delivered on the writer ahead of it: its answer waits for
/// the large batch's last reply, and every event is published once, in
/// `seq` order, before its answer.
#[tokio::test]
async fn a_small_batch_is_not_delivered_ahead_of_a_large_one_still_being_delivered() {
    use crate::store::writer::{Cmd, Op, OpMode, Reply};
    use std::sync::mpsc::channel;
    use std::task::{Context, Waker};

    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    let t = s
        .submit_turn(&owner(), submit(&th.id, "c1", "p"))
        .await
        .unwrap()
        .value;
    s.try_claim().await.unwrap().unwrap();
    let mut sub = s.subscribe();
    // A large batch (handed off) whose last reply blocks the publisher
    // until `unblock` fires.
    let (release, held) = hold_writer(s).await;
    let big: Vec<_> = (0..100)
        .map(|i| {
            s.append_activity(
                &t.id,
                Payload::from_value(EventKind::MessageChunk, json!(i)),
            )
        })
        .collect();
    let (delivering, in_reply) = channel::<()>();
    let (unblock, gate) = channel::<()>();
    let job: Op = Box::new(move |_| -> Reply {
        Box::new(move |_, _| {
            let _ = delivering.send(());
            let _ = gate.recv();
        })
    });
    s.send(Cmd::Op(job, OpMode::Durable)).unwrap();
    release.send(()).unwrap();
    in_reply.recv().unwrap();
    // A small batch commits meanwhile; an operation queued after it runs
    // once the writer is past that batch's delivery.
    let before = s.commit_count();
    let mut small = Box::pin(s.append_activity(
        &t.id,
        Payload::from_value(EventKind::MessageChunk, json!(100)),
    ));
    while s.commit_count() == before {
        tokio::task::yield_now().await;
    }
    let (ran, on_writer) = tokio::sync::oneshot::channel::<()>();
    let job: Op = Box::new(move |_| -> Reply {
        // Runs on the writer, in the batch after the small one.
        let _ = ran.send(());
        Box::new(|_, _| {})
    });
    s.send(Cmd::Op(job, OpMode::Detached)).unwrap();
    on_writer.await.unwrap();
    let mut cx = Context::from_waker(Waker::noop());
    assert!(
        small.as_mut().poll(&mut cx).is_pending(),
        "answered before the batch ahead of it was delivered"
    );
    unblock.send(()).unwrap();
    let small = small.await.unwrap();
    held.await.unwrap().unwrap();
    let mut seqs = vec![];
    for p in big {
        seqs.push(p.await.unwrap().seq);
    }
    seqs.push(small.seq);
    for seq in seqs {
        assert_eq!(sub.recv().await.unwrap().seq, seq, "published in order");
    }
}

#[tokio::test]
async fn queued_operations_share_one_commit_and_a_refused_one_rolls_back_alone() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    s.submit_turn(&owner(), submit(&th.id, "c0", "first"))
        .await
        .unwrap();
    // Hold the writer so every operation below is waiting in its channel.
    let (release, held) = hold_writer(s).await;
    let before = s.commit_count();
    let mut pending = Vec::new();
    for i in 1..=20 {
        let s = s.clone();
        let th = th.id.clone();
        // c0 again with another prompt: refused as a conflict, in the middle.
        let (cmd, prompt) = if i == 10 {
            ("c0".to_owned(), "different".to_owned())
        } else {
            (format!("c{i}"), format!("p{i}"))
        };
        pending.push(tokio::spawn(async move {
            s.submit_turn(&owner(), submit(&th, &cmd, &prompt)).await
        }));
        // On this single-threaded runtime the task runs up to its await on
        // the writer's reply, so its operation is queued before the next.
        tokio::task::yield_now().await;
    }
    release.send(()).unwrap();
    held.await.unwrap().unwrap();
    let mut accepted = 0;
    for (i, p) in pending.into_iter().enumerate() {
        match p.await.unwrap() {
            Ok(_) => accepted += 1,
            Err(e) => {
                assert_eq!(i + 1, 10, "only the conflicting submission fails: {e}");
                assert_eq!(e.code(), "conflict");
            }
        }
    }
    assert_eq!(accepted, 19);
    assert_eq!(
        s.commit_count() - before,
        1,
        "nineteen submissions, one transaction, one fsync"
    );
    // The refusal left nothing behind; the others are all durable.
    f.store.close().await;
    let again = Store::open(options(&f.dir.path().join("home"))).unwrap();
    let turns = again.list_turns(TurnFilter::default()).await.unwrap();
    assert_eq!(turns.len(), 20, "c0 plus nineteen accepted");
    assert!(turns.iter().all(|t| t.state == TurnState::Queued));
}

#[tokio::test]
async fn database_files_are_0600_and_an_existing_home_is_tightened_to_0700() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    let store = Store::open(options(&home)).unwrap();
    // A write makes sure the WAL and the shared-memory file exist.
    workspace(&store, dir.path(), "ws1").await;
    let mode = |name: &str| {
        std::fs::metadata(home.join(name))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode(""), 0o700);
    for name in ["controller.db", "controller.db-wal", "controller.db-shm"] {
        assert_eq!(mode(name), 0o600, "{name}");
    }
    store.close().await;
    // An older version's world-readable files are tightened at the next open.
    for name in ["controller.db", "controller.db-wal", "controller.db-shm"] {
        let p = home.join(name);
        if p.exists() {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
    let store = Store::open(options(&home)).unwrap();
    workspace(&store, dir.path(), "ws2").await;
    for name in ["controller.db", "controller.db-wal", "controller.db-shm"] {
        assert_eq!(mode(name), 0o600, "{name}");
    }
    store.close().await;
}

/// A batch's first write runs without a savepoint (`Writer::write`): when
/// it fails after writing, the whole still-empty transaction is rolled back
/// and reopened, so what it wrote is gone and the operations after it in
/// the batch still commit together.
#[tokio::test]
async fn a_failed_first_write_of_a_batch_rolls_back_alone() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    let (release, held) = hold_writer(s).await;
    let before = s.commit_count();
    let failing = {
        let s = s.clone();
        tokio::spawn(async move {
            s.op(|w| {
                w.write(|tx, _, _, now| {
                    tx.execute(
                        "INSERT INTO workspaces (id, path, created_at) VALUES ('ghost', '/ghost', ?1)",
                        [now],
                    )?;
                    Err::<(), _>(StoreError::invalid("refused after writing"))
                })
            })
            .await
        })
    };
    tokio::task::yield_now().await;
    let mut pending = Vec::new();
    for i in 0..3 {
        let (s, th) = (s.clone(), th.id.clone());
        pending.push(tokio::spawn(async move {
            s.submit_turn(&owner(), submit(&th, &format!("f{i}"), "after"))
                .await
        }));
        tokio::task::yield_now().await;
    }
    release.send(()).unwrap();
    held.await.unwrap().unwrap();
    assert!(failing.await.unwrap().is_err());
    for p in pending {
        p.await.unwrap().expect("the submissions after it commit");
    }
    assert_eq!(s.commit_count() - before, 1, "one transaction for the rest");
    f.store.close().await;
    let again = Store::open(options(&f.dir.path().join("home"))).unwrap();
    assert_eq!(
        again.list_turns(TurnFilter::default()).await.unwrap().len(),
        3
    );
    let workspaces = again.list_workspaces().await.unwrap();
    assert!(workspaces.iter().all(|w| w.id != "ghost"), "{workspaces:?}");
}
