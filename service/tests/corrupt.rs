//! Corrupt databases fail closed at open with a clear, content-free code:
//! a newer schema, a foreign file, a truncated file, rows edited by hand.

use lapis_protocol::Payload;
use std::path::{Path, PathBuf};

use lapis_service::store::DB_FILE;
use lapis_service::{
    Actor, ApprovalPolicy, EventKind, NewThread, Retention, Store, StoreError, StoreOptions,
    SubmitTurn, TurnEnd,
};
use rusqlite::Connection;
use serde_json::json;

struct Populated {
    _dir: tempfile::TempDir,
    home: PathBuf,
    thread: String,
    turn: String,
}

/// A closed store with a workspace, a thread, a completed turn and `chunks` events.
fn populated(chunks: usize) -> Populated {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (thread, turn) = rt.block_on(async {
        let s = Store::open(StoreOptions::new(&home)).unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        s.add_workspace("ws", &ws).await.unwrap();
        let actor = Actor::new("owner", "t");
        let input = NewThread {
            command_id: None,
            workspace_id: "ws".into(),
            provider: "echo".into(),
            approval: ApprovalPolicy::Ask,
            restricted: false,
            retention: Retention::Full,
            mcp_servers: Vec::new(),
            ports: Default::default(),
            thread_id: None,
            permission_timeout_seconds: None,
            budget: None,
        };
        let th = s.create_thread(&actor, input).await.unwrap().value;
        let sub = SubmitTurn {
            command_id: "c1".into(),
            thread_id: th.id.clone(),
            prompt: "p".into(),
            continues: None,
            max_turn_seconds: None,
        };
        let t = s.submit_turn(&actor, sub).await.unwrap().value;
        s.try_claim().await.unwrap().unwrap();
        s.mark_dispatched(&t.id, binding()).await.unwrap();
        let mut last = None;
        for i in 0..chunks {
            last = Some(s.append_activity(
                &t.id,
                Payload::from_value(
                    EventKind::MessageChunk,
                    json!({ "text": format!("chunk {i} {}", "x".repeat(200)) }),
                ),
            ));
        }
        if let Some(l) = last {
            l.await.unwrap();
        }
        s.finish_turn(&t.id, TurnEnd::Completed("end_turn".into()))
            .await
            .unwrap();
        s.close().await;
        (th.id, t.id)
    });
    Populated {
        _dir: dir,
        home,
        thread,
        turn,
    }
}

fn open_err(home: &Path) -> StoreError {
    Store::open(StoreOptions::new(home)).expect_err("open must fail closed")
}

fn edit(home: &Path, sql: &str) {
    let c = Connection::open(home.join(DB_FILE)).unwrap();
    c.pragma_update(None, "foreign_keys", false).unwrap();
    c.execute_batch(sql).unwrap();
}

#[test]
fn intact_store_reopens() {
    let p = populated(10);
    let s = Store::open(StoreOptions::new(&p.home)).unwrap();
    assert_eq!(s.open_report().validated.turns, 1);
    assert!(s.open_report().recovered.is_empty());
}

#[test]
fn newer_schema_fails_closed() {
    let p = populated(0);
    let newer = lapis_service::store::SCHEMA_VERSION + 1;
    edit(&p.home, &format!("PRAGMA user_version = {newer};"));
    let err = open_err(&p.home);
    assert_eq!(err.code(), "store_schema_unsupported");
    assert!(err.to_string().contains(&newer.to_string()));
}

#[test]
fn foreign_database_fails_closed() {
    let p = populated(0);
    edit(&p.home, "PRAGMA application_id = 7;");
    assert_eq!(open_err(&p.home).code(), "store_foreign");
}

#[test]
fn truncated_database_fails_closed() {
    let p = populated(3000);
    let db = p.home.join(DB_FILE);
    let len = std::fs::metadata(&db).unwrap().len();
    assert!(len > 100_000, "store was checkpointed into the main file");
    let f = std::fs::OpenOptions::new().write(true).open(&db).unwrap();
    f.set_len(len / 2).unwrap();
    drop(f);
    assert_eq!(open_err(&p.home).code(), "store_corrupt");
    // Down to a partial header: not a database at all.
    let f = std::fs::OpenOptions::new().write(true).open(&db).unwrap();
    f.set_len(50).unwrap();
    drop(f);
    let code = open_err(&p.home).code();
    assert!(["store_corrupt", "store_foreign"].contains(&code), "{code}");
}

