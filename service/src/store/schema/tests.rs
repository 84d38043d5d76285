use super::*;

#[test]
fn fresh_file_is_migrated_and_reopen_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DB_FILE);
    drop(open_writer(&path).unwrap());
    let conn = open_writer(&path).unwrap();
    let v: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    let a: i64 = conn
        .pragma_query_value(None, "application_id", |r| r.get(0))
        .unwrap();
    assert_eq!((v, a), (SCHEMA_VERSION, APPLICATION_ID));
}

/// A version-1 database (before agent sessions) upgrades in place: its
/// rows keep their values and the new columns start empty.
#[test]
fn a_version_1_database_upgrades_to_agent_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DB_FILE);
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(MIGRATIONS[0].sql).unwrap();
        conn.pragma_update(None, "application_id", APPLICATION_ID)
            .unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        conn.execute_batch(
            "INSERT INTO workspaces VALUES ('ws', '/w', 1); \
             INSERT INTO threads VALUES ('thr_1', 'owner', 'app', 'ws', 'echo', 'ask', 0, \
             'full', 3, 1, 1);",
        )
        .unwrap();
    }
    let conn = open_writer(&path).unwrap();
    let v: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(v, SCHEMA_VERSION);
    let (version, session): (i64, Option<String>) = conn
        .query_row(
            "SELECT version, agent_session_id FROM threads WHERE id = 'thr_1'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((version, session), (3, None));
}

/// A version-4 database (before prepared configurations) upgrades in
/// place: turns claimed before it have no prepared record.
#[test]
fn a_version_4_database_upgrades_to_prepared_configurations() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DB_FILE);
    {
        let conn = Connection::open(&path).unwrap();
        migrate(&conn, &path, 0).unwrap();
        rewind(&conn, 4);
        conn.execute_batch(
            "INSERT INTO workspaces VALUES ('ws', '/w', 1); \
             INSERT INTO threads (id, principal, application, workspace_id, provider, approval, \
             restricted, retention, version, created_at, updated_at) \
             VALUES ('thr_1', 'owner', 'app', 'ws', 'echo', 'ask', 0, 'full', 1, 1, 1); \
             INSERT INTO turns (id, thread_id, workspace_id, principal, command_id, queue_seq, \
             state, outcome, created_at, updated_at, prepared_at, finished_at) \
             VALUES ('turn_1', 'thr_1', 'ws', 'owner', 'c1', 1, 'failed', 'x', 1, 1, 1, 1);",
        )
        .unwrap();
    }
    let conn = open_writer(&path).unwrap();
    let v: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(v, SCHEMA_VERSION);
    let prepared: Option<String> = conn
        .query_row("SELECT prepared FROM turns WHERE id = 'turn_1'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(prepared, None);
}

/// A version-5 database (before MCP servers) upgrades in place: its
/// threads select none, and reading them stays valid.
#[test]
fn a_version_5_database_upgrades_to_mcp_server_names() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DB_FILE);
    {
        let conn = Connection::open(&path).unwrap();
        migrate(&conn, &path, 0).unwrap();
        rewind(&conn, 5);
        conn.execute_batch(
            "INSERT INTO workspaces VALUES ('ws', '/w', 1); \
             INSERT INTO threads (id, principal, application, workspace_id, provider, approval, \
             restricted, retention, version, created_at, updated_at) \
             VALUES ('thr_1', 'owner', 'app', 'ws', 'echo', 'ask', 0, 'full', 1, 1, 1);",
        )
        .unwrap();
    }
    let conn = open_writer(&path).unwrap();
    let v: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(v, SCHEMA_VERSION);
    let thread = super::super::read::thread(&conn, "thr_1").unwrap().unwrap();
    assert!(thread.mcp_servers.is_empty());
}

