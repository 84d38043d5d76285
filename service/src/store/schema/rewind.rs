//! Test support: take a database back to an older schema version, as a
//! file written by an older build would be, by undoing migrations newest
//! first. Upgrade tests start from here instead of each repeating what
//! every later migration added.
//!
//! What must stay true: `UNDO[i]` undoes exactly `MIGRATIONS[i]`'s DDL (its
//! data steps — backfilled hashes, dropped prompts, the anchor file — are
//! not undone; a test that needs that state sets it up itself). The array is
//! sized by [`SCHEMA_VERSION`], so a new migration does not compile in tests
//! until it says how to undo it, and
//! `every_version_rewinds_and_upgrades_back_to_the_current_schema` checks
//! that undoing then migrating again gives the current schema back.

use rusqlite::Connection;

use super::SCHEMA_VERSION;

/// `UNDO[i]` takes the schema from version `i + 1` back to `i`. Version 0
/// is an empty file: the first migration is never undone.
const UNDO: [&str; SCHEMA_VERSION as usize] = [
    "",
    "ALTER TABLE threads DROP COLUMN agent_session_id; \
     ALTER TABLE threads DROP COLUMN agent_fingerprint; \
     ALTER TABLE threads DROP COLUMN agent_thread_version; \
     ALTER TABLE turns DROP COLUMN agent_session_id; \
     ALTER TABLE turns DROP COLUMN max_turn_seconds;",
    "CREATE TABLE receipts_v2 (
         principal   TEXT NOT NULL,
         command_id  TEXT NOT NULL,
         kind        TEXT NOT NULL,
         digest      TEXT NOT NULL,
         resource_id TEXT NOT NULL,
         created_at  INTEGER NOT NULL,
         PRIMARY KEY (principal, command_id)
     ) WITHOUT ROWID;
     INSERT OR IGNORE INTO receipts_v2
         SELECT principal, command_id, kind, digest, resource_id, created_at FROM receipts;
     DROP TABLE receipts;
     ALTER TABLE receipts_v2 RENAME TO receipts;",
    "ALTER TABLE events DROP COLUMN hash; ALTER TABLE turns DROP COLUMN redactions;",
    "ALTER TABLE turns DROP COLUMN prepared;",
    "ALTER TABLE threads DROP COLUMN mcp_servers;",
    "DROP INDEX events_user_message;",
    "DROP INDEX events_turn_submitted;",
    "ALTER TABLE workspaces DROP COLUMN removed_at;",
    "ALTER TABLE threads DROP COLUMN tools; DROP INDEX events_tool_calls;",
    "DROP TABLE permission_requests; DROP INDEX turns_unsettled;",
    "ALTER TABLE threads DROP COLUMN context_port; ALTER TABLE threads DROP COLUMN memory_port; \
     DROP TABLE thread_reservations;",
    "ALTER TABLE threads DROP COLUMN permission_timeout_seconds;",
    "ALTER TABLE turns DROP COLUMN usage; DROP TABLE budget_resets;",
    "ALTER TABLE threads DROP COLUMN budget;",
    "DROP TABLE policy_probes;",
    "ALTER TABLE threads DROP COLUMN transcript_store; ALTER TABLE events DROP COLUMN event_hash;",
    "DROP TABLE chain_versions;",
    "ALTER TABLE threads DROP COLUMN port_identities;",
    "ALTER TABLE threads DROP COLUMN deleted_at;",
    "DROP INDEX events_receipts; DROP TABLE history_summary; DROP TABLE history_state;",
    "DROP INDEX threads_listed;",
    "ALTER TABLE threads DROP COLUMN named_ports;",
];

/// Takes the database on `conn` (at [`SCHEMA_VERSION`] or older) back to
/// `version` (at least 1) and sets its `user_version`, so the next open
/// upgrades it as it would a file of that version.
pub(crate) fn rewind(conn: &Connection, version: i64) {
    assert!(
        (1..=SCHEMA_VERSION).contains(&version),
        "rewind to {version}: only 1..={SCHEMA_VERSION}"
    );
    let from: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .expect("user_version");
    for i in (version..from).rev() {
        conn.execute_batch(UNDO[i as usize])
            .unwrap_or_else(|e| panic!("undo of migration {i} (to version {i}): {e}"));
        if i == super::super::chain::V2_SCHEMA - 1 {
            super::super::chain::relink(conn, i64::MAX).expect("relink as chain version 1");
            if let Some(db) = conn.path().filter(|p| !p.is_empty())
                && super::super::anchor::path(std::path::Path::new(db)).exists()
            {
                let db = std::path::Path::new(db);
                let head = super::super::anchor::committed(conn).expect("head");
                super::super::anchor::write(db, &head).expect("anchor");
            }
        }
    }
    conn.pragma_update(None, "user_version", version)
        .expect("user_version");
}

#[cfg(test)]
mod tests {
    use super::super::{DB_FILE, open_writer};
    use super::*;

    /// Every table's columns and every index's definition, by name.
    fn shape(conn: &Connection) -> Vec<String> {
        let names: Vec<(String, String, Option<String>)> = conn
            .prepare(
                "SELECT type, name, sql FROM sqlite_schema \
                 WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let mut out = Vec::new();
        for (kind, name, sql) in names {
            if kind == "table" {
                let cols: Vec<String> = conn
                    .prepare(&format!("SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info('{name}')"))
                    .unwrap()
                    .query_map([], |r| {
                        Ok(format!(
                            "{}:{}:{}:{:?}:{}",
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, i64>(2)?,
                            r.get::<_, Option<String>>(3)?,
                            r.get::<_, i64>(4)?
                        ))
                    })
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap();
                out.push(format!("table {name}: {}", cols.join(", ")));
            } else {
                out.push(format!("{kind} {name}: {}", sql.unwrap_or_default()));
            }
        }
        out
    }

    #[test]
    fn every_version_rewinds_and_upgrades_back_to_the_current_schema() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = dir.path().join(DB_FILE);
        let current = shape(&open_writer(&fresh).unwrap());
        for version in 1..SCHEMA_VERSION {
            let path = dir.path().join(format!("v{version}.db"));
            let conn = open_writer(&path).unwrap();
            rewind(&conn, version);
            let v: i64 = conn
                .pragma_query_value(None, "user_version", |r| r.get(0))
                .unwrap();
            assert_eq!(v, version);
            assert_ne!(
                shape(&conn),
                current,
                "version {version} is the current shape"
            );
            drop(conn);
            let upgraded = open_writer(&path).unwrap();
            assert_eq!(shape(&upgraded), current, "rewound to {version}");
        }
    }
}
