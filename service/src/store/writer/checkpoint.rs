//! The writer's anchor checkpoints (see `store::anchor`): the committed
//! journal head is written to the anchor file after a batch commits, at
//! most once per [`ANCHOR_INTERVAL`] while the journal grows, when the
//! writer goes idle (within that interval), and at a clean stop.
//!
//! What must stay true: the anchored head is read from the database
//! between batches (no transaction open), never from the writer's memory,
//! so it is never ahead of what is durable; a failed anchor write only
//! leaves the previous (older, still true) anchor and is retried at the
//! next checkpoint.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::Writer;
use crate::store::anchor::{self, ANCHOR_INTERVAL, Anchor};

/// What the anchor file holds, and when it was last written.
#[derive(Debug)]
pub(crate) struct AnchorState {
    /// The database the anchor belongs beside.
    db: PathBuf,
    /// The anchor as last written (or read and validated at open).
    written: Anchor,
    /// When the last checkpoint ran.
    at: Instant,
}

impl AnchorState {
    /// The state after open: `written` is the anchor open validated.
    pub(crate) fn new(db: PathBuf, written: Anchor) -> Self {
        AnchorState {
            db,
            written,
            at: Instant::now(),
        }
    }
}

impl Writer {
    /// Whether the journal (as the writer's memory counts it, a hint only)
    /// grew past the anchor.
    fn anchor_lags(&self) -> bool {
        self.journal.last_seq != self.anchor.written.events
    }

    /// How long the idle writer may wait before its next checkpoint is due:
    /// `None` when the anchor is current.
    pub(super) fn anchor_due_in(&self) -> Option<Duration> {
        self.anchor_lags()
            .then(|| ANCHOR_INTERVAL.saturating_sub(self.anchor.at.elapsed()))
    }

    /// After a batch: a checkpoint when the anchor lags and the interval
    /// has passed (the lag stays bounded under a load that never idles).
    pub(super) fn checkpoint_if_due(&mut self) {
        if self.anchor_due_in().is_some_and(|d| d.is_zero()) {
            self.checkpoint();
        }
    }

    /// Writes the committed head to the anchor file, if it moved.
    pub(super) fn checkpoint(&mut self) {
        self.anchor.at = Instant::now();
        if !self.conn.is_autocommit() {
            return;
        }
        let head = match anchor::committed(&self.conn) {
            Ok(head) => head,
            Err(e) => {
                tracing::warn!(code = e.code(), "cannot read the journal head to anchor it");
                return;
            }
        };
        if head == self.anchor.written {
            return;
        }
        match anchor::write(&self.anchor.db, &head) {
            Ok(()) => self.anchor.written = head,
            Err(e) => tracing::warn!(error = %e, "cannot write the journal anchor (retried)"),
        }
    }
}
