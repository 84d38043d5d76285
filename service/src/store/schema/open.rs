//! Opening the write connection: its identity and version checks and the
//! settings every connection gets.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::{APPLICATION_ID, SCHEMA_VERSION};
use crate::domain::{StoreError, StoreResult};

/// Settings every connection gets. `synchronous=FULL` in WAL mode makes each
/// commit durable (the WAL is fsynced at commit).
pub(super) fn configure(conn: &Connection) -> StoreResult<()> {
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    // Every statement a turn runs stays prepared (rusqlite keeps 16 by
    // default, fewer than one turn uses): SQL parsing and planning was a
    // large share of the writer's CPU per turn.
    conn.set_prepared_statement_cache_capacity(64);
    super::super::counters::count(conn);
    Ok(())
}

/// Open the write connection: check identity and version, migrate, enable
/// WAL. (The store opens through `backup::open_writer`, which guards a
/// migration with a backup.)
#[cfg(test)]
pub(in crate::store) fn open_writer(path: &Path) -> StoreResult<Connection> {
    let (conn, version, _) = open_writer_at(path)?;
    super::migrate(&conn, path, version)?;
    Ok(conn)
}

/// The write connection, checked and configured but not migrated yet:
/// `(connection, its schema version, whether the file is fresh)`.
pub(in crate::store) fn open_writer_at(path: &Path) -> StoreResult<(Connection, i64, bool)> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )
    .map_err(StoreError::from_sqlite)?;
    let app_id: i64 = conn
        .pragma_query_value(None, "application_id", |r| r.get(0))
        .map_err(StoreError::from_sqlite)?;
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(StoreError::from_sqlite)?;
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
        .map_err(StoreError::from_sqlite)?;
    let fresh = app_id == 0 && version == 0 && tables == 0;
    if !fresh && app_id != APPLICATION_ID {
        return Err(StoreError::ForeignDatabase {
            path: path.to_owned(),
        });
    }
    if !(0..=SCHEMA_VERSION).contains(&version) {
        return Err(StoreError::SchemaUnsupported {
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    if fresh {
        // Before the first table: a fresh file frees pages as they empty
        // (`threads.delete`), with no `VACUUM` ever needed.
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")
            .map_err(StoreError::from_sqlite)?;
    }
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .map_err(StoreError::from_sqlite)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::invalid("database refused WAL journal mode"));
    }
    configure(&conn)?;
    // Overwrite deleted content: a raw prompt, cleared once its turn leaves
    // the queue, must not linger in free space.
    conn.pragma_update(None, "secure_delete", true)?;
    // Every writer operation runs in a savepoint of its batch, and a page
    // it changes is first copied to the savepoint's sub-journal: in a temp
    // file past 64 KiB, so most batches opened, wrote, closed and unlinked
    // one (about 6% of the writer's CPU per warm turn). In memory it is a
    // copy, bounded by the batch, and raw prompts never reach a temp file.
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    Ok((conn, version, fresh))
}