/// A version-8 database (before tool endpoints) upgrades in place: its
/// threads bind none, and reading them stays valid.
#[test]
fn a_version_8_database_upgrades_to_tool_endpoint_names() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DB_FILE);
    {
        let conn = Connection::open(&path).unwrap();
        migrate(&conn, &path, 0).unwrap();
        rewind(&conn, 8);
        conn.execute_batch(
            "INSERT INTO workspaces VALUES ('ws', '/w', 1); \
             INSERT INTO threads (id, principal, application, workspace_id, provider, approval, \
             restricted, retention, version, created_at, updated_at) \
             VALUES ('thr_1', 'owner', 'app', 'ws', 'echo', 'ask', 0, 'full', 1, 1, 1);",
        )
        .unwrap();
    }
    let conn = open_writer(&path).unwrap();
    let v: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(v, SCHEMA_VERSION);
    let thread = super::super::read::thread(&conn, "thr_1").unwrap().unwrap();
    assert!(thread.ports.tools.is_empty());
}

/// A version-11 database (before context and memory ports and reserved
/// thread ids) upgrades in place: its threads bind no port, and
/// reservations can be taken.
#[test]
fn a_version_11_database_upgrades_to_ports_and_reservations() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DB_FILE);
    {
        let conn = Connection::open(&path).unwrap();
        migrate(&conn, &path, 0).unwrap();
        rewind(&conn, 11);
        conn.execute_batch(
            "INSERT INTO workspaces VALUES ('ws', '/w', 1, NULL); \
             INSERT INTO threads (id, principal, application, workspace_id, provider, approval, \
             restricted, retention, version, created_at, updated_at) \
             VALUES ('thr_1', 'owner', 'app', 'ws', 'echo', 'ask', 0, 'full', 1, 1, 1);",
        )
        .unwrap();
    }
    let conn = open_writer(&path).unwrap();
    let v: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(v, SCHEMA_VERSION);
    let thread = super::super::read::thread(&conn, "thr_1").unwrap().unwrap();
    assert_eq!((thread.ports.context, thread.ports.memory), (None, None));
    conn.execute(
        "INSERT INTO thread_reservations VALUES ('thr_2', 'owner', 'app', 1)",
        [],
    )
    .unwrap();
}

#[test]
fn newer_schema_and_foreign_databases_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DB_FILE);
    drop(open_writer(&path).unwrap());
    Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", 99)
        .unwrap();
    assert_eq!(
        open_writer(&path).unwrap_err().code(),
        "store_schema_unsupported"
    );

    let other = dir.path().join("other.db");
    Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t(x)")
        .unwrap();
    assert_eq!(open_writer(&other).unwrap_err().code(), "store_foreign");
}

/// A version-1 database keeps its receipts: each takes the application
/// of the thread it names (directly, or through its turn).
#[test]
fn a_version_1_database_keys_its_receipts_by_application() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DB_FILE);
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(MIGRATIONS[0].sql).unwrap();
        conn.pragma_update(None, "application_id", APPLICATION_ID)
            .unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        conn.execute_batch(
            "INSERT INTO workspaces VALUES ('ws', '/w', 1); \
             INSERT INTO threads VALUES ('thr_1', 'owner', 'editor', 'ws', 'echo', 'ask', 0, \
             'full', 1, 1, 1); \
             INSERT INTO turns (id, thread_id, workspace_id, principal, command_id, queue_seq, \
             state, prompt, created_at, updated_at) \
             VALUES ('turn_1', 'thr_1', 'ws', 'owner', 'submit-1', 1, 'queued', 'p', 1, 1); \
             INSERT INTO receipts VALUES ('owner', 'create-1', 'thread.create', 'd1', 'thr_1', 1); \
             INSERT INTO receipts VALUES ('owner', 'submit-1', 'turn.submit', 'd2', 'turn_1', 2);",
        )
        .unwrap();
    }
    let conn = open_writer(&path).unwrap();
    let rows: Vec<(String, String, String, Option<String>)> = conn
        .prepare(
            "SELECT application, command_id, resource_id, result FROM receipts \
             ORDER BY created_at",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        rows,
        [
            ("editor".into(), "create-1".into(), "thr_1".into(), None),
            ("editor".into(), "submit-1".into(), "turn_1".into(), None),
        ]
    );
}
