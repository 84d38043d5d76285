//! The journal verified whole, offline: `journal verify` ([`verify_journal`])
//! and `journal reanchor` ([`reanchor_journal`]), and the one pass both make,
//! [`verify`]: the hash chain walked in `seq` order (`super::chain`), then
//! checked against the anchor that names its durable prefix
//! (`super::anchor`). Here rather than in either: the chain does not know
//! the anchor, and the anchor only records the chain's head.

use rusqlite::Connection;

use crate::domain::{StoreError, StoreResult};

use super::anchor::{self, Anchor};
use super::chain::{self, COLUMNS, COLUMNS_BEFORE_17, ChainCheck, ChainReport};
use super::lock::InstanceLock;
use super::schema::{self, DB_FILE};
use super::tombstone::Tombstones;

/// Verifies the journal's hash chain of the database at `db` directly,
/// read-only, and that it reaches the prefix its anchor names: works
/// whether or not `serve` is running (the anchor is read before the
/// database, and names a prefix that was durable when it was written; a
/// read sees the last commit; no lock is taken). Fails as
/// `store_invalid_row` naming the first bad `seq` (check `chain`),
/// `store_anchor_mismatch` / `store_anchor_missing` (see
/// `anchor`), `store_schema_unsupported` for a database from before the
/// chain (version 4) or newer than this build. A database not yet upgraded
/// to version 8 has no anchor to check.
pub fn verify_journal(db: &std::path::Path) -> StoreResult<ChainReport> {
    let anchor = anchor::read(db)?;
    let conn = schema::open_reader(db)?;
    let version = schema::check_chained(&conn, db)?;
    // Before version 8 nothing was anchored (an anchor there is one an
    // upgrade wrote before it stopped: it names this journal's head).
    let anchor = match anchor {
        Some(a) => a,
        None if version < schema::ANCHORED_VERSION => Anchor::EMPTY,
        None => {
            return Err(StoreError::AnchorMissing {
                path: anchor::path(db),
                reason: "the file is missing",
            });
        }
    };
    verify(&conn, db, &anchor, version)
}

/// Accepts the journal of the controller home `home` as it is: verifies
/// its chain from genesis and writes a new anchor for its head. For an
/// intended restore of `controller.db` from a backup (the anchor then names
/// events the backup lacks). Takes the instance lock, so it refuses while
/// `serve` runs; the database must be at this build's schema version.
pub fn reanchor_journal(home: &std::path::Path) -> StoreResult<ChainReport> {
    let _lock = InstanceLock::acquire(home)?;
    let db = home.join(DB_FILE);
    let conn = schema::open_reader(&db)?;
    schema::check_current(&conn, &db)?;
    // Anchored to the chain as it is: the anchor check cannot fail.
    let report = verify(&conn, &db, &Anchor::EMPTY, schema::SCHEMA_VERSION)?;
    let head = anchor::committed(&conn)?;
    anchor::write(&db, &head)?;
    Ok(report)
}

/// Verifies the whole chain in `seq` order, then that it reaches `anchor`
/// (the anchor of the database at `db`): the first bad event fails as
/// `InvalidRow { table: "events", row: seq, check: "chain" }`, a chain
/// short of or different at its anchor as `AnchorMismatch`. `version` is
/// the database's schema version: which columns exist and from which
/// `seq` rows are linked with chain version 2 ([`chain::v2_from`]).
pub(super) fn verify(
    conn: &Connection,
    db: &std::path::Path,
    anchor: &Anchor,
    version: i64,
) -> StoreResult<ChainReport> {
    let v2_from = chain::v2_from(conn, version)?;
    let columns = if version < 17 {
        COLUMNS_BEFORE_17
    } else {
        COLUMNS
    };
    let mut stmt = conn.prepare(&format!("SELECT {columns} FROM events ORDER BY seq"))?;
    let mut rows = stmt.query([]).map_err(StoreError::from_sqlite)?;
    std::thread::scope(|scope| {
        let mut chain = ChainCheck::new(scope, v2_from);
        chain.watch(anchor.events);
        let mut marks = Tombstones::default();
        let scanned: StoreResult<()> = (|| {
            while let Some(r) = rows.next().map_err(StoreError::from_sqlite)? {
                if !marks.row(r, &mut chain).map_err(StoreError::from_sqlite)? {
                    break;
                }
            }
            Ok(())
        })();
        let watched = chain.watched();
        // A bad row comes before wherever the scan stopped.
        let report = chain.finish().map_err(|seq| StoreError::InvalidRow {
            table: "events",
            row: seq.to_string(),
            check: "chain",
        })?;
        scanned?;
        // Across deleted threads: every tombstone covered by its receipt.
        marks.check().map_err(|seq| StoreError::InvalidRow {
            table: "events",
            row: seq.to_string(),
            check: "tombstone",
        })?;
        anchor::check(db, anchor, report.events, watched)?;
        Ok(report)
    })
}
