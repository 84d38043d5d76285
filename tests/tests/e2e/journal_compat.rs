//! A journal written before the typed payloads (`lapis_protocol::Payload`)
//! reads and verifies unchanged: `tests/fixtures/journal-v1/controller.db`
//! was produced by [`generate_fixture`] on the code of commit "e2e: a
//! journal fixture written by the untyped journal", before any payload was
//! typed. Never regenerate it with newer code: its point is that older
//! bytes are what the reader is tested against.

use std::time::Duration;

use lapis_service::domain::{SessionBinding, ThreadPatch};
use lapis_service::{
    ApprovalPolicy, EventKind, NewThread, ResolveAs, Retention, Store, StoreOptions, SubmitTurn,
    TurnEnd, TurnState,
};
use serde_json::json;

use crate::acp_engine::{Rig, owner};

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Writes the fixture: every kind of event the controller journals, from
/// real turns of the fixture agent (run by hand:
/// `cargo test -p lapis-e2e --test e2e generate_fixture -- --ignored`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes tests/fixtures/journal-v1; run by hand on the old code only"]
async fn generate_fixture() {
    let scratch = tempfile::tempdir().unwrap();
    let idle = scratch.path().join("idle");
    let idle_arg = idle.to_string_lossy().into_owned();
    let rig = Rig::start(
        &[
            (
                "rich",
                args(&[
                    "--chunks",
                    "2",
                    "--thoughts",
                    "1",
                    "--tool-calls",
                    "2",
                    "--plan",
                    "--message-id",
                    "--permissions",
                    "1",
                    "--after-response",
                    "1",
                    "--idle-request",
                    &idle_arg,
                ]),
            ),
            ("perm", args(&["--permissions", "1"])),
            ("hang", args(&["--chunks", "1", "--hang"])),
            ("dies", args(&["--exit-at", "prompt"])),
        ],
        Duration::from_secs(5),
    );
    // A turn with every kind of agent output, a user answer, late output
    // and a late answer.
    let rich = rig.thread("ws-rich", "rich", ApprovalPolicy::Ask).await;
    let turn = rig.submit(&rich, "c-rich", "do everything").await;
    let request = loop {
        if let Some(p) = rig.engine.pending_permissions(Some(&turn)).first() {
            break p.request_id.clone();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    rig.engine
        .respond_permission(
            &turn,
            &request,
            lapis_service::acp::PermissionAnswer::Selected {
                option_id: "opt-allow_once".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(rig.settled(&turn).await.state, TurnState::Completed);
    for _ in 0..2000 {
        if idle.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _ = rig
        .engine
        .respond_permission(
            &turn,
            &request,
            lapis_service::acp::PermissionAnswer::Cancelled,
        )
        .await;
    // A transition the table refuses, and a late append.
    let _ = rig
        .store
        .finish_turn(&turn, TurnEnd::Failed("too_late".into()))
        .await;
    let _ = rig
        .store
        .append_activity(
            &turn,
            EventKind::MessageChunk,
            Some(json!({"type": "message", "text": "after the end"})),
        )
        .await;

    // allow-all: an automatic decision.
    let auto = rig
        .thread("ws-auto", "perm", ApprovalPolicy::AllowAll)
        .await;
    let turn = rig.submit(&auto, "c-auto", "approve yourself").await;
    rig.settled(&turn).await;

    // A cancel the agent honours.
    let hang = rig.thread("ws-hang", "hang", ApprovalPolicy::Ask).await;
    let turn = rig.submit(&hang, "c-hang", "wait").await;
    rig.wait(&turn, |t| t.state == TurnState::Running).await;
    rig.store.request_cancel(&owner(), &turn).await.unwrap();
    rig.settled(&turn).await;

    // A lost outcome, resolved by the owner.
    let dies = rig.thread("ws-dies", "dies", ApprovalPolicy::Ask).await;
    let turn = rig.submit(&dies, "c-dies", "vanish").await;
    assert_eq!(rig.settled(&turn).await.state, TurnState::SubmissionUnknown);
    rig.store
        .resolve_turn(&owner(), &turn, ResolveAs::Failed, true, Some("c-resolve"))
        .await
        .unwrap();

    // MCP servers nobody configured: refused before dispatch.
    let path = rig.path("ws-mcp");
    std::fs::create_dir_all(&path).unwrap();
    rig.store.add_workspace("ws-mcp", &path).await.unwrap();
    let mcp = rig
        .store
        .create_thread(
            &owner(),
            NewThread {
                command_id: Some("c-mcp-thread".into()),
                workspace_id: "ws-mcp".into(),
                provider: "echo".into(),
                approval: ApprovalPolicy::Ask,
                restricted: true,
                retention: Retention::Full,
                mcp_servers: vec!["tickets".into()],
            },
        )
        .await
        .unwrap()
        .value
        .id;
    let turn = rig.submit(&mcp, "c-mcp", "use tickets").await;
    rig.settled(&turn).await;

    // A reconfigured thread, metadata-only from then on (its content is
    // gone after the restart).
    let meta = rig.thread("ws-meta", "echo", ApprovalPolicy::Ask).await;
    let version = rig.store.get_thread(&meta).await.unwrap().version;
    rig.store
        .configure_thread(
            &owner(),
            &meta,
            version,
            ThreadPatch {
                provider: None,
                approval: Some(ApprovalPolicy::AllowAll),
                restricted: Some(true),
                retention: Some(Retention::MetadataOnly),
            },
            Some("c-configure"),
        )
        .await
        .unwrap();
    let turn = rig.submit(&meta, "c-meta", "forget me").await;
    rig.settled(&turn).await;
    let echo = rig.thread("ws-echo", "echo", ApprovalPolicy::Ask).await;
    let turn = rig.submit(&echo, "c-echo", "echo me").await;
    rig.settled(&turn).await;
    let Rig {
        dir,
        store,
        engine,
        handle,
    } = rig;
    handle.unwrap().shutdown().await;
    drop(engine);

    // A turn in flight when the controller stops: recovered at the next open.
    let path = dir.path().join("ws-lost");
    std::fs::create_dir_all(&path).unwrap();
    store.add_workspace("ws-lost", &path).await.unwrap();
    let lost = store
        .create_thread(
            &owner(),
            NewThread {
                command_id: None,
                workspace_id: "ws-lost".into(),
                provider: "echo".into(),
                approval: ApprovalPolicy::Ask,
                restricted: false,
                retention: Retention::Full,
                mcp_servers: Vec::new(),
            },
        )
        .await
        .unwrap()
        .value
        .id;
    let turn = store
        .submit_turn(
            &owner(),
            SubmitTurn {
                command_id: "c-lost".into(),
                thread_id: lost,
                prompt: "in flight".into(),
                continues: None,
                max_turn_seconds: None,
            },
        )
        .await
        .unwrap()
        .value
        .id;
    let claim = store.try_claim().await.unwrap().unwrap();
    assert_eq!(claim.turn.id, turn);
    store
        .mark_dispatched(
            &turn,
            SessionBinding {
                session_id: "s-lost".into(),
                fingerprint: "0".repeat(64),
                thread_version: 1,
            },
        )
        .await
        .unwrap();
    let home = dir.path().join("home");
    store.close().await;
    let store = Store::open(StoreOptions::new(home.clone())).unwrap();
    store.flush().await.unwrap();
    store.close().await;

    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/journal-v1");
    std::fs::create_dir_all(&out).unwrap();
    let db = home.join(lapis_service::store::DB_FILE);
    assert!(
        !home
            .join(format!("{}-wal", lapis_service::store::DB_FILE))
            .exists()
            || std::fs::metadata(home.join(format!("{}-wal", lapis_service::store::DB_FILE)))
                .unwrap()
                .len()
                == 0,
        "the WAL was checkpointed at close"
    );
    std::fs::copy(&db, out.join("controller.db")).unwrap();
}
