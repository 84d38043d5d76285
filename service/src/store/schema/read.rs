//! The read side of the schema: read connections, and the checks of the
//! tools that read a database without ever migrating it.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::domain::{StoreError, StoreResult};

use super::{APPLICATION_ID, CHAINED_VERSION, SCHEMA_VERSION, configure};

/// Refuses a database that is not a controller database with a chained
/// journal this build knows; returns its version (for `journal verify`,
/// which never migrates).
pub(in crate::store) fn check_chained(conn: &Connection, db: &Path) -> StoreResult<i64> {
    let version = identify(conn, db)?;
    if !(CHAINED_VERSION..=SCHEMA_VERSION).contains(&version) {
        return Err(StoreError::SchemaUnsupported {
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(version)
}

/// Refuses a database that is not a controller database at exactly this
/// build's schema version (for the read-only tools: they never migrate).
pub(in crate::store) fn check_current(conn: &Connection, db: &Path) -> StoreResult<()> {
    let version = identify(conn, db)?;
    if version != SCHEMA_VERSION {
        return Err(StoreError::SchemaUnsupported {
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(())
}

/// The version of a controller database (`store_foreign` for another).
fn identify(conn: &Connection, db: &Path) -> StoreResult<i64> {
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(StoreError::from_sqlite)?;
    let app: i64 = conn
        .pragma_query_value(None, "application_id", |r| r.get(0))
        .map_err(StoreError::from_sqlite)?;
    if app != APPLICATION_ID {
        return Err(StoreError::ForeignDatabase {
            path: db.to_owned(),
        });
    }
    Ok(version)
}

/// Open a read connection (after the writer has migrated the file).
pub(in crate::store) fn open_reader(path: &Path) -> StoreResult<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )
    .map_err(StoreError::from_sqlite)?;
    configure(&conn)?;
    Ok(conn)
}
