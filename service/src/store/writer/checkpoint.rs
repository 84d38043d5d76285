//! The writer's anchor checkpoints (see `store::anchor`): the committed
//! journal head is written to the anchor file after a batch commits, at
//! most once per [`ANCHOR_INTERVAL`] while the journal grows, when the
//! writer goes idle (within that interval), and at a clean stop.
//!
//! The file itself is written by a helper thread (two fsyncs, milliseconds
//! on a real disk, would otherwise stall the writer): the writer reads the
//! committed head and hands it over; the helper writes the newest head it
//! was handed, in order.
//!
//! What must stay true: the anchored head is read from the database
//! between batches (no transaction open), never from the writer's memory,
//! so it is never ahead of what is durable, whenever the helper writes it;
//! a failed anchor write only leaves the previous (older, still true)
//! anchor, and the next checkpoint after the journal grows writes again;
//! the writer waits for the helper's last write when it stops.

use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::Writer;
use crate::store::anchor::{self, ANCHOR_INTERVAL, Anchor};

/// What the anchor file holds, and when it was last written.
#[derive(Debug)]
pub(crate) struct AnchorState {
    /// The database the anchor belongs beside.
    db: PathBuf,
    /// The anchor as last handed to the helper (or read and validated at
    /// open).
    written: Anchor,
    /// When the last checkpoint ran.
    at: Instant,
    /// The helper that writes the file, started at the first checkpoint.
    helper: Option<(mpsc::Sender<Anchor>, JoinHandle<()>)>,
}

impl AnchorState {
    /// The state after open: `written` is the anchor open validated.
    pub(crate) fn new(db: PathBuf, written: Anchor) -> Self {
        AnchorState {
            db,
            written,
            at: Instant::now(),
            helper: None,
        }
    }

    /// Hands `head` to the helper (started on first use; written inline
    /// if it cannot be started).
    fn hand_over(&mut self, head: Anchor) {
        if self.helper.is_none() {
            let (tx, rx) = mpsc::channel::<Anchor>();
            let db = self.db.clone();
            let spawned = std::thread::Builder::new()
                .name("lapis-store-anchor".into())
                .spawn(move || {
                    while let Ok(mut head) = rx.recv() {
                        // Only the newest head matters; each is durable.
                        while let Ok(newer) = rx.try_recv() {
                            head = newer;
                        }
                        if let Err(e) = anchor::write(&db, &head) {
                            tracing::warn!(error = %e, "cannot write the journal anchor (retried)");
                        }
                    }
                });
            match spawned {
                Ok(done) => self.helper = Some((tx, done)),
                Err(_) => {
                    if let Err(e) = anchor::write(&self.db, &head) {
                        tracing::warn!(error = %e, "cannot write the journal anchor (retried)");
                        return;
                    }
                    self.written = head;
                    return;
                }
            }
        }
        if let Some((tx, _)) = &self.helper
            && tx.send(head).is_ok()
        {
            self.written = head;
        }
    }
}

impl Drop for AnchorState {
    /// Waits for the helper's last write (a clean stop's anchor).
    fn drop(&mut self) {
        if let Some((tx, done)) = self.helper.take() {
            drop(tx);
            let _ = done.join();
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
        // An anchor vouches for the journal: not before its history was
        // checked (`store::history`).
        if !self.conn.is_autocommit() || !crate::store::history::passed(&self.shared.history) {
            return;
        }
        // Timed, not caused by any one turn: not in the turn counters.
        let head = match crate::store::counters::housekeeping(|| anchor::committed(&self.conn)) {
            Ok(head) => head,
            Err(e) => {
                tracing::warn!(code = e.code(), "cannot read the journal head to anchor it");
                return;
            }
        };
        if head != self.anchor.written {
            self.anchor.hand_over(head);
        }
    }
}
