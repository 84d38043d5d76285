//! Schema 23 (`threads.named_ports`): a database at 22 upgrades, its
//! threads' port bindings (each in its column) survive the upgrade, and a
//! migration to 23 that fails midway leaves the file at 22 with them.

use rusqlite::Connection;

use super::*;
use crate::store::DB_FILE;
use lapis_protocol::{PortIdentities, ThreadPorts};

fn version(db: &Path) -> i64 {
    Connection::open(db)
        .unwrap()
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

/// Whether `threads` has the `named_ports` column.
fn has_named_ports(db: &Path) -> bool {
    Connection::open(db)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM pragma_table_info('threads') WHERE name = 'named_ports'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .unwrap()
        == 1
}

/// Every port kind bound, each with its identity.
fn every_port() -> ThreadPorts {
    ThreadPorts {
        tools: vec!["files".into(), "search".into()],
        context: Some("ctx".into()),
        memory: Some("mem".into()),
        transcript_store: Some("vault".into()),
        identities: PortIdentities {
            tools: [("files".into(), "tools_a".into())].into(),
            context: Some("context_b".into()),
            memory: Some("memory_c".into()),
            transcript_store: Some("transcript_d".into()),
        },
    }
}

fn create(ws: &str) -> NewThread {
    NewThread {
        command_id: Some("create-1".into()),
        workspace_id: ws.into(),
        provider: "echo".into(),
        approval: ApprovalPolicy::Ask,
        restricted: false,
        retention: Retention::MetadataOnly,
        mcp_servers: Vec::new(),
        ports: every_port(),
        thread_id: None,
        permission_timeout_seconds: None,
        budget: None,
    }
}

#[tokio::test]
async fn a_version_22_database_upgrades_and_its_threads_keep_their_ports() {
    let Fixture { dir, store } = fixture().await;
    let home = dir.path().join("home");
    let ws = workspace(&store, dir.path(), "a").await;
    let made = store.create_thread(&owner(), create(&ws.id)).await.unwrap();
    assert_eq!(made.value.ports, every_port());
    store.close().await;
    let db = home.join(DB_FILE);
    crate::store::schema::rewind(&Connection::open(&db).unwrap(), 22);
    assert!(!has_named_ports(&db));

    // Crash safety: the step to 23 fails after the steps before it; the
    // file is left at 22 (restored from its backup), bindings intact.
    std::fs::write(home.join(".test-fail-migration"), "23").unwrap();
    let err = Store::open(options(&home)).unwrap_err();
    assert_eq!(err.code(), "store_migration_failed", "{err}");
    assert_eq!(version(&db), 22);
    assert!(!has_named_ports(&db));
    std::fs::remove_file(home.join(".test-fail-migration")).unwrap();

    let store = Store::open(options(&home)).unwrap();
    assert_eq!(version(&db), SCHEMA_VERSION);
    assert!(has_named_ports(&db));
    let read = store.get_thread(&made.value.id).await.unwrap();
    assert_eq!(read.ports, every_port());
    let named: Option<String> = Connection::open(&db)
        .unwrap()
        .query_row("SELECT named_ports FROM threads", [], |r| r.get(0))
        .unwrap();
    assert_eq!(named, None, "the four first kinds keep their columns");
    // The create receipt's digest is the one made before the upgrade: the
    // same request replays to the same thread.
    let again = store.create_thread(&owner(), create(&ws.id)).await.unwrap();
    assert_eq!(again.value.id, made.value.id);
    store.close().await;
}
