//! Storage faults: a write refused by the file system (disk full,
//! read-only, I/O), how the writer records it, and when it is over.
//!
//! What must stay true:
//! - A fault is recorded when a write fails for its storage and logged
//!   once when it starts; `status` names it meanwhile.
//! - A full disk holds writes until the file system has
//!   [`RESUME_FREE_BYTES`] free. Without the hold a failed large write
//!   leaves WAL frames already allocated, the next small write fits in
//!   them and commits, and the fault clears and returns with every
//!   write: a new application got a full session (and its writes
//!   failed) or a read-only one depending on which write ran last. A
//!   held write fails as the full disk would, before touching the
//!   database, and costs one `statvfs` — only while the fault lasts.
//! - Other conditions (read-only, I/O) are retried as they come: the
//!   file system says when they clear.
//! - The next write that commits clears the fault.

use crate::domain::{StoreError, StoreResult};

use super::{Shared, Writer};

/// Free space a full disk must have again before writes resume.
pub(crate) const RESUME_FREE_BYTES: u64 = 1 << 20;

impl Shared {
    /// The condition recorded by the last failed write, if any.
    pub(crate) fn storage_fault(&self) -> Option<&'static str> {
        *self.storage_fault.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Writer {
    /// `Err` when the store holds writes because the disk was full and
    /// still has less than [`RESUME_FREE_BYTES`] free.
    pub(super) fn held_by_full_disk(&self) -> StoreResult<()> {
        if self.shared.storage_fault() != Some("disk_full") {
            return Ok(());
        }
        match self.free_bytes() {
            Some(free) if free < RESUME_FREE_BYTES => {
                Err(StoreError::from_sqlite(rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
                    Some(format!(
                        "the disk is full ({free} bytes free); writes resume at {RESUME_FREE_BYTES}"
                    )),
                )))
            }
            // Unknown (no file, a file system that does not say): try.
            _ => Ok(()),
        }
    }

    /// Free bytes on the database's file system, for an unprivileged
    /// writer.
    fn free_bytes(&self) -> Option<u64> {
        #[cfg(test)]
        if let Some(free) = FREE_BYTES.with(std::cell::Cell::get) {
            return Some(free);
        }
        let path = self.conn.path().filter(|p| !p.is_empty())?;
        let fs = nix::sys::statvfs::statvfs(path).ok()?;
        // The field types differ by platform (u64 on Linux, u32 elsewhere).
        #[allow(clippy::useless_conversion)]
        let (blocks, size) = (
            u64::from(fs.blocks_available()),
            u64::from(fs.fragment_size()),
        );
        Some(blocks.saturating_mul(size))
    }

    /// Records a storage condition (disk full, read-only, I/O) that made a
    /// write fail, logging it once when it starts.
    pub(super) fn note_storage(&self, e: &StoreError) {
        let Some(condition) = e.storage_condition() else {
            return;
        };
        let mut fault = self
            .shared
            .storage_fault
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if fault.is_none() {
            tracing::error!(
                condition,
                "the store cannot write ({condition}); reads continue, writes are refused until it clears"
            );
        }
        *fault = Some(condition);
    }

    /// A write committed: a recorded storage condition has cleared.
    pub(super) fn storage_recovered(&self) {
        let mut fault = self
            .shared
            .storage_fault
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(condition) = fault.take() {
            tracing::info!(condition, "the store writes again");
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Tests: the free space the writer's thread sees instead of the file
    /// system's (set it from inside an operation).
    pub(crate) static FREE_BYTES: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}
