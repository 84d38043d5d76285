//! What the store does, counted: durable commits, the pages (WAL frames)
//! they wrote, SQL statements and the rows they return. These are the hot path's guards — tests compare them
//! per turn (a warm turn's commits and statements, the same at turn 1,000
//! of a thread as at turn 10: a query that reads a thread's history returns
//! more rows as it grows), never a stopwatch — and `status` shows them.
//!
//! What must stay true: every connection the store opens counts what it
//! runs ([`count`], called where each connection is configured); a
//! statement is counted on the thread that runs it, so the writer thread's
//! count is the write connection's alone, and a read adds what it ran on
//! its pooled connection. The writer's timed housekeeping (the anchor
//! checkpoint) is counted apart ([`housekeeping`]), so a turn's count does
//! not depend on when it ran. Counting costs a thread-local increment per
//! statement and per row: SQLite's trace callback gets the statement's
//! own text, never its expanded parameters.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::Connection;
use rusqlite::trace::{TraceEvent, TraceEventCodes};

/// Statements started and rows returned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Statements started.
    pub(crate) statements: u64,
    /// Rows they returned.
    pub(crate) rows: u64,
}

impl std::ops::Sub for Tally {
    type Output = Tally;
    fn sub(self, earlier: Tally) -> Tally {
        Tally {
            statements: self.statements - earlier.statements,
            rows: self.rows - earlier.rows,
        }
    }
}

thread_local! {
    /// What counted connections ran on this thread.
    static RAN: Cell<Tally> = const { Cell::new(Tally { statements: 0, rows: 0 }) };
}

fn on_trace(event: TraceEvent<'_>) {
    RAN.with(|ran| {
        let mut t = ran.get();
        match event {
            // A trigger's subprogram reports itself as a comment: it is
            // part of a statement already counted.
            TraceEvent::Stmt(_, sql) if !sql.starts_with("--") => t.statements += 1,
            TraceEvent::Row(_) => t.rows += 1,
            _ => return,
        }
        ran.set(t);
    });
}

/// Makes `conn` count what it runs.
pub(super) fn count(conn: &Connection) {
    conn.trace_v2(
        TraceEventCodes::SQLITE_TRACE_STMT | TraceEventCodes::SQLITE_TRACE_ROW,
        Some(on_trace),
    );
}

/// What ran on this thread so far.
pub(super) fn on_this_thread() -> Tally {
    RAN.with(Cell::get)
}

/// Runs `f` without counting what it runs on this thread (the writer's
/// timed housekeeping, which no turn causes).
pub(super) fn housekeeping<T>(f: impl FnOnce() -> T) -> T {
    let before = on_this_thread();
    let out = f();
    RAN.with(|ran| ran.set(before));
    out
}

/// The store's totals since it opened (the open's own validation and
/// recovery are not counted: they run before the writer starts).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Transactions committed by the writer (each one fsync).
    pub(crate) commits: AtomicU64,
    /// Pages the write connection wrote (WAL frames: each one `pwrite`
    /// and its checksum, see [`drain_pages`]).
    write_pages: AtomicU64,
    /// Statements the write connection ran.
    write_statements: AtomicU64,
    /// Rows the write connection's statements returned.
    write_rows: AtomicU64,
    /// Statements the read connections ran.
    read_statements: AtomicU64,
    /// Rows the read connections' statements returned.
    read_rows: AtomicU64,
}

impl Counters {
    /// The writer's totals, as its thread counted them (the writer thread
    /// runs nothing else).
    pub(super) fn set_writer(&self, t: Tally) {
        self.write_statements.store(t.statements, Ordering::Relaxed);
        self.write_rows.store(t.rows, Ordering::Relaxed);
    }

    /// Adds pages the write connection wrote.
    pub(super) fn add_pages(&self, pages: u64) {
        self.write_pages.fetch_add(pages, Ordering::Relaxed);
    }

    /// Adds what one read ran.
    pub(super) fn add_read(&self, t: Tally) {
        self.read_statements
            .fetch_add(t.statements, Ordering::Relaxed);
        self.read_rows.fetch_add(t.rows, Ordering::Relaxed);
    }

    /// A snapshot of the totals.
    pub(crate) fn read(&self) -> lapis_protocol::params::StoreCounts {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        lapis_protocol::params::StoreCounts {
            commits: n(&self.commits),
            write_pages: n(&self.write_pages),
            write_statements: n(&self.write_statements),
            write_rows: n(&self.write_rows),
            read_statements: n(&self.read_statements),
            read_rows: n(&self.read_rows),
        }
    }
}

/// The pages `conn` wrote since the last call (SQLite's
/// `SQLITE_DBSTATUS_CACHE_WRITE`, read and reset: in WAL mode, the frames
/// appended to the WAL, one per dirty page per commit and per page spilled
/// before it). Every dirty page a commit holds is one more frame to
/// checksum and `pwrite`: what a turn costs the commit, as a count.
#[allow(unsafe_code)]
pub(super) fn drain_pages(conn: &Connection) -> u64 {
    let (mut current, mut highwater) = (0, 0);
    // SAFETY: `handle` is the open connection `conn` owns, used on the
    // thread that owns `conn` for the duration of this call only;
    // `sqlite3_db_status` only reads (and with the reset flag zeroes) the
    // pager's counters, and writes the two ints it is given.
    let rc = unsafe {
        rusqlite::ffi::sqlite3_db_status(
            conn.handle(),
            rusqlite::ffi::SQLITE_DBSTATUS_CACHE_WRITE,
            &mut current,
            &mut highwater,
            1,
        )
    };
    if rc == rusqlite::ffi::SQLITE_OK {
        u64::try_from(current).unwrap_or(0)
    } else {
        0
    }
}
