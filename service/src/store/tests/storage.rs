//! Storage faults at commit (the disk filled by another file between a
//! write and its batch's `COMMIT`), injected with `FAIL_COMMITS`.

use super::*;
use crate::domain::*;
use crate::store::writer::{FAIL_COMMITS, FREE_BYTES, RESUME_FREE_BYTES};

/// The next `n` batch commits fail as a full disk does; the setting
/// operation's own batch is the first of them.
async fn fail_commits(store: &Store, n: u32) {
    let err = store
        .op(move |_| {
            FAIL_COMMITS.with(|c| c.set(n));
            Ok(())
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), "storage_unavailable");
}

#[tokio::test]
async fn a_turn_end_rolled_back_by_a_full_disk_is_storage_unavailable_and_commits_on_retry() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    s.submit_turn(&owner(), submit(&th.id, "c1", "hello"))
        .await
        .unwrap();
    let claim = s.try_claim().await.unwrap().expect("runnable");
    s.mark_dispatched(&claim.turn.id, binding()).await.unwrap();
    s.mark_running(&claim.turn.id).await.unwrap();

    fail_commits(s, 2).await;
    let err = s
        .finish_turn(&claim.turn.id, TurnEnd::Completed("end_turn".into()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "storage_unavailable", "{err}");
    assert_eq!(err.storage_condition(), Some("disk_full"));
    assert_eq!(s.storage_fault(), Some("disk_full"));
    // Reads answer meanwhile; the turn is still in flight.
    let t = s.get_turn(&claim.turn.id).await.unwrap();
    assert_eq!(t.state, TurnState::Running);
    assert_eq!(s.status().running_workspaces, vec!["ws1".to_owned()]);
    // A submit refused by the full disk says so too.
    fail_commits(s, 2).await;
    let err = s
        .submit_turn(&owner(), submit(&th.id, "c2", "again"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "storage_unavailable", "{err}");

    // Space returns: the same end commits.
    let done = s
        .finish_turn(&claim.turn.id, TurnEnd::Completed("end_turn".into()))
        .await
        .unwrap();
    assert_eq!(done.turn.state, TurnState::Completed);
    assert_eq!(s.storage_fault(), None);
    assert!(s.status().running_workspaces.is_empty());
}

#[tokio::test]
async fn a_turn_the_store_cannot_end_is_fenced_in_memory_and_recovered_at_open() {
    let f = fixture().await;
    let home = f.dir.path().join("home");
    let s = f.store.clone();
    let ws = workspace(&s, f.dir.path(), "ws1").await;
    let th = thread(&s, &ws.id, Retention::Full).await;
    s.submit_turn(&owner(), submit(&th.id, "c1", "hello"))
        .await
        .unwrap();
    let claim = s.try_claim().await.unwrap().expect("runnable");
    s.mark_dispatched(&claim.turn.id, binding()).await.unwrap();
    // An end the store refuses (not a storage condition) ...
    let err = s
        .finish_turn(&claim.turn.id, TurnEnd::Completed("end turn".into()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_request");
    // ... leaves the workspace in flight until the turn is fenced.
    assert_eq!(s.status().running_workspaces, vec!["ws1".to_owned()]);
    s.fence_in_memory(&claim.turn.id).await.unwrap();
    let st = s.status();
    assert!(st.running_workspaces.is_empty(), "{st:?}");
    assert_eq!(st.fenced_workspaces, vec!["ws1".to_owned()]);
    let err = s
        .submit_turn(&owner(), submit(&th.id, "c2", "next"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "workspace_fenced");
    // A restart's recovery makes it a resolvable fence.
    drop(s);
    f.store.close().await;
    let s = Store::open(options(&home)).unwrap();
    let t = s.get_turn(&claim.turn.id).await.unwrap();
    assert_eq!(t.state, TurnState::SubmissionUnknown);
}

/// Sets the free space the writer sees.
async fn free_space(store: &Store, bytes: u64) {
    store
        .op(move |_| {
            FREE_BYTES.with(|c| c.set(Some(bytes)));
            Ok(())
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn a_full_disk_holds_writes_until_it_has_room_again() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    free_space(s, 64 << 10).await;
    fail_commits(s, 1).await;
    assert_eq!(s.storage_fault(), Some("disk_full"));
    let commits = s.counts().commits;
    // A small write would fit (the commits no longer fail), but 64 KiB
    // free is not room: it is refused before it touches the database.
    for command in ["c1", "c2"] {
        let err = s
            .submit_turn(&owner(), submit(&th.id, command, "hello"))
            .await
            .unwrap_err();
        assert_eq!(err.storage_condition(), Some("disk_full"), "{err}");
        assert_eq!(s.storage_fault(), Some("disk_full"));
    }
    assert_eq!(s.counts().commits, commits);
    assert!(s.list_turns(turns_of(&th.id)).await.unwrap().is_empty());
    // Room again: the next write commits and the fault clears.
    free_space(s, RESUME_FREE_BYTES).await;
    s.submit_turn(&owner(), submit(&th.id, "c1", "hello"))
        .await
        .unwrap();
    assert_eq!(s.storage_fault(), None);
    // A fault that is not a full disk holds nothing.
    free_space(s, 0).await;
    assert_eq!(s.list_turns(turns_of(&th.id)).await.unwrap().len(), 1);
}

fn turns_of(thread: &str) -> TurnFilter {
    TurnFilter {
        thread_id: Some(thread.to_owned()),
        ..TurnFilter::default()
    }
}