/// Each hand edit names the table, the row and the check; never the content.
#[test]
fn hand_edited_rows_fail_closed_naming_table_and_row_only() {
    let cases: Vec<(String, &str, Option<String>)> = vec![
        ("UPDATE turns SET state = 'SECRET-state'".into(), "turns", None),
        ("UPDATE turns SET state = 'queued'".into(), "turns", None),
        ("UPDATE turns SET dispatched_at = NULL".into(), "turns", None),
        ("UPDATE threads SET approval = 'SECRET'".into(), "threads", None),
        ("UPDATE threads SET agent_fingerprint = 'SECRET'".into(), "threads", None),
        ("UPDATE threads SET agent_thread_version = 99".into(), "threads", None),
        ("UPDATE threads SET agent_session_id = NULL".into(), "threads", None),
        ("UPDATE threads SET mcp_servers = '{SECRET not json'".into(), "threads", None),
        ("UPDATE threads SET mcp_servers = '[\"SECRET value\"]'".into(), "threads", None),
        ("UPDATE threads SET mcp_servers = '[1]'".into(), "threads", None),
        ("UPDATE threads SET budget = '{SECRET not json'".into(), "threads", None),
        ("UPDATE threads SET budget = '{}'".into(), "threads", None),
        ("UPDATE threads SET budget = '{\"cost\": -1}'".into(), "threads", None),
        ("UPDATE turns SET agent_session_id = 'SECRET' || char(10)".into(), "turns", None),
        ("UPDATE turns SET max_turn_seconds = 0".into(), "turns", None),
        ("UPDATE events SET payload = '{SECRET not json' WHERE thread_seq = 5".into(), "events", Some("5".into())),
        ("UPDATE events SET kind = 'SECRET' WHERE seq = 3".into(), "events", Some("3".into())),
        ("UPDATE events SET payload = '[1]' WHERE seq = 2".into(), "events", Some("2".into())),
        ("DELETE FROM events WHERE thread_seq = 4".into(), "events", None),
        ("UPDATE events SET turn_id = 'turn_SECRET' WHERE seq = 6".into(), "events", Some("6".into())),
        ("UPDATE receipts SET digest = 'SECRET'".into(), "receipts", None),
        ("DELETE FROM receipts".into(), "turns", None),
        ("UPDATE workspaces SET path = 'relative/SECRET'".into(), "workspaces", Some("ws".into())),
        (
            "INSERT INTO auth_sessions VALUES ('ses_x', 'owner', 'owner', 'a', 'SECRET', 'ff', 1, NULL, NULL)".into(),
            "auth_sessions",
            Some("ses_x".into()),
        ),
    ];
    for (sql, table, row) in cases {
        let p = populated(10);
        edit(&p.home, &sql);
        let Err(err) = Store::open(StoreOptions::new(&p.home)) else {
            panic!("opened after: {sql}")
        };
        assert_eq!(err.code(), "store_invalid_row", "{sql}");
        match &err {
            StoreError::InvalidRow {
                table: t, row: r, ..
            } => {
                assert_eq!(*t, table, "{sql}");
                if let Some(row) = &row {
                    assert_eq!(r, row, "{sql}");
                }
                if table == "turns" {
                    assert_eq!(r, &p.turn);
                }
                if table == "threads" {
                    assert_eq!(r, &p.thread);
                }
            }
            other => panic!("{other:?}"),
        }
        assert!(!err.to_string().contains("SECRET"), "content leaked: {err}");
    }
}

/// A session binding as the engine passes it at the dispatch boundary.
fn binding() -> lapis_protocol::SessionBinding {
    lapis_protocol::SessionBinding {
        session_id: "sess-1".into(),
        fingerprint: "0".repeat(64),
        thread_version: 1,
    }
}
