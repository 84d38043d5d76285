//! Making deleted content really go from the file: `secure_delete` (set on
//! every write connection, `schema::open_writer_at`) overwrites freed
//! cells; incremental vacuum gives freed pages back to the file system;
//! a truncating WAL checkpoint drops old page images from the WAL.
//!
//! A fresh database is created with `auto_vacuum=INCREMENTAL`; one from
//! before schema 20 is moved to it once, by a full `VACUUM` after its
//! migration ([`vacuum_once`]). After a batch holding a deletion commits,
//! the writer runs [`Writer::compact_if_asked`] (between batches, no
//! transaction open).

use rusqlite::Connection;

use crate::domain::StoreResult;

use super::writer::Writer;

/// The first version whose file uses `auto_vacuum=INCREMENTAL`.
pub(super) const INCREMENTAL_VACUUM_VERSION: i64 = 20;

/// Moves a migrated database to `auto_vacuum=INCREMENTAL` (a full
/// `VACUUM`, once: atomic, and the migration's backup was taken before).
/// A file already there is left alone.
pub(super) fn vacuum_once(conn: &Connection) -> StoreResult<()> {
    let mode: i64 = conn.pragma_query_value(None, "auto_vacuum", |r| r.get(0))?;
    if mode != 2 {
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
        conn.execute_batch("VACUUM")?;
    }
    Ok(())
}

impl Writer {
    /// After a deletion committed: free pages back to the file system and
    /// truncate the WAL. A failure is logged (the content is overwritten
    /// already; the next deletion tries again).
    pub(super) fn compact_if_asked(&mut self) {
        if !std::mem::take(&mut self.compact) || !self.conn.is_autocommit() {
            return;
        }
        let done = self
            .conn
            .execute_batch("PRAGMA incremental_vacuum")
            .and_then(|()| {
                self.conn
                    .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            });
        if let Err(e) = done {
            tracing::warn!(error = %e, "compaction after a deletion failed");
        }
        // Housekeeping: the pages compaction moved are no turn's.
        super::counters::drain_pages(&self.conn);
    }
}
