//! The journal's history check after open: `serve` answers before it has
//! read every retained event, and runs nothing before it has.
//!
//! # Why
//! Startup validation's one scan of the events table (per-row checks and
//! the hash chain, `super::validate`, `super::chain`) reads every retained
//! event: about 0.8 s for 1M events on a 2-core machine, and growing with
//! the journal. Nothing the socket answers needs it (`status`, reads,
//! submissions that only queue); what must not happen before it is *work
//! on the history's word*: a turn handed to an agent, a notification, or
//! an anchor that would vouch for a journal nobody checked.
//!
//! # How
//! With [`HistoryCheck::AfterOpen`] (what `serve` uses), [`Store::open`]
//! validates every other table, pins a read snapshot of the database as
//! open found it (before recovery writes anything), and hands the events
//! scan over that snapshot to a thread of its own. Until it passes:
//! - claims wait ([`Store::history_verified`] is awaited by
//!   `try_claim_with` and `next_runnable_with`), so no turn reaches an
//!   agent, and so does the notifier (`crate::notifier`) before its first
//!   command;
//! - the writer writes no anchor checkpoint (`writer::checkpoint`), so the
//!   anchor keeps naming the prefix it named at open, and a journal cut
//!   short or re-hashed is still caught against it at the next open.
//!
//! When it fails, claims fail with its error (the same `store_invalid_row`
//! naming the first bad `seq`, or `store_anchor_mismatch`) and `serve`
//! stops with it (exit 2), as it did when the check ran inside open; what
//! changes is *when*: within the scan's time after the socket answers,
//! instead of before. What must stay true: the scan reads the snapshot
//! pinned before recovery (so its anchor check sees exactly what was on
//! disk, not events this process wrote since); nothing is claimed and no
//! anchor is written before it passed.
//!
//! [`HistoryCheck::AfterOpen`]: super::HistoryCheck::AfterOpen
//! [`Store::open`]: super::Store::open
//! [`Store::history_verified`]: super::Store::history_verified

use std::sync::Arc;

use rusqlite::Connection;
use tokio::sync::watch;

use crate::domain::{StoreError, StoreResult};

use super::anchor::Anchor;

/// Where the check stands.
#[derive(Debug, Clone)]
pub(crate) enum HistoryState {
    /// Still reading.
    Pending,
    /// Every retained event passed (the count checked).
    Verified(u64),
    /// The first failure.
    Failed(Arc<StoreError>),
}

/// Shared between the check, the writer and the handles.
pub(crate) type HistoryCell = watch::Sender<HistoryState>;

/// A cell already verified (the check ran inside open).
pub(crate) fn verified(events: u64) -> HistoryCell {
    watch::Sender::new(HistoryState::Verified(events))
}

/// Whether the check passed (the writer's anchor checkpoint asks).
pub(crate) fn passed(cell: &HistoryCell) -> bool {
    matches!(*cell.borrow(), HistoryState::Verified(_))
}

/// A read snapshot of the database as open found it, pinned by a read
/// transaction that stays open until the check ends.
pub(crate) struct Pinned {
    conn: Connection,
}

/// Pins the snapshot the check will read: must be called before anything
/// is written at open (recovery).
pub(crate) fn pin(db: &std::path::Path) -> StoreResult<Pinned> {
    let conn = super::schema::open_reader(db)?;
    conn.execute_batch("BEGIN")
        .map_err(StoreError::from_sqlite)?;
    // A WAL reader takes its snapshot at its first read.
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))
        .map_err(StoreError::from_sqlite)?;
    Ok(Pinned { conn })
}

/// Starts the events scan over `pinned` on its own thread; its verdict
/// goes to the returned cell.
pub(crate) fn start(
    pinned: Pinned,
    db: std::path::PathBuf,
    anchor: Anchor,
) -> StoreResult<HistoryCell> {
    let cell = watch::Sender::new(HistoryState::Pending);
    let out = cell.clone();
    std::thread::Builder::new()
        .name("lapis-store-history".into())
        .spawn(move || {
            let started = std::time::Instant::now();
            let verdict = super::validate::validate_events(&pinned.conn, &db, &anchor);
            drop(pinned);
            let state = match verdict {
                Ok(events) => {
                    tracing::info!(
                        events,
                        check_ms = started.elapsed().as_millis() as u64,
                        "journal history verified"
                    );
                    HistoryState::Verified(events)
                }
                Err(e) => {
                    tracing::error!(code = e.code(), error = %e, "journal history check failed");
                    HistoryState::Failed(Arc::new(e))
                }
            };
            out.send_replace(state);
        })
        .map_err(|e| StoreError::io("cannot start the journal history check", e))?;
    Ok(cell)
}

/// The failure again, for one more caller (a [`StoreError`] is not
/// `Clone`: its SQLite and I/O causes are rebuilt from their codes).
pub(super) fn again(e: &StoreError) -> StoreError {
    match e {
        StoreError::InvalidRow { table, row, check } => StoreError::InvalidRow {
            table,
            row: row.clone(),
            check,
        },
        StoreError::AnchorMismatch {
            path,
            anchored,
            found,
            reason,
        } => StoreError::AnchorMismatch {
            path: path.clone(),
            anchored: *anchored,
            found: *found,
            reason,
        },
        StoreError::AnchorMissing { path, reason } => StoreError::AnchorMissing {
            path: path.clone(),
            reason,
        },
        StoreError::Corrupt(_) => StoreError::Corrupt(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
            None,
        )),
        other => StoreError::io(
            "the journal history check failed",
            std::io::Error::other(other.to_string()),
        ),
    }
}
