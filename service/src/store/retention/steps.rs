//! What one retention batch costs SQLite, counted (issue 44): the virtual
//! machine steps and the full-scan steps of the statements the batch ran
//! on the write connection (`SQLITE_STMTSTATUS_VM_STEP`,
//! `SQLITE_STMTSTATUS_FULLSCAN_STEP`). A batch is bounded when both are
//! independent of the thread's length: a statement that walks a thread's
//! history instead of one batch of it shows as more VM steps (an index
//! walked further), a table scan as full-scan steps. Tests compare them
//! (`store::tests::retention_steps`), never a stopwatch, and a pass sums
//! them into `HistoryPass` (`status`, the scale bench).
//!
//! What must stay true: every statement a batch runs is one the
//! connection keeps prepared (`prepare_cached`) — [`sweep`] reads the
//! counters of the statements alive on the connection, so a statement
//! prepared and finalized inside the batch would not be counted. The
//! writer's statement cache (64) holds far more than a batch runs.

use rusqlite::Connection;
use rusqlite::ffi;

/// SQLite's step counters over some statements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Steps {
    /// Virtual machine steps.
    pub(crate) vm: u64,
    /// Steps forward in a table as part of a full table scan.
    pub(crate) full_scan: u64,
}

/// Sums the two counters of every statement prepared on `conn` and resets
/// them, so the next sweep returns what ran in between.
#[allow(unsafe_code)]
pub(crate) fn sweep(conn: &Connection) -> Steps {
    let mut steps = Steps::default();
    // SAFETY: `handle` is the open connection `conn` owns, used on the
    // thread that owns `conn` for the duration of this call only, and no
    // statement is prepared or finalized while it walks them:
    // `sqlite3_next_stmt` only walks the connection's list of prepared
    // statements, and `sqlite3_stmt_status` only reads (and with the
    // reset flag zeroes) a counter of a statement on that list.
    unsafe {
        let db = conn.handle();
        let mut stmt = ffi::sqlite3_next_stmt(db, std::ptr::null_mut());
        while !stmt.is_null() {
            let vm = ffi::sqlite3_stmt_status(stmt, ffi::SQLITE_STMTSTATUS_VM_STEP, 1);
            let full = ffi::sqlite3_stmt_status(stmt, ffi::SQLITE_STMTSTATUS_FULLSCAN_STEP, 1);
            steps.vm += u64::try_from(vm).unwrap_or(0);
            steps.full_scan += u64::try_from(full).unwrap_or(0);
            stmt = ffi::sqlite3_next_stmt(db, stmt);
        }
    }
    steps
}
