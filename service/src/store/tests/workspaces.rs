//! `workspaces.remove`: refused while a turn waits on the workspace; a
//! removed workspace leaves a database that reopens, verifies and keeps its
//! threads readable; the same id and directory bring it back.

use super::*;
use crate::domain::*;
use crate::store::*;

#[tokio::test]
async fn remove_is_refused_while_a_turn_is_queued_claimed_or_fenced() {
    let f = fixture().await;
    let s = &f.store;
    let ws = workspace(s, f.dir.path(), "ws1").await;
    let th = thread(s, &ws.id, Retention::Full).await;
    let queued = s
        .submit_turn(&owner(), submit(&th.id, "c1", "p"))
        .await
        .unwrap()
        .value;
    let busy = |e: StoreError| match e {
        StoreError::WorkspaceBusy { turn, state, .. } => (turn, state),
        other => panic!("expected workspace_busy, got {other:?}"),
    };
    let err = s.remove_workspace(&owner(), "ws1").await.unwrap_err();
    assert_eq!(err.code(), "workspace_busy");
    assert_eq!(busy(err), (queued.id.clone(), TurnState::Queued));

    s.try_claim().await.unwrap().expect("runnable");
    let err = s.remove_workspace(&owner(), "ws1").await.unwrap_err();
    assert_eq!(busy(err), (queued.id.clone(), TurnState::Preparing));

    s.mark_dispatched(&queued.id, binding()).await.unwrap();
    s.finish_turn(
        &queued.id,
        TurnEnd::Unknown(lapis_protocol::OutcomeCode::AgentExited),
    )
    .await
    .unwrap();
    let err = s.remove_workspace(&owner(), "ws1").await.unwrap_err();
    assert_eq!(err.code(), "workspace_fenced");

    s.resolve_turn(&owner(), &queued.id, ResolveAs::Failed, true, None)
        .await
        .unwrap();
    let removed = s.remove_workspace(&owner(), "ws1").await.unwrap();
    assert!(!removed.replayed);
    assert_eq!((removed.workspace, removed.threads), (ws, 1));
}

#[tokio::test]
async fn a_removed_workspace_reopens_verifies_and_comes_back_with_its_threads() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let s = Store::open(options(&home)).unwrap();
    let ws = workspace(&s, dir.path(), "ws1").await;
    let kept = workspace(&s, dir.path(), "ws2").await;
    let th = thread(&s, &ws.id, Retention::Full).await;
    let t = s
        .submit_turn(&owner(), submit(&th.id, "c1", "p"))
        .await
        .unwrap()
        .value;
    s.try_claim().await.unwrap().unwrap();
    s.mark_dispatched(&t.id, binding()).await.unwrap();
    s.finish_turn(&t.id, TurnEnd::Completed("end_turn".into()))
        .await
        .unwrap();
    s.remove_workspace(&owner(), "ws1").await.unwrap();
    // Again: a retry, not an error.
    assert!(s.remove_workspace(&owner(), "ws1").await.unwrap().replayed);
    assert_eq!(
        s.remove_workspace(&owner(), "nope")
            .await
            .unwrap_err()
            .code(),
        "not_found"
    );
    assert_eq!(s.list_workspaces().await.unwrap(), vec![kept.clone()]);
    // No new work there: neither a thread nor a turn on an old thread.
    let err = s
        .create_thread(
            &owner(),
            NewThread {
                command_id: None,
                workspace_id: "ws1".into(),
                provider: "echo".into(),
                approval: ApprovalPolicy::Ask,
                restricted: false,
                retention: Retention::Full,
                mcp_servers: Vec::new(),
                ports: Default::default(),
                thread_id: None,
                permission_timeout_seconds: None,
                budget: None,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "not_found");
    let err = s
        .submit_turn(&owner(), submit(&th.id, "c2", "p"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_request");
    assert!(err.to_string().contains("was removed"), "{err}");
    // Another id for its directory, or its id for another directory: no.
    assert_eq!(
        s.add_workspace("ws3", &dir.path().join("ws1"))
            .await
            .unwrap_err()
            .code(),
        "workspace_alias"
    );
    assert_eq!(
        s.add_workspace("ws1", &dir.path().join("ws2"))
            .await
            .unwrap_err()
            .code(),
        "conflict"
    );
    s.close().await;

    // The next open validates every row (threads of a removed workspace
    // included), the chain verifies, and history is still there.
    let s = Store::open(options(&home)).unwrap();
    verify_journal(&home.join(DB_FILE)).unwrap();
    assert_eq!(s.list_workspaces().await.unwrap(), vec![kept]);
    assert_eq!(s.get_thread(&th.id).await.unwrap().workspace_id, "ws1");
    let snap = s.thread_snapshot(&th.id).await.unwrap();
    assert!(!snap.tail.is_empty());

    // The same id for the same directory restores it, threads and all.
    let back = s
        .add_workspace("ws1", &dir.path().join("ws1"))
        .await
        .unwrap();
    assert!(!back.replayed);
    assert_eq!(back.value, ws);
    s.submit_turn(&owner(), submit(&th.id, "c2", "p"))
        .await
        .unwrap();
}

/// One tree has one workspace (issue 43 item 5): a directory inside,
/// containing, or the same inode as (a bind mount of) a registered
/// workspace is refused `workspace_overlaps`, naming it; a sibling whose
/// name shares a prefix is not an overlap, and a removed workspace does
/// not count.
#[tokio::test]
#[allow(clippy::disallowed_methods)] // mounts with mount(8) itself
async fn a_nested_containing_or_bind_mounted_directory_overlaps() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(options(&dir.path().join("home"))).unwrap();
    let root = dir.path().join("proj");
    let nested = root.join("sub/deeper");
    std::fs::create_dir_all(&nested).unwrap();
    std::fs::create_dir_all(dir.path().join("proj-2")).unwrap();
    s.add_workspace("proj", &root.join("sub")).await.unwrap();
    for (id, path, how) in [
        ("inner", nested.clone(), "inside"),
        ("outer", root.clone(), "contains"),
    ] {
        let err = s.add_workspace(id, &path).await.unwrap_err();
        assert_eq!(err.code(), "workspace_overlaps", "{id}");
        assert!(err.to_string().contains("`proj`"), "{err}");
        assert!(err.to_string().contains(how), "{err}");
    }
    // A prefix of the name is not a parent.
    s.add_workspace("proj-2", &dir.path().join("proj-2"))
        .await
        .unwrap();
    // A bind mount of the tree elsewhere is the same directory (where this
    // machine lets the test mount).
    let bind = dir.path().join("bind");
    std::fs::create_dir_all(&bind).unwrap();
    let mounted = std::process::Command::new("mount")
        .arg("--bind")
        .arg(root.join("sub"))
        .arg(&bind)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|st| st.success());
    if mounted {
        let same = s.add_workspace("bind", &bind).await.unwrap_err();
        let inside = s.add_workspace("bind-deeper", &bind.join("deeper")).await;
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&bind)
            .status();
        assert_eq!(same.code(), "workspace_overlaps");
        assert!(same.to_string().contains("same directory"), "{same}");
        assert_eq!(inside.unwrap_err().code(), "workspace_overlaps");
    } else {
        eprintln!("bind mount part skipped: mounting needs root (CAP_SYS_ADMIN)");
    }
    // A removed workspace leaves its tree free.
    s.remove_workspace(&owner(), "proj").await.unwrap();
    s.add_workspace("inner", &nested).await.unwrap();
}
