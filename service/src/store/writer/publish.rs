//! Publication of committed batches: events to subscribers, the status
//! mirror, the scheduler's wake-up, then the batch's replies.
//!
//! A large batch is handed to a publisher thread so the writer goes on
//! with the next batch while the previous one is delivered (wrapping and
//! broadcasting each event, answering each append and dropping what
//! nobody kept were a tenth of the writer's time on a stream of appends).
//! A small batch is delivered on the writer when nothing is in flight, so
//! a lone request is not delayed by a thread hop.
//!
//! What must stay true: batches are delivered one at a time, in commit
//! order (a batch is delivered inline only when every handed-off one has
//! been delivered: `in_flight` is decremented after delivery, with release
//! ordering, and read with acquire ordering before an inline delivery);
//! within a batch, the status mirror before its events before the replies
//! (release first, then report: a subscriber that calls `status` on seeing
//! a turn's final event finds its workspace already released); only
//! committed events are delivered.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use crate::domain::{JournalEvent, StoreStatus};

use super::{Reply, Shared};

/// Batches of at least this many events are handed to the publisher
/// thread; smaller ones are delivered on the writer when it is idle.
const HAND_OFF_EVENTS: usize = 64;

/// A committed (or failed) batch, ready for delivery.
pub(crate) struct Published {
    /// Its events, in `seq` order (none when its commit failed).
    pub(crate) events: Vec<JournalEvent>,
    /// The counters as of its commit.
    pub(crate) status: StoreStatus,
    /// `Some(code)` when its commit failed.
    pub(crate) failed: Option<&'static str>,
    /// Answers due after its commit.
    pub(crate) replies: Vec<Reply>,
}

/// Delivers batches in order, on its own thread or on the caller's.
pub(crate) struct Publisher {
    /// Where delivery happens.
    shared: Arc<Shared>,
    /// To the publisher thread (taken on drop to end it).
    tx: Option<mpsc::Sender<Published>>,
    /// Batches handed off and not yet delivered.
    in_flight: Arc<AtomicUsize>,
    /// The publisher thread, joined on drop (after every batch handed to
    /// it is delivered).
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("in_flight", &self.in_flight.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Publisher {
    /// Starts the publisher thread; without one (it could not start) every
    /// batch is delivered on the writer.
    pub(crate) fn start(shared: Arc<Shared>) -> Publisher {
        let (tx, rx) = mpsc::channel::<Published>();
        let in_flight = Arc::new(AtomicUsize::new(0));
        let thread = {
            let (shared, in_flight) = (Arc::clone(&shared), Arc::clone(&in_flight));
            std::thread::Builder::new()
                .name("lapis-store-publish".into())
                .spawn(move || {
                    for batch in rx {
                        deliver(&shared, batch);
                        in_flight.fetch_sub(1, Ordering::Release);
                    }
                })
                .ok()
        };
        Publisher {
            shared,
            tx: thread.as_ref().map(|_| tx),
            in_flight,
            thread,
        }
    }

    /// Delivers `batch` after every batch given before it.
    pub(crate) fn publish(&self, batch: Published) {
        let idle = self.in_flight.load(Ordering::Acquire) == 0;
        let batch = match &self.tx {
            Some(tx) if !idle || batch.events.len() >= HAND_OFF_EVENTS => {
                self.in_flight.fetch_add(1, Ordering::AcqRel);
                match tx.send(batch) {
                    Ok(()) => return,
                    Err(mpsc::SendError(batch)) => {
                        // The thread is gone (it never panics while
                        // delivering, but if it did): deliver here.
                        self.in_flight.fetch_sub(1, Ordering::AcqRel);
                        batch
                    }
                }
            }
            _ => batch,
        };
        deliver(&self.shared, batch);
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Publishes the batch's events, refreshes the status mirror, then answers
/// its requests.
fn deliver(shared: &Shared, batch: Published) {
    // The engine's claims are parked on the writer (`ParkedClaim`): nothing
    // waits on a wake-up here.
    *shared.status.lock().unwrap_or_else(|p| p.into_inner()) = batch.status;
    let events: Vec<Arc<JournalEvent>> = batch.events.into_iter().map(Arc::new).collect();
    for e in &events {
        // No subscribers is fine.
        let _ = shared.events.send(Arc::clone(e));
    }
    for reply in batch.replies {
        reply(batch.failed, &events);
    }
}
